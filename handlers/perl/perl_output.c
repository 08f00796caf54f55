/* A .plx or .plt script's output, for the gateway: read from its runner's
 * pipe while it runs, then what its end brought; drained once nobody reads
 * it; and the timing header (X-Plxd-Perl). */
#include "perl_req.h"
#include "clock.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* After its end, pipe output still read at most: more comes from a
 * program the script left running, and the runner is replaced. */
#define DRAIN_MAX (1024 * 1024)

static ssize_t script_read(struct gw *g, char *buf, size_t len);
static int script_timing(struct gw *g, char *out, size_t outlen, int partial);

const struct gw_ops perl_req_gw_ops = {
	.read = script_read,
	.stop = perl_req_script_stop,
	.timing = script_timing,
};

/* Output, for the gateway: the pipe while the script runs; after its end,
 * what the pipe still holds (written before the end), then the end's own;
 * then, when the script forked, what the processes it left holding the
 * pipe print until they close it, for PERL_LINGER_MS at most: a CGI
 * script's background processes are read the same way ([cgi] linger), and
 * after it they are ended with the worker, as a CGI script's process group
 * is. */
static ssize_t script_read(struct gw *g, char *buf, size_t len)
{
	struct perl_req *q = (struct perl_req *)g;
	if (q->phase == PERL_REQ_RUNNING) {
		ssize_t n;
		while ((n = read(q->w->out, buf, len)) < 0 && errno == EINTR)
			;
		if (n > 0)
			return n;
		errno = EAGAIN; /* its end too: the end, or the runner's loss, says more */
		return -1;
	}
	ssize_t n = -1;
	if (q->pipe_clear && !q->tail_done) {
		/* The pipe held nothing more from before the end: the tail
		 * follows without another read. */
	} else if (!q->w) {
		/* Given back at its end: the pipe was found empty then. */
	} else if (q->drained < DRAIN_MAX && !q->pipe_eof) {
		size_t room = DRAIN_MAX - q->drained;
		while ((n = read(q->w->out, buf, len < room ? len : room)) < 0 && errno == EINTR)
			;
		if (n > 0) {
			q->drained += (size_t)n;
			return n;
		}
		q->pipe_eof = n == 0;
		q->pipe_clear = n < 0 && errno == EAGAIN;
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
	if (q->fresh < 0 || q->pipe_eof || q->held || q->dirty || q->phase == PERL_REQ_LOST)
		return 0;
	if (!q->lingering) {
		q->lingering = 1;
		loop_timer_set(q->loop, &q->timer, clock_ms() + PERL_LINGER_MS, perl_req_on_timer);
	}
	errno = EAGAIN;
	return -1;
}

static int script_timing(struct gw *g, char *out, size_t outlen, int partial)
{
	struct perl_req *q = (struct perl_req *)g;
	if (!q->conf->timing)
		return 0;
	if (q->phase == PERL_REQ_DONE) {
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
	/* The headers go out before the script ends: what is known now,
	 * which the runner may have told without its turn in the loop having
	 * come yet. */
	if (!q->running && q->phase == PERL_REQ_RUNNING)
		q->be->peek_running(q);
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

void perl_req_on_drain(struct loop_watch *w, unsigned events)
{
	(void)events;
	struct perl_req *q =
			(struct perl_req *)(void *)((char *)w - offsetof(struct perl_req, drain_w));
	char chunk[16384];
	ssize_t n;
	/* A runner that cannot be killed: until its script returns, all it
	 * prints is drained, or it would block on the full pipe before it
	 * could be ended. */
	int unbounded = q->be->drain_unbounded && q->phase != PERL_REQ_DONE;
	/* Read empty after its end, and no process it started holds the
	 * pipe: the next request starts clean without another read. */
	int clean = q->phase == PERL_REQ_DONE && q->pipe_clear && q->fresh < 0;
	while (!clean && (unbounded || q->drained < DRAIN_MAX)
			&& (n = read(q->w->out, chunk, sizeof chunk)) > 0)
		q->drained += (size_t)n;
	if (q->drained >= DRAIN_MAX)
		q->dirty = 1;
	if (q->phase == PERL_REQ_DONE)
		perl_req_give_back(q, PERL_RELEASE_IDLE, NULL);
}
