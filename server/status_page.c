/* The status page's three forms (HTML, JSON, Prometheus text) from one
 * struct status_data. The JSON schema is doc/status.md's and stays
 * stable: keys are only ever added. Pure string work. */
#include "status.h"
#include "alloc.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing string. */
struct out {
	char *p;
	size_t len, cap;
};

static void put(struct out *o, const char *s, size_t n);
static void put_s(struct out *o, const char *s);
static void putf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_json_string(struct out *o, const char *s);
static void put_html(struct out *o, const char *s);
static void put_label(struct out *o, const char *s);
static void render_json(struct out *o, const struct status_data *d);
static void render_html(struct out *o, const struct status_data *d);
static void render_prometheus(struct out *o, const struct status_data *d);
static void html_requests(struct out *o, const struct status_data *d);
static void prometheus_requests(struct out *o, const struct status_data *d);

static const char *const class_names[6] = { "other", "1xx", "2xx", "3xx", "4xx", "5xx" };

static void put(struct out *o, const char *s, size_t n)
{
	if (o->len + n + 1 > o->cap) {
		size_t cap = o->cap ? o->cap : 8192;
		while (cap < o->len + n + 1)
			cap *= 2;
		o->p = xrealloc(o->p, cap);
		o->cap = cap;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = '\0';
}

static void put_s(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

static void putf(struct out *o, const char *fmt, ...)
{
	char small[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof small, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof small) {
		put(o, small, (size_t)n);
		return;
	}
	char *big = xmalloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	put(o, big, (size_t)n);
	free(big);
}

/* Control characters, '"' and '\' escaped; other bytes as they are. */
/* The length of the well-formed UTF-8 character at s (1 to 4), or 0 for a
 * byte that starts none: a script's name is bytes, and every format here
 * must be UTF-8 (JSON, Prometheus labels, the HTML page's charset). */
static size_t utf8_char(const unsigned char *s)
{
	size_t n;
	unsigned min;
	unsigned cp;
	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		n = 2, min = 0x80, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3, min = 0x800, cp = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		n = 4, min = 0x10000, cp = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

#define REPLACEMENT "\xef\xbf\xbd" /* U+FFFD, for a byte that is no UTF-8 */

static void put_json_string(struct out *o, const char *s)
{
	put_s(o, "\"");
	while (*s) {
		unsigned char c = (unsigned char)*s;
		size_t n = utf8_char((const unsigned char *)s);
		if (n == 0) {
			put_s(o, "\\ufffd");
			n = 1;
		} else if (c == '"' || c == '\\') {
			putf(o, "\\%c", c);
		} else if (c < 0x20 || c == 0x7f) {
			putf(o, "\\u%04x", c);
		} else {
			put(o, s, n);
		}
		s += n;
	}
	put_s(o, "\"");
}

static void put_html(struct out *o, const char *s)
{
	while (*s) {
		size_t n = utf8_char((const unsigned char *)s);
		unsigned char c = (unsigned char)*s;
		if (n == 0 || (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f) {
			put_s(o, REPLACEMENT);
			n = 1;
		} else if (c == '<') {
			put_s(o, "&lt;");
		} else if (c == '>') {
			put_s(o, "&gt;");
		} else if (c == '&') {
			put_s(o, "&amp;");
		} else if (c == '"') {
			put_s(o, "&quot;");
		} else {
			put(o, s, n);
		}
		s += n;
	}
}

/* A Prometheus label value: '\', '"' and new lines escaped, other control
 * bytes and what is no UTF-8 replaced. */
static void put_label(struct out *o, const char *s)
{
	put_s(o, "\"");
	while (*s) {
		size_t n = utf8_char((const unsigned char *)s);
		unsigned char c = (unsigned char)*s;
		if (c == '\\' || c == '"') {
			putf(o, "\\%c", c);
		} else if (c == '\n') {
			put_s(o, "\\n");
		} else if (n == 0 || c < 0x20 || c == 0x7f) {
			put_s(o, REPLACEMENT);
			n = 1;
		} else {
			put(o, s, n);
		}
		s += n;
	}
	put_s(o, "\"");
}

static uint64_t mean(uint64_t sum, uint64_t n)
{
	return n ? sum / n : 0;
}

/* Open connections between requests. Only with the counters on: without
 * the phases it cannot be told from open, so the figure is left out. */
static uint64_t idle_connections(const struct status_data *d)
{
	uint64_t busy = d->sum.reading + d->sum.writing;
	return d->open > busy ? d->open - busy : 0;
}

static uint64_t total_requests(const struct status_data *d, uint64_t by_class[6])
{
	uint64_t total = 0;
	memset(by_class, 0, 6 * sizeof by_class[0]);
	for (unsigned i = 0; i < d->sum.nhandlers; i++) {
		total += d->sum.handlers[i].requests;
		for (unsigned c = 0; c < 6; c++)
			by_class[c] += d->sum.handlers[i].by_class[c];
	}
	return total;
}

static void json_classes(struct out *o, const uint64_t by_class[6])
{
	put_s(o, "{");
	for (unsigned c = 1; c < 6; c++)
		putf(o, "\"%s\":%" PRIu64 ",", class_names[c], by_class[c]);
	putf(o, "\"other\":%" PRIu64 "}", by_class[0]);
}

static void render_json(struct out *o, const struct status_data *d)
{
	uint64_t by_class[6];
	uint64_t total = total_requests(d, by_class);
	putf(o, "{\"version\":");
	put_json_string(o, d->version);
	putf(o,
			",\"pid\":%ld,\"uptime_s\":%.3f,\"generation\":%u,\"threads\":%u,"
			"\"counters\":%s,",
			d->pid, (double)d->sum.uptime_us / 1e6, d->generation, d->threads,
			d->counters ? "true" : "false");
	putf(o, "\"restarts\":%u,\"last_restart\":", d->restarts);
	if (d->last_restart && d->last_restart[0])
		put_json_string(o, d->last_restart);
	else
		put_s(o, "null");
	put_s(o, ",");
	/* Without the counters the phases are not kept: null, not 0 (idle
	 * would be every open connection, the status request's own too). */
	putf(o, "\"connections\":{\"open\":%" PRIu64, d->open);
	if (d->counters)
		putf(o, ",\"reading\":%" PRIu64 ",\"writing\":%" PRIu64 ",\"idle\":%" PRIu64 "},",
				d->sum.reading, d->sum.writing, idle_connections(d));
	else
		put_s(o, ",\"reading\":null,\"writing\":null,\"idle\":null},");
	putf(o, "\"requests\":{\"total\":%" PRIu64 ",\"by_class\":", total);
	json_classes(o, by_class);
	put_s(o, ",\"by_handler\":{");
	int first = 1;
	for (unsigned i = 0; i < d->sum.nhandlers; i++) {
		const struct stats_handler_sum *h = &d->sum.handlers[i];
		if (!first)
			put_s(o, ",");
		first = 0;
		put_json_string(o, h->name);
		putf(o, ":{\"total\":%" PRIu64 ",\"by_class\":", h->requests);
		json_classes(o, h->by_class);
		putf(o,
				",\"latency_us\":{\"mean\":%" PRIu64 ",\"p50\":%" PRIu64
				",\"p90\":%" PRIu64 ",\"p99\":%" PRIu64 "}}",
				mean(h->sum_us, h->requests), hist_percentile(h->hist, 0.50),
				hist_percentile(h->hist, 0.90), hist_percentile(h->hist, 0.99));
	}
	put_s(o, "}},\"handlers\":{");
	/* Gauges grouped by handler, in the order reported. */
	first = 1;
	for (size_t i = 0; i < d->ngauges; i++) {
		size_t k = 0;
		while (k < i && strcmp(d->gauges[k].handler, d->gauges[i].handler) != 0)
			k++;
		if (k < i)
			continue; /* written with its handler's first gauge */
		if (!first)
			put_s(o, ",");
		first = 0;
		put_json_string(o, d->gauges[i].handler);
		put_s(o, ":{");
		int inner = 1;
		for (size_t j = i; j < d->ngauges; j++) {
			if (strcmp(d->gauges[j].handler, d->gauges[i].handler) != 0)
				continue;
			if (!inner)
				put_s(o, ",");
			inner = 0;
			put_json_string(o, d->gauges[j].name);
			putf(o, ":%" PRIu64, d->gauges[j].value);
		}
		put_s(o, "}");
	}
	put_s(o, "},\"workers\":[");
	for (size_t i = 0; i < d->nworkers; i++) {
		const struct status_worker *w = &d->workers[i];
		put_s(o, i ? ",{\"handler\":" : "{\"handler\":");
		put_json_string(o, w->handler);
		putf(o, ",\"pid\":%ld,\"state\":", w->pid);
		put_json_string(o, w->state);
		put_s(o, ",\"script\":");
		if (w->script)
			put_json_string(o, w->script);
		else
			put_s(o, "null");
		/* Without the counters no worker notes when its script began. */
		if (d->counters)
			putf(o, ",\"script_running_ms\":%" PRIu64, w->script_us / 1000);
		else
			put_s(o, ",\"script_running_ms\":null");
		putf(o,
				",\"requests\":%" PRIu64 ",\"rss_kb\":%" PRIu64
				",\"scripts_compiled\":%" PRIu64 "}",
				w->requests, w->rss_kb, w->scripts_compiled);
	}
	put_s(o, "],\"scripts\":[");
	for (size_t i = 0; i < d->nscripts; i++) {
		const struct status_script *s = &d->scripts[i];
		put_s(o, i ? ",{\"handler\":" : "{\"handler\":");
		put_json_string(o, s->handler);
		put_s(o, ",\"path\":");
		put_json_string(o, s->path);
		putf(o,
				",\"compiles\":%" PRIu64 ",\"runs\":%" PRIu64
				",\"run_mean_us\":%" PRIu64 ",\"run_p99_us\":%" PRIu64 "}",
				s->compiles, s->runs, mean(s->run_us_sum, s->runs), s->run_us_p99);
	}
	put_s(o, "]}\n");
}

static void html_cell_u(struct out *o, uint64_t v)
{
	putf(o, "<td class=n>%" PRIu64 "</td>", v);
}

/* A figure that is not kept ([status] counters = off). */
static void html_cell_none(struct out *o)
{
	put_s(o, "<td class=n>-</td>");
}

/* The requests table: per handler, then all. */
static void html_requests(struct out *o, const struct status_data *d)
{
	uint64_t by_class[6];
	uint64_t total = total_requests(d, by_class);
	put_s(o, "<h2>Requests</h2><table><tr><th>handler</th><th>total</th>");
	for (unsigned c = 1; c < 6; c++)
		putf(o, "<th>%s</th>", class_names[c]);
	putf(o,
			"<th>mean &micro;s</th><th>p50 &micro;s</th><th>p90 &micro;s</th>"
			"<th>p99 &micro;s</th></tr>\n");
	for (unsigned i = 0; i < d->sum.nhandlers; i++) {
		const struct stats_handler_sum *h = &d->sum.handlers[i];
		put_s(o, "<tr><td>");
		put_html(o, h->name);
		put_s(o, "</td>");
		html_cell_u(o, h->requests);
		for (unsigned c = 1; c < 6; c++)
			html_cell_u(o, h->by_class[c]);
		html_cell_u(o, mean(h->sum_us, h->requests));
		html_cell_u(o, hist_percentile(h->hist, 0.50));
		html_cell_u(o, hist_percentile(h->hist, 0.90));
		html_cell_u(o, hist_percentile(h->hist, 0.99));
		put_s(o, "</tr>\n");
	}
	putf(o, "<tr><th>all</th>");
	html_cell_u(o, total);
	for (unsigned c = 1; c < 6; c++)
		html_cell_u(o, by_class[c]);
	putf(o, "<td></td><td></td><td></td><td></td></tr></table>\n");
}

static void render_html(struct out *o, const struct status_data *d)
{
	/* Refreshes itself every 5 s; ?json and ?prometheus give the same. */
	put_s(o,
			"<!DOCTYPE html>\n<html><head><meta charset=utf-8>"
			"<meta http-equiv=refresh content=5><title>plxd status</title><style>"
			"body{font:14px system-ui,sans-serif;margin:1.5em}"
			"table{border-collapse:collapse;margin:.5em 0 1.5em}"
			"td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}"
			".n{text-align:right;font-variant-numeric:tabular-nums}"
			"</style></head><body><h1>plxd status</h1>\n");
	putf(o,
			"<p>plxd/%s, pid %ld, up %.0f s, configuration generation %u, %u event "
			"threads. Also as <a href=\"?json\">JSON</a> and "
			"<a href=\"?prometheus\">Prometheus text</a>; refreshed every 5 s.</p>\n",
			d->version, d->pid, (double)d->sum.uptime_us / 1e6, d->generation,
			d->threads);
	if (d->restarts) {
		putf(o, "<p>The serving process was restarted %u times; the last one before it ",
				d->restarts);
		put_html(o, d->last_restart ? d->last_restart : "");
		put_s(o, ".</p>\n");
	}
	if (!d->counters)
		put_s(o,
				"<p><b>[status] counters = off</b>: requests, connection phases "
				"and scripts are not counted.</p>\n");
	putf(o,
			"<h2>Connections</h2><table><tr><th>open</th><th>reading</th>"
			"<th>writing</th><th>idle</th></tr><tr>");
	html_cell_u(o, d->open);
	if (d->counters) {
		html_cell_u(o, d->sum.reading);
		html_cell_u(o, d->sum.writing);
		html_cell_u(o, idle_connections(d));
	} else {
		html_cell_none(o);
		html_cell_none(o);
		html_cell_none(o);
	}
	put_s(o, "</tr></table>\n");
	if (d->counters)
		html_requests(o, d);
	if (d->ngauges) {
		putf(o,
				"<h2>Handlers</h2><table><tr><th>handler</th><th>figure</th>"
				"<th>value</th></tr>\n");
		for (size_t i = 0; i < d->ngauges; i++) {
			put_s(o, "<tr><td>");
			put_html(o, d->gauges[i].handler);
			put_s(o, "</td><td>");
			put_html(o, d->gauges[i].name);
			put_s(o, "</td>");
			html_cell_u(o, d->gauges[i].value);
			put_s(o, "</tr>\n");
		}
		put_s(o, "</table>\n");
	}
	if (d->nworkers) {
		putf(o,
				"<h2>Workers</h2><table><tr><th>handler</th><th>pid</th><th>state</th>"
				"<th>script</th><th>for ms</th><th>requests</th><th>RSS KB</th>"
				"<th>scripts compiled</th></tr>\n");
		for (size_t i = 0; i < d->nworkers; i++) {
			const struct status_worker *w = &d->workers[i];
			put_s(o, "<tr><td>");
			put_html(o, w->handler);
			putf(o, "</td><td class=n>%ld</td><td>", w->pid);
			put_html(o, w->state);
			put_s(o, "</td><td>");
			put_html(o, w->script ? w->script : "");
			put_s(o, "</td>");
			if (d->counters)
				html_cell_u(o, w->script_us / 1000);
			else
				html_cell_none(o);
			html_cell_u(o, w->requests);
			html_cell_u(o, w->rss_kb);
			html_cell_u(o, w->scripts_compiled);
			put_s(o, "</tr>\n");
		}
		put_s(o, "</table>\n");
	}
	if (d->nscripts) {
		putf(o,
				"<h2>Scripts</h2><table><tr><th>handler</th><th>script</th>"
				"<th>compiles</th><th>runs</th><th>mean &micro;s</th>"
				"<th>p99 &micro;s</th></tr>\n");
		for (size_t i = 0; i < d->nscripts; i++) {
			const struct status_script *s = &d->scripts[i];
			put_s(o, "<tr><td>");
			put_html(o, s->handler);
			put_s(o, "</td><td>");
			put_html(o, s->path);
			put_s(o, "</td>");
			html_cell_u(o, s->compiles);
			html_cell_u(o, s->runs);
			html_cell_u(o, mean(s->run_us_sum, s->runs));
			html_cell_u(o, s->run_us_p99);
			put_s(o, "</tr>\n");
		}
		put_s(o, "</table>\n");
	}
	put_s(o, "</body></html>\n");
}

/* The request counters and durations, per handler. */
static void prometheus_requests(struct out *o, const struct status_data *d)
{
	putf(o,
			"# HELP plxd_requests_total Requests ended, by handler and status class.\n"
			"# TYPE plxd_requests_total counter\n");
	for (unsigned i = 0; i < d->sum.nhandlers; i++)
		for (unsigned c = 0; c < 6; c++) {
			put_s(o, "plxd_requests_total{handler=");
			put_label(o, d->sum.handlers[i].name);
			putf(o, ",class=\"%s\"} %" PRIu64 "\n", class_names[c],
					d->sum.handlers[i].by_class[c]);
		}
	putf(o,
			"# HELP plxd_request_duration_us Request durations by handler (mean and "
			"quantiles from log-scale buckets).\n# TYPE plxd_request_duration_us summary\n");
	static const double qs[] = { 0.5, 0.9, 0.99 };
	for (unsigned i = 0; i < d->sum.nhandlers; i++) {
		const struct stats_handler_sum *h = &d->sum.handlers[i];
		for (unsigned q = 0; q < 3; q++) {
			put_s(o, "plxd_request_duration_us{handler=");
			put_label(o, h->name);
			putf(o, ",quantile=\"%g\"} %" PRIu64 "\n", qs[q],
					hist_percentile(h->hist, qs[q]));
		}
		put_s(o, "plxd_request_duration_us_sum{handler=");
		put_label(o, h->name);
		putf(o, "} %" PRIu64 "\n", h->sum_us);
		put_s(o, "plxd_request_duration_us_count{handler=");
		put_label(o, h->name);
		putf(o, "} %" PRIu64 "\n", h->requests);
	}
}

static void render_prometheus(struct out *o, const struct status_data *d)
{
	putf(o,
			"# HELP plxd_uptime_seconds Seconds since plxd started.\n"
			"# TYPE plxd_uptime_seconds gauge\nplxd_uptime_seconds %.3f\n",
			(double)d->sum.uptime_us / 1e6);
	putf(o,
			"# HELP plxd_restarts_total Serving processes the master started after the "
			"first.\n# TYPE plxd_restarts_total counter\nplxd_restarts_total %u\n",
			d->restarts);
	putf(o,
			"# HELP plxd_generation The configuration generation (1, then one more per "
			"reload).\n# TYPE plxd_generation gauge\nplxd_generation %u\n",
			d->generation);
	putf(o,
			"# HELP plxd_connections Open connections by phase.\n"
			"# TYPE plxd_connections gauge\n"
			"plxd_connections{state=\"open\"} %" PRIu64 "\n",
			d->open);
	/* Without the counters, what is not kept is left out rather than
	 * exported as 0: a scraper has no other way to tell. */
	if (d->counters) {
		putf(o,
				"plxd_connections{state=\"reading\"} %" PRIu64 "\n"
				"plxd_connections{state=\"writing\"} %" PRIu64 "\n"
				"plxd_connections{state=\"idle\"} %" PRIu64 "\n",
				d->sum.reading, d->sum.writing, idle_connections(d));
		prometheus_requests(o, d);
	}
	if (d->ngauges)
		putf(o,
				"# HELP plxd_handler A handler's own figure.\n"
				"# TYPE plxd_handler gauge\n");
	for (size_t i = 0; i < d->ngauges; i++) {
		put_s(o, "plxd_handler{handler=");
		put_label(o, d->gauges[i].handler);
		put_s(o, ",name=");
		put_label(o, d->gauges[i].name);
		putf(o, "} %" PRIu64 "\n", d->gauges[i].value);
	}
	static const char *const wfig[] = { "requests", "rss_kb", "scripts_compiled",
		"script_running_ms" };
	/* script_running_ms (the last) is not kept without the counters. */
	for (unsigned f = 0; f < (d->counters ? 4u : 3u); f++) {
		if (!d->nworkers)
			break;
		putf(o, "# TYPE plxd_worker_%s gauge\n", wfig[f]);
		/* slot: the row's place among its handler's rows (they come
		 * together, in the handler's order), which its workers'
		 * replacements keep, so that each slot is one series however
		 * many share a pid of 0 or a state. */
		size_t slot = 0;
		for (size_t i = 0; i < d->nworkers; i++) {
			const struct status_worker *w = &d->workers[i];
			slot = i && strcmp(w->handler, d->workers[i - 1].handler) == 0 ? slot + 1
										       : 0;
			uint64_t v = f == 0      ? w->requests
					: f == 1 ? w->rss_kb
					: f == 2 ? w->scripts_compiled
						 : w->script_us / 1000;
			putf(o, "plxd_worker_%s{handler=", wfig[f]);
			put_label(o, w->handler);
			putf(o, ",slot=\"%zu\",pid=\"%ld\",state=", slot, w->pid);
			put_label(o, w->state);
			putf(o, "} %" PRIu64 "\n", v);
		}
	}
	static const char *const sfig[] = { "compiles", "runs", "run_mean_us", "run_p99_us" };
	for (unsigned f = 0; f < 4; f++) {
		if (!d->nscripts)
			break;
		putf(o, "# TYPE plxd_script_%s gauge\n", sfig[f]);
		for (size_t i = 0; i < d->nscripts; i++) {
			const struct status_script *s = &d->scripts[i];
			uint64_t v = f == 0      ? s->compiles
					: f == 1 ? s->runs
					: f == 2 ? mean(s->run_us_sum, s->runs)
						 : s->run_us_p99;
			putf(o, "plxd_script_%s{handler=", sfig[f]);
			put_label(o, s->handler);
			put_s(o, ",script=");
			put_label(o, s->path);
			putf(o, "} %" PRIu64 "\n", v);
		}
	}
}

char *status_render(const struct status_data *d, enum status_format format, size_t *len)
{
	struct out o = { 0 };
	put(&o, "", 0);
	if (format == STATUS_JSON)
		render_json(&o, d);
	else if (format == STATUS_PROMETHEUS)
		render_prometheus(&o, d);
	else
		render_html(&o, d);
	*len = o.len;
	return o.p;
}
