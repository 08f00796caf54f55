/* The perl handler module: runs .plx scripts in persistent worker
 * processes (perl_pool.c), each holding one embedded interpreter that
 * keeps every script compiled (plxd-perl-worker). This file is the glue:
 * the handler hooks, getting a worker and sending it the request, and
 * telling the gateway (server/gateway/gateway.h) what the script printed
 * and how it ended. Everything between the script and the client is the
 * gateway's, as for a CGI script.
 *
 * A worker's output comes two ways: what the script flushed while it ran
 * comes through its stdout pipe; what was still buffered when it returned
 * comes with the DONE message, which ends the response. */
#include "alloc.h"
#include "cgi_env.h"
#include "clock.h"
#include "gateway.h"
#include "gw_request.h"
#include "handler.h"
#include "log.h"
#include "loop.h"
#include "perl_conf.h"
#include "perl_pool.h"
#include "perl_scripts.h"
#include "perl_tpool.h"
#include "perl_wire.h"
#include "version.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define WORKER_NAME  "plxd-perl-worker"
#define THREADS_NAME "plxd-perl-threads.so"
/* After its response ended (or the client left), how long a script may
 * take to finish before its worker is killed. */
#define LINGER_MS 2000
/* How often an interpreter thread is asked again to end its script: the
 * signal that interrupts a system call can come just before one. */
#define RECANCEL_MS 100
/* After DONE, pipe output still read at most: more comes from a program
 * the script left running, and the worker is replaced. */
#define DRAIN_MAX (1024 * 1024)
/* Sending a request to a worker found dead while idle: other workers are
 * tried, this many times in all. */
#define SEND_ATTEMPTS 3

/* A script's end comes with what its STDOUT still buffered (DONE, or an
 * interpreter thread's done): its pipes are watched only once it has run
 * this long (gw_settings), which spares a quick script's four epoll_ctl. */
#define WATCH_AFTER_MS 2

struct perl_state {
	struct perl_pool *pool;       /* isolation = process */
	struct perl_tpool *tpool;     /* isolation = thread: interpreters in plxd */
	char worker[PATH_MAX];        /* plxd-perl-worker, beside this module */
	char threads[PATH_MAX];       /* plxd-perl-threads.so, beside it too */
	char perl5[PATH_MAX];         /* plxd's Perl modules (PLXD::Request), beside it too */
	char perl5lib[PATH_MAX + 16]; /* "PERL5LIB=" that folder, as .pl scripts get it */
	char *inc;                    /* [perl] inc, then perl5 */
	unsigned long workers;        /* as started: a reload cannot change it */
	struct perl_scripts *scripts; /* the status page's per-script figures */
};

/* One request's exchange with a worker; it may outlive its request (the
 * script finishing after the client left). */
struct perl_req {
	struct gw gw; /* first member: the gateway's ops get it */
	struct perl_state *st;
	const struct perl_conf *conf;
	struct loop *loop;
	char *script;
	struct perl_wire_request wire; /* the file facts, for the worker */
	struct perl_job job;           /* the request, for an interpreter thread */
	struct perl_worker *job_w;     /* ... the one it was handed to (q->w may
					  not be set yet when it answers) */
	int handed;                    /* sent() ran: the gateway reads it */
	int done_early;                /* its done came before that */
	int canceling;                 /* its thread was asked to end the script */
	int has_body;
	char **env;            /* the request's environment, until sent */
	struct perl_waiter wt; /* in the pool's queue */
	int queued;            /* wt is (or was, until ready) there */
	int attempts;
	struct perl_worker *w;     /* NULL: none yet, or given back */
	int in;                    /* write end of the body pipe, until started */
	struct loop_watch ctl_w;   /* RUNNING, DONE, or the worker's end */
	struct loop_watch pid_w;   /* a lost worker's exit, to say how it died */
	struct loop_watch drain_w; /* output after the request, dropped */
	struct loop_timer timer;   /* queue_timeout, then linger */
	int running;               /* RUNNING came */
	struct perl_wire_running run_info;
	uint64_t run_at_us;   /* when it came */
	atomic_int run_known; /* a thread set run_info and run_at_us */
	int done;             /* DONE came: the script returned */
	struct perl_wire_done result;
	int lost;   /* the worker died (or broke the protocol) */
	char *tail; /* the output DONE brought */
	size_t tail_len, tail_off;
	int fresh;      /* the new stdout pipe DONE brought, or -1 */
	size_t drained; /* pipe output read after DONE */
	int tail_done;  /* what the pipe held at DONE, then the tail, were read */
	int pipe_eof;   /* every holder of the old pipe closed it */
	int lingering;  /* the timer is linger for the processes holding it */
	int held;       /* ... and they held it past linger */
	int dirty;      /* a program the script started writes on */
	int stopped;    /* the gateway is done with it */
	int completed;  /* ... after a complete response */
	int over;       /* the worker is given back */
	int free_posted;
};

static int perl_start(const void *conf, void **state);
static int perl_reconfigure(void *state, const void *conf);
static void perl_stop(void *state);
static int perl_begin(struct plxd_request *r);
static int perl_handle(struct plxd_request *r);
static void perl_finished(struct plxd_request *r, enum plxd_end how);

static void pool_settings(const struct perl_conf *c, const char *worker,
		struct perl_pool_settings *s);
static int send_request(void *ctx, struct perl_worker *w);
static void acquire(struct perl_req *q);
static void waiter_ready(struct perl_waiter *wt);
static void sent(struct perl_req *q);
static ssize_t script_read(struct gw *g, char *buf, size_t len);
static void script_stop(struct gw *g, enum gw_stop how);
static int script_timing(struct gw *g, char *out, size_t outlen, int partial);
static void on_ctl(struct loop_watch *w, unsigned events);
static void on_pid(struct loop_watch *w, unsigned events);
static void on_drain(struct loop_watch *w, unsigned events);
static void done_received(struct perl_req *q, int fresh);
static void thread_done_post(void *arg);
static int send_thread(void *ctx, struct perl_worker *w);
static void pool_release(struct perl_state *st, struct perl_worker *w, enum perl_release how,
		const char *why);
static void on_timer(struct loop_timer *t);
static void on_recancel(struct loop_timer *t);
static void give_back(struct perl_req *q, enum perl_release how, const char *why);
static void maybe_free(struct perl_req *q);

static const struct gw_ops perl_gw_ops = {
	.read = script_read,
	.stop = script_stop,
	.timing = script_timing,
};

/* ---- start, reconfigure, stop ---- */

static void pool_settings(const struct perl_conf *c, const char *worker,
		struct perl_pool_settings *s)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	*s = (struct perl_pool_settings){
		.worker_path = worker,
		.workers = c->workers ? (unsigned)c->workers : (unsigned)(cores > 0 ? cores : 1),
		.queue = c->queue,
		.start_timeout_ms = c->start_timeout_ms,
		.max_requests = c->max_requests,
		.max_rss_kb = c->max_rss / 1024,
		.max_memory = c->max_memory,
		.preload = c->preload,
		.inc = c->inc,
		.taint = perl_conf_taint(c),
	};
}

static void state_free(struct perl_state *st)
{
	free(st->inc);
	perl_scripts_destroy(st->scripts);
	free(st);
}

/* The worker executable and plxd's Perl modules live beside this module
 * (build tree: modules/; installed: the module folder), found the way
 * plxd found the module. */
static int find_files(struct perl_state *st)
{
	char dir[PATH_MAX];
	if (plxd_module_dir(&plxd_handler_module, dir, sizeof dir) < 0)
		return -1;
	int n = snprintf(st->worker, sizeof st->worker, "%s/" WORKER_NAME, dir);
	int m = snprintf(st->perl5, sizeof st->perl5, "%s/perl5", dir);
	int t = snprintf(st->threads, sizeof st->threads, "%s/" THREADS_NAME, dir);
	if (n < 0 || (size_t)n >= sizeof st->worker || m < 0 || (size_t)m >= sizeof st->perl5
			|| t < 0 || (size_t)t >= sizeof st->threads)
		return -1;
	snprintf(st->perl5lib, sizeof st->perl5lib, "PERL5LIB=%s", st->perl5);
	return access(st->worker, X_OK);
}

/* The workers' @INC additions: the configured folders, then plxd's own
 * modules, so that `use PLXD::Request` works in a .plx as in a .pl. */
static void set_inc(struct perl_state *st, const struct perl_conf *c)
{
	free(st->inc);
	st->inc = access(st->perl5, F_OK) == 0 ? xasprintf("%s %s", c->inc, st->perl5)
					       : xstrdup(c->inc);
}

static int perl_start(const void *conf, void **state)
{
	const struct perl_conf *c = conf;
	struct perl_state *st = xcalloc(1, sizeof *st);
	st->scripts = perl_scripts_create();
	if (find_files(st) < 0) {
		plxd_log(PLXD_LOG_ERROR, "perl: %s not found beside the perl module (%s)",
				WORKER_NAME, st->worker[0] ? st->worker : "?");
		state_free(st);
		return -1;
	}
	set_inc(st, c);
	struct perl_pool_settings s;
	pool_settings(c, st->worker, &s);
	s.inc = st->inc;
	char err[1024];
	if (perl_conf_threaded(c))
		st->tpool = perl_tpool_create(st->threads, s.workers, s.preload, s.inc, s.taint,
				err, sizeof err);
	else
		st->pool = perl_pool_create(&s, err, sizeof err);
	if (!st->pool && !st->tpool) {
		plxd_log(PLXD_LOG_ERROR, "perl: %s", err);
		state_free(st);
		return -1;
	}
	st->workers = c->workers;
	if (st->tpool)
		plxd_log(PLXD_LOG_INFO, "perl: %u interpreter threads started in plxd (%s)",
				s.workers, st->threads);
	else
		plxd_log(PLXD_LOG_INFO, "perl: %u workers started (%s)", s.workers, st->worker);
	*state = st;
	return 0;
}

static int perl_reconfigure(void *state, const void *conf)
{
	struct perl_state *st = state;
	const struct perl_conf *c = conf;
	if (c->workers != st->workers)
		plxd_log(PLXD_LOG_WARN,
				"[perl] workers changed: it takes effect only after a restart");
	if (!st->tpool != !perl_conf_threaded(c))
		plxd_log(PLXD_LOG_WARN,
				"[perl] isolation changed: it takes effect only after a restart");
	if (st->tpool) {
		/* The interpreters were cloned from the preload: they stay. */
		plxd_log(PLXD_LOG_INFO,
				"perl: interpreter threads keep their settings until a "
				"restart; scripts that changed are compiled again");
		return 0;
	}
	struct perl_pool_settings s;
	set_inc(st, conf);
	pool_settings(conf, st->worker, &s);
	s.inc = st->inc;
	perl_pool_reconfigure(st->pool, &s);
	plxd_log(PLXD_LOG_INFO,
			"perl: workers are replaced with the new settings one at a time, each "
			"serving until its replacement is ready");
	return 0;
}

static void perl_stop(void *state)
{
	struct perl_state *st = state;
	if (!st)
		return;
	perl_pool_destroy(st->pool);
	perl_tpool_destroy(st->tpool);
	state_free(st);
	plxd_log(PLXD_LOG_INFO, "perl: workers stopped");
}

/* ---- talking to the worker ---- */

/* The request body's pipe: the script's end blocks (it reads with
 * stdio); ours, the gateway's, must not. Returns 0, or -1 with errno. */
static int body_pipe(int inp[2])
{
	if (pipe2(inp, O_CLOEXEC) == 0 && fcntl(inp[1], F_SETFL, O_NONBLOCK) == 0)
		return 0;
	int saved = errno;
	for (int i = 0; i < 2; i++)
		if (inp[i] >= 0)
			close(inp[i]);
	inp[0] = inp[1] = -1;
	errno = saved;
	return -1;
}

/* Sends the request (with a body pipe when there is a body): a
 * perl_send_fn, which may run on the thread of the request that freed the
 * worker, so it touches only what q holds (never the plxd_request).
 * Returns 0, or -1 with errno (EPIPE/ECONNRESET: the worker is gone). */
static int send_request(void *ctx, struct perl_worker *w)
{
	struct perl_req *q = ctx;
	char **env = q->env;
	int inp[2] = { -1, -1 };
	size_t nenv = 0, env_len = 0;
	while (env[nenv])
		env_len += strlen(env[nenv++]) + 1;
	size_t script_len = strlen(q->script) + 1;
	struct perl_wire_request req = q->wire;
	req.script_len = (uint32_t)script_len;
	req.env_len = (uint32_t)env_len;
	if (sizeof req + script_len + env_len > PERL_WIRE_MAX || nenv + 2 > 1000) {
		errno = EMSGSIZE;
		return -1;
	}
	if (q->has_body && body_pipe(inp) < 0)
		return -1;
	struct iovec stack_iov[64];
	struct iovec *iov = nenv + 2 <= 64 ? stack_iov : xmalloc((nenv + 2) * sizeof *iov);
	iov[0] = (struct iovec){ &req, sizeof req };
	iov[1] = (struct iovec){ (void *)q->script, script_len };
	for (size_t i = 0; i < nenv; i++)
		iov[2 + i] = (struct iovec){ env[i], strlen(env[i]) + 1 };
	int rc = perl_wire_send(w->ctl, iov, (int)(nenv + 2), &inp[0], q->has_body ? 1 : 0);
	int saved = errno;
	if (iov != stack_iov)
		free(iov);
	if (inp[0] >= 0)
		close(inp[0]);
	if (rc < 0) {
		if (inp[1] >= 0)
			close(inp[1]);
		errno = saved;
		return -1;
	}
	q->in = inp[1];
	return 0;
}

/* ---- interpreter threads (isolation = thread) ---- */

/* On the request's loop: the script returned (job.done posted it). */
static void thread_done_post(void *arg)
{
	struct perl_req *q = arg;
	if (!q->handed) {
		/* A queued request's ready was posted after the thread took
		 * it: sent() comes first, then this. */
		q->done_early = 1;
		return;
	}
	if (q->canceling) {
		/* Ended by its interpreter: the request was over already. What
		 * it printed before is drained, so that the thread's next
		 * request starts clean. */
		q->canceling = 0;
		q->done = 1;
		/* It may have returned on its own before the cancel reached
		 * it, with a new pipe (it forked): the thread writes there now. */
		q->fresh = q->job.fresh_out;
		loop_timer_stop(q->loop, &q->timer);
		on_drain(&q->drain_w, 0);
		return;
	}
	done_received(q, q->job.fresh_out);
}

/* On the interpreter thread, as the script returns: what DONE would say,
 * and the output still buffered, copied before the thread goes on. */
static void thread_done(struct perl_job *job, const struct perl_run *run)
{
	struct perl_req *q = job->ctx;
	q->result = (struct perl_wire_done){
		.type = PERL_WIRE_DONE,
		.outcome = perl_wire_outcome(run->outcome),
		.exit_status = run->exit_status,
		.flags = run->compiled ? PERL_WIRE_COMPILED : 0,
		.compile_us = run->compile_us,
		.run_us = run->run_us,
		.requests = q->job_w->served + 1,
	};
	q->tail_len = run->tail_len;
	if (run->tail_len) {
		q->tail = xmalloc(run->tail_len);
		memcpy(q->tail, run->tail, run->tail_len);
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
 * script_timing reads when the headers go out first. */
static void thread_running(struct perl_job *job, const struct perl_run *run)
{
	struct perl_req *q = job->ctx;
	q->run_info = (struct perl_wire_running){
		.type = PERL_WIRE_RUNNING,
		.flags = run->compiled ? PERL_WIRE_COMPILED : 0,
		.compile_us = run->compile_us,
	};
	q->run_at_us = clock_us();
	atomic_store_explicit(&q->run_known, 1, memory_order_release);
	loop_post(q->loop, thread_running_post, q);
}

/* A perl_send_fn for a thread: the request is handed over in memory, its
 * body (if any) through a pipe, as to a worker. */
static int send_thread(void *ctx, struct perl_worker *w)
{
	struct perl_req *q = ctx;
	int inp[2] = { -1, -1 };
	if (q->has_body && body_pipe(inp) < 0)
		return -1;
	q->in = inp[1];
	q->job_w = w;
	q->job = (struct perl_job){
		.run = { .script = q->script,
				.dev = q->wire.dev,
				.ino = q->wire.ino,
				.size = q->wire.size,
				.mtime_sec = q->wire.mtime_sec,
				.mtime_nsec = q->wire.mtime_nsec,
				.env = q->env,
				.stdin_fd = inp[0],
				.want_running = (q->wire.flags & PERL_WIRE_TIMING) != 0 },
		.running = thread_running,
		.done = thread_done,
		.ctx = q,
		.fresh_out = -1,
	};
	perl_tpool_api(q->st->tpool)->submit(perl_tpool_thread(w), &q->job);
	return 0;
}

static void pool_release(struct perl_state *st, struct perl_worker *w, enum perl_release how,
		const char *why)
{
	if (st->tpool)
		perl_tpool_release(st->tpool, w);
	else
		perl_pool_release(st->pool, w, how, why);
}

static int pool_cancel(struct perl_state *st, struct perl_waiter *wt)
{
	return st->tpool ? perl_tpool_cancel(st->tpool, wt) : perl_pool_cancel(st->pool, wt);
}

/* Gives back a worker the request never reached. */
static void untried(struct perl_req *q, enum perl_release how, const char *why)
{
	if (q->in >= 0) {
		close(q->in);
		q->in = -1;
	}
	pool_release(q->st, q->w, how, why);
	q->w = NULL;
}

/* A worker was had (w), the request sent on it or not (e). Returns 0 when
 * sent, -1 when the attempt failed and another may be made. */
static int took(struct perl_req *q, struct perl_worker *w, int e)
{
	q->w = w;
	if (!e) {
		sent(q);
		return 0;
	}
	if (e == EMSGSIZE) {
		untried(q, PERL_RELEASE_IDLE, NULL);
		plxd_log(PLXD_LOG_ERROR, "%s: request too large for a perl worker: answered 431",
				q->script);
		gw_refuse(&q->gw, 431);
		return 1;
	}
	if (e == EPIPE || e == ECONNRESET) {
		/* It died while idle, before the keeper saw it. */
		plxd_log(PLXD_LOG_WARN,
				"perl worker %d was gone (sending a request: %s): "
				"another is tried",
				(int)w->pid, strerror(e));
		untried(q, PERL_RELEASE_KILL, NULL);
	} else {
		char why[128];
		snprintf(why, sizeof why, "sending a request failed: %s", strerror(e));
		untried(q, PERL_RELEASE_IDLE, why);
	}
	return -1;
}

/* Gets a worker for q and sends the request, or queues q for one. A worker
 * that died while idle shows only when it is written to: it is replaced,
 * and the request tries another. */
static void acquire(struct perl_req *q)
{
	while (q->attempts++ < SEND_ATTEMPTS) {
		struct perl_worker *w;
		int e = 0;
		q->wt = (struct perl_waiter){ .loop = q->loop,
			.ready = waiter_ready,
			.send = q->st->tpool ? send_thread : send_request,
			.ctx = q,
			.script = plxd_counting() ? q->script : NULL };
		enum perl_acquire a = q->st->tpool
				? perl_tpool_acquire(q->st->tpool, q->conf->queue, &q->wt, &w, &e)
				: perl_pool_acquire(q->st->pool, q->conf->queue, &q->wt, &w, &e);
		if (a == PERL_QUEUED) {
			q->queued = 1;
			loop_timer_set(q->loop, &q->timer, clock_ms() + q->conf->queue_timeout_ms,
					on_timer);
			return;
		}
		if (a != PERL_ACQUIRED) {
			plxd_log(PLXD_LOG_WARN, "%s: no perl worker became free (%s): answered 503",
					q->script,
					a == PERL_QUEUE_FULL ? "queue full" : "stopping");
			gw_refuse(&q->gw, 503);
			q->over = 1;
			gw_fini(&q->gw);
			return;
		}
		int rc = took(q, w, e);
		if (rc >= 0) {
			if (rc > 0) {
				q->over = 1;
				gw_fini(&q->gw);
			}
			return;
		}
	}
	gw_refuse(&q->gw, 502);
	q->over = 1;
	gw_fini(&q->gw);
}

/* A queued q got a worker (or the pool stops): on q's loop. */
static void waiter_ready(struct perl_waiter *wt)
{
	struct perl_req *q =
			(struct perl_req *)(void *)((char *)wt - offsetof(struct perl_req, wt));
	q->queued = 0;
	loop_timer_stop(q->loop, &q->timer);
	if (!wt->given) {
		plxd_log(PLXD_LOG_WARN, "%s: no perl worker became free (stopping): answered 503",
				q->script);
		gw_refuse(&q->gw, 503);
		q->over = 1;
		gw_fini(&q->gw);
		maybe_free(q);
		return;
	}
	int rc = took(q, wt->given, wt->send_errno);
	if (rc < 0 && !q->stopped) {
		acquire(q);
	} else if (rc < 0 || rc > 0) {
		q->over = 1;
		gw_fini(&q->gw);
	} else if (q->stopped) {
		/* The request ended while it waited, but its script was sent:
		 * it runs, its output dropped, and gives its worker back. */
		script_stop(&q->gw, GW_STOP_ABANDON);
	}
	maybe_free(q);
}

/* The request is on a worker: the gateway reads the script from now. */
static void sent(struct perl_req *q)
{
	if (!q->st->tpool) {
		/* An interpreter thread reads it in place, until done. */
		cgi_env_free(q->env);
		q->env = NULL;
		loop_watch_add(q->loop, &q->ctl_w, q->w->ctl, LOOP_IN, on_ctl);
	}
	int in = q->in;
	q->in = -1;
	q->handed = 1;
	gw_started(&q->gw, in, q->w->out, q->w->err);
	if (q->done_early)
		thread_done_post(q);
}

/* How the script ended, as DONE says, for the gateway: a script that
 * died or called exit with a status failed, as a CGI process would. */
static void describe_done(struct perl_req *q)
{
	struct gw_end *e = &q->gw.end;
	e->known = 1;
	e->cut = 0;
	e->failed = q->result.outcome != PERL_WIRE_OK
			&& !(q->result.outcome == PERL_WIRE_EXIT && q->result.exit_status == 0);
	switch (q->result.outcome) {
	case PERL_WIRE_DIED:
		/* Said as a CGI process's end is: perl exits a die with a
		 * status (errno, $? >> 8 or 255), and a .pl is known by it. */
		if (q->result.exit_status != 0)
			snprintf(e->how, sizeof e->how, "exited with status %d",
					(int)q->result.exit_status);
		else
			snprintf(e->how, sizeof e->how, "died");
		break;
	case PERL_WIRE_COMPILE_ERROR:
		snprintf(e->how, sizeof e->how, "did not compile");
		break;
	case PERL_WIRE_NOT_FOUND:
		snprintf(e->how, sizeof e->how, "could not be read");
		break;
	case PERL_WIRE_FATAL:
		snprintf(e->how, sizeof e->how, "ended the interpreter (out of memory?)");
		break;
	case PERL_WIRE_EXIT:
		if (q->result.exit_status != 0)
			snprintf(e->how, sizeof e->how, "exited with status %d",
					(int)q->result.exit_status);
		break;
	default:
		break;
	}
}

/* The worker is gone (or broke the protocol): its script's output is cut. */
static void lose(struct perl_req *q)
{
	q->lost = 1;
	loop_watch_del(q->loop, &q->ctl_w);
	struct gw_end *e = &q->gw.end;
	e->failed = e->cut = 1;
	perl_pool_describe_exit(q->w, e->how, sizeof e->how);
	if (e->how[0] || q->w->pidfd < 0) {
		e->known = 1;
	} else {
		/* Not reaped yet: its exit says how it died, in a moment. */
		loop_watch_add(q->loop, &q->pid_w, q->w->pidfd, LOOP_IN, on_pid);
	}
	if (q->stopped) {
		give_back(q, PERL_RELEASE_KILL, NULL);
		return;
	}
	if (e->known)
		gw_ended(&q->gw);
	gw_output_ready(&q->gw);
}

static void on_pid(struct loop_watch *w, unsigned events)
{
	(void)events;
	struct perl_req *q =
			(struct perl_req *)(void *)((char *)w - offsetof(struct perl_req, pid_w));
	loop_watch_del(q->loop, w);
	if (q->w)
		perl_pool_describe_exit(q->w, q->gw.end.how, sizeof q->gw.end.how);
	q->gw.end.known = 1;
	if (!q->stopped)
		gw_ended(&q->gw);
}

static void on_ctl(struct loop_watch *w, unsigned events)
{
	(void)events;
	struct perl_req *q =
			(struct perl_req *)(void *)((char *)w - offsetof(struct perl_req, ctl_w));
	struct perl_worker *wk = q->w;
	int fds[2] = { -1, -1 }, nfds = 0;
	ssize_t n = perl_wire_recv(wk->ctl, wk->rx, wk->rx_cap, fds, &nfds, MSG_DONTWAIT);
	int fresh = -1;
	for (int i = 0; i < nfds; i++) {
		if (i == 0 && n >= (ssize_t)sizeof(struct perl_wire_done))
			fresh = fds[0];
		else
			close(fds[i]);
	}
	if (n < 0 && errno == EAGAIN)
		return;
	uint32_t type = 0;
	if (n >= (ssize_t)sizeof type)
		memcpy(&type, wk->rx, sizeof type);
	if (type == PERL_WIRE_RUNNING && n == (ssize_t)sizeof q->run_info && fresh < 0) {
		memcpy(&q->run_info, wk->rx, sizeof q->run_info);
		q->running = 1;
		q->run_at_us = clock_us();
		return;
	}
	if (n < (ssize_t)sizeof q->result || type != PERL_WIRE_DONE) {
		if (n != 0)
			plxd_log(PLXD_LOG_ERROR, "%s: bad message from perl worker %d: %s",
					q->script, (int)wk->pid,
					n < 0 ? strerror(errno) : "unexpected");
		if (fresh >= 0)
			close(fresh);
		lose(q);
		return;
	}
	memcpy(&q->result, wk->rx, sizeof q->result);
	if ((fresh >= 0) != !!(q->result.flags & PERL_WIRE_NEW_STDOUT)) {
		plxd_log(PLXD_LOG_ERROR, "%s: unexpected message from perl worker %d", q->script,
				(int)wk->pid);
		if (fresh >= 0)
			close(fresh);
		lose(q);
		return;
	}
	loop_watch_del(q->loop, &q->ctl_w);
	q->tail_len = (size_t)n - sizeof q->result;
	if (q->tail_len) {
		q->tail = xmalloc(q->tail_len);
		memcpy(q->tail, wk->rx + sizeof q->result, q->tail_len);
	}
	if (fresh >= 0)
		fcntl(fresh, F_SETFL, O_NONBLOCK);
	done_received(q, fresh);
}

/* DONE came (q->result and the tail are in), from a worker or an
 * interpreter thread: the script returned. */
static void done_received(struct perl_req *q, int fresh)
{
	/* The status page's figures, from what DONE says anyway. */
	int compiled = !!(q->result.flags & PERL_WIRE_COMPILED);
	q->w->served = q->result.requests;
	q->w->compiled = (unsigned)compiled;
	if (plxd_counting())
		perl_scripts_add(q->st->scripts, q->script, compiled, q->result.run_us);
	q->done = 1;
	q->fresh = fresh;
	describe_done(q);
	/* What it wrote to stderr before DONE is in the pipe now; what the
	 * worker writes after is not the script's. */
	gw_stderr_end(&q->gw);
	if (q->stopped) {
		/* Its output was not wanted: drained, dropped, and the worker
		 * goes back. */
		on_drain(&q->drain_w, 0);
		return;
	}
	gw_ended(&q->gw);
	gw_output_ready(&q->gw);
}

/* Output, for the gateway: the pipe while the script runs; after DONE, what
 * the pipe still holds (written before DONE), then DONE's own; then, when
 * the script forked, what the processes it left holding the pipe print
 * until they close it, for LINGER_MS at most: a CGI script's background
 * processes are read the same way ([cgi] linger), and after it they are
 * ended with the worker, as a CGI script's process group is. */
static ssize_t script_read(struct gw *g, char *buf, size_t len)
{
	struct perl_req *q = (struct perl_req *)g;
	if (!q->done && !q->lost) {
		ssize_t n;
		while ((n = read(q->w->out, buf, len)) < 0 && errno == EINTR)
			;
		if (n > 0)
			return n;
		errno = EAGAIN; /* its end too: DONE, or the worker's loss, says more */
		return -1;
	}
	ssize_t n = -1;
	if (q->drained < DRAIN_MAX && !q->pipe_eof) {
		size_t room = DRAIN_MAX - q->drained;
		while ((n = read(q->w->out, buf, len < room ? len : room)) < 0 && errno == EINTR)
			;
		if (n > 0) {
			q->drained += (size_t)n;
			return n;
		}
		q->pipe_eof = n == 0;
	} else if (!q->pipe_eof) {
		q->dirty = 1; /* a background program floods it */
	}
	if (!q->tail_done) {
		size_t left = q->tail_len - q->tail_off;
		if (left > 0) {
			size_t m = left < len ? left : len;
			memcpy(buf, q->tail + q->tail_off, m);
			q->tail_off += m;
			return (ssize_t)m;
		}
		q->tail_done = 1;
	}
	if (q->fresh < 0 || q->pipe_eof || q->held || q->dirty || q->lost)
		return 0;
	if (!q->lingering) {
		q->lingering = 1;
		loop_timer_set(q->loop, &q->timer, clock_ms() + LINGER_MS, on_timer);
	}
	errno = EAGAIN;
	return -1;
}

static int script_timing(struct gw *g, char *out, size_t outlen, int partial)
{
	struct perl_req *q = (struct perl_req *)g;
	if (!q->conf->timing)
		return 0;
	if (q->done) {
		if (q->result.flags & PERL_WIRE_COMPILED)
			snprintf(out, outlen, "compiled; compile=%lluus; run=%lluus",
					(unsigned long long)q->result.compile_us,
					(unsigned long long)q->result.run_us);
		else
			snprintf(out, outlen, "reused; run=%lluus",
					(unsigned long long)q->result.run_us);
		return 1;
	}
	(void)partial;
	/* The headers go out before the script ends: what is known now. The
	 * worker sent RUNNING before the script printed a byte, so it waits
	 * on the socket if its turn in the loop has not come yet; a thread
	 * published it before the script ran. */
	struct perl_wire_running msg;
	if (!q->running && q->st->tpool
			&& atomic_load_explicit(&q->run_known, memory_order_acquire))
		q->running = 1;
	else if (!q->running && !q->lost && !q->st->tpool
			&& recv(q->w->ctl, &msg, sizeof msg, MSG_PEEK | MSG_DONTWAIT)
					== (ssize_t)sizeof msg
			&& msg.type == PERL_WIRE_RUNNING)
		on_ctl(&q->ctl_w, LOOP_IN);
	unsigned long long run_us = q->running ? clock_us() - q->run_at_us : 0;
	if (q->running && (q->run_info.flags & PERL_WIRE_COMPILED))
		snprintf(out, outlen, "compiled; compile=%lluus; run=%lluus; partial",
				(unsigned long long)q->run_info.compile_us, run_us);
	else if (q->running)
		snprintf(out, outlen, "reused; run=%lluus; partial", run_us);
	else
		snprintf(out, outlen, "partial");
	return 1;
}

/* ---- the end ---- */

/* Gives the worker back to the pool, the way this request left it, and
 * lets go of the script. */
static void give_back(struct perl_req *q, enum perl_release how, const char *why)
{
	if (!q->w || q->canceling)
		return;
	if (q->st->tpool && !q->done) {
		/* A thread cannot be killed: its script is ended at its next
		 * Perl op, and the thread comes back with its done. */
		q->canceling = 1;
		plxd_log(PLXD_LOG_WARN, "%s: its interpreter ends it: %s", q->script,
				why ? why : "its script must end");
		perl_tpool_api(q->st->tpool)->cancel(perl_tpool_thread(q->w), &q->job);
		loop_timer_set(q->loop, &q->timer, clock_ms() + RECANCEL_MS, on_recancel);
		/* What it prints meanwhile is drained: a script blocked writing
		 * to a full pipe would never reach its next op. */
		loop_watch_del(q->loop, &q->drain_w);
		loop_watch_add(q->loop, &q->drain_w, q->w->out, LOOP_IN, on_drain);
		return;
	}
	if (how == PERL_RELEASE_IDLE && (q->result.flags & PERL_WIRE_RETIRING))
		how = PERL_RELEASE_RETIRING;
	if (q->dirty && how != PERL_RELEASE_KILL) {
		how = PERL_RELEASE_KILL;
		why = "a program its script started kept writing to its output";
	}
	if (q->held && how != PERL_RELEASE_KILL) {
		how = PERL_RELEASE_KILL;
		why = "a process its script started held its output past linger";
	}
	if (how == PERL_RELEASE_RETIRING)
		plxd_log(PLXD_LOG_INFO, "perl worker %d retires after %llu requests: %s",
				(int)q->w->pid, (unsigned long long)q->result.requests,
				perl_wire_retire_text(q->result.retire));
	loop_timer_stop(q->loop, &q->timer);
	loop_watch_del(q->loop, &q->ctl_w);
	loop_watch_del(q->loop, &q->pid_w);
	loop_watch_del(q->loop, &q->drain_w);
	if (q->completed && q->done)
		gw_log_end(&q->gw);
	gw_fini(&q->gw); /* its last stderr, before the worker goes */
	if (q->fresh >= 0) {
		/* The script started processes that may still hold the old
		 * pipe: what they write from now on goes nowhere. */
		close(q->w->out);
		q->w->out = q->fresh;
		q->fresh = -1;
	}
	if (q->in >= 0) {
		close(q->in);
		q->in = -1;
	}
	pool_release(q->st, q->w, how, why);
	q->w = NULL;
	q->over = 1;
	maybe_free(q);
}

/* Output nobody reads any more (the request ended first): drained while
 * the script finishes; DONE gives the worker back. */
static void on_drain(struct loop_watch *w, unsigned events)
{
	(void)events;
	struct perl_req *q =
			(struct perl_req *)(void *)((char *)w - offsetof(struct perl_req, drain_w));
	char chunk[16384];
	ssize_t n;
	/* An interpreter thread cannot be killed: until its script returns,
	 * all it prints is drained, or it would block on the full pipe before
	 * its next op, where it is ended. */
	int unbounded = q->st->tpool && !q->done;
	while ((unbounded || q->drained < DRAIN_MAX)
			&& (n = read(q->w->out, chunk, sizeof chunk)) > 0)
		q->drained += (size_t)n;
	if (q->drained >= DRAIN_MAX)
		q->dirty = 1;
	if (q->done)
		give_back(q, PERL_RELEASE_IDLE, NULL);
}

static void on_recancel(struct loop_timer *t)
{
	struct perl_req *q =
			(struct perl_req *)(void *)((char *)t - offsetof(struct perl_req, timer));
	if (perl_tpool_api(q->st->tpool)->cancel(perl_tpool_thread(q->w), &q->job))
		loop_timer_set(q->loop, t, clock_ms() + RECANCEL_MS, on_recancel);
}

static void on_timer(struct loop_timer *t)
{
	struct perl_req *q =
			(struct perl_req *)(void *)((char *)t - offsetof(struct perl_req, timer));
	if (q->queued) {
		if (!pool_cancel(q->st, &q->wt)) {
			/* Given at this very moment: ready is on its way. */
			loop_timer_set(q->loop, t, clock_ms() + 1000, on_timer);
			return;
		}
		q->queued = 0;
		if (!q->stopped)
			plxd_log(PLXD_LOG_WARN,
					"%s: no perl worker became free (queue_timeout "
					"passed): answered 503",
					q->script);
		gw_refuse(&q->gw, 503);
		q->over = 1;
		gw_fini(&q->gw);
		maybe_free(q);
		return;
	}
	if (q->lingering) {
		q->lingering = 0;
		if (!q->stopped) {
			/* The script returned, a process it started holds its
			 * output: the response ends here, in the words of the
			 * CGI handler. */
			q->held = 1;
			/* An interpreter thread's children are plxd's: none
			 * is ended, so the log does not say so. */
			q->gw.out_cut = q->st->tpool
					? "exited, but a background process held its output "
					  "past linger; the response was ended; the process "
					  "was left running"
					: "exited, but a background process held its output past "
					  "linger; its process group was ended";
			gw_output_ready(&q->gw);
			return;
		}
	}
	/* It ran on too long after its request ended (a thread's end is
	 * logged by give_back). */
	if (!q->st->tpool)
		plxd_log(PLXD_LOG_WARN,
				"%s: still running %d ms after its response ended; its worker "
				"was killed",
				q->script, LINGER_MS);
	give_back(q, PERL_RELEASE_KILL, "its script ran on after its response ended");
}

static void script_stop(struct gw *g, enum gw_stop how)
{
	struct perl_req *q = (struct perl_req *)g;
	q->stopped = 1;
	q->completed = how == GW_STOP_DONE;
	if (q->queued) {
		if (pool_cancel(q->st, &q->wt)) {
			q->queued = 0;
			loop_timer_stop(q->loop, &q->timer);
			q->over = 1;
			gw_fini(g);
		}
		return; /* else waiter_ready carries on */
	}
	if (!q->w) {
		if (!q->over) {
			q->over = 1;
			gw_fini(g);
		}
		return;
	}
	if (q->lost) {
		give_back(q, PERL_RELEASE_KILL, NULL);
		return;
	}
	if (how == GW_STOP_TIMEOUT) {
		give_back(q, PERL_RELEASE_KILL, "its script ran past timeout");
		return;
	}
	if (q->done) {
		/* What the pipe still holds was written before DONE: read it so
		 * that the next request starts clean. */
		on_drain(&q->drain_w, 0);
		return;
	}
	/* The script still runs (the client left, its answer failed, or HEAD
	 * skipped its body): its output goes nowhere now; it may finish, and
	 * keep its worker, within a grace period. */
	loop_watch_add(q->loop, &q->drain_w, q->w->out, LOOP_IN, on_drain);
	uint64_t until = clock_ms() + LINGER_MS;
	loop_timer_set(q->loop, &q->timer, until, on_timer);
}

static void free_req(void *arg)
{
	struct perl_req *q = arg;
	if (q->env)
		cgi_env_free(q->env);
	free(q->tail);
	free(q->script);
	free(q);
}

/* Frees q once both its request and its exchange with a worker are over;
 * posted, so that no caller on its way out still holds q. */
static void maybe_free(struct perl_req *q)
{
	if (!q->over || q->gw.r || q->queued || q->free_posted)
		return;
	q->free_posted = 1;
	loop_post(q->loop, free_req, q);
}

/* ---- hooks ---- */

static int perl_begin(struct plxd_request *r)
{
	const struct perl_conf *conf = r->conf;
	struct perl_state *st = r->state;
	if (st
			&& (st->tpool ? perl_tpool_saturated(st->tpool, conf->queue)
				      : perl_pool_saturated(st->pool, conf->queue))) {
		plxd_log(PLXD_LOG_WARN,
				"%s: every perl worker is busy and %lu requests wait: answered 503",
				r->file, conf->queue);
		plxd_respond_error(r, 503);
		return PLXD_RESPONDED;
	}
	return PLXD_SPOOL_BODY;
}

static int perl_handle(struct plxd_request *r)
{
	struct perl_state *st = r->state;
	const struct perl_conf *conf = r->conf;
	struct perl_req *q = xcalloc(1, sizeof *q);
	q->st = st;
	q->conf = conf;
	q->loop = plxd_loop(r);
	q->script = xstrdup(r->file);
	q->in = q->fresh = -1;
	loop_watch_init(&q->ctl_w);
	loop_watch_init(&q->pid_w);
	loop_watch_init(&q->drain_w);
	loop_timer_init(&q->timer);
	q->has_body = r->body_length > 0;
	q->wire = (struct perl_wire_request){
		.type = PERL_WIRE_REQUEST,
		.flags = (q->has_body ? PERL_WIRE_STDIN : 0)
				| (conf->timing ? PERL_WIRE_TIMING : 0),
		.dev = (uint64_t)r->st.st_dev,
		.ino = (uint64_t)r->st.st_ino,
		.size = (uint64_t)r->st.st_size,
		.mtime_sec = (int64_t)r->st.st_mtim.tv_sec,
		.mtime_nsec = (int64_t)r->st.st_mtim.tv_nsec,
	};
	struct gw_settings set = {
		.timeout_ms = conf->timeout_ms,
		.max_script_header = (size_t)conf->max_script_header_size,
		.spool_limit = plxd_max_body(r),
		.tmp_dir = plxd_tmp_dir(r),
		.watch_after_ms = WATCH_AFTER_MS,
	};
	gw_init(&q->gw, &perl_gw_ops, r, q->script, &set);
	r->data = q;
	/* The environment a .pl script gets, PERL5LIB and [request] included. */
	q->env = gw_request_env(r, conf->path, conf->pass_authorization, st->perl5lib);
	/* The request is complete before its script starts: the gateway must
	 * know it first, or what an idle worker prints at once would be held
	 * as if its body still arrived ([server] max_body), not streamed. */
	int rc = gw_handle(&q->gw);
	acquire(q);
	return rc;
}

static void perl_finished(struct plxd_request *r, enum plxd_end how)
{
	struct perl_req *q = r->data;
	if (!q)
		return;
	r->data = NULL;
	gw_finished(&q->gw, how);
	maybe_free(q);
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

static void report_script(const struct perl_script_figures *f, void *ctx)
{
	plxd_report_script(ctx,
			&(struct plxd_report_script){
					.path = f->path,
					.compiles = f->compiles,
					.runs = f->runs,
					.run_us_sum = f->run_us_sum,
					.run_us_p99 = f->run_us_p99,
			});
}

/* The status page's rows: each worker (its RSS read now, outside the
 * pool's lock), the scripts, and how many workers are busy. */
static void perl_report(void *state, struct plxd_report *rep)
{
	struct perl_state *st = state;
	struct perl_worker_view stack[64];
	struct perl_worker_view *v = stack;
	size_t n = st->tpool ? perl_tpool_view(st->tpool, v, 64) : perl_pool_view(st->pool, v, 64);
	if (n > 64) {
		v = xmalloc(n * sizeof *v);
		n = st->tpool ? perl_tpool_view(st->tpool, v, n) : perl_pool_view(st->pool, v, n);
	}
	uint64_t busy = 0;
	for (size_t i = 0; i < n; i++) {
		busy += strcmp(v[i].state, "busy") == 0;
		plxd_report_worker(rep,
				&(struct plxd_report_worker){
						.pid = (long)v[i].pid,
						.state = v[i].state,
						.script = v[i].script[0] ? v[i].script : NULL,
						.script_us = v[i].script_us,
						.requests = v[i].requests,
						/* A thread's is plxd's own. */
						.rss_kb = v[i].pid && !st->tpool ? rss_kb(v[i].pid)
										 : 0,
						.scripts_compiled = v[i].compiled,
				});
	}
	if (v != stack)
		free(v);
	plxd_report_gauge(rep, "workers", n);
	plxd_report_gauge(rep, "workers_busy", busy);
	perl_scripts_each(st->scripts, report_script, rep);
}

const struct plxd_handler plxd_handler_module = {
	.abi = PLXD_HANDLER_ABI,
	.name = "perl",
	.keys = perl_conf_keys,
	.conf_size = sizeof(struct perl_conf),
	.start = perl_start,
	.reconfigure = perl_reconfigure,
	.stop = perl_stop,
	.begin = perl_begin,
	.handle = perl_handle,
	.finished = perl_finished,
	.report = perl_report,
};
