/* The worker processes as a backend (perl_backend.h): a request goes to its
 * worker over the control socket (perl_wire.h), and RUNNING and DONE come
 * back on it; a worker that dies or breaks the protocol is lost. */
#include "perl_pool.h"
#include "perl_req.h"
#include "alloc.h"
#include "cgi_env.h"
#include "clock.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void on_ctl(struct loop_watch *w, unsigned events);

static struct perl_worker *worker_of(struct perl_req *q)
{
	return (struct perl_worker *)(void *)q->w;
}

/* Sends the request (with a body pipe when there is a body): a
 * perl_send_fn, which may run on the thread of the request that freed the
 * worker, so it touches only what q holds (never the plxd_request).
 * Returns 0, or -1 with errno (EPIPE/ECONNRESET: the worker is gone). */
static int send_request(void *ctx, struct perl_runner *r)
{
	struct perl_req *q = ctx;
	struct perl_worker *w = (struct perl_worker *)(void *)r;
	char **env = q->env;
	int inp[2] = { -1, -1 };
	size_t nenv = 0, env_len = 0;
	while (env[nenv])
		env_len += strlen(env[nenv++]) + 1;
	size_t script_len = strlen(q->script) + 1;
	struct perl_wire_request req = q->wire;
	req.script_len = (uint32_t)script_len;
	req.env_len = (uint32_t)env_len;
	if (sizeof req + script_len + env_len > PERL_WIRE_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	if (q->has_body && perl_req_body_pipe(inp) < 0)
		return -1;
	/* A variable per iovec, as they lie; past IOV_MAX's reach (a head of
	 * many fields), all of them copied into one. */
	struct iovec iov[64];
	char *joined = NULL;
	int niov = 2;
	iov[0] = (struct iovec){ &req, sizeof req };
	iov[1] = (struct iovec){ (void *)q->script, script_len };
	if (nenv + 2 <= sizeof iov / sizeof iov[0]) {
		for (size_t i = 0; i < nenv; i++)
			iov[niov++] = (struct iovec){ env[i], strlen(env[i]) + 1 };
	} else {
		joined = xmalloc(env_len);
		for (size_t i = 0, at = 0; i < nenv; i++) {
			size_t len = strlen(env[i]) + 1;
			memcpy(joined + at, env[i], len);
			at += len;
		}
		iov[niov++] = (struct iovec){ joined, env_len };
	}
	int rc = perl_wire_send(w->ctl, iov, niov, &inp[0], q->has_body ? 1 : 0);
	int saved = errno;
	free(joined);
	if (inp[0] >= 0)
		close(inp[0]);
	if (rc < 0) {
		if (inp[1] >= 0)
			close(inp[1]);
		if (saved == EPIPE || saved == ECONNRESET)
			/* It died while idle, before the keeper saw it. */
			plxd_log(PLXD_LOG_WARN,
					"perl worker %d was gone (sending a request: %s): "
					"another is tried",
					(int)w->pid, strerror(saved));
		errno = saved;
		return -1;
	}
	q->in = inp[1];
	return 0;
}

/* Watches the control socket for the worker's next message. One at a
 * time: each message disarms the watch, which leaves the socket in the
 * loop's set, so the next request this worker serves on this loop arms it
 * with one epoll_ctl, and a request that ends with DONE needs none to
 * stop watching. */
static void watch_ctl(struct perl_req *q)
{
	loop_watch_once(q->loop, &q->b.proc.ctl_w, worker_of(q)->ctl, LOOP_IN, on_ctl);
}

/* The worker has the request: its environment is no longer needed, and
 * its answers are watched for. */
static void started(struct perl_req *q)
{
	loop_watch_init(&q->b.proc.ctl_w);
	loop_watch_init(&q->b.proc.pid_w);
	cgi_env_free(q->env);
	q->env = NULL;
	watch_ctl(q);
}

/* The worker sent RUNNING before the script printed a byte: it waits on
 * the socket if its turn in the loop has not come yet. */
static void peek_running(struct perl_req *q)
{
	struct perl_wire_running msg;
	if (recv(worker_of(q)->ctl, &msg, sizeof msg, MSG_PEEK | MSG_DONTWAIT)
					== (ssize_t)sizeof msg
			&& msg.type == PERL_WIRE_RUNNING)
		on_ctl(&q->b.proc.ctl_w, LOOP_IN);
}

/* The message stays on the socket until the worker's next request: the
 * app's writer peeks at it. A full socket drops it (the worker is then
 * killed at linger as before). */
static void client_gone(struct perl_req *q)
{
	struct perl_wire_gone msg = { .type = PERL_WIRE_GONE };
	(void)send(worker_of(q)->ctl, &msg, sizeof msg, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* A worker is killed with its script (and its process group). */
static int end_script(struct perl_req *q, const char *why)
{
	(void)q;
	(void)why;
	return 0;
}

static void unwatch(struct perl_req *q)
{
	loop_watch_del(q->loop, &q->b.proc.ctl_w);
	loop_watch_del(q->loop, &q->b.proc.pid_w);
}

static void on_pid(struct loop_watch *w, unsigned events)
{
	(void)events;
	struct perl_req *q = (struct perl_req *)(void *)((char *)w
			- offsetof(struct perl_req, b.proc.pid_w));
	loop_watch_del(q->loop, w);
	if (q->w)
		perl_pool_describe_exit(worker_of(q), q->gw.end.how, sizeof q->gw.end.how);
	q->gw.end.known = 1;
	if (!q->stopped)
		gw_ended(&q->gw);
}

/* The worker is gone (or broke the protocol): its script's output is cut,
 * and its exit says how, now or in a moment. */
static void lose(struct perl_req *q)
{
	loop_watch_del(q->loop, &q->b.proc.ctl_w);
	struct gw_end *e = &q->gw.end;
	e->failed = e->cut = 1;
	struct perl_worker *w = worker_of(q);
	perl_pool_describe_exit(w, e->how, sizeof e->how);
	if (e->how[0] || w->pidfd < 0) {
		e->known = 1;
	} else {
		/* Not reaped yet: its exit says how it died, in a moment. */
		loop_watch_add(q->loop, &q->b.proc.pid_w, w->pidfd, LOOP_IN, on_pid);
	}
	perl_req_lost(q);
}

static void on_ctl(struct loop_watch *w, unsigned events)
{
	(void)events;
	struct perl_req *q = (struct perl_req *)(void *)((char *)w
			- offsetof(struct perl_req, b.proc.ctl_w));
	struct perl_worker *wk = worker_of(q);
	int fds[2] = { -1, -1 }, nfds = 0;
	ssize_t n = perl_wire_recv(wk->ctl, wk->rx, wk->rx_cap, fds, &nfds, MSG_DONTWAIT);
	int fresh = -1;
	for (int i = 0; i < nfds; i++) {
		if (i == 0 && n >= (ssize_t)sizeof(struct perl_wire_done))
			fresh = fds[0];
		else
			close(fds[i]);
	}
	if (n < 0 && errno == EAGAIN) {
		watch_ctl(q); /* read already (peek_running) */
		return;
	}
	uint32_t type = 0;
	if (n >= (ssize_t)sizeof type)
		memcpy(&type, wk->rx, sizeof type);
	if (type == PERL_WIRE_RUNNING && n == (ssize_t)sizeof q->run_info && fresh < 0) {
		memcpy(&q->run_info, wk->rx, sizeof q->run_info);
		q->running = 1;
		q->run_at_us = clock_us();
		watch_ctl(q); /* DONE comes next */
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
	wk->twin = !!(q->result.flags & PERL_WIRE_TWIN);
	if ((fresh >= 0) != !!(q->result.flags & PERL_WIRE_NEW_STDOUT)) {
		plxd_log(PLXD_LOG_ERROR, "%s: unexpected message from perl worker %d", q->script,
				(int)wk->pid);
		if (fresh >= 0)
			close(fresh);
		lose(q);
		return;
	}
	loop_watch_del(q->loop, &q->b.proc.ctl_w);
	q->tail_len = (size_t)n - sizeof q->result;
	if (q->tail_len) {
		q->tail = xmalloc(q->tail_len);
		memcpy(q->tail, wk->rx + sizeof q->result, q->tail_len);
	}
	if (fresh >= 0)
		fcntl(fresh, F_SETFL, O_NONBLOCK);
	perl_req_done(q, fresh);
}

/* ---- the pool behind the table ---- */

static void *create(const struct perl_backend_settings *s, char *err, size_t errlen)
{
	struct perl_pool *p = perl_pool_create(s, err, errlen);
	if (p)
		plxd_log(PLXD_LOG_INFO, "perl: %u workers started (%s)", s->workers,
				s->worker_path);
	return p;
}

static void reconfigure(void *b, const struct perl_backend_settings *s)
{
	perl_pool_reconfigure(b, s);
	plxd_log(PLXD_LOG_INFO,
			"perl: workers are replaced with the new settings one at a time, each "
			"serving until its replacement is ready");
}

static void destroy(void *b)
{
	perl_pool_destroy(b);
}

static enum perl_acquire acquire(void *b, unsigned long queue, struct perl_waiter *wt,
		struct perl_runner **out, int *send_errno)
{
	return perl_pool_acquire(b, queue, wt, out, send_errno);
}

static int cancel(void *b, struct perl_waiter *wt)
{
	return perl_pool_cancel(b, wt);
}

static int saturated(void *b, unsigned long queue)
{
	return perl_pool_saturated(b, queue);
}

static void release(void *b, struct perl_runner *r, enum perl_release how, const char *why)
{
	perl_pool_release(b, r, how, why);
}

static size_t view(void *b, struct perl_runner_view *out, size_t max)
{
	return perl_pool_view(b, out, max);
}

const struct perl_backend perl_backend_process = {
	.create = create,
	.reconfigure = reconfigure,
	.destroy = destroy,
	.acquire = acquire,
	.cancel = cancel,
	.saturated = saturated,
	.release = release,
	.view = view,
	.send = send_request,
	.started = started,
	.peek_running = peek_running,
	.end_script = end_script,
	.client_gone = client_gone,
	.unwatch = unwatch,
	.drain_unbounded = 0,
	.held_cut = "exited, but a background process held its output past linger; its "
		    "process group was ended",
	.ran_on_log = "%s: still running %d ms after its response ended; its worker was killed",
};
