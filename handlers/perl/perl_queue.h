/* The first-come first-served queue of requests waiting for a runner, one
 * for every backend. Its calls take no lock: the backend holds its own
 * around them. */
#ifndef PLXD_PERL_QUEUE_H
#define PLXD_PERL_QUEUE_H

#include "perl_backend.h"

struct perl_queue {
	struct perl_waiter *first, *last;
	unsigned long waiting;
};

/* wt waits last. */
void perl_queue_push(struct perl_queue *q, struct perl_waiter *wt);
/* The longest-waiting request, taken out and given r (the caller serves it
 * with perl_queue_serve once its lock is released), or NULL. */
struct perl_waiter *perl_queue_give(struct perl_queue *q, struct perl_runner *r);
/* Takes wt out. Returns 1 when it was still queued, 0 when it was given or
 * told to stop already. */
int perl_queue_remove(struct perl_queue *q, struct perl_waiter *wt);
/* Every waiter is told to stop (its ready posted with no runner). */
void perl_queue_stop(struct perl_queue *q);

/* Without the backend's lock: sends the waiter's request on the runner it
 * was given, then tells its loop. The loop's queue lock orders what was
 * written here before ready runs. */
void perl_queue_serve(struct perl_waiter *wt);

#endif
