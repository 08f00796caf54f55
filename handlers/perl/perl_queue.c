/* The queue of requests waiting for a runner: see perl_queue.h. A waiting
 * request holds no thread; the thread that frees a runner serves it. */
#include "perl_queue.h"
#include "loop.h"

#include <errno.h>

void perl_queue_push(struct perl_queue *q, struct perl_waiter *wt)
{
	wt->next = NULL;
	wt->given = NULL;
	wt->stopping = 0;
	wt->queued = 1;
	if (q->last)
		q->last->next = wt;
	else
		q->first = wt;
	q->last = wt;
	q->waiting++;
}

struct perl_waiter *perl_queue_give(struct perl_queue *q, struct perl_runner *r)
{
	struct perl_waiter *wt = q->first;
	if (!wt)
		return NULL;
	q->first = wt->next;
	if (!q->first)
		q->last = NULL;
	q->waiting--;
	wt->next = NULL;
	wt->queued = 0;
	wt->given = r;
	return wt;
}

int perl_queue_remove(struct perl_queue *q, struct perl_waiter *wt)
{
	if (!wt->queued)
		return 0;
	struct perl_waiter **pp = &q->first, *prev = NULL;
	while (*pp && *pp != wt) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (*pp) {
		*pp = wt->next;
		if (q->last == wt)
			q->last = prev;
		q->waiting--;
	}
	wt->queued = 0;
	return 1;
}

static void waiter_ready(void *arg)
{
	struct perl_waiter *wt = arg;
	wt->ready(wt);
}

void perl_queue_stop(struct perl_queue *q)
{
	for (struct perl_waiter *wt = q->first, *next; wt; wt = next) {
		next = wt->next; /* wt may be gone once posted */
		wt->queued = 0;
		wt->stopping = 1;
		loop_post(wt->loop, waiter_ready, wt);
	}
	q->first = q->last = NULL;
	q->waiting = 0;
}

void perl_queue_serve(struct perl_waiter *wt)
{
	wt->send_errno = wt->send(wt->ctx, wt->given) < 0 ? errno : 0;
	loop_post(wt->loop, waiter_ready, wt);
}
