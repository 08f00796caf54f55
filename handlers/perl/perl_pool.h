/* The Perl worker processes, plxd's side ([perl] isolation = process):
 * starting them (posix_spawn of plxd-perl-worker, never fork from plxd's
 * threads), lending one to each request, and replacing those that crash,
 * hang, retire or run old settings, from a keeper thread. The handler
 * reaches them through perl_backend_process (perl_pool_req.c). No perl.h
 * (plxd never links libperl), no microhttpd.h. */
#ifndef PLXD_PERL_POOL_H
#define PLXD_PERL_POOL_H

#include "perl_backend.h"

/* A worker as a request sees it while it holds it. */
struct perl_worker {
	struct perl_runner r; /* first member: a runner of this pool is a worker */
	pid_t pid;
	int pidfd; /* readable once it has exited (the keeper reaps it) */
	int ctl;   /* control socket (perl_wire.h) */
	char *rx;  /* room for one message from it */
	size_t rx_cap;
	int twin; /* its last DONE said it has a tainted twin (PERL_WIRE_TWIN) */
};

struct perl_pool;

/* Starts the workers and waits until each is ready. Returns NULL with a
 * message in err when one cannot start (plxd then refuses to start). */
struct perl_pool *perl_pool_create(const struct perl_backend_settings *s, char *err, size_t errlen);

/* New settings for workers started from now on. The running ones serve on
 * until they are replaced, one at a time: a spare started with the new
 * settings takes the place of one that is idle or given back once it is
 * ready. The number of workers stays. */
void perl_pool_reconfigure(struct perl_pool *p, const struct perl_backend_settings *s);

/* Stops every worker (their END blocks run), waits for them briefly, kills
 * the rest, and frees the pool. No request may hold a worker. */
void perl_pool_destroy(struct perl_pool *p);

/* As struct perl_backend's calls of the same names. */
enum perl_acquire perl_pool_acquire(struct perl_pool *p, unsigned long queue,
		struct perl_waiter *wt, struct perl_runner **out, int *send_errno);
int perl_pool_cancel(struct perl_pool *p, struct perl_waiter *wt);
int perl_pool_saturated(struct perl_pool *p, unsigned long queue);
void perl_pool_release(struct perl_pool *p, struct perl_runner *r, enum perl_release how,
		const char *why);
/* Under the pool's lock; each worker's RSS is read after it. */
size_t perl_pool_view(struct perl_pool *p, struct perl_runner_view *out, size_t max);

/* How the worker's process ended ("killed by signal 11 (SIGSEGV)", "exited
 * with status 1") if it has (its pidfd is readable); "" when it still
 * runs or exited with 0. Never blocks; leaves it to be reaped by the
 * pool. */
void perl_pool_describe_exit(struct perl_worker *w, char *out, size_t outlen);

#endif
