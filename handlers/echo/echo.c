/* The echo handler: answers with what it was given (request fields, headers,
 * body) and counts how requests finished. It exists to exercise the handler
 * interface and module loading without CGI or Perl, and is the skeleton to
 * copy for a new handler; tests map an extension to it. Query words:
 * "sleep=MS" answers MS later (a pending answer, from a timer: the event
 * thread serves others meanwhile), "stats" answers with the counters. */
#include "clock.h"
#include "handler.h"
#include "log.h"
#include "loop.h"

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct echo_conf {
	char *greeting;
	unsigned long max_sleep_ms;
};

struct echo_state {
	atomic_ulong handled;
	atomic_ulong finished[4]; /* by enum plxd_end */
};

/* clang-format off */
static const struct conf_key echo_keys[] = {
	{ .name = "greeting", .type = CONF_STRING, .default_value = "echo",
	  .offset = offsetof(struct echo_conf, greeting),
	  .help = "first line of every answer (shows which configuration served it)",
	  .tests = "integration/handlers.t integration/logs_signals.t" },
	{ .name = "max_sleep", .type = CONF_DURATION, .default_value = "10s",
	  .offset = offsetof(struct echo_conf, max_sleep_ms), .max = 60 * 1000,
	  .help = "longest wait a request's `sleep=MS` may ask for",
	  .limit = "a longer sleep is cut to it",
	  .tests = "integration/handlers.t code:handlers/echo/echo.c" },
	CONF_KEYS_END
};
/* clang-format on */

static int echo_start(const void *conf, void **state)
{
	const struct echo_conf *c = conf;
	*state = calloc(1, sizeof(struct echo_state));
	if (!*state)
		return -1;
	plxd_log(PLXD_LOG_INFO, "echo: started, greeting '%s'", c->greeting);
	return 0;
}

static int echo_reconfigure(void *state, const void *conf)
{
	(void)state;
	const struct echo_conf *c = conf;
	plxd_log(PLXD_LOG_INFO, "echo: reconfigured, greeting '%s'", c->greeting);
	return 0;
}

static void echo_stop(void *state)
{
	plxd_log(PLXD_LOG_INFO, "echo: stopped");
	free(state);
}

static enum MHD_Result add_header_line(void *cls, enum MHD_ValueKind kind, const char *key,
		const char *value)
{
	(void)kind;
	fprintf(cls, "header %s: %s\n", key, value ? value : "");
	return MHD_YES;
}

/* The value of word=NUMBER in a query string, or -1. */
static long query_number(const char *query, const char *word)
{
	size_t wlen = strlen(word);
	for (const char *p = query; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL)
		if (strncmp(p, word, wlen) == 0 && p[wlen] == '=')
			return strtol(p + wlen + 1, NULL, 10);
	return -1;
}

/* A request answered later: its timer, and the request it answers. */
struct echo_wait {
	struct loop_timer timer; /* first member: the timer is the wait */
	struct plxd_request *r;
};

static int echo_answer(struct plxd_request *r);

static void echo_wake(struct loop_timer *t)
{
	struct echo_wait *w = (struct echo_wait *)t;
	struct plxd_request *r = w->r;
	r->data = NULL;
	free(w);
	if (echo_answer(r) < 0)
		plxd_respond_error(r, 500);
}

static int echo_handle(struct plxd_request *r)
{
	const struct echo_conf *conf = r->conf;
	struct echo_state *state = r->state;
	atomic_fetch_add(&state->handled, 1);

	long sleep_ms = query_number(r->query, "sleep");
	if (sleep_ms <= 0)
		return echo_answer(r);
	if ((unsigned long)sleep_ms > conf->max_sleep_ms)
		sleep_ms = (long)conf->max_sleep_ms;
	struct echo_wait *w = calloc(1, sizeof *w);
	if (!w)
		return -1;
	w->r = r;
	loop_timer_init(&w->timer);
	loop_timer_set(plxd_loop(r), &w->timer, clock_ms() + (uint64_t)sleep_ms, echo_wake);
	r->data = w;
	return PLXD_PENDING;
}

static int echo_answer(struct plxd_request *r)
{
	const struct echo_conf *conf = r->conf;
	struct echo_state *state = r->state;
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	if (!out)
		return -1;
	if (strcmp(r->query, "stats") == 0) {
		fprintf(out, "handled %lu\nfinished done=%lu client_gone=%lu timeout=%lu error=%lu\n",
				atomic_load(&state->handled),
				atomic_load(&state->finished[PLXD_END_DONE]),
				atomic_load(&state->finished[PLXD_END_CLIENT_GONE]),
				atomic_load(&state->finished[PLXD_END_TIMEOUT]),
				atomic_load(&state->finished[PLXD_END_ERROR]));
	} else {
		fprintf(out,
				"%s\nmethod %s\nversion %s\ntarget %s\npath %s\nquery %s\n"
				"script_name %s\npath_info %s\nfile %s\nroute_name %s\nbody_length %llu\n",
				conf->greeting, r->method, r->version, r->target, r->path, r->query,
				r->script_name, r->path_info, r->file, r->route_name,
				(unsigned long long)r->body_length);
		MHD_get_connection_values(r->connection, MHD_HEADER_KIND, add_header_line, out);
		fputs("body\n", out);
		char buf[8192];
		ssize_t n;
		while ((n = plxd_body_read(r, buf, sizeof buf)) > 0)
			fwrite(buf, 1, (size_t)n, out);
	}
	fclose(out);
	struct MHD_Response *resp =
			MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return -1;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
	r->bytes_sent = len;
	return plxd_respond(r, 200, resp);
}

static void echo_finished(struct plxd_request *r, enum plxd_end how)
{
	struct echo_state *state = r->state;
	struct echo_wait *w = r->data;
	if (w) { /* the client left before the answer */
		loop_timer_stop(plxd_loop(r), &w->timer);
		free(w);
		r->data = NULL;
	}
	if (state)
		atomic_fetch_add(&state->finished[how], 1);
}

const struct plxd_handler plxd_handler_module = {
	.abi = PLXD_HANDLER_ABI,
	.name = "echo",
	.keys = echo_keys,
	.conf_size = sizeof(struct echo_conf),
	.start = echo_start,
	.reconfigure = echo_reconfigure,
	.stop = echo_stop,
	.handle = echo_handle,
	.finished = echo_finished,
};
