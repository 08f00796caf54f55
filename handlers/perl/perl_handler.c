/* The perl handler module: runs .plx and .plt scripts, and .psgi
 * applications, in interpreters that keep every script compiled, behind
 * one backend table (perl_backend.h:
 * worker processes or interpreter threads in plxd, as the configuration
 * says). This file is the module's hooks and its status rows; a request's
 * life is perl_req.c, its output perl_output.c. Everything between the
 * script and the client is the gateway's (server/gateway/gateway.h), as for
 * a CGI script. */
#include "alloc.h"
#include "handler.h"
#include "log.h"
#include "perl_conf.h"
#include "perl_req.h"
#include "perl_scripts.h"
#include "version.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WORKER_NAME  "plxd-perl-worker"
#define THREADS_NAME "plxd-perl-threads.so"

static int perl_start(const void *conf, void **state);
static int perl_reconfigure(void *state, const void *conf);
static void perl_stop(void *state);
static int perl_begin(struct plxd_request *r);
static void perl_finished(struct plxd_request *r, enum plxd_end how);

/* ---- start, reconfigure, stop ---- */

/* The backend's settings from [perl]; inc is the state's (set_inc). */
static void backend_settings(const struct perl_conf *c, const struct perl_state *st,
		struct perl_backend_settings *s)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	*s = (struct perl_backend_settings){
		.worker_path = st->worker,
		.threads_lib = st->threads,
		.workers = c->workers ? (unsigned)c->workers : (unsigned)(cores > 0 ? cores : 1),
		.queue = c->queue,
		.start_timeout_ms = c->start_timeout_ms,
		.max_requests = c->max_requests,
		.max_rss_kb = c->max_rss / 1024,
		.max_memory = c->max_memory,
		.preload = c->preload,
		.inc = st->inc,
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
	struct perl_backend_settings s;
	backend_settings(c, st, &s);
	char err[1024];
	st->be = perl_conf_backend(c);
	st->backend = st->be->create(&s, err, sizeof err);
	if (!st->backend) {
		plxd_log(PLXD_LOG_ERROR, "perl: %s", err);
		state_free(st);
		return -1;
	}
	st->workers = c->workers;
	*state = st;
	return 0;
}

static int perl_reconfigure(void *state, const void *conf)
{
	struct perl_state *st = state;
	const struct perl_conf *c = conf;
	perl_conf_warn_restart(c, st->workers, st->be);
	struct perl_backend_settings s;
	set_inc(st, conf);
	backend_settings(conf, st, &s);
	st->be->reconfigure(st->backend, &s);
	return 0;
}

static void perl_stop(void *state)
{
	struct perl_state *st = state;
	if (!st)
		return;
	st->be->destroy(st->backend);
	state_free(st);
	plxd_log(PLXD_LOG_INFO, "perl: workers stopped");
}

/* ---- hooks ---- */

static int perl_begin(struct plxd_request *r)
{
	const struct perl_conf *conf = r->conf;
	struct perl_state *st = r->state;
	if (st && st->be->saturated(st->backend, conf->queue)) {
		plxd_log(PLXD_LOG_WARN,
				"%s: every perl worker is busy and %lu requests wait: answered 503",
				r->file, conf->queue);
		plxd_respond_error(r, 503);
		return PLXD_RESPONDED;
	}
	return PLXD_SPOOL_BODY;
}

static void perl_finished(struct plxd_request *r, enum plxd_end how)
{
	struct perl_req *q = r->data;
	if (!q)
		return;
	r->data = NULL;
	gw_finished(&q->gw, how);
	perl_req_maybe_free(q);
}

/* ---- the status page ---- */

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

/* The status page's rows: each runner, the scripts, and how many runners
 * are busy. */
static void perl_report(void *state, struct plxd_report *rep)
{
	struct perl_state *st = state;
	struct perl_runner_view stack[64];
	struct perl_runner_view *v = stack;
	size_t n = st->be->view(st->backend, v, 64);
	if (n > 64) {
		v = xmalloc(n * sizeof *v);
		n = st->be->view(st->backend, v, n);
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
						.rss_kb = v[i].rss_kb,
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
	.handle = perl_req_start,
	.finished = perl_finished,
	.report = perl_report,
};
