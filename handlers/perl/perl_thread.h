/* Interpreter threads inside plxd ([perl] isolation = thread, the model of
 * Perl for ISAPI): a parent interpreter does the set-up and the preload
 * once, and each thread serves requests with a clone of it
 * (perl_interp_clone), one at a time, handed over in memory. Callers do
 * not need perl.h. */
#ifndef PLXD_PERL_THREAD_H
#define PLXD_PERL_THREAD_H

#include "perl_interp.h"

struct perl_threads;
struct perl_thread;

/* One request for an interpreter thread: the caller's until done has run. */
struct perl_job {
	struct perl_run run; /* its "In" fields, as for a worker */
	/* Optional, on the interpreter thread: the script is compiled and
	 * about to run (run.want_running). */
	void (*running)(struct perl_job *job, const struct perl_run *run);
	/* On the interpreter thread, once the script has returned: run holds
	 * the outcome, and its tail (what STDOUT still buffered) is valid
	 * only during the call. */
	void (*done)(struct perl_job *job, const struct perl_run *run);
	void *ctx;
};

/* Makes the parent interpreter on the calling thread, then n threads each
 * with its clone, and waits until each is ready. Returns NULL with a
 * message in err. */
struct perl_threads *perl_threads_create(const struct perl_interp_options *o, unsigned n, char *err,
		size_t errlen);

/* Ends the threads (each finishes its request first) and the parent. */
void perl_threads_destroy(struct perl_threads *p);

/* The i-th thread (i < n). */
struct perl_thread *perl_threads_get(struct perl_threads *p, unsigned i);

/* The read ends of thread t's response channel (what its scripts flush to
 * STDOUT) and of its stderr; non-blocking. */
int perl_thread_out(const struct perl_thread *t);
int perl_thread_err(const struct perl_thread *t);

/* Ends the script job runs on t, if t still runs it (perl_interp_cancel):
 * its done comes with PERL_CANCELED, and a fresh clone then serves t's
 * next job. Returns 1 when asked, 0 when job was not running. */
int perl_thread_cancel(struct perl_thread *t, struct perl_job *job);

/* Hands job to t, which must be idle (its previous job's done has run).
 * Never blocks. */
void perl_thread_submit(struct perl_thread *t, struct perl_job *job);

#endif
