/* The event loop: see loop.h. One epoll set (level-triggered), a binary
 * heap of timers, and an eventfd that wakes the loop for posted functions. */
#include "loop.h"
#include "alloc.h"
#include "clock.h"

#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define BATCH 64

struct post {
	struct post *next;
	void (*fn)(void *arg);
	void *arg;
};

struct loop {
	int epfd;
	struct loop_watch wake; /* the eventfd loop_post writes */
	/* The batch being dispatched, so that a watch removed by a callback
	 * loses the events still queued for it. */
	struct epoll_event batch[BATCH];
	int batch_n, batch_i;
	size_t watches;           /* added, the wake-up's included */
	struct loop_timer **heap; /* 1-based min-heap on at_ms */
	size_t heap_n, heap_cap;
	pthread_mutex_t posts_lock; /* guards posts and sleeping */
	struct post *posts, *posts_last;
	int sleeping;        /* in epoll_wait, or about to be: a post must wake it */
	unsigned long waits; /* epoll_waits with a timeout, for loop_waits */
	atomic_int held;     /* loop_set_held */
};

static _Thread_local struct loop *current;

/* Milliseconds from now until deadline_ms, 0 once it has passed, capped so
 * that it fits poll's and epoll_wait's int timeout. */
static int ms_until(uint64_t deadline_ms)
{
	uint64_t now = clock_ms();
	if (deadline_ms <= now)
		return 0;
	uint64_t left = deadline_ms - now;
	return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

static void wake_read(struct loop_watch *w, unsigned events);
static void run_posts(struct loop *l);
static void run_timers(struct loop *l);

struct loop *loop_create(void)
{
	struct loop *l = xcalloc(1, sizeof *l);
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	loop_watch_init(&l->wake);
	if (l->epfd < 0 || efd < 0 || loop_watch_add(l, &l->wake, efd, LOOP_IN, wake_read) < 0) {
		int saved = errno;
		if (efd >= 0)
			close(efd);
		if (l->epfd >= 0)
			close(l->epfd);
		free(l);
		errno = saved;
		return NULL;
	}
	pthread_mutex_init(&l->posts_lock, NULL);
	return l;
}

void loop_destroy(struct loop *l)
{
	if (!l)
		return;
	int efd = l->wake.fd;
	loop_watch_del(l, &l->wake);
	close(efd);
	close(l->epfd);
	for (struct post *p = l->posts, *next; p; p = next) {
		next = p->next;
		free(p);
	}
	pthread_mutex_destroy(&l->posts_lock);
	free(l->heap);
	free(l);
}

int loop_idle(struct loop *l)
{
	pthread_mutex_lock(&l->posts_lock);
	int posted = l->posts != NULL;
	pthread_mutex_unlock(&l->posts_lock);
	return l->watches == 1 && l->heap_n == 0 && !posted;
}

void loop_set_held(struct loop *l, int held)
{
	atomic_store_explicit(&l->held, held, memory_order_relaxed);
}

int loop_held(struct loop *l)
{
	return atomic_load_explicit(&l->held, memory_order_relaxed);
}

unsigned long loop_waits(const struct loop *l)
{
	return l->waits;
}

struct loop *loop_current(void)
{
	return current;
}

/* ---- watches ---- */

static uint32_t epoll_events(unsigned want)
{
	uint32_t ev = 0;
	if (want & LOOP_IN)
		ev |= EPOLLIN;
	if (want & LOOP_OUT)
		ev |= EPOLLOUT;
	if (want & LOOP_HUP)
		ev |= EPOLLRDHUP;
	if (want & LOOP_EXCLUSIVE)
		ev |= EPOLLEXCLUSIVE;
	return ev;
}

/* Forgets events of the current batch that are still queued for w. */
static void batch_forget(struct loop *l, struct loop_watch *w)
{
	for (int i = l->batch_i; i < l->batch_n; i++)
		if (l->batch[i].data.ptr == w)
			l->batch[i].data.ptr = NULL;
}

int loop_watch_add(struct loop *l, struct loop_watch *w, int fd, unsigned want, loop_watch_fn *cb)
{
	w->fd = fd;
	w->want = want;
	w->cb = cb;
	struct epoll_event ev = { .events = epoll_events(want), .data.ptr = w };
	if (want && epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		w->fd = -1;
		w->want = 0;
		return -1;
	}
	l->watches++;
	return 0;
}

int loop_watch_once(struct loop *l, struct loop_watch *w, int fd, unsigned want, loop_watch_fn *cb)
{
	if (w->fd >= 0)
		return 0;
	struct epoll_event ev = { .events = epoll_events(want) | EPOLLONESHOT, .data.ptr = w };
	/* Left disabled in the set by an earlier event, or never added (or
	 * closed since, which took it out of the set). */
	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) < 0
			&& (errno != ENOENT || epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0))
		return -1;
	w->fd = fd;
	w->want = want | LOOP_ONCE;
	w->cb = cb;
	l->watches++;
	return 0;
}

/* A watch with want 0 is not in the epoll set at all: epoll reports a
 * hang-up even to a registration that asks for nothing, and a paused
 * reader whose peer has gone would be woken for ever. */
void loop_watch_set(struct loop *l, struct loop_watch *w, unsigned want)
{
	if (w->fd < 0 || want == w->want)
		return;
	struct epoll_event ev = { .events = epoll_events(want), .data.ptr = w };
	int op = w->want == 0 ? EPOLL_CTL_ADD : want == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
	if (epoll_ctl(l->epfd, op, w->fd, &ev) == 0)
		w->want = want;
	if (want == 0)
		batch_forget(l, w);
}

void loop_watch_del(struct loop *l, struct loop_watch *w)
{
	if (w->fd < 0)
		return;
	if (w->want)
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	batch_forget(l, w);
	w->fd = -1;
	w->want = 0;
	l->watches--;
}

/* ---- timers ---- */

static void heap_put(struct loop *l, size_t i, struct loop_timer *t)
{
	l->heap[i] = t;
	t->slot = i;
}

static void heap_up(struct loop *l, size_t i)
{
	struct loop_timer *t = l->heap[i];
	while (i > 1 && l->heap[i / 2]->at_ms > t->at_ms) {
		heap_put(l, i, l->heap[i / 2]);
		i /= 2;
	}
	heap_put(l, i, t);
}

static void heap_down(struct loop *l, size_t i)
{
	struct loop_timer *t = l->heap[i];
	for (;;) {
		size_t child = 2 * i;
		if (child > l->heap_n)
			break;
		if (child < l->heap_n && l->heap[child + 1]->at_ms < l->heap[child]->at_ms)
			child++;
		if (l->heap[child]->at_ms >= t->at_ms)
			break;
		heap_put(l, i, l->heap[child]);
		i = child;
	}
	heap_put(l, i, t);
}

void loop_timer_stop(struct loop *l, struct loop_timer *t)
{
	size_t i = t->slot;
	if (i == 0)
		return;
	t->slot = 0;
	struct loop_timer *last = l->heap[l->heap_n--];
	if (i > l->heap_n)
		return; /* it was the last one */
	heap_put(l, i, last);
	heap_up(l, i);
	heap_down(l, last->slot);
}

void loop_timer_set(struct loop *l, struct loop_timer *t, uint64_t at_ms, loop_timer_fn *cb)
{
	loop_timer_stop(l, t);
	t->at_ms = at_ms;
	t->cb = cb;
	if (l->heap_n + 1 >= l->heap_cap) {
		l->heap_cap = l->heap_cap ? l->heap_cap * 2 : 64;
		l->heap = xrealloc(l->heap, l->heap_cap * sizeof *l->heap);
	}
	heap_put(l, ++l->heap_n, t);
	heap_up(l, l->heap_n);
}

static void run_timers(struct loop *l)
{
	uint64_t now = clock_ms();
	while (l->heap_n > 0 && l->heap[1]->at_ms <= now) {
		struct loop_timer *t = l->heap[1];
		loop_timer_stop(l, t);
		t->cb(t);
	}
}

/* ---- posts ---- */

void loop_post(struct loop *l, void (*fn)(void *arg), void *arg)
{
	struct post *p = xmalloc(sizeof *p);
	p->next = NULL;
	p->fn = fn;
	p->arg = arg;
	pthread_mutex_lock(&l->posts_lock);
	if (l->posts_last)
		l->posts_last->next = p;
	else
		l->posts = p;
	l->posts_last = p;
	/* A loop that is not waiting runs its posts at the end of this turn,
	 * and the next turn does not wait (loop_run_once): only a waiting one
	 * is woken, once. */
	int wake = l->sleeping;
	l->sleeping = 0;
	pthread_mutex_unlock(&l->posts_lock);
	if (wake) {
		uint64_t one = 1;
		/* Only EAGAIN can fail it, and then the counter is already set. */
		if (write(l->wake.fd, &one, sizeof one) < 0)
			(void)errno;
	}
}

static void wake_read(struct loop_watch *w, unsigned events)
{
	(void)events;
	uint64_t count;
	if (read(w->fd, &count, sizeof count) < 0)
		(void)errno; /* EAGAIN: a spurious wake-up */
}

static void run_posts(struct loop *l)
{
	pthread_mutex_lock(&l->posts_lock);
	struct post *p = l->posts;
	l->posts = l->posts_last = NULL;
	pthread_mutex_unlock(&l->posts_lock);
	while (p) {
		struct post *next = p->next;
		p->fn(p->arg);
		free(p);
		p = next;
	}
}

/* ---- running ---- */

int loop_run_once(struct loop *l, int timeout_ms)
{
	current = l;
	if (l->heap_n > 0) {
		int until = ms_until(l->heap[1]->at_ms);
		if (timeout_ms < 0 || until < timeout_ms)
			timeout_ms = until;
	}
	/* A busy loop mostly has events waiting: a look that cannot sleep
	 * finds them without the wake-up handshake below, and only a turn
	 * that may sleep counts as a wait (loop_waits). */
	int n = timeout_ms != 0 ? epoll_wait(l->epfd, l->batch, BATCH, 0) : 0;
	if (n <= 0) {
		/* Posts made while the loop was not waiting wrote no wake-up:
		 * they are looked for here. */
		pthread_mutex_lock(&l->posts_lock);
		if (l->posts)
			timeout_ms = 0;
		l->sleeping = timeout_ms != 0;
		pthread_mutex_unlock(&l->posts_lock);
		if (timeout_ms != 0)
			l->waits++;
		n = epoll_wait(l->epfd, l->batch, BATCH, timeout_ms);
		if (timeout_ms != 0) {
			pthread_mutex_lock(&l->posts_lock);
			l->sleeping = 0;
			pthread_mutex_unlock(&l->posts_lock);
		}
	}
	int ran = 0;
	l->batch_n = n > 0 ? n : 0;
	for (l->batch_i = 0; l->batch_i < l->batch_n;) {
		struct epoll_event *e = &l->batch[l->batch_i++];
		struct loop_watch *w = e->data.ptr;
		if (!w)
			continue;
		unsigned events = 0;
		if (e->events & EPOLLIN)
			events |= LOOP_IN;
		if (e->events & EPOLLOUT)
			events |= LOOP_OUT;
		if (e->events & EPOLLRDHUP)
			events |= LOOP_HUP;
		if (e->events & (EPOLLHUP | EPOLLERR))
			events |= LOOP_HUP | (w->want & (LOOP_IN | LOOP_OUT));
		if (w->want & LOOP_ONCE) {
			/* The kernel disabled it with this event. */
			w->fd = -1;
			w->want = 0;
			l->watches--;
		}
		w->cb(w, events);
		ran++;
	}
	l->batch_n = l->batch_i = 0;
	run_timers(l);
	run_posts(l);
	return ran;
}
