/* Where a .plx or .plt script runs, behind one table of functions: a
 * backend lends a runner (a worker process, perl_pool_req.c; an
 * interpreter thread in plxd, perl_tpool.c) to each request. No perl.h. */
#ifndef PLXD_PERL_BACKEND_H
#define PLXD_PERL_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct loop;
struct perl_req;

struct perl_backend_settings {
	const char *worker_path; /* the plxd-perl-worker executable */
	const char *threads_lib; /* plxd-perl-threads.so */
	unsigned workers;        /* worker processes or interpreter threads */
	unsigned long queue;     /* requests waiting for a runner at most */
	unsigned long start_timeout_ms;
	uint64_t max_requests;
	uint64_t max_rss_kb;
	uint64_t max_memory;
	const char *preload; /* "" or NULL: none */
	const char *inc;     /* whitespace-separated folders */
	unsigned taint;      /* enum perl_taint (perl_interp.h) */
};

/* What runs a script, as the request holding it sees it. */
struct perl_runner {
	int out; /* read end of its response pipe (the script's STDOUT),
		    non-blocking; the request holding it replaces it when the
		    script's end brings a new one */
	int err; /* read end of its stderr, non-blocking */
	/* For the status page, set by the request holding it from the
	 * script's end; the backend's release takes them into its slot. */
	uint64_t served;   /* requests it has served, as it counts them */
	unsigned compiled; /* its script was compiled for this request */
};

enum perl_acquire {
	PERL_ACQUIRED,
	PERL_QUEUED,     /* all busy: waiter->ready comes later */
	PERL_QUEUE_FULL, /* queue requests already wait */
	PERL_STOPPING
};

/* Sends a request to the runner r. Returns 0, or -1 with errno. */
typedef int perl_send_fn(void *ctx, struct perl_runner *r);

/* A request waiting for a runner (perl_queue.h): the caller's, until ready
 * has run or the backend's cancel said it was taken out. */
struct perl_waiter {
	struct perl_waiter *next;
	struct loop *loop;                     /* where ready runs */
	void (*ready)(struct perl_waiter *wt); /* given (or stopping) */
	perl_send_fn *send;
	void *ctx;
	const char *script;        /* what it runs, for the status page */
	struct perl_runner *given; /* then: the runner, its request sent... */
	int send_errno;            /* ...or not, with this errno */
	int stopping;              /* or none: the backend stops */
	int queued;                /* the queue's */
};

enum perl_release {
	PERL_RELEASE_IDLE,     /* finished cleanly: it serves again */
	PERL_RELEASE_RETIRING, /* it said it exits now: reap and replace it */
	PERL_RELEASE_KILL      /* hung, broken or died: kill (its process group)
				  and replace it */
};

/* One runner as the status page shows it. */
#define PERL_VIEW_SCRIPT 256
struct perl_runner_view {
	pid_t pid; /* 0 while starting or down */
	const char *state;
	char script[PERL_VIEW_SCRIPT]; /* "" when idle; a longer path is cut */
	uint64_t script_us;            /* how long it has run it */
	uint64_t requests, compiled;   /* since its process started */
	uint64_t rss_kb;               /* its own process's; 0: none */
};

/* A backend. Its lending calls may run on any event thread; its request
 * calls run on the loop of the request q. A third way to run scripts is a
 * third table. */
struct perl_backend {
	/* Starts the runners and waits until each is ready, and logs so.
	 * Returns NULL with a message in err (plxd then refuses to start). */
	void *(*create)(const struct perl_backend_settings *s, char *err, size_t errlen);
	/* New settings from a reload, as far as the backend can take them
	 * (logged either way). */
	void (*reconfigure)(void *b, const struct perl_backend_settings *s);
	/* Stops every runner; no request may hold one. b may be NULL. */
	void (*destroy)(void *b);

	/* Lends an idle runner and sends the request on it with
	 * wt->send(wt->ctx, r): PERL_ACQUIRED, with *out the runner and
	 * *send_errno 0 or send's errno (either way the caller holds it and
	 * must release it). With every runner busy, wt waits in a queue of at
	 * most queue requests (PERL_QUEUED): the thread that frees a runner
	 * sends the request on it and posts wt->ready to wt->loop. Never
	 * blocks. */
	enum perl_acquire (*acquire)(void *b, unsigned long queue, struct perl_waiter *wt,
			struct perl_runner **out, int *send_errno);
	/* Takes a queued waiter out. Returns 1 when it was still queued
	 * (ready will not run), 0 when it was already given or told to stop
	 * (ready is on its way to wt->loop). */
	int (*cancel)(void *b, struct perl_waiter *wt);
	/* Whether a request arriving now would find the queue full (for an
	 * early 503, before its body is read). */
	int (*saturated)(void *b, unsigned long queue);
	/* Gives a runner back; why (or NULL) is logged with KILL and
	 * RETIRING. */
	void (*release)(void *b, struct perl_runner *r, enum perl_release how, const char *why);
	/* Copies up to max runners' views into out, and returns how many
	 * there are. Never blocks for long. */
	size_t (*view)(void *b, struct perl_runner_view *out, size_t max);

	/* The request q (perl_req.h) on a runner: */
	perl_send_fn *send; /* with ctx q; may run on another thread */
	/* q was handed over: from now its end is watched for, which calls
	 * perl_req_done (or perl_req_lost). */
	void (*started)(struct perl_req *q);
	/* Whether the running script told its timing start (q->running). */
	void (*peek_running)(struct perl_req *q);
	/* Ends q's script while it runs (why: NULL or the reason). Returns 1
	 * when the backend asked it to end and its end comes with
	 * perl_req_done, 0 when its runner is to be released killed. */
	int (*end_script)(struct perl_req *q, const char *why);
	/* q's response is wanted no more while its script runs (the client
	 * left): tells the runner, for a PSGI app's writer. Never blocks. */
	void (*client_gone)(struct perl_req *q);
	/* q lets go of its runner: nothing of q's is watched from now. */
	void (*unwatch)(struct perl_req *q);
	/* Until its script returns, all it prints is read and dropped once
	 * its request has ended: a runner that cannot be killed must not
	 * block on a full pipe. */
	int drain_unbounded;
	/* The response's end when a process the script started held its
	 * output past linger, and the log line (a printf format taking the
	 * script and the linger in ms; NULL: none) when the script ran on
	 * past linger after its response ended. */
	const char *held_cut;
	const char *ran_on_log;
};

extern const struct perl_backend perl_backend_process; /* perl_pool_req.c */
extern const struct perl_backend perl_backend_thread;  /* perl_tpool.c */

#endif
