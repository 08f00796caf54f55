/* The gateway: see gateway.h.
 *
 * A script's run goes through these phases:
 *
 *   STARTING  the handler is starting the script
 *   HEAD      its output is read into the header parser
 *   HELD      the header block is in, the request is not complete yet
 *             (its body still arrives): output is spooled meanwhile
 *   LOCAL     a local redirect: waiting to see whether a body follows
 *   COUNT     HEAD of unknown length: the body is read and counted
 *   FAILING   a failure waits (briefly) to learn how the script ended
 *   STREAM    the response is queued and its body streams
 *   SENT      the response is queued whole, or has no body
 *   OVER      the request needs the script no more (ops->stop was called)
 */
#include "gateway.h"
#include "alloc.h"
#include "clock.h"
#include "log.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum { STARTING, HEAD, HELD, LOCAL, COUNT, FAILING, STREAM, SENT, OVER };

/* Output kept in memory before the response starts; beyond, a temp file. */
#define SPOOL_IN_MEMORY (64 * 1024)
/* How long the end of a script's output may precede the news of how it
 * ended: a process's exit follows its stdout's end by microseconds, but on
 * a loaded machine the dying process may wait that long for a CPU. */
#define SETTLE_MS 1000
/* stderr read per wake-up, so a script flooding it cannot starve the rest. */
#define STDERR_BURST (64 * 1024)
/* Request body written to stdin per step. */
#define FEED_CHUNK (64 * 1024)

static void pull(struct gw *g);
static void take(struct gw *g, const char *data, size_t n);
static void advance(struct gw *g);
static void output_ended(struct gw *g);
static void fail(struct gw *g, unsigned status, const char *why);
static void fail_now(struct gw *g);
static void answer_error(struct gw *g, unsigned status);
static void respond(struct gw *g);
static void redirect(struct gw *g);
static void check_tail(struct gw *g);
static void stop(struct gw *g, enum gw_stop how);
static void feed(struct gw *g);
static ssize_t stream(void *cls, uint64_t pos, char *buf, size_t max);
static void on_out(struct loop_watch *w, unsigned events);
static void on_in(struct loop_watch *w, unsigned events);
static void on_err(struct loop_watch *w, unsigned events);
static void on_deadline(struct loop_timer *t);
static void on_settle(struct loop_timer *t);
static void on_watch_later(struct loop_timer *t);
static int reading(const struct gw *g);
static void relay_stderr(struct gw *g, size_t limit);

#define GW_OF(ptr, member) ((struct gw *)(void *)((char *)(ptr)-offsetof(struct gw, member)))

/* "SCRIPT: answered STATUS: WHY; HOW": the one form of a failed script's
 * log line, whichever handler ran it. */
static void gw_log_failure(const char *script, unsigned status, const char *why, const char *how)
{
	plxd_log(PLXD_LOG_ERROR, "%s: answered %u: %s%s%s", script, status, why,
			how && how[0] ? "; " : "", how ? how : "");
}

void gw_log_end(const struct gw *g)
{
	if (g->end.known && g->end.how[0])
		plxd_log(PLXD_LOG_INFO, "%s: %s", g->script, g->end.how);
}

void gw_init(struct gw *g, const struct gw_ops *ops, struct plxd_request *r, const char *script,
		const struct gw_settings *set)
{
	memset(g, 0, sizeof *g);
	g->ops = ops;
	g->r = r;
	g->script = script;
	g->loop = plxd_loop(r);
	g->set = *set;
	g->phase = STARTING;
	g->in_fd = g->out_fd = g->err_fd = -1;
	loop_watch_init(&g->in_w);
	loop_watch_init(&g->out_w);
	loop_watch_init(&g->err_w);
	loop_timer_init(&g->deadline);
	loop_timer_init(&g->settle);
	loop_timer_init(&g->watch_later);
	/* The header block is also bounded by what the connection can hold
	 * of the response's head, beside its request's. */
	size_t room = plxd_reply_header_room(r);
	g->header_room_binds = room < set->max_script_header;
	cgi_reply_init(&g->reply,
			g->header_room_binds ? (room ? room : 1) : set->max_script_header);
	spool_init(&g->spool, set->tmp_dir, SPOOL_IN_MEMORY);
}

void gw_started(struct gw *g, int in_fd, int out_fd, int err_fd)
{
	g->in_fd = in_fd;
	g->out_fd = out_fd;
	g->err_fd = err_fd;
	int later = g->set.watch_after_ms > 0;
	if (later)
		loop_timer_set(g->loop, &g->watch_later, clock_ms() + g->set.watch_after_ms,
				on_watch_later);
	else if (err_fd >= 0)
		loop_watch_add(g->loop, &g->err_w, err_fd, LOOP_IN, on_err);
	if (g->phase != STARTING) { /* the request ended while it started */
		if (in_fd >= 0)
			close(in_fd);
		g->in_fd = -1;
		return;
	}
	g->phase = HEAD;
	loop_timer_set(g->loop, &g->deadline, clock_ms() + g->set.timeout_ms, on_deadline);
	if (out_fd >= 0 && !later)
		loop_watch_add(g->loop, &g->out_w, out_fd, LOOP_IN, on_out);
	if (in_fd >= 0)
		loop_watch_add(g->loop, &g->in_w, in_fd, 0, on_in);
	if (g->r)
		plxd_body_resume(g->r); /* a streamed body waited for stdin */
	feed(g);
	/* Watched later: what it prints is read at its end or once watched;
	 * a read now, as it only starts, would almost always find nothing. */
	if (!later)
		pull(g);
}

/* The script runs on: its descriptors are watched from now. What its
 * output is still wanted for decides that one (a stopped script's stderr
 * is still relayed). */
static void on_watch_later(struct loop_timer *t)
{
	struct gw *g = GW_OF(t, watch_later);
	if (g->err_fd >= 0)
		loop_watch_add(g->loop, &g->err_w, g->err_fd, LOOP_IN, on_err);
	if (g->out_fd >= 0 && !g->out_eof && !g->stopped && (reading(g) || g->phase == STREAM))
		loop_watch_add(g->loop, &g->out_w, g->out_fd, LOOP_IN, on_out);
}

void gw_refuse(struct gw *g, unsigned status)
{
	loop_timer_stop(g->loop, &g->deadline);
	if (g->phase < FAILING)
		answer_error(g, status);
	g->phase = OVER;
	g->stopped = 1;
}

/* ---- the request body ---- */

static void close_in(struct gw *g)
{
	if (g->in_fd < 0)
		return;
	loop_watch_del(g->loop, &g->in_w);
	close(g->in_fd);
	g->in_fd = -1;
	free(g->feed_buf);
	g->feed_buf = NULL;
	g->feed_len = g->feed_off = 0;
}

unsigned gw_body(struct gw *g, const char *data, size_t len, size_t *taken)
{
	if (g->deferred) {
		*taken = len;
		return g->deferred; /* plxd drops the rest and answers it */
	}
	if (g->phase >= FAILING || g->feed_done) {
		*taken = len; /* nobody reads it: dropped */
		return 0;
	}
	if (g->phase == STARTING) {
		*taken = 0; /* gw_started asks for it again */
		return 0;
	}
	if (g->in_fd < 0) {
		*taken = len;
		return 0;
	}
	ssize_t n;
	while ((n = write(g->in_fd, data, len)) < 0 && errno == EINTR)
		;
	if (n < 0 && errno == EAGAIN) {
		*taken = 0;
		loop_watch_set(g->loop, &g->in_w, LOOP_OUT);
		return 0;
	}
	if (n < 0) {
		/* EPIPE: the script is done with its input; the rest is dropped. */
		g->feed_done = 1;
		close_in(g);
		*taken = len;
		return 0;
	}
	*taken = (size_t)n;
	if ((size_t)n < len)
		loop_watch_set(g->loop, &g->in_w, LOOP_OUT);
	return 0;
}

/* Writes the spooled body (plxd_body_read) into stdin as it takes it, once
 * the request is complete and the script runs; then closes stdin. */
static void feed(struct gw *g)
{
	if (!g->handled || g->in_fd < 0 || g->feed_done || !g->r)
		return;
	for (;;) {
		if (g->feed_off == g->feed_len) {
			if (!g->feed_buf)
				g->feed_buf = xmalloc(FEED_CHUNK);
			ssize_t n = plxd_body_read(g->r, g->feed_buf, FEED_CHUNK);
			if (n <= 0) {
				if (n < 0)
					plxd_log(PLXD_LOG_ERROR,
							"%s: reading the spooled request "
							"body: %s",
							g->script, strerror(errno));
				g->feed_done = 1;
				close_in(g); /* the script sees the end of its input */
				return;
			}
			g->feed_len = (size_t)n;
			g->feed_off = 0;
		}
		ssize_t n = write(g->in_fd, g->feed_buf + g->feed_off, g->feed_len - g->feed_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			loop_watch_set(g->loop, &g->in_w, LOOP_OUT);
			return;
		}
		if (n < 0) {
			g->feed_done = 1; /* EPIPE: the script stopped reading */
			close_in(g);
			return;
		}
		g->feed_off += (size_t)n;
	}
}

static void on_in(struct loop_watch *w, unsigned events)
{
	(void)events;
	struct gw *g = GW_OF(w, in_w);
	loop_watch_set(g->loop, w, 0);
	if (g->handled)
		feed(g);
	else if (g->r)
		plxd_body_resume(g->r); /* body() takes the rest now */
}

int gw_handle(struct gw *g)
{
	g->handled = 1;
	if (g->deferred && g->r) {
		plxd_respond_error(g->r, g->deferred);
		return 0;
	}
	feed(g);
	if (g->phase == HELD)
		advance(g);
	/* Pending also when a local redirect handed the request to another
	 * handler meanwhile: plxd knows whether a response was queued. */
	return PLXD_PENDING;
}

/* ---- reading the output ---- */

static void on_out(struct loop_watch *w, unsigned events)
{
	(void)events;
	struct gw *g = GW_OF(w, out_w);
	if (g->phase == STREAM) {
		/* The reader waits: it reads for itself, straight into
		 * libmicrohttpd's buffer. */
		loop_watch_set(g->loop, w, 0);
		if (g->stream_waits && g->r) {
			g->stream_waits = 0;
			plxd_stream_resume(g->r);
		}
		return;
	}
	pull(g);
}

void gw_output_ready(struct gw *g)
{
	if (g->phase == STREAM) {
		if (g->stream_waits && g->r) {
			g->stream_waits = 0;
			plxd_stream_resume(g->r);
		}
		return;
	}
	pull(g);
}

static int reading(const struct gw *g)
{
	return g->phase == HEAD || g->phase == HELD || g->phase == LOCAL || g->phase == COUNT;
}

/* Reads what the script has printed. Once its header block is in, a little
 * more is read before answering, so that a script that has already ended
 * gets a response with a length instead of a chunked one. */
static void pull(struct gw *g)
{
	char buf[16384];
	while (reading(g) && !g->out_eof) {
		if (g->phase == HELD && g->handled && g->spool.len >= SPOOL_IN_MEMORY)
			break; /* enough to start with */
		ssize_t n = g->ops->read(g, buf, sizeof buf);
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0)
			plxd_log(PLXD_LOG_ERROR, "%s: reading its output: %s", g->script,
					strerror(errno));
		if (n <= 0) {
			g->out_eof = 1;
			loop_watch_del(g->loop, &g->out_w);
			output_ended(g);
			return;
		}
		take(g, buf, (size_t)n);
	}
	if (g->phase == HELD)
		advance(g);
}

/* Output before the response: kept for it. */
static void keep(struct gw *g, const char *data, size_t n)
{
	if (g->spool.len + n > g->set.spool_limit) {
		snprintf(g->why, sizeof g->why,
				"printed more than %llu bytes before its response "
				"could start",
				(unsigned long long)g->set.spool_limit);
		fail(g, 500, g->why);
		return;
	}
	if (spool_append(&g->spool, data, n) < 0) {
		plxd_log(PLXD_LOG_ERROR, "%s: cannot spool its output in %s: %s", g->script,
				g->set.tmp_dir, strerror(errno));
		fail(g, 502, "its output could not be spooled");
	}
}

static void take(struct gw *g, const char *data, size_t n)
{
	switch (g->phase) {
	case HEAD: {
		size_t used = 0;
		enum cgi_reply_result rr = cgi_reply_feed(&g->reply, data, n, &used);
		if (rr == CGI_REPLY_MORE)
			return;
		if (rr == CGI_REPLY_ERROR) {
			fail(g, 500,
					g->header_room_binds
									&& strcmp(g->reply.error,
											   "header block too large")
											== 0
							? "header block too large for the connection's memory beside its "
							  "request ([server] max_header_size)"
							: g->reply.error);
			return;
		}
		g->phase = HELD;
		if (n > used)
			keep(g, data + used, n - used);
		return;
	}
	case HELD:
		keep(g, data, n);
		return;
	case LOCAL:
		/* A body: not a local redirect after all, but a response
		 * with a Location (RFC 3875 6.2.3 wants a Status too; plxd
		 * sends what the script gave). */
		g->phase = HELD;
		keep(g, data, n);
		return;
	case COUNT:
		g->counted += n;
		return;
	default:
		return;
	}
}

/* The header block is in: answer now if the request is complete and
 * enough of the output is known. */
static void advance(struct gw *g)
{
	if (!g->handled || !g->r)
		return;
	if (g->out_eof && !g->end.known && !g->settled) {
		/* Ended: a response sent whole must not hide a script killed
		 * mid-output, so first learn how it ended (SETTLE_MS at most). */
		if (!loop_timer_armed(&g->settle))
			loop_timer_set(g->loop, &g->settle, clock_ms() + SETTLE_MS, on_settle);
		return;
	}
	const struct cgi_reply *rep = &g->reply;
	if (rep->location_local && g->spool.len == 0) {
		if (g->out_eof) {
			redirect(g);
			return;
		}
		g->phase = LOCAL;
		return; /* pull, or the output's end, goes on */
	}
	/* HEAD says what GET would send: a length the script did not give is
	 * counted (a 1xx, 204 or 304 has none to say). */
	if (plxd_request_head(g->r) && rep->content_length < 0 && !g->out_eof && rep->status >= 200
			&& rep->status != 204 && rep->status != 304) {
		g->counted = g->spool.len;
		g->phase = COUNT;
		return; /* counted by pull; answered at the output's end */
	}
	respond(g);
}

static void output_ended(struct gw *g)
{
	switch (g->phase) {
	case HEAD:
		if (g->out_cut) {
			fail(g, 500, g->out_cut);
			return;
		}
		cgi_reply_eof(&g->reply);
		fail(g, 500,
				g->reply.error ? g->reply.error
					       : "output ended inside the header block");
		return;
	case HELD:
		advance(g);
		return;
	case LOCAL:
		redirect(g);
		return;
	case COUNT:
		g->phase = HELD;
		respond(g);
		return;
	default:
		return;
	}
}

/* ---- failures ---- */

/* A failure before the response: logged with how the script ended, which
 * may take a moment to be known (SETTLE_MS at most). */
static void fail(struct gw *g, unsigned status, const char *why)
{
	if (g->phase >= FAILING)
		return;
	g->phase = FAILING;
	g->fail_status = status;
	g->fail_why = why;
	loop_watch_del(g->loop, &g->out_w);
	if (!g->end.known && !g->settled && status == 500) {
		loop_timer_set(g->loop, &g->settle, clock_ms() + SETTLE_MS, on_settle);
		return;
	}
	fail_now(g);
}

/* Answers status for a failed script. While its request body still
 * arrives no response can be queued (libmicrohttpd takes none before the
 * body's end): the body is let in and dropped, and the answer follows it. */
static void answer_error(struct gw *g, unsigned status)
{
	if (!g->r)
		return;
	if (g->handled) {
		plxd_respond_error(g->r, status);
		return;
	}
	g->deferred = status;
	plxd_body_resume(g->r); /* gw_body refuses the rest with it */
}

static void fail_now(struct gw *g)
{
	loop_timer_stop(g->loop, &g->settle);
	gw_log_failure(g->script, g->fail_status, g->fail_why, g->end.known ? g->end.how : "");
	answer_error(g, g->fail_status);
	stop(g, GW_STOP_ABANDON);
}

/* How the script ended is known now, or will not be soon: what waited for
 * it goes on. */
static void settled(struct gw *g)
{
	g->settled = 1; /* known as far as it will be: not waited for again */
	if (g->phase == FAILING) {
		fail_now(g);
	} else if (g->phase == HELD) {
		advance(g);
	} else if (g->phase == STREAM && g->stream_waits && g->r) {
		g->stream_waits = 0;
		plxd_stream_resume(g->r);
	}
}

void gw_ended(struct gw *g)
{
	if (g->in_fd >= 0 && !g->feed_done) {
		/* The script is gone: what is left of the body has no reader
		 * (a program it left behind may hold its stdin, never reading). */
		g->feed_done = 1;
		close_in(g);
		if (!g->handled && g->r)
			plxd_body_resume(g->r);
	}
	if (!loop_timer_armed(&g->settle))
		return;
	loop_timer_stop(g->loop, &g->settle);
	settled(g);
}

static void on_settle(struct loop_timer *t)
{
	struct gw *g = GW_OF(t, settle);
	plxd_log(PLXD_LOG_DEBUG, "%s: its output ended %d ms ago, and how it ended is not known",
			g->script, SETTLE_MS);
	settled(g);
}

void gw_timed_out(struct gw *g)
{
	loop_timer_stop(g->loop, &g->deadline);
	on_deadline(&g->deadline);
}

static void on_deadline(struct loop_timer *t)
{
	struct gw *g = GW_OF(t, deadline);
	char why[64];
	snprintf(why, sizeof why, "ran longer than timeout (%llu ms)",
			(unsigned long long)g->set.timeout_ms);
	if (g->phase < FAILING) {
		gw_log_failure(g->script, 504, why, "");
		answer_error(g, 504);
		stop(g, GW_STOP_TIMEOUT);
		return;
	}
	if (g->phase == FAILING) { /* only waiting to say how it ended */
		fail_now(g);
		return;
	}
	if (g->phase == STREAM) {
		plxd_log(PLXD_LOG_ERROR, "%s: %s after its headers were sent; connection closed",
				g->script, why);
		g->phase = OVER; /* the reader ends the response with an error */
		stop(g, GW_STOP_TIMEOUT);
		if (g->stream_waits && g->r) {
			g->stream_waits = 0;
			plxd_stream_resume(g->r);
		}
	}
}

/* ---- the response ---- */

static void add_headers(struct gw *g, struct MHD_Response *resp)
{
	const struct cgi_reply *rep = &g->reply;
	if (rep->content_type)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, rep->content_type);
	if (rep->location)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, rep->location);
	for (size_t i = 0; i < rep->header_count; i++) {
		const struct cgi_reply_header *h = &rep->headers[i];
		if (strcasecmp(h->name, "Server") == 0)
			continue; /* plxd names itself once */
		/* libmicrohttpd 0.9.75 refuses an empty value, which is valid
		 * HTTP: a space instead reads the same once a client strips
		 * the optional whitespace around it ("X-Empty:  "). */
		const char *value = h->value[0] ? h->value : " ";
		if (MHD_add_response_header(resp, h->name, value) != MHD_YES)
			plxd_log(PLXD_LOG_WARN, "%s: header %s dropped (libmicrohttpd refused it)",
					g->script, h->name);
	}
	char timing[160];
	if (g->ops->timing && g->ops->timing(g, timing, sizeof timing, !g->out_eof))
		MHD_add_response_header(resp, "X-Plxd-Perl", timing);
}

/* RFC 3875 6.2.2: plxd serves the local path itself, as a GET. */
static void redirect(struct gw *g)
{
	struct plxd_request *r = g->r;
	char *target = xstrdup(g->reply.location);
	target[strcspn(target, "#")] = '\0'; /* a fragment is the browser's, not a path's */
	plxd_log(PLXD_LOG_DEBUG, "%s: local redirect to %s", g->script, target);
	/* This script and its request part here: its handler lets it go (and
	 * may free g) before the new target runs, which may be a script
	 * again and need a slot. */
	g->r = NULL;
	r->data = NULL;
	stop(g, GW_STOP_DONE);
	if (plxd_serve_local(r, target) < 0)
		plxd_respond_error(r, 500);
	free(target);
}

static void respond(struct gw *g)
{
	struct plxd_request *r = g->r;
	const struct cgi_reply *rep = &g->reply;
	unsigned status = rep->status;
	int64_t declared = rep->content_length;
	uint64_t have = g->spool.len;
	struct MHD_Response *resp;
	if (plxd_response_bodiless(r, status)) {
		/* HEAD: what GET would send (counted, or all spooled); a 304
		 * says no length but the one it was given (RFC 9110 8.6). */
		uint64_t size = declared >= 0       ? (uint64_t)declared
				: status == 304     ? MHD_SIZE_UNKNOWN
				: g->counted > have ? g->counted
						    : have;
		resp = plxd_response_stream(r, status, size, NULL, NULL);
		g->phase = SENT;
	} else if (g->out_eof && g->spool.fd < 0 && (declared < 0 || (uint64_t)declared == have)
			&& !g->end.cut) {
		/* Complete: one buffer, handed over without a copy. */
		size_t len;
		char *mem = spool_take(&g->spool, &len);
		resp = MHD_create_response_from_buffer(len, mem ? mem : (void *)"",
				mem ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
		if (!resp)
			free(mem);
		r->bytes_sent = len;
		g->phase = SENT;
	} else {
		/* A script cut short (killed mid-output) streams without a length,
		 * so that the missing end can say so. */
		uint64_t size = declared >= 0               ? (uint64_t)declared
				: g->out_eof && !g->end.cut ? have
							    : MHD_SIZE_UNKNOWN;
		resp = plxd_response_stream(r, status, size, stream, g);
		g->phase = STREAM;
		/* More than it announced is already here: the connection will
		 * not be reused (the excess is logged when the body is sent). */
		if (resp && g->out_eof && declared >= 0 && (uint64_t)declared < have)
			MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	}
	if (!resp) {
		g->phase = FAILING;
		gw_log_failure(g->script, 500, "libmicrohttpd has no memory for the response", "");
		plxd_respond_error(r, 500);
		stop(g, GW_STOP_ABANDON);
		return;
	}
	add_headers(g, resp);
	plxd_respond(r, status, resp);
	if (g->phase == SENT)
		loop_watch_del(g->loop, &g->out_w);
	else if (declared == 0)
		check_tail(g); /* an empty body: libmicrohttpd never asks the reader */
}

/* The end of the output while streaming. */
static ssize_t stream_end(struct gw *g)
{
	int64_t declared = g->reply.content_length;
	if (declared >= 0 && g->sent < (uint64_t)declared) {
		plxd_log(PLXD_LOG_ERROR,
				"%s: output ended after %llu of the %lld bytes its "
				"Content-Length announced; connection closed",
				g->script, (unsigned long long)g->sent, (long long)declared);
		stop(g, GW_STOP_ABANDON);
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	if (!g->end.known && !g->settled && !loop_timer_armed(&g->settle) && !g->out_cut) {
		/* A script killed mid-output must not look complete: wait a
		 * moment to learn how it ended. */
		loop_timer_set(g->loop, &g->settle, clock_ms() + SETTLE_MS, on_settle);
		g->stream_waits = 1;
		return 0;
	}
	if (g->end.known && g->end.cut) {
		plxd_log(PLXD_LOG_ERROR, "%s: %s; response cut short, connection closed", g->script,
				g->end.how[0] ? g->end.how : "its output was cut");
		stop(g, GW_STOP_ABANDON);
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	if (g->out_cut) {
		plxd_log(PLXD_LOG_WARN, "%s: %s", g->script, g->out_cut);
		if (declared >= 0) {
			stop(g, GW_STOP_ABANDON);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
	}
	return MHD_CONTENT_READER_END_OF_STREAM;
}

/* The script printed more than its Content-Length announced: an error the
 * client cannot see, so the connection is closed after this response (the
 * next request on it would read garbage otherwise). */
static void overflowed(struct gw *g)
{
	plxd_log(PLXD_LOG_ERROR,
			"%s: printed more than the %lld bytes its Content-Length "
			"announced; connection closed",
			g->script, (long long)g->reply.content_length);
	plxd_connection_close(g->r);
	stop(g, GW_STOP_ABANDON);
}

/* The body has reached its announced length: whatever the script printed
 * past it (already spooled, or waiting in its output now) is an error. */
static void check_tail(struct gw *g)
{
	if (g->spool_sent < g->spool.len) {
		overflowed(g);
		return;
	}
	if (g->out_eof)
		return;
	char extra;
	ssize_t n = g->ops->read(g, &extra, 1);
	if (n > 0)
		overflowed(g);
	else if (n == 0)
		g->out_eof = 1;
}

/* libmicrohttpd's reader of a streamed response: what was spooled, then
 * the script's output as it comes, straight into libmicrohttpd's buffer;
 * 0 (the connection waits) when there is none yet. */
static ssize_t stream(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct gw *g = cls;
	if (g->phase != STREAM || !g->r)
		return MHD_CONTENT_READER_END_WITH_ERROR; /* timed out, or cut */
	int64_t declared = g->reply.content_length;
	if (declared >= 0 && max > (uint64_t)declared - g->sent)
		max = (size_t)((uint64_t)declared - g->sent);
	ssize_t n;
	if (g->spool_sent < g->spool.len) {
		n = spool_read(&g->spool, g->spool_sent, buf, max);
		if (n < 0) {
			plxd_log(PLXD_LOG_ERROR, "%s: reading its spooled output: %s", g->script,
					strerror(errno));
			stop(g, GW_STOP_ABANDON);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		g->spool_sent += (uint64_t)n;
	} else if (g->out_eof) {
		return stream_end(g);
	} else {
		n = g->ops->read(g, buf, max);
		if (n < 0 && errno == EAGAIN) {
			loop_watch_set(g->loop, &g->out_w, LOOP_IN);
			g->stream_waits = 1;
			return 0;
		}
		if (n <= 0) {
			g->out_eof = 1;
			loop_watch_del(g->loop, &g->out_w);
			return stream_end(g);
		}
	}
	g->sent += (uint64_t)n;
	g->r->bytes_sent += (uint64_t)n;
	if (declared >= 0 && g->sent == (uint64_t)declared)
		check_tail(g);
	return n;
}

/* ---- the end ---- */

/* The request needs the script no more: the gateway stops reading and
 * feeding, and the handler ends or lets go of the script. */
static void stop(struct gw *g, enum gw_stop how)
{
	if (g->stopped)
		return;
	g->stopped = 1;
	if (g->phase != STREAM)
		g->phase = OVER;
	loop_timer_stop(g->loop, &g->deadline);
	loop_timer_stop(g->loop, &g->settle);
	loop_watch_del(g->loop, &g->out_w);
	close_in(g);
	g->ops->stop(g, how);
}

void gw_finished(struct gw *g, enum plxd_end how)
{
	int complete = how == PLXD_END_DONE && (g->phase == SENT || g->phase == STREAM);
	if (how == PLXD_END_CLIENT_GONE && !g->stopped && g->phase != STARTING)
		plxd_log(PLXD_LOG_INFO, "%s: the client left %s; ended the script", g->script,
				g->phase < STREAM ? "before the script's headers"
						  : "during the response");
	g->r = NULL;
	if (g->phase != STREAM)
		g->phase = OVER;
	stop(g, complete ? GW_STOP_DONE : GW_STOP_ABANDON);
}

static void relay_stderr(struct gw *g, size_t limit)
{
	char buf[4096];
	size_t total = 0;
	while (g->err_fd >= 0 && total < limit) {
		ssize_t n = read(g->err_fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			/* Its end: every holder closed it. */
			loop_watch_del(g->loop, &g->err_w);
			g->err_fd = -1;
			return;
		}
		total += (size_t)n;
		log_lines_feed(&g->lines, g->script, buf, (size_t)n);
	}
}

static void on_err(struct loop_watch *w, unsigned events)
{
	(void)events;
	relay_stderr(GW_OF(w, err_w), STDERR_BURST);
}

void gw_stderr_end(struct gw *g, int empty)
{
	if (!empty)
		relay_stderr(g, 16 * STDERR_BURST); /* bounded: a background process may flood it */
	log_lines_flush(&g->lines, g->script);
	loop_watch_del(g->loop, &g->err_w);
	g->err_fd = -1;
}

int gw_output_taken(struct gw *g)
{
	if (g->in_fd >= 0)
		return -1;
	loop_watch_del(g->loop, &g->out_w);
	g->out_fd = -1;
	return 0;
}

void gw_fini(struct gw *g)
{
	gw_stderr_end(g, 0);
	loop_watch_del(g->loop, &g->out_w);
	loop_timer_stop(g->loop, &g->deadline);
	loop_timer_stop(g->loop, &g->settle);
	loop_timer_stop(g->loop, &g->watch_later);
	close_in(g);
	cgi_reply_fini(&g->reply);
	spool_fini(&g->spool);
}
