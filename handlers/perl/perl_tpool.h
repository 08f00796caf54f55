/* The interpreter threads as perl.so lends them to requests ([perl]
 * isolation = thread): the same calls and the same contract as the worker
 * pool (perl_pool.h), with a thread of plxd in each slot instead of a
 * worker process. It opens plxd-perl-threads.so when made (with
 * plxd_plugin_load, which makes libperl global), so that a plxd with no
 * instance in thread mode never loads Perl. No perl.h. */
#ifndef PLXD_PERL_TPOOL_H
#define PLXD_PERL_TPOOL_H

#include "perl_pool.h"
#include "perl_thread.h"

struct perl_tpool;

/* Starts threads interpreter threads, cloned from a parent that loaded
 * inc and preload, from lib (the plugin's path). Returns NULL with
 * a message in err. */
struct perl_tpool *perl_tpool_create(const char *lib, unsigned threads, const char *preload,
		const char *inc, enum perl_taint taint, char *err, size_t errlen);
/* Ends the threads; no request may hold one. */
void perl_tpool_destroy(struct perl_tpool *p);

enum perl_acquire perl_tpool_acquire(struct perl_tpool *p, unsigned long queue,
		struct perl_waiter *wt, struct perl_worker **out, int *send_errno);
int perl_tpool_cancel(struct perl_tpool *p, struct perl_waiter *wt);
int perl_tpool_saturated(struct perl_tpool *p, unsigned long queue);
/* Gives a thread back once its script has returned (its job's done came). */
void perl_tpool_release(struct perl_tpool *p, struct perl_worker *w);
size_t perl_tpool_view(struct perl_tpool *p, struct perl_worker_view *out, size_t max);

/* The thread behind w, and the calls that reach it. */
struct perl_thread *perl_tpool_thread(struct perl_worker *w);
const struct perl_threads_api *perl_tpool_api(struct perl_tpool *p);

#endif
