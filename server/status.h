/* plxd's status page: a built-in handler answering [status] path, only to
 * the clients [status] allow names (others get 404), with what the event
 * threads counted (stats.h) and what each running handler reports (its
 * workers, scripts and children). status_page.c renders it. */
#ifndef PLXD_STATUS_H
#define PLXD_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "stats.h"

/* The section requests for the page are routed to; its state is the
 * request's site, its conf the site's struct status_conf. */
extern const struct handler_section status_section;

/* Whether target (raw, as received) asks for the page: its path part is
 * exactly c->path. *query is then what follows '?', or "". */
int status_route(const struct status_conf *c, const char *target, const char **query);

/* Whether r's client (found as for REMOTE_ADDR, through trusted proxies)
 * is one c->allow names. request.c asks on a request's first call, before
 * any body, so that a client that may not see the page gets what a missing
 * file gets: the same 404, and no "100 Continue" first. */
struct plxd_request;
int status_allowed(struct plxd_request *r, const struct status_conf *c);

/* ---- the figures, as status_page.c renders them ---- */

struct status_gauge {
	const char *handler;
	char *name;
	uint64_t value;
};

struct status_worker {
	const char *handler;
	long pid;
	char *state;
	char *script; /* NULL: none */
	uint64_t script_us, requests, rss_kb, scripts_compiled;
};

struct status_script {
	const char *handler;
	char *path;
	uint64_t compiles, runs, run_us_sum, run_us_p99;
};

struct status_data {
	const char *version;
	long pid;
	unsigned restarts;        /* serving processes the master started after the first */
	const char *last_restart; /* why the last one before this ended; "" */
	unsigned generation;
	unsigned threads;
	int counters; /* [status] counters: the request figures are kept */
	uint64_t open;
	struct stats_sum sum;
	struct status_gauge *gauges;
	size_t ngauges;
	struct status_worker *workers;
	size_t nworkers;
	struct status_script *scripts;
	size_t nscripts;
};

enum status_format { STATUS_HTML, STATUS_JSON, STATUS_PROMETHEUS };

/* The page in format, in a malloc'd buffer of *len bytes (never fails:
 * plxd's allocators abort). Pure string work. */
char *status_render(const struct status_data *d, enum status_format format, size_t *len);

#endif
