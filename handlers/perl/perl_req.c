/* A .plx or .plt request's life in the handler: getting a runner from the
 * backend (or waiting for one), handing the request over, its script's
 * end, and giving the runner back however the request left it. */
#include "perl_req.h"
#include "alloc.h"
#include "cgi_env.h"
#include "clock.h"
#include "gw_request.h"
#include "handler.h"
#include "log.h"
#include "perl_scripts.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Sending a request to a runner found dead while idle: others are tried,
 * this many times in all. */
#define SEND_ATTEMPTS 3

/* A script's end comes with what its STDOUT still buffered: its pipes are
 * watched only once it has run this long (gw_settings), which spares a
 * quick script's four epoll_ctl. */
#define WATCH_AFTER_MS 2

static void acquire(struct perl_req *q);
static void waiter_ready(struct perl_waiter *wt);
static void sent(struct perl_req *q);

int perl_req_start(struct plxd_request *r)
{
	struct perl_state *st = r->state;
	const struct perl_conf *conf = r->conf;
	struct perl_req *q = xcalloc(1, sizeof *q);
	q->st = st;
	q->be = st->be;
	q->conf = conf;
	q->loop = plxd_loop(r);
	q->script = xstrdup(r->file);
	q->phase = PERL_REQ_NEW;
	q->in = q->fresh = -1;
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
	gw_init(&q->gw, &perl_req_gw_ops, r, q->script, &set);
	r->data = q;
	/* The environment a .pl script gets, PERL5LIB and [request] included. */
	/* A PSGI app does its own authentication, as under any PSGI server:
	 * it sees Authorization whatever pass_authorization says. */
	int psgi = perl_req_is_psgi(r->file);
	q->env = gw_request_env(r, conf->path, conf->pass_authorization || psgi, st->perl5lib);
	/* The request is complete before its script starts: the gateway must
	 * know it first, or what an idle runner prints at once would be held
	 * as if its body still arrived ([server] max_body), not streamed. */
	int rc = gw_handle(&q->gw);
	acquire(q);
	return rc;
}

int perl_req_is_psgi(const char *file)
{
	size_t n = strlen(file);
	return n > 5 && strcasecmp(file + n - 5, ".psgi") == 0;
}

int perl_req_body_pipe(int inp[2])
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

/* ---- getting a runner ---- */

/* The request got no runner, or gave it back before it ran: over. */
static void refused(struct perl_req *q)
{
	q->phase = PERL_REQ_OVER;
	gw_fini(&q->gw);
}

/* Gives back a runner the request never reached. */
static void untried(struct perl_req *q, enum perl_release how, const char *why)
{
	if (q->in >= 0) {
		close(q->in);
		q->in = -1;
	}
	q->be->release(q->st->backend, q->w, how, why);
	q->w = NULL;
}

/* A runner was had (w), the request sent on it or not (e). Returns 0 when
 * sent, 1 when answered, -1 when the attempt failed and another may be
 * made. */
static int took(struct perl_req *q, struct perl_runner *w, int e)
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
		/* It died while idle, before the keeper saw it (the send
		 * logged it). */
		untried(q, PERL_RELEASE_KILL, NULL);
	} else {
		char why[128];
		snprintf(why, sizeof why, "sending a request failed: %s", strerror(e));
		untried(q, PERL_RELEASE_IDLE, why);
	}
	return -1;
}

/* Gets a runner for q and sends the request, or queues q for one. A worker
 * that died while idle shows only when it is written to: it is replaced,
 * and the request tries another. */
static void acquire(struct perl_req *q)
{
	while (q->attempts++ < SEND_ATTEMPTS) {
		struct perl_runner *w;
		int e = 0;
		q->wt = (struct perl_waiter){ .loop = q->loop,
			.ready = waiter_ready,
			.send = q->be->send,
			.ctx = q,
			.script = plxd_counting() ? q->script : NULL };
		enum perl_acquire a =
				q->be->acquire(q->st->backend, q->conf->queue, &q->wt, &w, &e);
		if (a == PERL_QUEUED) {
			q->phase = PERL_REQ_WAITING;
			loop_timer_set(q->loop, &q->timer, clock_ms() + q->conf->queue_timeout_ms,
					perl_req_on_timer);
			return;
		}
		if (a != PERL_ACQUIRED) {
			plxd_log(PLXD_LOG_WARN, "%s: no perl worker became free (%s): answered 503",
					q->script,
					a == PERL_QUEUE_FULL ? "queue full" : "stopping");
			gw_refuse(&q->gw, 503);
			refused(q);
			return;
		}
		int rc = took(q, w, e);
		if (rc >= 0) {
			if (rc > 0)
				refused(q);
			return;
		}
	}
	gw_refuse(&q->gw, 502);
	refused(q);
}

/* A queued q got a runner (or the backend stops): on q's loop. */
static void waiter_ready(struct perl_waiter *wt)
{
	struct perl_req *q =
			(struct perl_req *)(void *)((char *)wt - offsetof(struct perl_req, wt));
	q->phase = PERL_REQ_NEW;
	loop_timer_stop(q->loop, &q->timer);
	if (!wt->given) {
		plxd_log(PLXD_LOG_WARN, "%s: no perl worker became free (stopping): answered 503",
				q->script);
		gw_refuse(&q->gw, 503);
		refused(q);
		perl_req_maybe_free(q);
		return;
	}
	int rc = took(q, wt->given, wt->send_errno);
	if (rc < 0 && !q->stopped) {
		acquire(q);
	} else if (rc != 0) {
		refused(q);
	} else if (q->stopped) {
		/* The request ended while it waited, but its script was sent:
		 * it runs, its output dropped, and gives its runner back. */
		perl_req_script_stop(&q->gw, GW_STOP_ABANDON);
	}
	perl_req_maybe_free(q);
}

/* The request is on a runner: the gateway reads the script from now. */
static void sent(struct perl_req *q)
{
	q->be->started(q);
	int in = q->in;
	q->in = -1;
	q->phase = PERL_REQ_RUNNING;
	gw_started(&q->gw, in, q->w->out, q->w->err);
	if (q->done_late)
		perl_req_done_late(q, q->fresh);
	else if (q->done_early)
		perl_req_done(q, q->fresh);
}

static void runner_back(struct perl_req *q, enum perl_release how, const char *why);

/* ---- the script's end ---- */

/* How the script ended, as its end says, for the gateway: a script that
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
		/* A PSGI application that died after its head went out left
		 * its response incomplete: it is cut short, not framed as
		 * whole (before that, nothing went out, and it is a 500). */
		e->cut = perl_req_is_psgi(q->script);
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

/* Its end, as the backend said it: the status page's figures and how it
 * ended. Returns 1 when its output is still wanted. */
static int note_done(struct perl_req *q, int fresh)
{
	/* The status page's figures, from what the end says anyway. */
	int compiled = !!(q->result.flags & PERL_WIRE_COMPILED);
	q->w->served = q->result.requests;
	q->w->compiled = (unsigned)compiled;
	if (plxd_counting())
		perl_scripts_add(q->st->scripts, q->script, compiled, q->result.run_us);
	q->phase = PERL_REQ_DONE;
	q->fresh = fresh;
	describe_done(q);
	/* What it wrote to stderr and to its output pipe itself before its
	 * end is in them now (what its STDOUT buffered came with the end).
	 * One poll of both says what most scripts leave, nothing, where a
	 * read of each would. */
	struct pollfd pipes[2] = {
		{ .fd = q->w->out, .events = POLLIN },
		{ .fd = q->w->err, .events = POLLIN },
	};
	/* An inline run's output is all in memory: no pipe to poll. */
	int polled = (q->w->out < 0 && q->w->err < 0) || poll(pipes, 2, 0) >= 0;
	if (polled && !pipes[0].revents)
		q->pipe_clear = 1;
	/* What the runner writes to stderr after its end is not the
	 * script's. */
	int err_clear = polled && !pipes[1].revents;
	gw_stderr_end(&q->gw, err_clear);
	q->spent = q->pipe_clear && err_clear && fresh < 0;
	if (q->stopped) {
		/* Its output was not wanted: drained, dropped, and the runner
		 * goes back. */
		perl_req_on_drain(&q->drain_w, 0);
		return 0;
	}
	return 1;
}

void perl_req_done(struct perl_req *q, int fresh)
{
	if (!note_done(q, fresh))
		return;
	/* Its runner has nothing more for it: the output is in hand, its
	 * pipes are empty, and no process the script started holds them. It
	 * goes back now, to run the next request while this response is
	 * sent, rather than once the client has it. */
	if (q->spent && gw_output_taken(&q->gw) == 0)
		runner_back(q, PERL_RELEASE_IDLE, NULL);
	gw_ended(&q->gw);
	gw_output_ready(&q->gw);
}

void perl_req_done_late(struct perl_req *q, int fresh)
{
	if (note_done(q, fresh))
		gw_timed_out(&q->gw);
}

void perl_req_lost(struct perl_req *q)
{
	q->phase = PERL_REQ_LOST;
	if (q->stopped) {
		perl_req_give_back(q, PERL_RELEASE_KILL, NULL);
		return;
	}
	if (q->gw.end.known)
		gw_ended(&q->gw);
	gw_output_ready(&q->gw);
}

/* ---- the end ---- */

/* The runner goes back to its backend, or is ended when how (or what its
 * script left behind) says so; the request watches it no more. */
static void runner_back(struct perl_req *q, enum perl_release how, const char *why)
{
	if (how == PERL_RELEASE_IDLE && (q->result.flags & PERL_WIRE_RETIRING)) {
		how = PERL_RELEASE_RETIRING;
		why = perl_wire_retire_text(q->result.retire);
	}
	if (q->dirty && how != PERL_RELEASE_KILL) {
		how = PERL_RELEASE_KILL;
		why = "a program its script started kept writing to its output";
	}
	if (q->held && how != PERL_RELEASE_KILL) {
		how = PERL_RELEASE_KILL;
		why = "a process its script started held its output past linger";
	}
	loop_timer_stop(q->loop, &q->timer);
	q->be->unwatch(q);
	loop_watch_del(q->loop, &q->drain_w);
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
	q->be->release(q->st->backend, q->w, how, why);
	q->w = NULL;
}

void perl_req_give_back(struct perl_req *q, enum perl_release how, const char *why)
{
	if (!q->w || q->phase == PERL_REQ_ENDING)
		return;
	if (q->phase == PERL_REQ_RUNNING && q->be->end_script(q, why)) {
		q->phase = PERL_REQ_ENDING;
		return;
	}
	if (q->completed && q->phase == PERL_REQ_DONE)
		gw_log_end(&q->gw);
	gw_fini(&q->gw); /* its last stderr, before the runner goes */
	runner_back(q, how, why);
	q->phase = PERL_REQ_OVER;
	perl_req_maybe_free(q);
}

void perl_req_on_timer(struct loop_timer *t)
{
	struct perl_req *q =
			(struct perl_req *)(void *)((char *)t - offsetof(struct perl_req, timer));
	if (q->phase == PERL_REQ_WAITING) {
		if (!q->be->cancel(q->st->backend, &q->wt)) {
			/* Given at this very moment: ready is on its way. */
			loop_timer_set(q->loop, t, clock_ms() + 1000, perl_req_on_timer);
			return;
		}
		if (!q->stopped)
			plxd_log(PLXD_LOG_WARN,
					"%s: no perl worker became free (queue_timeout "
					"passed): answered 503",
					q->script);
		gw_refuse(&q->gw, 503);
		refused(q);
		perl_req_maybe_free(q);
		return;
	}
	if (q->lingering) {
		q->lingering = 0;
		if (!q->stopped) {
			/* The script returned, a process it started holds its
			 * output: the response ends here, in the words of the
			 * CGI handler. */
			q->held = 1;
			q->gw.out_cut = q->be->held_cut;
			gw_output_ready(&q->gw);
			return;
		}
	}
	/* It ran on too long after its request ended. */
	if (q->be->ran_on_log)
		plxd_log(PLXD_LOG_WARN, q->be->ran_on_log, q->script, PERL_LINGER_MS);
	perl_req_give_back(q, PERL_RELEASE_KILL, "its script ran on after its response ended");
}

void perl_req_script_stop(struct gw *g, enum gw_stop how)
{
	struct perl_req *q = (struct perl_req *)g;
	q->stopped = 1;
	q->completed = how == GW_STOP_DONE;
	if (q->phase == PERL_REQ_WAITING) {
		if (q->be->cancel(q->st->backend, &q->wt)) {
			loop_timer_stop(q->loop, &q->timer);
			refused(q);
		}
		return; /* else waiter_ready carries on */
	}
	if (!q->w) {
		/* Never had one, or gave it back at its end (perl_req_done). */
		if (q->completed && q->phase == PERL_REQ_DONE)
			gw_log_end(&q->gw);
		if (q->phase != PERL_REQ_OVER)
			refused(q);
		/* A local redirect lets go of the request before it stops
		 * the script: no finished() comes to free it. */
		perl_req_maybe_free(q);
		return;
	}
	if (q->phase == PERL_REQ_LOST) {
		perl_req_give_back(q, PERL_RELEASE_KILL, NULL);
		return;
	}
	if (how == GW_STOP_TIMEOUT) {
		perl_req_give_back(q, PERL_RELEASE_KILL, "its script ran past timeout");
		return;
	}
	if (q->phase == PERL_REQ_DONE) {
		/* What the pipe still holds was written before its end: read
		 * it so that the next request starts clean. */
		perl_req_on_drain(&q->drain_w, 0);
		return;
	}
	/* The script still runs (the client left, its answer failed, or HEAD
	 * skipped its body): its output goes nowhere now; it may finish, and
	 * keep its runner, within a grace period. A PSGI app's writer is told
	 * (its write dies), so that it ends, and its cleanup handlers run. */
	if (q->phase == PERL_REQ_RUNNING && perl_req_is_psgi(q->script))
		q->be->client_gone(q);
	loop_watch_add(q->loop, &q->drain_w, q->w->out, LOOP_IN, perl_req_on_drain);
	uint64_t until = clock_ms() + PERL_LINGER_MS;
	loop_timer_set(q->loop, &q->timer, until, perl_req_on_timer);
}

static void free_req(void *arg)
{
	struct perl_req *q = arg;
	if (q->env)
		cgi_env_free(q->env);
	free(q->tail);
	free(q->route);
	free(q->script);
	free(q);
}

/* Frees q once both its request and its exchange with a runner are over;
 * posted, so that no caller on its way out still holds q. */
void perl_req_maybe_free(struct perl_req *q)
{
	if (q->phase != PERL_REQ_OVER || q->gw.r || q->free_posted)
		return;
	q->free_posted = 1;
	loop_post(q->loop, free_req, q);
}
