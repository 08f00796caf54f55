/* Interpreter threads inside plxd ([perl] isolation = thread, the model of
 * Perl for ISAPI): a parent interpreter does the set-up and the preload
 * once, and each thread serves requests with a clone of it
 * (perl_interp_clone), one at a time, handed over in memory. Callers do
 * not need perl.h. */
#ifndef PLXD_PERL_THREAD_H
#define PLXD_PERL_THREAD_H

#include "handler.h"
#include "perl_interp.h"

struct perl_threads;
struct perl_thread;

/* An event thread's CPU time and voluntary context switches, read for
 * one inline run and good for the runs after it while its thread has not
 * waited for its loop since and they are recent (perl_inline.c,
 * perl_inline_begin): the two system calls cost more than a short run's
 * own Perl. A run's own time then counts what its thread did since the
 * reading too, at most PERL_INLINE_MARK_AGE_US more. */
struct perl_usage_mark {
	int valid;                    /* read, not failed */
	int usable;                   /* by the next run: set as it begins */
	uint64_t wall_us;             /* clock_us() when read */
	uint64_t cpu_us;              /* clock_thread_cpu_us() */
	long waits;                   /* voluntary context switches */
	unsigned long loop_waits;     /* loop_waits() when read */
	unsigned long loop_waits_now; /* loop_waits() as the next run begins */
};

/* One request for an interpreter thread: the caller's until done has run. */
struct perl_job {
	struct perl_run run; /* its "In" fields, as for a worker (copied when
				the thread takes the job) */
	/* Optional, on the interpreter thread: the script is compiled and
	 * about to run (run.want_running). */
	void (*running)(struct perl_job *job, const struct perl_run *run);
	/* On the interpreter thread, once the script has returned: run holds
	 * the outcome, and its tail (what STDOUT still buffered) is valid
	 * only during the call. */
	void (*done)(struct perl_job *job, const struct perl_run *run);
	void *ctx;
	/* Set before done when the script started processes (run.forked):
	 * one may still hold the response pipe, so the thread has a new one
	 * from now on, and this is its read end (non-blocking), the caller's
	 * to keep and close. -1 otherwise. */
	int fresh_out;
	/* Set (atomic) by the request's loop when its response is wanted no
	 * more; read by the interpreter thread (perl_transport.gone). */
	int gone;
	/* When want_usage: set on the thread that runs the job (an
	 * interpreter thread, or an event thread inline) as the script is
	 * about to run, after its compile, to that thread's CPU time
	 * (clock_thread_cpu_us) and voluntary context switches so far, for
	 * done to tell how the run spent its time. waits_at stays as the
	 * caller set it (-1: not known) when the script did not compile. */
	int want_usage;
	uint64_t cpu_at;
	long waits_at;
	/* Inline: the event thread's readings, used instead of new ones when
	 * usable and the script did not compile. NULL on an interpreter
	 * thread, which waits for its next job. */
	struct perl_usage_mark *mark;
};

/* Makes the parent interpreter on the calling thread, then n threads each
 * with its clone, and waits until each is ready. Returns NULL with a
 * message in err. */
struct perl_threads *perl_threads_create(const struct perl_interp_options *o, unsigned n, char *err,
		size_t errlen);

/* Ends the threads and the parent. Each finishes its request first: a
 * script still running is ended as at its timeout, and the processes it
 * started, which it may be waiting for, are killed. A thread that has not
 * ended 2 s later (in C code) is left running, with the log naming
 * its script, and calls no job's done again: the process is ending. */
void perl_threads_destroy(struct perl_threads *p);

/* The i-th thread (i < n). */
struct perl_thread *perl_threads_get(struct perl_threads *p, unsigned i);

/* The read ends of thread t's response channel (what its scripts flush to
 * STDOUT) and of its stderr; non-blocking. */
int perl_thread_out(const struct perl_thread *t);
int perl_thread_err(const struct perl_thread *t);

/* Ends the script job runs on t, if t still runs it (perl_interp_cancel),
 * and kills the processes it started in this request (perl_interp_kill_children):
 * its done comes with PERL_CANCELED, and a fresh clone then serves t's
 * next job. Returns 1 when asked, 0 when job was not running. */
int perl_thread_cancel(struct perl_thread *t, struct perl_job *job);

/* Hands job to t, which must be idle (its previous job's done has run).
 * Never blocks, but on an inline thread (perl_threads_inline): there the
 * job runs at once, on the caller's thread, and done has run when this
 * returns. */
void perl_thread_submit(struct perl_thread *t, struct perl_job *job);

/* The calling thread's own inline thread (an event thread's): a clone of
 * the parent made on the calling thread at its first call, whose jobs run
 * on that thread as they are submitted, with no hand-off. Its response
 * and stderr pipes hold 1 MiB each (F_SETPIPE_SZ, where allowed; *room
 * says how much), which an inline run writes into with nobody reading
 * until it returns. The calling thread blocks no signal from now on:
 * its script's alarm and cancel must reach it, and the programs its
 * scripts start inherit an empty mask (plxd's own signals are passed on,
 * as from an interpreter thread). Returns NULL with a message in err. */
struct perl_thread *perl_threads_inline(struct perl_threads *p, size_t *room, char *err,
		size_t errlen);

/* Whether t has an interpreter: an inline thread whose clone could not be
 * replaced (logged) has none, and runs nothing more. Call it on t's own
 * thread. */
int perl_thread_alive(const struct perl_thread *t);

/* perl_interp_load_would_wait for t's interpreter; on t's own thread. */
int perl_thread_load_would_wait(const struct perl_thread *t, const struct perl_run *run);

/* What perl.so finds in plxd-perl-threads.so, a plugin it opens with
 * plxd_plugin_load only for thread mode, so that plxd holds no libperl
 * otherwise. plxd checks plugin.abi, PLXD_HANDLER_ABI, whose hash covers
 * this header and perl_interp.h, and makes plugin.global_library
 * (libperl) global. */
struct perl_threads_api {
	struct plxd_plugin plugin;
	struct perl_threads *(*create)(const struct perl_interp_options *o, unsigned n, char *err,
			size_t errlen);
	void (*destroy)(struct perl_threads *p);
	struct perl_thread *(*get)(struct perl_threads *p, unsigned i);
	int (*out)(const struct perl_thread *t);
	int (*err)(const struct perl_thread *t);
	void (*submit)(struct perl_thread *t, struct perl_job *job);
	int (*cancel)(struct perl_thread *t, struct perl_job *job);
	struct perl_thread *(*inline_thread)(struct perl_threads *p, size_t *room, char *err,
			size_t errlen);
	int (*alive)(const struct perl_thread *t);
	int (*load_would_wait)(const struct perl_thread *t, const struct perl_run *run);
};
extern const struct perl_threads_api perl_threads_api;

#endif
