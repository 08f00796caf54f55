/* loop_post: from another thread it wakes a waiting loop, and only a
 * waiting one; from the loop's own thread it needs no wake-up, yet never
 * waits for one. Timers: stopping one in the middle of the heap leaves the
 * rest firing in order, none early. A one-shot watch fires once per
 * arming. loop_waits counts only the turns that may sleep. */
#include "loop.h"
#include "clock.h"
#include "tap.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
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

/* The timers' offsets from a base, in tens of milliseconds, in the order
 * they are armed: stopping the one at 101 moves the heap's last timer (8)
 * into its slot below larger ones, where only a move upwards puts it right;
 * a stop that sifted only downwards would leave it there, to fire after
 * 100, 920 ms late. */
static const unsigned timer_k[] = { 1, 100, 2, 101, 102, 3, 4, 103, 104, 105, 106, 5, 6, 7, 8 };
#define TIMERS  (sizeof timer_k / sizeof timer_k[0])
#define STOPPED 3 /* timer_k[3] == 101 */

struct test_timer {
	struct loop_timer t; /* first: the callback gets its address */
	unsigned k;
	uint64_t fired_ms;
};

static unsigned fired_k[TIMERS];
static size_t fired_n;

static void timer_fired(struct loop_timer *t)
{
	struct test_timer *tt = (struct test_timer *)t;
	tt->fired_ms = clock_ms();
	if (fired_n < TIMERS)
		fired_k[fired_n] = tt->k;
	fired_n++;
}

static void test_timer_stop_in_middle(void)
{
	static struct test_timer timers[TIMERS];
	uint64_t base = clock_ms();
	for (size_t i = 0; i < TIMERS; i++) {
		loop_timer_init(&timers[i].t);
		timers[i].k = timer_k[i];
		timers[i].fired_ms = 0;
		loop_timer_set(loop, &timers[i].t, base + 10 * timer_k[i], timer_fired);
	}
	loop_timer_stop(loop, &timers[STOPPED].t);
	ok(!loop_timer_armed(&timers[STOPPED].t), "a stopped timer is no longer armed");

	/* The last is due about 1.06 s after base; the bound only ends a loop
	 * whose timers never fire. */
	uint64_t give_up = base + 60 * 1000;
	while (fired_n < TIMERS - 1 && clock_ms() < give_up)
		loop_run_once(loop, 1000);

	char got[256] = "", want[256] = "";
	unsigned sorted[TIMERS - 1];
	size_t n = 0;
	for (size_t i = 0; i < TIMERS; i++)
		if (i != STOPPED)
			sorted[n++] = timer_k[i];
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
			unsigned swap = sorted[j];
			sorted[j] = sorted[j - 1];
			sorted[j - 1] = swap;
		}
	for (size_t i = 0; i < n; i++)
		snprintf(want + strlen(want), sizeof want - strlen(want), " %u", sorted[i]);
	for (size_t i = 0; i < fired_n && i < TIMERS; i++)
		snprintf(got + strlen(got), sizeof got - strlen(got), " %u", fired_k[i]);
	is_str(got, want,
			"after a stop in the middle of the heap, the other 14 timers fire in order");

	int early = 0;
	for (size_t i = 0; i < TIMERS; i++)
		if (i != STOPPED && timers[i].fired_ms < base + 10 * timers[i].k)
			early++;
	ok(early == 0, "no timer fires before its time (%d early)", early);

	loop_run_once(loop, 0);
	ok(fired_n == TIMERS - 1 && timers[STOPPED].fired_ms == 0 && loop_idle(loop),
			"the stopped timer never fires, and none is left armed");
}

static int once_ran;

static void once_cb(struct loop_watch *w, unsigned events)
{
	(void)w;
	if (events & LOOP_IN)
		once_ran++;
}

/* loop_watch_once: one event, then nothing though the data stays (the
 * watch is disarmed, the loop idle); armed again it fires again (the
 * descriptor was left in the set); a descriptor closed meanwhile and a
 * new one on the same number are armed alike; deleted before its event,
 * it never fires. */
static void test_watch_once(void)
{
	int p[2];
	ok(pipe(p) == 0, "a pipe");
	struct loop_watch w;
	loop_watch_init(&w);
	ok(loop_watch_once(loop, &w, p[0], LOOP_IN, once_cb) == 0
					&& loop_watch_once(loop, &w, p[0], LOOP_IN, once_cb) == 0,
			"armed (twice: the second is a no-op)");
	ok(write(p[1], "x", 1) == 1, "data");
	loop_run_once(loop, 1000);
	ok(once_ran == 1 && w.fd == -1 && loop_idle(loop),
			"its event ran it once and disarmed it (%d runs)", once_ran);
	loop_run_once(loop, 0);
	loop_run_once(loop, 0);
	ok(once_ran == 1, "disarmed, the data still there wakes nothing (%d runs)", once_ran);
	struct loop_watch other;
	loop_watch_init(&other);
	ok(loop_watch_once(loop, &other, p[0], LOOP_IN, once_cb) == 0,
			"armed again, by another watch");
	loop_run_once(loop, 1000);
	ok(once_ran == 2 && other.fd == -1, "it fires again (%d runs)", once_ran);

	/* Closed while disabled in the set, and a new pipe on its number. */
	close(p[0]);
	close(p[1]);
	int q[2];
	ok(pipe(q) == 0 && q[0] == p[0], "a new pipe on the same number");
	ok(loop_watch_once(loop, &w, q[0], LOOP_IN, once_cb) == 0, "armed on the new pipe");
	ok(write(q[1], "y", 1) == 1, "data");
	loop_run_once(loop, 1000);
	ok(once_ran == 3, "it fires (%d runs)", once_ran);

	ok(loop_watch_once(loop, &w, q[0], LOOP_IN, once_cb) == 0, "armed once more");
	loop_watch_del(loop, &w);
	ok(w.fd == -1 && loop_idle(loop), "deleted before its event");
	loop_run_once(loop, 0);
	ok(once_ran == 3, "a deleted one never fires (%d runs)", once_ran);
	ok(loop_watch_once(loop, &w, q[0], LOOP_IN, once_cb) == 0, "and can be armed after");
	loop_run_once(loop, 1000);
	ok(once_ran == 4, "it fires (%d runs)", once_ran);
	close(q[0]);
	close(q[1]);
}

/* Runs one turn with a long timeout; returns the milliseconds it took. */
static uint64_t turn(void)
{
	uint64_t t0 = clock_ms();
	loop_run_once(loop, 10 * 1000);
	return clock_ms() - t0;
}

static void drain(struct loop_watch *w, unsigned events)
{
	(void)events;
	char buf[16];
	if (read(w->fd, buf, sizeof buf) > 0)
		ran++;
}

/* loop_waits counts the turns that may sleep, which an inline Perl run's
 * measure of its own time needs (perl_inline.c): a turn with an event
 * already waiting does not sleep, whatever its timeout, nor does a turn
 * with none. */
static void test_waits(void)
{
	int fds[2];
	if (pipe(fds) < 0) {
		ok(0, "a pipe");
		return;
	}
	struct loop_watch w;
	loop_watch_init(&w);
	loop_watch_add(loop, &w, fds[0], LOOP_IN, drain);
	unsigned long before = loop_waits(loop);
	ran = 0;
	ssize_t unused = write(fds[1], "x", 1);
	(void)unused;
	loop_run_once(loop, 10 * 1000);
	ok(ran == 1 && loop_waits(loop) == before,
			"a turn that finds an event waiting is no wait (%lu waits)",
			loop_waits(loop) - before);
	loop_run_once(loop, 0);
	ok(loop_waits(loop) == before, "nor is a turn with no timeout");
	loop_run_once(loop, 10);
	ok(loop_waits(loop) == before + 1, "a turn that may sleep is one (%lu waits)",
			loop_waits(loop) - before);
	loop_watch_del(loop, &w);
	close(fds[0]);
	close(fds[1]);
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

	test_timer_stop_in_middle();
	test_watch_once();
	test_waits();

	loop_destroy(loop);
	return done_testing();
}
