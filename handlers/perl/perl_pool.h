/* The Perl worker processes, plxd's side: starting them (posix_spawn of
 * plxd-perl-worker, never fork from plxd's threads), lending one to each
 * request, and replacing those that crash, hang, retire or run old
 * settings, from a keeper thread. No perl.h (plxd never links libperl), no
 * microhttpd.h. */
#ifndef PLXD_PERL_POOL_H
#define PLXD_PERL_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct loop;

struct perl_pool_settings {
	const char *worker_path; /* the plxd-perl-worker executable */
	unsigned workers;
	unsigned long queue; /* requests waiting for a worker at most */
	unsigned long start_timeout_ms;
	uint64_t max_requests;
	uint64_t max_rss_kb;
	uint64_t max_memory;
	const char *preload; /* "" or NULL: none */
	const char *inc;     /* whitespace-separated folders */
	unsigned taint;      /* enum perl_taint (perl_interp.h) */
};

/* A worker as a request sees it while it holds it. */
struct perl_worker {
	pid_t pid;
	int pidfd; /* readable once it has exited (the keeper reaps it) */
	int ctl;   /* control socket (perl_wire.h) */
	int out;   /* read end of its response pipe (its fd 1), non-blocking;
			 the request holding the worker replaces it when DONE
			 brings a new one */
	int err;   /* read end of its stderr, non-blocking */
	char *rx;  /* room for one message from it */
	size_t rx_cap;
	/* For the status page, set by the request holding it from its DONE
	 * message; perl_pool_release takes them into the slot. */
	uint64_t served;   /* requests it has served, as it counts them */
	unsigned compiled; /* its script was compiled for this request */
};

struct perl_pool;

/* Starts the workers and waits until each is ready. Returns NULL with a
 * message in err when one cannot start (plxd then refuses to start). */
struct perl_pool *perl_pool_create(const struct perl_pool_settings *s, char *err, size_t errlen);

/* New settings for workers started from now on. The running ones serve on
 * until they are replaced, one at a time: a spare started with the new
 * settings takes the place of one that is idle or given back once it is
 * ready. The number of workers stays. */
void perl_pool_reconfigure(struct perl_pool *p, const struct perl_pool_settings *s);

/* Stops every worker (their END blocks run), waits for them briefly, kills
 * the rest, and frees the pool. No request may hold a worker. */
void perl_pool_destroy(struct perl_pool *p);

enum perl_acquire {
	PERL_ACQUIRED,
	PERL_QUEUED,     /* all busy: waiter->ready comes later */
	PERL_QUEUE_FULL, /* queue requests already wait */
	PERL_STOPPING
};

/* Sends a request to the worker w. Returns 0, or -1 with errno. */
typedef int perl_send_fn(void *ctx, struct perl_worker *w);

/* A request waiting for a worker: the caller's, until ready has run or
 * perl_pool_cancel said it was taken out. */
struct perl_waiter {
	struct perl_waiter *next;
	struct loop *loop;                     /* where ready runs */
	void (*ready)(struct perl_waiter *wt); /* given (or stopping) */
	perl_send_fn *send;
	void *ctx;
	const char *script;        /* what it runs, for the status page */
	struct perl_worker *given; /* then: the worker, its request sent... */
	int send_errno;            /* ...or not, with this errno */
	int stopping;              /* or none: the pool stops */
	int queued;                /* private */
};

/* Lends an idle worker and sends the request on it with
 * wt->send(wt->ctx, w): PERL_ACQUIRED, with *out the worker and
 * *send_errno 0 or send's errno (either way the caller holds it and must
 * release it). With every worker busy, wt waits in a queue of at most
 * queue requests (PERL_QUEUED): the thread that frees a worker sends the
 * request on it, right after that worker's previous request (the worker
 * then finds its next request already there instead of going to sleep
 * and being woken for it), and posts wt->ready to wt->loop. Never blocks. */
enum perl_acquire perl_pool_acquire(struct perl_pool *p, unsigned long queue,
		struct perl_waiter *wt, struct perl_worker **out, int *send_errno);

/* Takes a queued waiter out. Returns 1 when it was still queued (ready will
 * not run), 0 when it was already given or told to stop (ready is on its
 * way to wt->loop). */
int perl_pool_cancel(struct perl_pool *p, struct perl_waiter *wt);

/* Whether a request arriving now would find the queue full (for an early
 * 503, before its body is read). */
int perl_pool_saturated(struct perl_pool *p, unsigned long queue);

enum perl_release {
	PERL_RELEASE_IDLE,     /* finished cleanly: it serves again */
	PERL_RELEASE_RETIRING, /* it said it exits now: reap and replace it */
	PERL_RELEASE_KILL      /* hung, broken or died: kill (its process group)
				  and replace it */
};

/* Gives a worker back. why (or NULL: nothing to say, it died by itself)
 * is logged with KILL. */
void perl_pool_release(struct perl_pool *p, struct perl_worker *w, enum perl_release how,
		const char *why);

/* How the worker's process ended ("killed by signal 11 (SIGSEGV)", "exited
 * with status 1") if it has (its pidfd is readable); "" when it still
 * runs or exited with 0. Never blocks; leaves it to be reaped by the
 * pool. */
void perl_pool_describe_exit(struct perl_worker *w, char *out, size_t outlen);

/* One worker as the status page shows it. */
#define PERL_VIEW_SCRIPT 256
struct perl_worker_view {
	pid_t pid; /* 0 while starting or down */
	const char *state;
	char script[PERL_VIEW_SCRIPT]; /* "" when idle; a longer path is cut */
	uint64_t script_us;            /* how long it has run it */
	uint64_t requests, compiled;   /* since its process started */
};

/* Copies up to max workers' views into out under the pool's lock, and
 * returns how many there are. Never blocks for long. */
size_t perl_pool_view(struct perl_pool *p, struct perl_worker_view *out, size_t max);

#endif
