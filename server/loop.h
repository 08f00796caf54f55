/* An event loop: descriptor watches, timers and functions posted from
 * other threads, on one epoll set, run by one thread. Every event thread
 * runs one; everything a loop calls runs on that thread, so what belongs to
 * a loop (its connections and their requests' handler state) needs no lock.
 *
 * Watches and timers are embedded in their owner's struct and cost no
 * allocation. A callback may add, change or remove any watch or timer,
 * its own included, and free its owner: an event still pending for a
 * removed watch is dropped. Watches are level-triggered: a callback that
 * leaves its condition standing (data unread, room unused) is called again,
 * so a watch that must wait is changed to want less. */
#ifndef PLXD_LOOP_H
#define PLXD_LOOP_H

#include <stddef.h>
#include <stdint.h>

struct loop;

enum {
	LOOP_IN = 1,        /* readable, or its end (EOF, error) */
	LOOP_OUT = 2,       /* writable, or its end */
	LOOP_HUP = 4,       /* the peer hung up or shut down its side (EPOLLRDHUP) */
	LOOP_EXCLUSIVE = 8, /* with loop_watch_add only: of the loops watching fd,
			       one is woken (EPOLLEXCLUSIVE; a listening socket) */
	LOOP_ONCE = 16      /* set by loop_watch_once: disarmed by its event */
};

struct loop_watch;
typedef void loop_watch_fn(struct loop_watch *w, unsigned events);

struct loop_watch {
	int fd;        /* -1: not added */
	unsigned want; /* LOOP_* it was added or last set with */
	loop_watch_fn *cb;
};

struct loop_timer;
typedef void loop_timer_fn(struct loop_timer *t);

struct loop_timer {
	uint64_t at_ms; /* clock_ms() when it fires */
	size_t slot;    /* its place in the loop's heap; 0: not armed */
	loop_timer_fn *cb;
};

/* Returns NULL with errno when epoll or eventfd cannot be had. */
struct loop *loop_create(void);
/* Frees l; nothing may be watched or armed on it any more. Functions
 * posted and not yet run are dropped. */
void loop_destroy(struct loop *l);

/* Whether nothing is watched, armed or posted on l any more: what was
 * left running on it after its connections closed has finished. */
int loop_idle(struct loop *l);

/* Marks l as held, from any thread: a callback on it runs long (an inline
 * Perl run that has gone on), so that its thread is handed no new
 * connection meanwhile. */
void loop_set_held(struct loop *l, int held);
int loop_held(struct loop *l);

/* How many times l's thread waited for events (loop_run_once with a
 * timeout), read on that thread: unchanged, it has not slept since. */
unsigned long loop_waits(const struct loop *l);

/* The loop the calling thread runs (set by loop_run_once), or NULL. */
struct loop *loop_current(void);

/* Waits up to timeout_ms (-1: no bound but the next timer) for events and
 * runs their callbacks, then the timers that are due and the functions
 * posted meanwhile. Returns the number of callbacks run. */
int loop_run_once(struct loop *l, int timeout_ms);

static inline void loop_watch_init(struct loop_watch *w)
{
	w->fd = -1;
	w->want = 0;
	w->cb = NULL;
}

/* Starts watching fd for want. A hang-up or error of fd is delivered as
 * LOOP_HUP with whichever of LOOP_IN and LOOP_OUT are wanted, so the read or
 * write that follows sees the end. With want 0 the watch is kept but
 * nothing is delivered (a paused reader is not woken by its peer's end).
 * Returns 0, or -1 with errno. */
int loop_watch_add(struct loop *l, struct loop_watch *w, int fd, unsigned want, loop_watch_fn *cb);
/* Arms w for one event of fd (want): delivered once, after which w is
 * disarmed (as if deleted) but fd stays in the loop's epoll set, disabled,
 * so that arming it again on this loop, with this watch or another, costs
 * one epoll_ctl where an add and a delete cost two (a worker's control
 * socket, one answer per request). A no-op when w is armed. Until its
 * event, w is removed with loop_watch_del; after it, fd leaves the set
 * when it is closed. fd must not be watched on l otherwise. Returns 0, or
 * -1 with errno. */
int loop_watch_once(struct loop *l, struct loop_watch *w, int fd, unsigned want, loop_watch_fn *cb);
/* Changes what an added watch waits for (a no-op when unchanged). */
void loop_watch_set(struct loop *l, struct loop_watch *w, unsigned want);
/* Stops watching (a no-op for a watch not added). Call it before closing
 * the descriptor. */
void loop_watch_del(struct loop *l, struct loop_watch *w);

static inline void loop_timer_init(struct loop_timer *t)
{
	t->slot = 0;
	t->cb = NULL;
}

/* Arms t to fire once at at_ms (re-arming an armed timer moves it). */
void loop_timer_set(struct loop *l, struct loop_timer *t, uint64_t at_ms, loop_timer_fn *cb);
/* Disarms t (a no-op when not armed). */
void loop_timer_stop(struct loop *l, struct loop_timer *t);
static inline int loop_timer_armed(const struct loop_timer *t)
{
	return t->slot != 0;
}

/* Runs fn(arg) on l's thread soon: the one call that may come from any
 * thread. fn runs even if it was posted from l's own thread. */
void loop_post(struct loop *l, void (*fn)(void *arg), void *arg);

#endif
