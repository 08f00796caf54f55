/* The Perl worker pool: see perl_pool.h. This file lends the workers
 * (acquire, release, the queue, the status view); perl_pool_keeper.c
 * starts, ends and replaces them.
 *
 * A slot is IDLE (ready), BUSY (lent to a request), DOWN (its process must
 * end and be replaced) or STARTING (the keeper is replacing it). Requests
 * only ever take IDLE slots, or wait in a queue without a thread of their
 * own; the keeper thread does all ending, reaping and spawning, so a
 * request never waits for a worker to start.
 *
 * A reload replaces the workers the way Apache's graceful restart does: the
 * old ones go on serving until a replacement is ready. The keeper starts one
 * spare worker at a time with the new settings, outside every slot; once it
 * is ready it takes the place of an old worker that is idle (the keeper
 * swaps them) or that a request gives back (the releasing thread swaps
 * them, so that a busy pool whose queue never empties is replaced too), and
 * the keeper ends the old process. No slot is ever empty for a reload, and
 * no more than `workers` are ever lent; the cost is one process more than
 * `workers` while a spare starts, and a reload that takes a start per
 * worker. */
#include "perl_pool.h"
#include "perl_pool_slot.h"
#include "alloc.h"
#include "clock.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct settings *pool_settings_copy(const struct perl_backend_settings *s)
{
	struct settings *c = xcalloc(1, sizeof *c);
	c->worker_path = xstrdup(s->worker_path);
	c->start_timeout_ms = s->start_timeout_ms;
	c->max_requests = s->max_requests;
	c->max_rss_kb = s->max_rss_kb;
	c->max_memory = s->max_memory;
	c->preload = xstrdup(s->preload ? s->preload : "");
	c->inc = xstrdup(s->inc ? s->inc : "");
	c->taint = s->taint;
	return c;
}

void pool_settings_free(struct settings *s)
{
	if (!s)
		return;
	free(s->worker_path);
	free(s->preload);
	free(s->inc);
	free(s);
}

/* ---- lending ---- */

/* ---- the keeper ---- */

/* With the lock held: s is lent to a request for script (NULL: not
 * noted). */
static void slot_busy(struct slot *s, const char *script)
{
	s->state = SLOT_BUSY;
	if (!script) /* not counting ([status] counters = off) */
		return;
	snprintf(s->script, sizeof s->script, "%s", script);
	s->script_since_us = clock_us();
}

struct perl_waiter *pool_slot_idle(struct perl_pool *p, struct slot *s)
{
	struct perl_waiter *wt = perl_queue_give(&p->queue, &s->w.r);
	if (wt) {
		slot_busy(s, wt->script);
		return wt;
	}
	s->state = SLOT_IDLE;
	s->script[0] = '\0';
	p->idle++;
	return NULL;
}

/* ---- the pool ---- */

struct perl_pool *perl_pool_create(const struct perl_backend_settings *ps, char *err, size_t errlen)
{
	struct perl_pool *p = xcalloc(1, sizeof *p);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->keeper_cond, &ca);
	pthread_condattr_destroy(&ca);
	p->settings = pool_settings_copy(ps);
	p->n = ps->workers ? ps->workers : 1;
	p->slots = xcalloc(p->n, sizeof *p->slots);
	for (unsigned i = 0; i < p->n; i++) {
		struct slot *s = &p->slots[i];
		s->index = i;
		s->w.pid = -1;
		s->w.ctl = s->w.r.err = s->w.r.out = s->w.pidfd = -1;
		/* DONE carries at most a PerlIO buffer (8 KiB) of output. */
		s->w.rx_cap = 64 * 1024;
		s->w.rx = xmalloc(s->w.rx_cap);
		s->state = SLOT_DOWN;
	}
	p->spare.w.pid = -1;
	p->spare.w.ctl = p->spare.w.r.err = p->spare.w.r.out = p->spare.w.pidfd = -1;
	p->spare_state = SPARE_EMPTY;
	/* Start them all, then wait: their interpreters load in parallel. */
	int failed = 0;
	for (unsigned i = 0; i < p->n && !failed; i++)
		failed = pool_spawn(&p->slots[i], p->settings, err, errlen) < 0;
	for (unsigned i = 0; i < p->n && !failed; i++)
		failed = pool_await_ready(&p->slots[i], ps->start_timeout_ms, err, errlen) < 0;
	if (failed) {
		for (unsigned i = 0; i < p->n; i++)
			pool_end_process(&p->slots[i], END_KILL, 0);
		perl_pool_destroy(p);
		return NULL;
	}
	for (unsigned i = 0; i < p->n; i++)
		(void)pool_slot_idle(p, &p->slots[i]); /* no one waits yet */
	int rc = pthread_create(&p->keeper, NULL, pool_keeper_main, p);
	if (rc != 0) {
		snprintf(err, errlen, "cannot start the perl worker keeper thread: %s",
				strerror(rc));
		perl_pool_destroy(p);
		return NULL;
	}
	p->keeper_running = 1;
	return p;
}

void perl_pool_reconfigure(struct perl_pool *p, const struct perl_backend_settings *s)
{
	struct settings *fresh = pool_settings_copy(s);
	pthread_mutex_lock(&p->lock);
	struct settings *old = p->settings;
	p->settings = fresh;
	p->generation++;
	/* The keeper replaces them through the spare, one at a time; they
	 * serve until then. A start that failed is tried again at once. */
	p->spare.failures = 0;
	p->spare.retry_at_ms = 0;
	pthread_cond_signal(&p->keeper_cond);
	pthread_mutex_unlock(&p->lock);
	pool_settings_free(old);
}

void perl_pool_destroy(struct perl_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stopping = 1;
	/* (No request can be waiting here: plxd stops its handlers after the
	 * last request ends. This only keeps a stray one from hanging.) */
	perl_queue_stop(&p->queue);
	pthread_cond_broadcast(&p->keeper_cond);
	pthread_mutex_unlock(&p->lock);
	if (p->keeper_running)
		pthread_join(p->keeper, NULL);
	/* Tell them all first, then wait: their END blocks run in parallel.
	 * The spare (slot n here) is ready or holds an old worker to end. */
	for (unsigned i = 0; i <= p->n; i++) {
		struct slot *s = i < p->n ? &p->slots[i] : &p->spare;
		if (s->w.ctl >= 0)
			close(s->w.ctl);
		s->w.ctl = -1;
	}
	uint64_t deadline = clock_ms() + STOP_GRACE_MS;
	for (unsigned i = 0; i <= p->n; i++) {
		struct slot *s = i < p->n ? &p->slots[i] : &p->spare;
		uint64_t now = clock_ms();
		enum slot_end how = s->end == END_KILL ? END_KILL : END_STOP;
		pool_end_process(s, how, now < deadline ? (unsigned long)(deadline - now) : 0);
	}
	for (unsigned i = 0; i < p->n; i++)
		free(p->slots[i].w.rx);
	free(p->slots);
	pool_settings_free(p->settings);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->keeper_cond);
	free(p);
}

enum perl_acquire perl_pool_acquire(struct perl_pool *p, unsigned long queue,
		struct perl_waiter *wt, struct perl_runner **out, int *send_errno)
{
	pthread_mutex_lock(&p->lock);
	if (p->stopping) {
		pthread_mutex_unlock(&p->lock);
		return PERL_STOPPING;
	}
	if (p->idle > 0) {
		struct slot *got = NULL;
		for (unsigned i = 0; i < p->n && !got; i++) {
			if (p->slots[i].state == SLOT_IDLE) {
				got = &p->slots[i];
				slot_busy(got, wt->script);
				p->idle--;
			}
		}
		pthread_mutex_unlock(&p->lock);
		*out = &got->w.r;
		*send_errno = wt->send(wt->ctx, *out) < 0 ? errno : 0;
		return PERL_ACQUIRED;
	}
	if (p->queue.waiting >= queue) {
		pthread_mutex_unlock(&p->lock);
		return PERL_QUEUE_FULL;
	}
	perl_queue_push(&p->queue, wt);
	pthread_mutex_unlock(&p->lock);
	return PERL_QUEUED;
}

int perl_pool_cancel(struct perl_pool *p, struct perl_waiter *wt)
{
	pthread_mutex_lock(&p->lock);
	int queued = perl_queue_remove(&p->queue, wt);
	pthread_mutex_unlock(&p->lock);
	return queued;
}

int perl_pool_saturated(struct perl_pool *p, unsigned long queue)
{
	pthread_mutex_lock(&p->lock);
	int full = p->idle == 0 && p->queue.waiting >= queue;
	pthread_mutex_unlock(&p->lock);
	return full;
}

void perl_pool_release(struct perl_pool *p, struct perl_runner *r, enum perl_release how,
		const char *why)
{
	struct slot *s = (struct slot *)(void *)r;
	struct perl_worker *w = &s->w;
	if (how == PERL_RELEASE_KILL) {
		/* Now, not when the keeper gets to it: a runaway script should
		 * stop burning CPU at once. */
		if (why)
			plxd_log(PLXD_LOG_WARN, "perl worker %d killed: %s", (int)w->pid, why);
		kill(-w->pid, SIGKILL);
		kill(w->pid, SIGKILL);
	} else if (how == PERL_RELEASE_RETIRING) {
		plxd_log(PLXD_LOG_INFO, "perl worker %d retires after %llu requests: %s",
				(int)w->pid, (unsigned long long)r->served, why ? why : "");
	}
	struct perl_waiter *wt = NULL;
	pthread_mutex_lock(&p->lock);
	s->served = r->served;
	s->compiled += r->compiled;
	r->compiled = 0;
	s->script[0] = '\0';
	int twin_first = w->twin && !p->twin_wanted;
	if (twin_first) {
		/* The site has -T scripts: the other workers are replaced, as a
		 * reload does, by workers that make their tainted interpreter
		 * before they are ready, so that no later request waits for its
		 * preload. This one has it, and stays unless a reload is under
		 * way. */
		p->twin_wanted = 1;
		if (s->generation == p->generation++)
			s->generation = p->generation;
		p->spare.failures = 0;
		p->spare.retry_at_ms = 0;
		pthread_cond_signal(&p->keeper_cond);
	}
	if (how == PERL_RELEASE_IDLE && !p->stopping) {
		/* A worker of an older generation serves on until a spare of
		 * the current one is ready; then it takes its place here, where
		 * no request holds the slot (under load none may ever be idle
		 * for the keeper to find). */
		if (s->generation != p->generation && p->spare_state == SPARE_READY
				&& p->spare.generation == p->generation)
			pool_spare_take(p, s, END_STOP);
		wt = pool_slot_idle(p, s);
	} else {
		s->state = SLOT_DOWN;
		s->end = how == PERL_RELEASE_KILL              ? END_KILL
				: how == PERL_RELEASE_RETIRING ? END_RETIRE
							       : END_STOP;
		s->retry_at_ms = 0;
		pthread_cond_signal(&p->keeper_cond);
	}
	pthread_mutex_unlock(&p->lock);
	if (twin_first)
		plxd_log(PLXD_LOG_INFO,
				"perl: a script asked for taint checks (-T): the other workers are "
				"replaced one at a time, and workers started from now on make "
				"their interpreter with them at start-up");
	if (wt)
		perl_queue_serve(wt);
}

/* Resident size of a process, in KB, from /proc/PID/statm; 0 when it
 * cannot be read (gone already). */
static uint64_t rss_kb(pid_t pid)
{
	char path[64], buf[128];
	snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	unsigned long long size, resident;
	if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
		return 0;
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE) / 1024;
}

size_t perl_pool_view(struct perl_pool *p, struct perl_runner_view *out, size_t max)
{
	static const char *const names[] = {
		[SLOT_IDLE] = "idle",
		[SLOT_BUSY] = "busy",
		[SLOT_DOWN] = "down",
		[SLOT_STARTING] = "starting",
	};
	pthread_mutex_lock(&p->lock);
	uint64_t now = clock_us();
	for (unsigned i = 0; i < p->n && i < max; i++) {
		struct slot *s = &p->slots[i];
		int live = s->state == SLOT_IDLE || s->state == SLOT_BUSY;
		out[i] = (struct perl_runner_view){
			/* The keeper writes pid unlocked while it starts one. */
			.pid = live ? s->w.pid : 0,
			.state = names[s->state],
			.script_us = s->state == SLOT_BUSY ? now - s->script_since_us : 0,
			/* Its worker's, and none while it has none. */
			.requests = live ? s->served : 0,
			.compiled = live ? s->compiled : 0,
		};
		if (s->state == SLOT_BUSY)
			memcpy(out[i].script, s->script, sizeof out[i].script);
	}
	size_t n = p->n;
	pthread_mutex_unlock(&p->lock);
	for (size_t i = 0; i < n && i < max; i++)
		if (out[i].pid)
			out[i].rss_kb = rss_kb(out[i].pid);
	return n;
}
