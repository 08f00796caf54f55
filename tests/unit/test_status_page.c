/* The status page's pure parts: the log-scale histogram (hist.h) and the
 * renderer (status_page.c): percentiles within a bucket's width, strings
 * escaped for JSON, HTML and Prometheus labels. */
#include "hist.h"
#include "status.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

/* Prometheus refuses a scrape that holds a series twice. Worker rows that
 * look alike (two slots starting, pid 0 and the same state, as after a
 * crash of both; or plxd's own pid for two interpreter threads) are told
 * apart by their slot, counted per handler from 0; the slot is the row's
 * place, so each series name and label set comes once. */
static void check_worker_series(void)
{
	struct status_worker w[] = {
		{ .handler = "perl", .pid = 0, .state = "starting" },
		{ .handler = "perl", .pid = 0, .state = "starting" },
		{ .handler = "perl", .pid = 7, .state = "idle", .requests = 2 },
		{ .handler = "perl:thread", .pid = 9, .state = "idle" },
		{ .handler = "perl:thread", .pid = 9, .state = "idle" },
	};
	struct status_data d = { .version = "1",
		.generation = 1,
		.counters = 1,
		.workers = w,
		.nworkers = sizeof w / sizeof w[0] };
	size_t len;
	char *prom = status_render(&d, STATUS_PROMETHEUS, &len);
	/* Every sample line up to its value, against every other. */
	size_t nlines = 0, twice = 0;
	char *lines[256];
	for (char *save = NULL, *l = strtok_r(prom, "\n", &save); l && nlines < 256;
			l = strtok_r(NULL, "\n", &save)) {
		if (l[0] == '#')
			continue;
		char *value = strrchr(l, ' ');
		if (value)
			*value = '\0';
		for (size_t i = 0; i < nlines; i++)
			if (strcmp(lines[i], l) == 0) {
				printf("# twice: %s\n", l);
				twice++;
			}
		lines[nlines++] = l;
	}
	ok(nlines > 3 * 5 && twice == 0, "Prometheus: %zu series, none twice", nlines);
	int slots = 1;
	for (size_t i = 0; i < nlines; i++)
		if (strncmp(lines[i], "plxd_worker_requests{", 21) == 0)
			slots = slots && strstr(lines[i], ",slot=\"") != NULL;
	free(prom);
	prom = status_render(&d, STATUS_PROMETHEUS, &len);
	ok(slots && strstr(prom, "plxd_worker_requests{handler=\"perl\",slot=\"0\",pid=\"0\"")
					&& strstr(prom, "plxd_worker_requests{handler=\"perl\",slot=\"1\",pid=\"0\"")
					&& strstr(prom, "plxd_worker_requests{handler=\"perl\",slot=\"2\",pid=\"7\",state=\"idle\"} 2\n")
					&& strstr(prom, "plxd_worker_requests{handler=\"perl:thread\",slot=\"0\",")
					&& strstr(prom, "plxd_worker_requests{handler=\"perl:thread\",slot=\"1\","),
			"... the slot: the row's place among its handler's, from 0 for each");
	free(prom);
}

int main(void)
{
	int monotonic = 1, contained = 1;
	for (uint64_t v = 0; v < 5000000; v = v < 64 ? v + 1 : v + v / 7) {
		unsigned i = hist_index(v);
		if (v > 0 && i < hist_index(v - 1))
			monotonic = 0;
		if (v < hist_low(i) || v >= hist_low(i) + hist_width(i))
			contained = 0;
	}
	ok(monotonic, "bucket indexes grow with the value");
	ok(contained, "every value lies in its bucket's range");
	ok(hist_index(UINT64_MAX) == HIST_BUCKETS - 1, "the largest value: the last bucket");
	int narrow = 1;
	for (unsigned i = 4; i < HIST_BUCKETS; i++)
		if (hist_width(i) * 4 > hist_low(i))
			narrow = 0;
	ok(narrow,
			"a bucket is at most a quarter of its lowest value wide (its middle: within "
			"12.5%%)");

	uint64_t b[HIST_BUCKETS] = { 0 };
	ok(hist_percentile(b, 0.99) == 0, "nothing counted: 0");
	for (int i = 0; i < 99; i++)
		b[hist_index(100)]++;
	b[hist_index(10000)]++;
	uint64_t p50 = hist_percentile(b, 0.5), p99 = hist_percentile(b, 0.99),
		 p100 = hist_percentile(b, 1.0);
	ok(p50 >= 88 && p50 <= 113, "p50 of 99 x 100 us and 1 x 10 ms: about 100 (%llu)",
			(unsigned long long)p50);
	ok(p99 >= 88 && p99 <= 113, "p99: still 100 (%llu)", (unsigned long long)p99);
	ok(p100 >= 8750 && p100 <= 11250, "p100: about 10000 (%llu)", (unsigned long long)p100);

	struct status_worker w = { .handler = "perl",
		.pid = 42,
		.state = "busy",
		.script = "/a \"b\"\n<c>.plx",
		.requests = 3 };
	struct status_script sc = { .handler = "perl",
		.path = "/a \"b\"\n<c>.plx",
		.runs = 2,
		.run_us_sum = 30 };
	struct status_data d = { .version = "1",
		.generation = 1,
		.counters = 1,
		.workers = &w,
		.nworkers = 1,
		.scripts = &sc,
		.nscripts = 1 };
	d.sum.nhandlers = 1;
	d.sum.handlers[0].name = "static";
	d.sum.handlers[0].requests = 5;
	d.sum.handlers[0].by_class[2] = 5;
	size_t len;
	char *json = status_render(&d, STATUS_JSON, &len);
	ok(strlen(json) == len, "JSON: the length given");
	ok(strstr(json, "\"script\":\"/a \\\"b\\\"\\u000a<c>.plx\"") != NULL,
			"JSON escapes quotes and control characters");
	ok(strstr(json, "\"run_mean_us\":15") != NULL, "a script's mean run time");
	ok(strstr(json, "\"static\":{\"total\":5,\"by_class\":{\"1xx\":0,\"2xx\":5") != NULL,
			"requests by handler and class");
	free(json);
	char *html = status_render(&d, STATUS_HTML, &len);
	ok(strstr(html, "&lt;c&gt;") != NULL && strstr(html, "<c>") == NULL, "HTML escapes <>");
	free(html);
	char *prom = status_render(&d, STATUS_PROMETHEUS, &len);
	ok(strstr(prom, "script=\"/a \\\"b\\\"\\n<c>.plx\"") != NULL,
			"Prometheus labels escape quotes and new lines");
	ok(strstr(prom, "plxd_requests_total{handler=\"static\",class=\"2xx\"} 5\n") != NULL,
			"plxd_requests_total");
	free(prom);

	/* A name that is no UTF-8 (a file named with Latin-1 bytes, or
	 * garbage) still gives UTF-8 in every format; UTF-8 is kept. */
	w.script = sc.path = "/inv\xff\xfe-\xc3\xa9-\xc0\xaf-\x1b.plx";
	json = status_render(&d, STATUS_JSON, &len);
	ok(strstr(json, "\"/inv\\ufffd\\ufffd-\xc3\xa9-\\ufffd\\ufffd-\\u001b.plx\"") != NULL,
			"JSON: bytes that are no UTF-8 become \\ufffd, an overlong form too; é is kept");
	free(json);
	prom = status_render(&d, STATUS_PROMETHEUS, &len);
	ok(strstr(prom, "script=\"/inv\xef\xbf\xbd\xef\xbf\xbd-\xc3\xa9-\xef\xbf\xbd\xef\xbf\xbd-\xef\xbf\xbd.plx\"")
					!= NULL,
			"Prometheus: the same bytes and ESC become U+FFFD");
	free(prom);
	html = status_render(&d, STATUS_HTML, &len);
	ok(strstr(html, "/inv\xef\xbf\xbd\xef\xbf\xbd-\xc3\xa9-") != NULL
					&& strstr(html, "\x1b") == NULL,
			"HTML: the same, and no control byte");
	free(html);

	/* The connection phases: idle is what is open and in neither. */
	w.script = "/slow.plx";
	w.script_us = 2500000;
	d.open = 3;
	d.sum.reading = 1;
	d.sum.writing = 1;
	json = status_render(&d, STATUS_JSON, &len);
	ok(strstr(json, "\"connections\":{\"open\":3,\"reading\":1,\"writing\":1,\"idle\":1}")
					!= NULL,
			"counters on: 3 open, 1 reading, 1 writing: 1 idle");
	ok(strstr(json, "\"script_running_ms\":2500") != NULL,
			"... a busy worker's time on its script");
	free(json);
	prom = status_render(&d, STATUS_PROMETHEUS, &len);
	ok(strstr(prom, "plxd_connections{state=\"idle\"} 1\n") != NULL
					&& strstr(prom, "plxd_worker_script_running_ms{") != NULL,
			"... in Prometheus too");
	free(prom);

	/* [status] counters = off: no phase is kept (reading and writing are
	 * 0), so idle cannot be told from open: every phase is left out, and
	 * so is a busy worker's time on its script (no start is noted), and in
	 * Prometheus, which has no counters flag, the request figures. */
	d.counters = 0;
	d.sum.reading = d.sum.writing = 0;
	d.sum.handlers[0].requests = 0;
	d.sum.handlers[0].by_class[2] = 0;
	w.script = NULL;
	w.script_us = 1700000000000; /* now - 0: no start noted */
	json = status_render(&d, STATUS_JSON, &len);
	ok(strstr(json,
			   "\"connections\":{\"open\":3,\"reading\":null,\"writing\":null,"
			   "\"idle\":null}")
					!= NULL,
			"counters off, JSON: open, and the phases null (not idle = open)");
	ok(strstr(json, "\"script_running_ms\":null") != NULL,
			"... a busy worker's time on its script: null");
	ok(strstr(json, "\"counters\":false") != NULL, "... and counters false");
	free(json);
	prom = status_render(&d, STATUS_PROMETHEUS, &len);
	ok(strstr(prom, "plxd_connections{state=\"open\"} 3\n") != NULL, "Prometheus: open");
	ok(strstr(prom, "state=\"idle\"") == NULL && strstr(prom, "state=\"reading\"") == NULL
					&& strstr(prom, "state=\"writing\"") == NULL,
			"... no phase");
	ok(strstr(prom, "plxd_requests_total") == NULL
					&& strstr(prom, "plxd_request_duration_us") == NULL,
			"... no request counters stuck at 0");
	ok(strstr(prom, "plxd_worker_requests{") != NULL
					&& strstr(prom, "plxd_worker_script_running_ms") == NULL,
			"... the workers, without their time on a script");
	free(prom);
	html = status_render(&d, STATUS_HTML, &len);
	ok(strstr(html, "<td class=n>3</td><td class=n>-</td><td class=n>-</td><td class=n>-</td>")
					!= NULL,
			"HTML: open, and - for the phases");
	ok(strstr(html, "<h2>Requests</h2>") == NULL, "... no table of requests not counted");
	ok(strstr(html, "<td class=n>1700000000</td>") == NULL, "... nor the worker's time");
	free(html);
	check_worker_series();
	return done_testing();
}
