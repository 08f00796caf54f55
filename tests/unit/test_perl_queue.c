/* The wait queue both Perl backends share (handlers/perl/perl_queue.c):
 * first come first served, a waiter taken out from anywhere, one already
 * given not taken out again, its request sent before its ready runs on its
 * loop, and every waiter told when the backend stops. */
#include "perl_queue.h"
#include "loop.h"
#include "tap.h"

#include <errno.h>

static struct perl_runner runner;
static int readied, sends;

static int send_ok(void *ctx, struct perl_runner *r)
{
	(void)ctx;
	sends += r == &runner;
	return 0;
}

static int send_gone(void *ctx, struct perl_runner *r)
{
	(void)ctx;
	(void)r;
	errno = EPIPE;
	return -1;
}

static void ready(struct perl_waiter *wt)
{
	(void)wt;
	readied++;
}

int main(void)
{
	struct loop *loop = loop_create();
	struct perl_queue q = { 0 };
	struct perl_waiter w[3];
	for (int i = 0; i < 3; i++) {
		w[i] = (struct perl_waiter){ .loop = loop, .ready = ready, .send = send_ok };
		perl_queue_push(&q, &w[i]);
	}
	ok(q.waiting == 3 && w[1].queued, "three wait");

	ok(perl_queue_remove(&q, &w[1]) == 1 && q.waiting == 2 && !w[1].queued,
			"one taken out of the middle");
	ok(perl_queue_remove(&q, &w[1]) == 0 && q.waiting == 2, "and not twice");

	struct perl_waiter *got = perl_queue_give(&q, &runner);
	ok(got == &w[0] && got->given == &runner && !got->queued && q.waiting == 1,
			"the first come is given the runner first");
	ok(perl_queue_remove(&q, &w[0]) == 0, "a given waiter is not taken out");

	perl_queue_serve(got);
	ok(sends == 1 && got->send_errno == 0 && readied == 0,
			"served: its request is sent at once, its ready is posted");
	loop_run_once(loop, 0);
	ok(readied == 1, "ready runs on its loop");

	w[2].send = send_gone;
	got = perl_queue_give(&q, &runner);
	ok(got == &w[2] && q.waiting == 0 && !q.first && !q.last, "the last one given");
	perl_queue_serve(got);
	ok(got->send_errno == EPIPE, "a failed send leaves its errno for ready");
	loop_run_once(loop, 0);
	ok(perl_queue_give(&q, &runner) == NULL, "none left to give");

	readied = 0;
	perl_queue_push(&q, &w[0]);
	perl_queue_push(&q, &w[1]);
	perl_queue_stop(&q);
	ok(q.waiting == 0 && !q.first && w[0].stopping && w[1].stopping && !w[0].given,
			"stopping empties the queue");
	loop_run_once(loop, 0);
	ok(readied == 2, "and tells every waiter");

	loop_destroy(loop);
	return done_testing();
}
