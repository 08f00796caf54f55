/* The perl handler module: runs .plx scripts in persistent worker
 * processes (perl_pool.c), each holding one embedded interpreter that
 * keeps every script compiled (plxd-perl-worker). This file is the glue:
 * the handler hooks, sending a request to a worker, and turning what the
 * script prints (parsed by the shared CGI response parser) into a
 * libmicrohttpd response.
 *
 * A response is sent whole, with a Content-Length, when the script
 * returned before flushing its headers itself (the common case: its output
 * arrives with the worker's DONE message); it streams, chunked, when the
 * script flushed or filled its buffer while running. Either way a script
 * that dies after a complete header block keeps what it printed as the
 * response, as a CGI process that dies does; a worker that dies cuts it
 * short. */
#include "alloc.h"
#include "cgi_env.h"
#include "cgi_request.h"
#include "cgi_reply.h"
#include "handler.h"
#include "log.h"
#include "perl_conf.h"
#include "perl_pool.h"
#include "perl_wire.h"
#include "req_limits.h"
#include "version.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WORKER_NAME "plxd-perl-worker"
/* Output read ahead of the client at most; beyond, the script waits. */
#define MAX_PENDING (256 * 1024)
/* After its response ended (or the client left), how long a script may
 * take to finish before its worker is killed. */
#define LINGER_MS 2000
/* How long a lost worker's exit may take to be seen, to say how it died. */
#define EXIT_SETTLE_MS 100
/* After DONE, pipe output still read at most. */
#define DRAIN_MAX (1024 * 1024)

struct perl_state {
	struct perl_pool *pool;
	char worker[PATH_MAX];   /* plxd-perl-worker, beside this module */
	char perl5[PATH_MAX];    /* plxd's Perl modules (PLXD::Request), beside it too */
	char perl5lib[PATH_MAX + 16]; /* "PERL5LIB=" that folder, as .pl scripts get it */
	char *inc;               /* [perl] inc, then perl5 */
	unsigned long workers;   /* as started: a reload cannot change it */
};

/* One request's exchange with a worker. */
struct perl_req {
	struct plxd_request *r;
	struct perl_state *st;
	const struct perl_conf *conf;
	const char *script;
	struct perl_worker *w;     /* NULL once given back */
	char **env;                /* the request's environment, until it is sent */
	uint64_t deadline_ms;
	int out_eof;               /* the worker's response pipe ended (it died) */
	int discard;               /* the response is over: drop output */
	int dirty;                 /* the pipe may hold output of no request */
	int in;                    /* write end of the body pipe */
	int client;                /* the client's socket, watched for hang-ups */
	char *body_chunk;
	size_t body_len, body_off;

	struct cgi_reply reply;
	int reply_state;           /* 0 parsing headers, 1 parsed, -1 malformed */
	char *buf;                 /* body bytes not yet handed on */
	size_t len, off, cap;
	int64_t declared;          /* the script's Content-Length, or -1 */
	uint64_t body_sent;

	int done;                  /* DONE received: the script returned */
	struct perl_wire_done result;
	int lost;                  /* the worker died */
	int timed_out;
	int client_gone;
};

static int perl_start(const void *conf, void **state);
static int perl_reconfigure(void *state, const void *conf);
static void perl_stop(void *state);
static int perl_begin(struct plxd_request *r);
static int perl_handle(struct plxd_request *r);
static void perl_finished(struct plxd_request *r, enum plxd_end how);

static uint64_t now_ms(void);
static void pool_settings(const struct perl_conf *c, const char *worker,
		struct perl_pool_settings *s);
static int send_request(void *ctx, struct perl_worker *w);
static void pump(struct perl_req *q, int wait);
static void take_output(struct perl_req *q, const char *data, size_t n);
static void read_output(struct perl_req *q);
static void drain_output(struct perl_req *q);
static void feed_body(struct perl_req *q);
static void read_done(struct perl_req *q, short out_ev, short err_ev);
static void give_back(struct perl_req *q, const char *why);
static void outcome_describe(const struct perl_req *q, char *out, size_t outlen);
static int respond(struct perl_req *q);
static void add_headers(struct perl_req *q, struct MHD_Response *resp);
static ssize_t stream(void *cls, uint64_t pos, char *buf, size_t max);
static void req_free(struct perl_req *q);

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

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
	};
}

static void state_free(struct perl_state *st)
{
	free(st->inc);
	free(st);
}

/* The worker executable and plxd's Perl modules live beside this module
 * (build tree: modules/; installed: the module folder), found the way
 * plxd found the module. */
static int find_files(struct perl_state *st)
{
	char dir[PATH_MAX];
	if (cgi_request_module_dir(dir, sizeof dir) < 0)
		return -1;
	int n = snprintf(st->worker, sizeof st->worker, "%s/" WORKER_NAME, dir);
	int m = snprintf(st->perl5, sizeof st->perl5, "%s/perl5", dir);
	if (n < 0 || (size_t)n >= sizeof st->worker || m < 0 || (size_t)m >= sizeof st->perl5)
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
	if (find_files(st) < 0) {
		plxd_log(PLXD_LOG_ERROR, "perl: %s not found beside the perl module (%s)", WORKER_NAME,
				st->worker[0] ? st->worker : "?");
		state_free(st);
		return -1;
	}
	set_inc(st, c);
	struct perl_pool_settings s;
	pool_settings(c, st->worker, &s);
	s.inc = st->inc;
	char err[1024];
	st->pool = perl_pool_create(&s, err, sizeof err);
	if (!st->pool) {
		plxd_log(PLXD_LOG_ERROR, "perl: %s", err);
		state_free(st);
		return -1;
	}
	st->workers = c->workers;
	plxd_log(PLXD_LOG_INFO, "perl: %u workers started (%s)", s.workers, st->worker);
	*state = st;
	return 0;
}

static int perl_reconfigure(void *state, const void *conf)
{
	struct perl_state *st = state;
	const struct perl_conf *c = conf;
	if (c->workers != st->workers)
		plxd_log(PLXD_LOG_WARN, "[perl] workers changed: it takes effect only after a restart");
	struct perl_pool_settings s;
	set_inc(st, conf);
	pool_settings(conf, st->worker, &s);
	s.inc = st->inc;
	perl_pool_reconfigure(st->pool, &s);
	plxd_log(PLXD_LOG_INFO, "perl: workers are replaced with the new settings as they become idle");
	return 0;
}

static void perl_stop(void *state)
{
	struct perl_state *st = state;
	if (!st)
		return;
	perl_pool_destroy(st->pool);
	state_free(st);
	plxd_log(PLXD_LOG_INFO, "perl: workers stopped");
}

/* ---- the request's environment ---- */

/* ---- talking to the worker ---- */

/* Sends the request (with a body pipe when there is a body): a
 * perl_send_fn, which may run on the thread of the request that freed the
 * worker. Returns 0, or -1 with errno (EPIPE/ECONNRESET: the worker is
 * gone). */
static int send_request(void *ctx, struct perl_worker *w)
{
	struct perl_req *q = ctx;
	struct plxd_request *r = q->r;
	char **env = q->env;
	int inp[2] = { -1, -1 };
	int has_body = r->body_length > 0;
	size_t nenv = 0, env_len = 0;
	while (env[nenv])
		env_len += strlen(env[nenv++]) + 1;
	size_t script_len = strlen(q->script) + 1;
	struct perl_wire_request req = {
		.type = PERL_WIRE_REQUEST,
		.flags = has_body ? PERL_WIRE_STDIN : 0,
		.script_len = (uint32_t)script_len,
		.env_len = (uint32_t)env_len,
		.dev = (uint64_t)r->st.st_dev,
		.ino = (uint64_t)r->st.st_ino,
		.size = (uint64_t)r->st.st_size,
		.mtime_sec = (int64_t)r->st.st_mtim.tv_sec,
		.mtime_nsec = (int64_t)r->st.st_mtim.tv_nsec,
	};
	if (sizeof req + script_len + env_len > PERL_WIRE_MAX || nenv + 2 > 1000) {
		errno = EMSGSIZE;
		return -1;
	}
	/* The script's end blocks (it reads with stdio); ours must not (we
	 * also watch the worker and the client). */
	if (has_body && (pipe2(inp, O_CLOEXEC) < 0 || fcntl(inp[1], F_SETFL, O_NONBLOCK) < 0)) {
		int saved = errno;
		for (int i = 0; i < 2; i++)
			if (inp[i] >= 0)
				close(inp[i]);
		errno = saved;
		return -1;
	}
	struct iovec stack_iov[64];
	struct iovec *iov = nenv + 2 <= 64 ? stack_iov : xmalloc((nenv + 2) * sizeof *iov);
	iov[0] = (struct iovec){ &req, sizeof req };
	iov[1] = (struct iovec){ (void *)q->script, script_len };
	for (size_t i = 0; i < nenv; i++)
		iov[2 + i] = (struct iovec){ env[i], strlen(env[i]) + 1 };
	int rc = perl_wire_send(w->ctl, iov, (int)(nenv + 2), &inp[0], has_body ? 1 : 0);
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

static void take_output(struct perl_req *q, const char *data, size_t n)
{
	if (q->discard)
		return;
	if (q->reply_state == 0) {
		size_t used = 0;
		enum cgi_reply_result rr = cgi_reply_feed(&q->reply, data, n, &used);
		if (rr == CGI_REPLY_MORE)
			return;
		if (rr == CGI_REPLY_ERROR) {
			q->reply_state = -1;
			return;
		}
		q->reply_state = 1;
		q->declared = q->reply.content_length;
		data += used;
		n -= used;
	}
	if (q->reply_state < 0 || n == 0)
		return;
	if (q->len + n > q->cap) {
		if (q->off > 0) {
			memmove(q->buf, q->buf + q->off, q->len - q->off);
			q->len -= q->off;
			q->off = 0;
		}
		if (q->len + n > q->cap) {
			size_t cap = q->cap ? q->cap : 4096;
			while (cap < q->len + n)
				cap *= 2;
			q->buf = xrealloc(q->buf, cap);
			q->cap = cap;
		}
	}
	memcpy(q->buf + q->len, data, n);
	q->len += n;
}

static void read_output(struct perl_req *q)
{
	char chunk[16384];
	while (!q->out_eof && (q->discard || q->len - q->off < MAX_PENDING)) {
		ssize_t n = read(q->w->out, chunk, sizeof chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			/* Every holder closed it: the worker is gone. */
			q->out_eof = 1;
			return;
		}
		take_output(q, chunk, (size_t)n);
	}
}

/* After DONE: what the pipe holds, up to a bound (a background program
 * could keep writing). */
static void drain_output(struct perl_req *q)
{
	char chunk[16384];
	size_t total = 0;
	while (!q->out_eof) {
		if (total >= DRAIN_MAX) {
			q->dirty = 1; /* a background program floods it */
			return;
		}
		ssize_t n = read(q->w->out, chunk, sizeof chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			q->out_eof = n == 0;
			return;
		}
		take_output(q, chunk, (size_t)n);
		total += (size_t)n;
	}
}

/* Writes the spooled body into the script's stdin as the pipe takes it. */
static void feed_body(struct perl_req *q)
{
	while (q->in >= 0) {
		if (q->body_off == q->body_len) {
			if (!q->body_chunk)
				q->body_chunk = xmalloc(65536);
			ssize_t n = plxd_body_read(q->r, q->body_chunk, 65536);
			if (n <= 0) {
				close(q->in); /* the script sees the end of its input */
				q->in = -1;
				return;
			}
			q->body_len = (size_t)n;
			q->body_off = 0;
		}
		ssize_t n = write(q->in, q->body_chunk + q->body_off, q->body_len - q->body_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) {
			/* EPIPE: the script is done with its input. */
			close(q->in);
			q->in = -1;
			return;
		}
		q->body_off += (size_t)n;
	}
}

/* DONE: the script returned. Output its children wrote before that is
 * already in the pipe; the script's last buffered output comes with the
 * message, after it. out_ev and err_ev are what the same poll said of the
 * pipes (see pump). */
static void read_done(struct perl_req *q, short out_ev, short err_ev)
{
	struct perl_worker *w = q->w;
	int fds[2] = { -1, -1 }, nfds = 0;
	ssize_t n = perl_wire_recv(w->ctl, w->rx, w->rx_cap, fds, &nfds, MSG_DONTWAIT);
	int fresh = -1;
	for (int i = 0; i < nfds; i++) {
		if (i == 0 && n >= (ssize_t)sizeof(struct perl_wire_done))
			fresh = fds[0];
		else
			close(fds[i]);
	}
	if (n < 0 && errno == EAGAIN)
		return;
	struct perl_wire_done done;
	if (n < (ssize_t)sizeof done) {
		if (n != 0)
			plxd_log(PLXD_LOG_ERROR, "%s: bad message from perl worker %d: %s", q->script,
					(int)w->pid, n < 0 ? strerror(errno) : "short");
		perl_pool_relay_stderr(w, q->script, 1); /* its last words */
		q->lost = 1;
		return;
	}
	memcpy(&done, w->rx, sizeof done);
	if (done.type != PERL_WIRE_DONE || (fresh >= 0) != !!(done.flags & PERL_WIRE_NEW_STDOUT)) {
		plxd_log(PLXD_LOG_ERROR, "%s: unexpected message from perl worker %d", q->script,
				(int)w->pid);
		if (fresh >= 0)
			close(fresh);
		q->lost = 1;
		return;
	}
	q->done = 1;
	q->result = done;
	/* POLLHUP alone: the worker closed its end, nothing is left. */
	if (out_ev & POLLIN)
		drain_output(q);
	if (err_ev & POLLIN)
		perl_pool_relay_stderr(w, q->script, 1);
	else
		perl_pool_flush_stderr(w, q->script);
	take_output(q, w->rx + sizeof done, (size_t)n - sizeof done);
	if (fresh >= 0) {
		/* The script started processes that may still hold the old
		 * pipe: what they write from now on goes nowhere. */
		fcntl(fresh, F_SETFL, O_NONBLOCK);
		close(w->out);
		w->out = fresh;
		q->dirty = 0;
	}
	if (q->in >= 0) {
		close(q->in);
		q->in = -1;
	}
}

/* One round of waiting: for the script's output, its stderr, the end of
 * the request (DONE), room in its stdin pipe, or the client hanging up.
 * With wait 0, only what is ready now.
 *
 * The control socket is polled first: poll(2) looks at the descriptors in
 * order on each pass, so when it reports DONE, the pipes looked at after
 * it show everything the worker wrote before sending DONE. No second look
 * is needed to be sure the response is complete. */
static void pump(struct perl_req *q, int wait)
{
	struct pollfd p[5];
	int n = 0, i_out = -1, i_ctl = -1, i_err, i_in = -1, i_client = -1;
	if (!q->done && !q->lost) {
		i_ctl = n;
		p[n++] = (struct pollfd){ .fd = q->w->ctl, .events = POLLIN };
	}
	if (!q->done && !q->out_eof && (q->discard || q->len - q->off < MAX_PENDING)) {
		i_out = n;
		p[n++] = (struct pollfd){ .fd = q->w->out, .events = POLLIN };
	}
	i_err = n;
	p[n++] = (struct pollfd){ .fd = q->w->err, .events = POLLIN };
	if (q->in >= 0) {
		i_in = n;
		p[n++] = (struct pollfd){ .fd = q->in, .events = POLLOUT };
	}
	if (q->client >= 0 && !q->client_gone) {
		i_client = n;
		p[n++] = (struct pollfd){ .fd = q->client, .events = POLLRDHUP };
	}
	int timeout = 0;
	if (wait) {
		uint64_t now = now_ms();
		if (now >= q->deadline_ms) {
			q->timed_out = 1;
			return;
		}
		timeout = q->deadline_ms - now > INT32_MAX ? INT32_MAX : (int)(q->deadline_ms - now);
	}
	int rc = poll(p, (nfds_t)n, timeout);
	if (rc < 0) {
		if (errno != EINTR) {
			plxd_log(PLXD_LOG_ERROR, "%s: poll: %s", q->script, strerror(errno));
			q->lost = 1;
		}
		return;
	}
	if (rc == 0) {
		if (wait && now_ms() >= q->deadline_ms)
			q->timed_out = 1;
		return;
	}
	/* A pipe not polled (its output waits for the client) may hold data. */
	short out_ev = i_out >= 0 ? p[i_out].revents : (q->out_eof ? 0 : POLLIN);
	short err_ev = p[i_err].revents;
	if (i_in >= 0 && p[i_in].revents)
		feed_body(q);
	if (i_ctl >= 0 && p[i_ctl].revents) {
		read_done(q, out_ev, err_ev);
	} else {
		if (err_ev)
			perl_pool_relay_stderr(q->w, q->script, 0);
		if (i_out >= 0 && out_ev)
			read_output(q);
	}
	if (i_client >= 0 && (p[i_client].revents & (POLLRDHUP | POLLHUP | POLLERR)))
		q->client_gone = 1;
}

/* Gives the worker back to the pool, the way this request left it. */
static void give_back(struct perl_req *q, const char *why)
{
	if (!q->w)
		return;
	enum perl_release how;
	if (q->done && !q->lost && !q->timed_out)
		how = (q->result.flags & PERL_WIRE_RETIRING) ? PERL_RELEASE_RETIRING
							     : PERL_RELEASE_IDLE;
	else
		how = PERL_RELEASE_KILL;
	if (q->dirty && how != PERL_RELEASE_KILL) {
		how = PERL_RELEASE_KILL;
		why = "a program its script started kept writing to its output";
	}
	if (how == PERL_RELEASE_RETIRING)
		plxd_log(PLXD_LOG_INFO, "perl worker %d retires after %llu requests: %s", (int)q->w->pid,
				(unsigned long long)q->result.requests,
				perl_wire_retire_text(q->result.retire));
	perl_pool_release(q->st->pool, q->w, how, why);
	q->w = NULL;
}

/* How the script ended, for a log line, as a CGI process's exit would be
 * described: "" when it returned (or called exit with 0). */
static void outcome_describe(const struct perl_req *q, char *out, size_t outlen)
{
	out[0] = '\0';
	switch (q->result.outcome) {
	case PERL_WIRE_DIED: snprintf(out, outlen, "died"); break;
	case PERL_WIRE_COMPILE_ERROR: snprintf(out, outlen, "did not compile"); break;
	case PERL_WIRE_NOT_FOUND: snprintf(out, outlen, "could not be read"); break;
	case PERL_WIRE_FATAL: snprintf(out, outlen, "ended the interpreter (out of memory?)"); break;
	case PERL_WIRE_EXIT:
		if (q->result.exit_status != 0)
			snprintf(out, outlen, "exited with status %d", (int)q->result.exit_status);
		break;
	default: break;
	}
}

/* ---- the response ---- */

static void add_headers(struct perl_req *q, struct MHD_Response *resp)
{
	cgi_request_add_headers(resp, &q->reply, q->script);
	if (q->conf->timing && q->done) {
		char v[128];
		if (q->result.flags & PERL_WIRE_COMPILED)
			snprintf(v, sizeof v, "compiled; compile=%lluus; run=%lluus",
					(unsigned long long)q->result.compile_us,
					(unsigned long long)q->result.run_us);
		else
			snprintf(v, sizeof v, "reused; run=%lluus",
					(unsigned long long)q->result.run_us);
		MHD_add_response_header(resp, "X-Plxd-Perl", v);
	}
}

/* Hands out the body as it comes (a streamed response), or what is left of
 * it (a complete one whose length was announced wrongly). */
static ssize_t stream(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct perl_req *q = cls;
	for (;;) {
		size_t pending = q->len - q->off;
		if (pending > 0) {
			size_t n = pending < max ? pending : max;
			if (q->declared >= 0) {
				uint64_t room = (uint64_t)q->declared - q->body_sent;
				if (room == 0) {
					plxd_log(PLXD_LOG_ERROR, "%s: printed more than the %lld bytes its "
							"Content-Length announced; connection closed",
							q->script, (long long)q->declared);
					return MHD_CONTENT_READER_END_WITH_ERROR;
				}
				if (n > room)
					n = (size_t)room;
			}
			memcpy(buf, q->buf + q->off, n);
			q->off += n;
			if (q->off == q->len)
				q->off = q->len = 0;
			q->body_sent += n;
			q->r->bytes_sent += n;
			return (ssize_t)n;
		}
		if (q->done) {
			give_back(q, NULL);
			/* As under CGI, where a script that dies after its headers
			 * exits: what it printed is the response. */
			char how[64];
			outcome_describe(q, how, sizeof how);
			if (how[0])
				plxd_log(PLXD_LOG_INFO, "%s: %s", q->script, how);
			if (q->declared >= 0 && q->body_sent < (uint64_t)q->declared) {
				plxd_log(PLXD_LOG_ERROR, "%s: printed %llu of the %lld bytes its "
						"Content-Length announced; connection closed",
						q->script, (unsigned long long)q->body_sent,
						(long long)q->declared);
				return MHD_CONTENT_READER_END_WITH_ERROR;
			}
			return MHD_CONTENT_READER_END_OF_STREAM;
		}
		if (q->lost) {
			plxd_log(PLXD_LOG_ERROR, "%s: its perl worker died after the headers were sent: "
					"connection closed", q->script);
			give_back(q, NULL);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		if (q->timed_out) {
			plxd_log(PLXD_LOG_ERROR, "%s: ran longer than timeout (%lu ms): connection closed",
					q->script, q->conf->timeout_ms);
			give_back(q, "its script ran past timeout");
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		if (q->client_gone)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		pump(q, 1);
	}
}

static int respond(struct perl_req *q)
{
	struct plxd_request *r = q->r;
	char how[64] = "";
	if (q->done) {
		outcome_describe(q, how, sizeof how);
		give_back(q, NULL);
	} else if (q->timed_out) {
		char why[64];
		snprintf(why, sizeof why, "ran longer than timeout (%lu ms)", q->conf->timeout_ms);
		cgi_request_log_failure(q->script, 504, why, "");
		give_back(q, "its script ran past timeout");
		return plxd_respond_error(r, 504);
	} else if (q->lost) {
		/* The script took its worker down (a crash in XS code, the OOM
		 * killer): its failure, as a CGI process killed by a signal. */
		perl_pool_describe_exit(q->w, EXIT_SETTLE_MS, how, sizeof how);
		give_back(q, NULL);
	} else if (q->client_gone) {
		return -1;
	}
	if (q->reply_state == 0 && (q->done || q->lost))
		q->reply_state = cgi_reply_eof(&q->reply) == CGI_REPLY_DONE ? 1 : -1;
	if (q->reply_state == 1 && q->declared < 0)
		q->declared = q->reply.content_length;
	if (q->reply_state < 0) {
		cgi_request_log_failure(q->script, 500,
				q->reply.error ? q->reply.error : "malformed headers", how);
		return plxd_respond_error(r, 500);
	}
	if (q->done && how[0])
		plxd_log(PLXD_LOG_INFO, "%s: %s", q->script, how);
	const struct cgi_reply *rep = &q->reply;
	if (rep->location_local && q->done && q->len == q->off) {
		/* RFC 3875 local redirect: plxd serves the path itself. */
		char *target = xstrdup(rep->location);
		req_free(q);
		r->data = NULL;
		int rc = plxd_serve_local(r, target);
		free(target);
		return rc;
	}

	struct MHD_Response *resp;
	size_t have = q->len - q->off;
	if (q->done && (q->declared < 0 || (uint64_t)q->declared == have)) {
		/* Complete: one buffer, handed over without a copy. */
		if (q->off > 0)
			memmove(q->buf, q->buf + q->off, have);
		resp = MHD_create_response_from_buffer(have, have ? q->buf : (void *)"",
				have ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
		if (resp && have) {
			q->buf = NULL;
			q->len = q->off = q->cap = 0;
		}
		r->bytes_sent = have;
	} else {
		if (q->done && q->declared >= 0 && (uint64_t)q->declared < have)
			plxd_log(PLXD_LOG_ERROR, "%s: printed %zu bytes, more than the %lld its "
					"Content-Length announced: truncated, connection closed",
					q->script, have, (long long)q->declared);
		uint64_t size = q->declared >= 0 ? (uint64_t)q->declared : MHD_SIZE_UNKNOWN;
		resp = plxd_response_stream(r, rep->status, size, stream, q);
		if (resp && q->done && q->declared >= 0 && (uint64_t)q->declared < have)
			MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	}
	if (!resp)
		return plxd_respond_error(r, 500);
	add_headers(q, resp);
	return plxd_respond(r, rep->status, resp);
}

/* ---- hooks ---- */

static int perl_begin(struct plxd_request *r)
{
	const struct perl_conf *conf = r->conf;
	struct perl_state *st = r->state;
	if (st && perl_pool_saturated(st->pool, conf->queue)) {
		plxd_log(PLXD_LOG_WARN, "%s: every perl worker is busy and %lu requests wait: answered 503",
				r->file, conf->queue);
		plxd_respond_error(r, 503);
		return PLXD_RESPONDED;
	}
	return PLXD_SPOOL_BODY;
}

static void req_free(struct perl_req *q)
{
	if (q->env)
		cgi_env_free(q->env);
	if (q->in >= 0)
		close(q->in);
	cgi_reply_fini(&q->reply);
	free(q->buf);
	free(q->body_chunk);
	free(q);
}

static int client_fd(struct plxd_request *r)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->connection,
			MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

static int perl_handle(struct plxd_request *r)
{
	struct perl_state *st = r->state;
	const struct perl_conf *conf = r->conf;
	struct perl_req *q = xcalloc(1, sizeof *q);
	q->r = r;
	q->st = st;
	q->conf = conf;
	q->script = r->file;
	q->in = -1;
	q->declared = -1;
	q->client = client_fd(r);
	cgi_reply_init(&q->reply, (size_t)conf->max_script_header_size);
	r->data = q;

	/* The environment a .pl script gets, PERL5LIB and [request] included. */
	q->env = cgi_request_env(r, conf->path, conf->pass_authorization, st->perl5lib);
	int sent = -1;
	/* A worker that died while idle shows only when it is written to: it
	 * is replaced, and the request tries another. */
	for (int attempt = 0; attempt < 3 && sent < 0; attempt++) {
		int e = 0;
		enum perl_acquire a = perl_pool_acquire(st->pool, conf->queue,
				conf->queue_timeout_ms, send_request, q, &q->w, &e);
		if (a != PERL_ACQUIRED) {
			plxd_log(PLXD_LOG_WARN, "%s: no perl worker became free (%s): answered 503",
					q->script, a == PERL_QUEUE_FULL ? "queue full"
					: a == PERL_QUEUE_TIMEOUT ? "queue_timeout passed" : "stopping");
			return plxd_respond_error(r, 503);
		}
		sent = e ? -1 : 0;
		if (sent < 0) {
			if (e == EMSGSIZE) {
				perl_pool_release(st->pool, q->w, PERL_RELEASE_IDLE, NULL);
				q->w = NULL;
				plxd_log(PLXD_LOG_ERROR, "%s: request too large for a perl worker: answered 431",
						q->script);
				return plxd_respond_error(r, 431);
			}
			char why[128];
			snprintf(why, sizeof why, "sending a request failed: %s", strerror(e));
			perl_pool_release(st->pool, q->w, e == EPIPE || e == ECONNRESET
					? PERL_RELEASE_KILL : PERL_RELEASE_IDLE, why);
			q->w = NULL;
		}
	}
	cgi_env_free(q->env);
	q->env = NULL;
	if (sent < 0)
		return plxd_respond_error(r, 502);
	q->deadline_ms = now_ms() + conf->timeout_ms;

	/* Until the headers are in; a local redirect also needs the end. */
	while (!q->done && !q->lost && !q->timed_out && !q->client_gone &&
			(q->reply_state == 0 || (q->reply_state == 1 && q->reply.location_local)))
		pump(q, 1);
	return respond(q);
}

static void perl_finished(struct plxd_request *r, enum plxd_end how)
{
	struct perl_req *q = r->data;
	if (!q)
		return;
	if (q->w && !q->done && !q->lost && !q->timed_out) {
		/* The script still runs: the client left, the answer was an
		 * error, or HEAD skipped the body. Its output goes nowhere now;
		 * it may finish (and keep its worker) within a grace period. */
		uint64_t grace = now_ms() + LINGER_MS;
		if (grace < q->deadline_ms)
			q->deadline_ms = grace;
		q->discard = 1;
		q->client = -1;
		while (!q->done && !q->lost && !q->timed_out)
			pump(q, 1);
		if (q->timed_out)
			plxd_log(PLXD_LOG_WARN, "%s: still running after its response ended%s", q->script,
					how == PLXD_END_CLIENT_GONE || q->client_gone
					? " (the client left)" : "");
	}
	give_back(q, q->timed_out ? "its script ran past timeout" : NULL);
	req_free(q);
	r->data = NULL;
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
};
