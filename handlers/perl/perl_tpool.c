/* The interpreter threads as a backend (perl_backend.h, [perl] isolation =
 * thread): each slot a thread of plxd with its clone of the interpreter,
 * lent to one request at a time with the queue every backend shares
 * (perl_queue.h), the request handed over in memory. It opens
 * plxd-perl-threads.so when made (with plxd_plugin_load, which makes
 * libperl global), so that a plxd with no instance in thread mode never
 * loads Perl. No perl.h. */
#include "perl_inline.h"
#include "perl_queue.h"
#include "perl_req.h"
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

/* How often an interpreter thread is asked again to end its script: the
 * signal that interrupts a system call can come just before one. */
#define RECANCEL_MS 100

struct tslot {
	struct perl_runner r; /* first member: the handler holds &r */
	struct perl_thread *t;
	int busy;
	char script[PERL_VIEW_SCRIPT];
	uint64_t since_us, served;
	uint64_t compiled; /* compiles by its interpreters since plxd started */
	/* An inline run's, made for its request alone (an event thread's
	 * interpreter is never lent to another): NULL on an interpreter
	 * thread's slot. */
	struct perl_inline_thread *inl;
};

struct perl_tpool {
	const struct perl_threads_api *api;
	struct perl_threads *threads;
	pthread_mutex_t lock; /* guards the slots' busy state and the queue */
	struct tslot *slots;
	unsigned n;
	struct perl_queue queue;
	struct perl_inline *inline_runs;
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

static void tpool_destroy(void *b);

static void *tpool_create(const struct perl_backend_settings *s, char *err, size_t errlen)
{
	const char *lib = s->threads_lib, *preload = s->preload, *inc = s->inc;
	unsigned threads = s->workers;
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
		.taint = (enum perl_taint)s->taint };
	p->threads = p->api->create(&o, threads, err, errlen);
	if (!p->threads)
		goto fail;
	p->inline_runs = perl_inline_create(p->api, p->threads);
	p->n = threads;
	p->slots = xcalloc(threads, sizeof *p->slots);
	for (unsigned i = 0; i < threads; i++) {
		struct tslot *t = &p->slots[i];
		t->t = p->api->get(p->threads, i);
		t->r = (struct perl_runner){
			/* Copies the handler may replace (a new pipe after a
			 * script that started processes) and close. */
			.out = fcntl(p->api->out(t->t), F_DUPFD_CLOEXEC, 3),
			.err = fcntl(p->api->err(t->t), F_DUPFD_CLOEXEC, 3),
		};
		if (t->r.out < 0 || t->r.err < 0) {
			snprintf(err, errlen, "interpreter thread pipes: %s", strerror(errno));
			goto fail;
		}
	}
	for (size_t i = 0; incv[i]; i++)
		free(incv[i]);
	free(incv);
	plxd_log(PLXD_LOG_INFO, "perl: %u interpreter threads started in plxd (%s)", threads, lib);
	return p;

fail:
	if (incv) {
		for (size_t i = 0; incv[i]; i++)
			free(incv[i]);
		free(incv);
	}
	tpool_destroy(p);
	return NULL;
}

/* The interpreters were cloned from the preload: they keep it. */
static void tpool_reconfigure(void *b, const struct perl_backend_settings *s)
{
	(void)b;
	(void)s;
	plxd_log(PLXD_LOG_INFO,
			"perl: interpreter threads keep their settings until a "
			"restart; scripts that changed are compiled again");
}

static void tpool_destroy(void *b)
{
	struct perl_tpool *p = b;
	if (!p)
		return;
	perl_inline_destroy(p->inline_runs);
	if (p->threads)
		p->api->destroy(p->threads);
	for (unsigned i = 0; p->slots && i < p->n; i++) {
		if (p->slots[i].r.out >= 0)
			close(p->slots[i].r.out);
		if (p->slots[i].r.err >= 0)
			close(p->slots[i].r.err);
	}
	free(p->slots);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static void slot_take(struct tslot *s, struct perl_waiter *wt)
{
	s->busy = 1;
	s->since_us = clock_us();
	snprintf(s->script, sizeof s->script, "%s", wt->script ? wt->script : "");
}

/* q's script and its file facts, as plxd opened it, for a run. */
static struct perl_run run_of(const struct perl_req *q)
{
	return (struct perl_run){ .script = q->script,
		.dev = q->wire.dev,
		.ino = q->wire.ino,
		.size = q->wire.size,
		.mtime_sec = q->wire.mtime_sec,
		.mtime_nsec = q->wire.mtime_nsec };
}

/* Runs q's request inline when its script has proven short: it has run
 * when this returns 1, on a slot of its own. Not when it would first load
 * there while another interpreter loads: the event thread would wait for
 * that load (perl_interp_load_would_wait). */
static int try_inline(struct perl_tpool *p, struct perl_waiter *wt, struct perl_runner **out,
		int *send_errno)
{
	struct perl_req *q = wt->ctx;
	struct perl_inline_thread *it = perl_inline_for(p->inline_runs, q);
	if (!it)
		return 0;
	struct perl_run probe = run_of(q);
	if (p->api->load_would_wait(perl_inline_perl_thread(it), &probe))
		return 0;
	struct tslot *s = xcalloc(1, sizeof *s);
	s->r.out = s->r.err = -1;
	s->t = perl_inline_perl_thread(it);
	s->inl = it;
	slot_take(s, wt);
	perl_inline_begin(p->inline_runs, it, q);
	*out = &s->r;
	*send_errno = wt->send(wt->ctx, *out) < 0 ? errno : 0;
	return 1;
}

static enum perl_acquire tpool_acquire(void *b, unsigned long queue, struct perl_waiter *wt,
		struct perl_runner **out, int *send_errno)
{
	struct perl_tpool *p = b;
	if (try_inline(p, wt, out, send_errno))
		return PERL_ACQUIRED;
	pthread_mutex_lock(&p->lock);
	struct tslot *got = NULL;
	for (unsigned i = 0; i < p->n && !got; i++)
		if (!p->slots[i].busy)
			got = &p->slots[i];
	if (got) {
		slot_take(got, wt);
		pthread_mutex_unlock(&p->lock);
		*out = &got->r;
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

static int tpool_cancel(void *b, struct perl_waiter *wt)
{
	struct perl_tpool *p = b;
	pthread_mutex_lock(&p->lock);
	int queued = perl_queue_remove(&p->queue, wt);
	pthread_mutex_unlock(&p->lock);
	return queued;
}

static int tpool_saturated(void *b, unsigned long queue)
{
	struct perl_tpool *p = b;
	pthread_mutex_lock(&p->lock);
	int full = p->queue.waiting >= queue;
	for (unsigned i = 0; i < p->n && full; i++)
		full = p->slots[i].busy;
	pthread_mutex_unlock(&p->lock);
	return full;
}

/* Gives a thread back once its script has returned (its job's done
 * came): how and why do not matter, a thread is never killed. */
static void tpool_release(void *b, struct perl_runner *r, enum perl_release how, const char *why)
{
	(void)how;
	(void)why;
	struct perl_tpool *p = b;
	struct tslot *s = (struct tslot *)(void *)r;
	if (s->inl) {
		if (r->out >= 0)
			close(r->out);
		free(s);
		return;
	}
	pthread_mutex_lock(&p->lock);
	s->served++;
	/* What its done said (perl_req_done), as a worker's slot counts it. */
	s->compiled += r->compiled;
	r->compiled = 0;
	struct perl_waiter *wt = perl_queue_give(&p->queue, r);
	if (wt) {
		slot_take(s, wt);
	} else {
		s->busy = 0;
		s->script[0] = '\0';
	}
	pthread_mutex_unlock(&p->lock);
	if (wt)
		perl_queue_serve(wt);
}

static void view_slot(const struct tslot *s, uint64_t now, struct perl_runner_view *out, size_t max,
		size_t *n)
{
	if (*n < max) {
		out[*n] = (struct perl_runner_view){
			.pid = getpid(), /* a thread's RSS is plxd's: none */
			.state = s->busy ? "busy" : "idle",
			.script_us = s->busy ? now - s->since_us : 0,
			.requests = s->served,
			.compiled = s->compiled,
		};
		if (s->busy)
			memcpy(out[*n].script, s->script, sizeof out[*n].script);
	}
	(*n)++;
}

static size_t tpool_view(void *b, struct perl_runner_view *out, size_t max)
{
	struct perl_tpool *p = b;
	pthread_mutex_lock(&p->lock);
	uint64_t now = clock_us();
	size_t n = 0;
	/* The interpreter threads: an event thread's interpreter is not a
	 * runner a request waits for (its runs count in the scripts'
	 * figures). */
	for (unsigned i = 0; i < p->n; i++)
		view_slot(&p->slots[i], now, out, max, &n);
	pthread_mutex_unlock(&p->lock);
	return n;
}

/* ---- a request on an interpreter thread ---- */

static struct perl_thread *thread_of(struct perl_req *q)
{
	return ((struct tslot *)(void *)q->w)->t;
}

static const struct perl_threads_api *api_of(struct perl_req *q)
{
	return ((struct perl_tpool *)q->st->backend)->api;
}

/* On the request's loop: the script returned (job.done posted it). */
static void thread_done_post(void *arg)
{
	struct perl_req *q = arg;
	if (q->phase < PERL_REQ_RUNNING) {
		/* A queued request's ready was posted after the thread took
		 * it: it is handed over first, then this. */
		q->done_early = 1;
		q->fresh = q->b.thread.job.fresh_out;
		return;
	}
	if (q->phase == PERL_REQ_ENDING) {
		/* Ended by its interpreter: the request was over already. What
		 * it printed before is drained, so that the thread's next
		 * request starts clean. */
		q->phase = PERL_REQ_DONE;
		/* It may have returned on its own before the cancel reached
		 * it, with a new pipe (it forked): the thread writes there now. */
		q->fresh = q->b.thread.job.fresh_out;
		loop_timer_stop(q->loop, &q->timer);
		perl_req_on_drain(&q->drain_w, 0);
		return;
	}
	perl_req_done(q, q->b.thread.job.fresh_out);
}

/* On the interpreter thread, as the script returns: what DONE would say,
 * and the output still buffered, copied before the thread goes on. */
static void thread_done(struct perl_job *job, const struct perl_run *run)
{
	struct perl_req *q = job->ctx;
	struct tslot *s = (struct tslot *)(void *)q->b.thread.given;
	struct perl_inline *inline_runs = ((struct perl_tpool *)q->st->backend)->inline_runs;
	uint64_t own_us;
	enum perl_inline_verdict verdict = perl_inline_judge(q, run, &own_us);
	int may_stay_short = s->inl ? perl_inline_end(inline_runs, s->inl, q, run, &s->r.out) : 1;
	if (!may_stay_short && (verdict == PERL_INLINE_SHORT || verdict == PERL_INLINE_STRAY))
		verdict = PERL_INLINE_LONG;
	/* Noted before its response can reach the client: the client's
	 * next request finds the script's record up to date. */
	perl_inline_note(inline_runs, q, verdict, own_us, s->inl != NULL, run->run_us);
	q->result = (struct perl_wire_done){
		.type = PERL_WIRE_DONE,
		.outcome = perl_wire_outcome(run->outcome),
		.exit_status = run->exit_status,
		.flags = run->compiled ? PERL_WIRE_COMPILED : 0,
		.compile_us = run->compile_us,
		.run_us = run->run_us,
		.requests = q->b.thread.given->served + 1,
	};
	if (!q->tail) {
		q->tail_len = run->tail_len;
		if (run->tail_len) {
			q->tail = xmalloc(run->tail_len);
			memcpy(q->tail, run->tail, run->tail_len);
		}
	}
	if (s->inl) {
		/* Its request is still in acquire, on this thread: it takes
		 * the end as it is handed over (perl_req.c's sent). */
		q->done_early = 1;
		q->done_late = q->b.thread.timed_out;
		q->fresh = -1;
		return;
	}
	loop_post(q->loop, thread_done_post, q);
}

/* On the interpreter thread: compiled, about to run (for the timing
 * header of a response whose headers go out before the script ends). */
static void thread_running_post(void *arg)
{
	struct perl_req *q = arg;
	q->running = 1;
}

/* The script's first flushed bytes can reach the request's loop before the
 * post does, so run_info is also published with run_known, which
 * peek_running reads when the headers go out first. */
static void thread_running(struct perl_job *job, const struct perl_run *run)
{
	struct perl_req *q = job->ctx;
	q->run_info = (struct perl_wire_running){
		.type = PERL_WIRE_RUNNING,
		.flags = run->compiled ? PERL_WIRE_COMPILED : 0,
		.compile_us = run->compile_us,
	};
	q->run_at_us = clock_us();
	atomic_store_explicit(&q->b.thread.run_known, 1, memory_order_release);
	if (((struct tslot *)(void *)q->b.thread.given)->inl)
		q->running = 1; /* on the request's own thread */
	else
		loop_post(q->loop, thread_running_post, q);
}

/* A perl_send_fn for a thread: the request is handed over in memory, its
 * body (if any) through a pipe, as to a worker. */
static int send_thread(void *ctx, struct perl_runner *r)
{
	struct perl_req *q = ctx;
	int inp[2] = { -1, -1 };
	if (q->has_body && perl_req_body_pipe(inp) < 0)
		return -1;
	q->in = inp[1];
	q->b.thread.given = r;
	struct tslot *s = (struct tslot *)(void *)r;
	q->b.thread.job = (struct perl_job){
		.run = run_of(q),
		.running = thread_running,
		.done = thread_done,
		.ctx = q,
		.fresh_out = -1,
		/* Its thread's usage tells whether the run was short
		 * (perl_inline_judge): of no use when nothing runs inline. */
		.want_usage = q->conf->inline_budget_ms != 0,
		.waits_at = -1,
		.mark = s->inl ? perl_inline_mark(s->inl) : NULL,
	};
	q->b.thread.job.run.env = q->env;
	q->b.thread.job.run.stdin_fd = inp[0];
	q->b.thread.job.run.want_running = (q->wire.flags & PERL_WIRE_TIMING) != 0;
	api_of(q)->submit(s->t, &q->b.thread.job);
	return 0;
}

/* The thread reads the request's environment in place, until done. */
static void started(struct perl_req *q)
{
	(void)q;
}

/* The thread published it before the script ran. */
static void peek_running(struct perl_req *q)
{
	if (atomic_load_explicit(&q->b.thread.run_known, memory_order_acquire))
		q->running = 1;
}

static void on_recancel(struct loop_timer *t)
{
	struct perl_req *q =
			(struct perl_req *)(void *)((char *)t - offsetof(struct perl_req, timer));
	if (api_of(q)->cancel(thread_of(q), &q->b.thread.job))
		loop_timer_set(q->loop, t, clock_ms() + RECANCEL_MS, on_recancel);
}

/* A thread cannot be killed: its script is ended at its next Perl op, and
 * the thread comes back with its done. */
static int end_script(struct perl_req *q, const char *why)
{
	plxd_log(PLXD_LOG_WARN, "%s: its interpreter ends it: %s", q->script,
			why ? why : "its script must end");
	api_of(q)->cancel(thread_of(q), &q->b.thread.job);
	loop_timer_set(q->loop, &q->timer, clock_ms() + RECANCEL_MS, on_recancel);
	/* What it prints meanwhile is drained: a script blocked writing to a
	 * full pipe would never reach its next op. */
	loop_watch_del(q->loop, &q->drain_w);
	loop_watch_add(q->loop, &q->drain_w, q->w->out, LOOP_IN, perl_req_on_drain);
	return 1;
}

static void unwatch(struct perl_req *q)
{
	(void)q;
}

static void client_gone(struct perl_req *q)
{
	__atomic_store_n(&q->b.thread.job.gone, 1, __ATOMIC_RELEASE);
}

const struct perl_backend perl_backend_thread = {
	.create = tpool_create,
	.reconfigure = tpool_reconfigure,
	.destroy = tpool_destroy,
	.acquire = tpool_acquire,
	.cancel = tpool_cancel,
	.saturated = tpool_saturated,
	.release = tpool_release,
	.view = tpool_view,
	.send = send_thread,
	.started = started,
	.peek_running = peek_running,
	.end_script = end_script,
	.client_gone = client_gone,
	.unwatch = unwatch,
	.drain_unbounded = 1,
	/* An interpreter thread's children are plxd's: none is ended, so
	 * the log does not say so. */
	.held_cut = "exited, but a background process held its output past linger; the "
		    "response was ended; the process was left running",
	.ran_on_log = NULL, /* end_script logs it */
};
