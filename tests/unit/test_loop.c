/* loop_post: from another thread it wakes a waiting loop, and only a
 * waiting one; from the loop's own thread it needs no wake-up, yet never
 * waits for one. */
#include "loop.h"
#include "clock.h"
#include "tap.h"

#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

static int ran;
static struct loop *loop;

static void count(void *arg)
{
	(void)arg;
	ran++;
}

/* A post that posts again: the second runs in the next turn. */
static void post_again(void *arg)
{
	(void)arg;
	ran++;
	loop_post(loop, count, NULL);
}

static void *post_now(void *arg)
{
	(void)arg;
	loop_post(loop, count, NULL);
	return NULL;
}

static void *post_later(void *arg)
{
	(void)arg;
	usleep(100 * 1000);
	loop_post(loop, count, NULL);
	return NULL;
}

/* Runs one turn with a long timeout; returns the milliseconds it took. */
static uint64_t turn(void)
{
	uint64_t t0 = clock_ms();
	loop_run_once(loop, 10 * 1000);
	return clock_ms() - t0;
}

int main(void)
{
	loop = loop_create();
	ok(loop != NULL, "a loop");

	loop_run_once(loop, 0); /* this thread now runs the loop */
	loop_post(loop, count, NULL);
	uint64_t ms = turn();
	ok(ran == 1 && ms < 5000,
			"a post from the loop's own thread runs in the next turn, "
			"which does not wait (%llu ms)",
			(unsigned long long)ms);

	ran = 0;
	loop_post(loop, post_again, NULL);
	turn();
	ms = turn();
	ok(ran == 2 && ms < 5000,
			"a post made by a post runs in the turn after, without waiting "
			"(%llu ms)",
			(unsigned long long)ms);

	ran = 0;
	pthread_t t;
	pthread_create(&t, NULL, post_later, NULL);
	ms = turn();
	pthread_join(t, NULL);
	ok(ran == 1 && ms >= 50 && ms < 5000,
			"a post from another thread wakes the waiting loop (%llu ms)",
			(unsigned long long)ms);

	/* The loop is busy (not in epoll_wait) while another thread posts:
	 * the post runs at its next turn, which no wake-up was written for
	 * (loop_run_once counts the watches it ran: the eventfd's is one). */
	ran = 0;
	pthread_create(&t, NULL, post_now, NULL);
	pthread_join(t, NULL);
	int watches = loop_run_once(loop, 10 * 1000);
	ok(ran == 1 && watches == 0,
			"a post from another thread to a loop that is not waiting runs "
			"at its next turn, with no wake-up written (%d watches ran)",
			watches);

	loop_destroy(loop);
	return done_testing();
}
