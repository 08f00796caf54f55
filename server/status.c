/* The status page's handler: who may see it, gathering the figures from
 * the counters and from each running handler's report hook, and the
 * response. Rendering is status_page.c's. */
#include "status.h"
#include "alloc.h"
#include "handler.h"
#include "http.h"
#include "master.h"
#include "site.h"
#include "version.h"

#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What a handler's report hook adds to. */
struct plxd_report {
	struct status_data *d;
	const char *handler; /* the section's name */
};

static int status_handle(struct plxd_request *r);

static const struct plxd_handler status_handler = {
	.abi = PLXD_HANDLER_ABI,
	.name = "status",
	.handle = status_handle,
};

const struct handler_section status_section = {
	.name = "status",
	.handler = &status_handler,
	.stats_id = STATS_STATUS,
};

int status_route(const struct status_conf *c, const char *target, const char **query)
{
	size_t len = strlen(c->path);
	if (!len || strncmp(target, c->path, len) != 0 || (target[len] && target[len] != '?'))
		return 0;
	*query = target[len] ? target + len + 1 : "";
	return 1;
}

int status_allowed(struct plxd_request *r, const struct status_conf *c)
{
	struct addr_range client;
	return plxd_client_addr(r, &client) == 0 && addr_list_match_addr(&c->allow, &client);
}

void plxd_report_gauge(struct plxd_report *rep, const char *name, uint64_t value)
{
	struct status_data *d = rep->d;
	d->gauges = xrealloc(d->gauges, (d->ngauges + 1) * sizeof *d->gauges);
	d->gauges[d->ngauges++] = (struct status_gauge){
		.handler = rep->handler,
		.name = xstrdup(name),
		.value = value,
	};
}

void plxd_report_worker(struct plxd_report *rep, const struct plxd_report_worker *w)
{
	struct status_data *d = rep->d;
	d->workers = xrealloc(d->workers, (d->nworkers + 1) * sizeof *d->workers);
	d->workers[d->nworkers++] = (struct status_worker){
		.handler = rep->handler,
		.pid = w->pid,
		.state = xstrdup(w->state ? w->state : "?"),
		.script = w->script ? xstrdup(w->script) : NULL,
		.script_us = w->script_us,
		.requests = w->requests,
		.rss_kb = w->rss_kb,
		.scripts_compiled = w->scripts_compiled,
	};
}

void plxd_report_script(struct plxd_report *rep, const struct plxd_report_script *s)
{
	struct status_data *d = rep->d;
	d->scripts = xrealloc(d->scripts, (d->nscripts + 1) * sizeof *d->scripts);
	d->scripts[d->nscripts++] = (struct status_script){
		.handler = rep->handler,
		.path = xstrdup(s->path ? s->path : ""),
		.compiles = s->compiles,
		.runs = s->runs,
		.run_us_sum = s->run_us_sum,
		.run_us_p99 = s->run_us_p99,
	};
}

int plxd_counting(void)
{
	return stats_enabled();
}

static void gather(struct status_data *d, const struct site *site)
{
	*d = (struct status_data){
		.version = PLXD_VERSION,
		.pid = (long)getpid(),
		.restarts = master_restarts(),
		.last_restart = master_last_reason(),
		.generation = site->generation,
		.threads = http_threads(),
		/* What is in effect: a reload keeps the value plxd started with. */
		.counters = stats_enabled(),
		.open = http_open_connections(),
	};
	stats_read(&d->sum);
	const struct config *c = site->config;
	for (size_t i = 0; i < c->nhandlers; i++) {
		const struct handler_section *s = &c->handlers[i];
		if (!s->handler->report || !s->state)
			continue;
		struct plxd_report rep = { .d = d, .handler = s->name };
		s->handler->report(s->state, &rep);
	}
}

static void release(struct status_data *d)
{
	for (size_t i = 0; i < d->ngauges; i++)
		free(d->gauges[i].name);
	for (size_t i = 0; i < d->nworkers; i++) {
		free(d->workers[i].state);
		free(d->workers[i].script);
	}
	for (size_t i = 0; i < d->nscripts; i++)
		free(d->scripts[i].path);
	free(d->gauges);
	free(d->workers);
	free(d->scripts);
}

/* The format a query asks for: "json" or "prometheus" as its first word
 * (up to '&' or '='), else HTML. */
static enum status_format format_of(const char *query)
{
	size_t n = strcspn(query, "&=");
	if (n == 4 && strncmp(query, "json", 4) == 0)
		return STATUS_JSON;
	if (n == 10 && strncmp(query, "prometheus", 10) == 0)
		return STATUS_PROMETHEUS;
	return STATUS_HTML;
}

static int status_handle(struct plxd_request *r)
{
	const struct status_conf *c = r->conf;
	const struct site *site = r->state;
	/* request.c refused the others before their body; this is the same
	 * check, kept for any other way here. */
	if (!status_allowed(r, c))
		return plxd_respond_error(r, 404) < 0 ? -1 : 0;
	if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0) {
		struct MHD_Response *resp =
				MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
		if (!resp)
			return -1;
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
		return plxd_respond(r, 405, resp) < 0 ? -1 : 0;
	}
	enum status_format format = format_of(r->query);
	struct status_data d;
	gather(&d, site);
	size_t len;
	char *page = status_render(&d, format, &len);
	release(&d);
	struct MHD_Response *resp =
			MHD_create_response_from_buffer(len, page, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(page);
		return -1;
	}
	static const char *const types[] = {
		[STATUS_HTML] = "text/html; charset=utf-8",
		[STATUS_JSON] = "application/json",
		[STATUS_PROMETHEUS] = "text/plain; version=0.0.4; charset=utf-8",
	};
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, types[format]);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	r->bytes_sent = len;
	return plxd_respond(r, 200, resp) < 0 ? -1 : 0;
}
