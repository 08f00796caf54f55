/* The interpreter threads, lent to requests one at a time, with the queue
 * the worker pool uses too (perl_queue.c): a request finding every thread
 * busy waits (at most queue of them), and the thread that frees an
 * interpreter sends the next waiting request on it. */
#include "perl_tpool.h"
#include "perl_queue.h"
#include "alloc.h"
#include "clock.h"
#include "log.h"
#include "loop.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct tslot {
	struct perl_worker w; /* first member: the handler holds &w */
	struct perl_thread *t;
	int busy;
	char script[PERL_VIEW_SCRIPT];
	uint64_t since_us, served;
	uint64_t compiled; /* compiles by its interpreters since plxd started */
};

struct perl_tpool {
	const struct perl_threads_api *api;
	struct perl_threads *threads;
	pthread_mutex_t lock; /* guards the slots' busy state and the queue */
	struct tslot *slots;
	unsigned n;
	struct perl_queue queue;
};

/* The parent interpreter's @INC additions, split as the workers get them. */
static char **split_inc(const char *inc)
{
	size_t n = 0, cap = 4;
	char **v = xcalloc(cap, sizeof *v);
	const char *p = inc ? inc : "";
	while (*p) {
		while (*p == ' ' || *p == '\t')
			p++;
		size_t len = strcspn(p, " \t");
		if (!len)
			break;
		if (n + 2 > cap)
			v = xrealloc(v, (cap *= 2) * sizeof *v);
		v[n++] = xstrndup(p, len);
		v[n] = NULL;
		p += len;
	}
	return v;
}

struct perl_tpool *perl_tpool_create(const char *lib, unsigned threads, const char *preload,
		const char *inc, enum perl_taint taint, char *err, size_t errlen)
{
	struct perl_tpool *p = xcalloc(1, sizeof *p);
	char **incv = NULL;
	pthread_mutex_init(&p->lock, NULL);
	/* Makes libperl global too, before an XS module can load. */
	p->api = plxd_plugin_load(lib, "perl_threads_api", err, errlen);
	if (!p->api)
		goto fail;
	incv = split_inc(inc);
	struct perl_interp_options o = { .preload = preload && *preload ? preload : NULL,
		.inc = incv,
		.threaded = 1,
		.taint = taint };
	p->threads = p->api->create(&o, threads, err, errlen);
	if (!p->threads)
		goto fail;
	p->n = threads;
	p->slots = xcalloc(threads, sizeof *p->slots);
	for (unsigned i = 0; i < threads; i++) {
		struct tslot *s = &p->slots[i];
		s->t = p->api->get(p->threads, i);
		s->w = (struct perl_worker){
			.pid = getpid(),
			.pidfd = -1,
			.ctl = -1,
			/* Copies the handler may replace (a new pipe after a
			 * script that started processes) and close. */
			.out = fcntl(p->api->out(s->t), F_DUPFD_CLOEXEC, 3),
			.err = fcntl(p->api->err(s->t), F_DUPFD_CLOEXEC, 3),
		};
		if (s->w.out < 0 || s->w.err < 0) {
			snprintf(err, errlen, "interpreter thread pipes: %s", strerror(errno));
			goto fail;
		}
	}
	for (size_t i = 0; incv[i]; i++)
		free(incv[i]);
	free(incv);
	return p;

fail:
	if (incv) {
		for (size_t i = 0; incv[i]; i++)
			free(incv[i]);
		free(incv);
	}
	perl_tpool_destroy(p);
	return NULL;
}

void perl_tpool_destroy(struct perl_tpool *p)
{
	if (!p)
		return;
	if (p->threads)
		p->api->destroy(p->threads);
	for (unsigned i = 0; p->slots && i < p->n; i++) {
		if (p->slots[i].w.out >= 0)
			close(p->slots[i].w.out);
		if (p->slots[i].w.err >= 0)
			close(p->slots[i].w.err);
	}
	free(p->slots);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static void slot_take(struct tslot *s, const char *script)
{
	s->busy = 1;
	s->since_us = clock_us();
	snprintf(s->script, sizeof s->script, "%s", script ? script : "");
}

enum perl_acquire perl_tpool_acquire(struct perl_tpool *p, unsigned long queue,
		struct perl_waiter *wt, struct perl_worker **out, int *send_errno)
{
	pthread_mutex_lock(&p->lock);
	struct tslot *got = NULL;
	for (unsigned i = 0; i < p->n && !got; i++)
		if (!p->slots[i].busy)
			got = &p->slots[i];
	if (got) {
		slot_take(got, wt->script);
		pthread_mutex_unlock(&p->lock);
		*out = &got->w;
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

int perl_tpool_cancel(struct perl_tpool *p, struct perl_waiter *wt)
{
	pthread_mutex_lock(&p->lock);
	int queued = perl_queue_remove(&p->queue, wt);
	pthread_mutex_unlock(&p->lock);
	return queued;
}

int perl_tpool_saturated(struct perl_tpool *p, unsigned long queue)
{
	pthread_mutex_lock(&p->lock);
	int full = p->queue.waiting >= queue;
	for (unsigned i = 0; i < p->n && full; i++)
		full = p->slots[i].busy;
	pthread_mutex_unlock(&p->lock);
	return full;
}

void perl_tpool_release(struct perl_tpool *p, struct perl_worker *w)
{
	struct tslot *s = (struct tslot *)(void *)w;
	pthread_mutex_lock(&p->lock);
	s->served++;
	/* What its DONE said (done_received), as a worker's slot counts it. */
	s->compiled += w->compiled;
	w->compiled = 0;
	struct perl_waiter *wt = perl_queue_give(&p->queue, w);
	if (wt) {
		slot_take(s, wt->script);
	} else {
		s->busy = 0;
		s->script[0] = '\0';
	}
	pthread_mutex_unlock(&p->lock);
	if (wt)
		perl_queue_serve(wt);
}

size_t perl_tpool_view(struct perl_tpool *p, struct perl_worker_view *out, size_t max)
{
	pthread_mutex_lock(&p->lock);
	uint64_t now = clock_us();
	for (unsigned i = 0; i < p->n && i < max; i++) {
		struct tslot *s = &p->slots[i];
		out[i] = (struct perl_worker_view){
			.pid = s->w.pid,
			.state = s->busy ? "busy" : "idle",
			.script_us = s->busy ? now - s->since_us : 0,
			.requests = s->served,
			.compiled = s->compiled,
		};
		if (s->busy)
			memcpy(out[i].script, s->script, sizeof out[i].script);
	}
	size_t n = p->n;
	pthread_mutex_unlock(&p->lock);
	return n;
}

struct perl_thread *perl_tpool_thread(struct perl_worker *w)
{
	return ((struct tslot *)(void *)w)->t;
}

const struct perl_threads_api *perl_tpool_api(struct perl_tpool *p)
{
	return p->api;
}
