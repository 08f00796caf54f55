/* Reads plxd.conf with libinih and validates it against the key tables of
 * [server] and of each handler. Every problem is collected, not just the
 * first, and each names file, line and key. */
#include "config.h"
#include "alloc.h"
#include "deny.h"
#include "handler.h"
#include "log.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef PLXD_DEFAULT_ROOT
#define PLXD_DEFAULT_ROOT "/usr/local/share/plxd/cgi-bin"
#endif

static const char *check_listen(const char *value);
static const char *check_log_level(const char *value);
static const char *check_status_path(const char *value);

#define SERVER_KEY(n, t, field, def, ...)                                            \
	{                                                                            \
		.name = n, .type = t, .offset = offsetof(struct server_conf, field), \
		.default_value = def, __VA_ARGS__                                    \
	}

/* clang-format off */
const struct conf_key server_keys[] = {
	SERVER_KEY("listen", CONF_STRING, listen, "127.0.0.1:8080", .check = check_listen,
		.flags = CONF_RESTART,
		.help = "address and port to accept connections on: `127.0.0.1:8080`, `[::1]:0`, "
			"`*:80` (port 0: any free port)",
		.tests = "integration/startup.t integration/config.t"),
	SERVER_KEY("master", CONF_BOOL, master, "yes", .flags = CONF_RESTART,
		.help = "run a master process that holds the listening socket and starts the serving "
			"process again when it dies (a crash costs the requests in flight only); "
			"`no` (or `--no-master`): one process, for debugging or a supervisor of "
			"its own",
		.tests = "integration/master.t"),
	SERVER_KEY("threads", CONF_UINT, threads, "0", .max = 256, .flags = CONF_RESTART,
		.help = "event threads that carry every connection; 0: one per CPU core",
		.tests = "integration/engine.t"),
	SERVER_KEY("root", CONF_PATH, root, PLXD_DEFAULT_ROOT,
		.help = "document root, served at /",
		.tests = "integration/static.t unit/test_resolve.c"),
	SERVER_KEY("user", CONF_STRING, user, "", .flags = CONF_RESTART,
		.help = "when started as root, switch to this user after binding (scripts run as it too)",
		.tests = "integration/privileges.t"),
	SERVER_KEY("follow_symlinks_outside", CONF_BOOL, follow_symlinks_outside, "no",
		.help = "serve files through symbolic links that lead outside root (otherwise 403)",
		.tests = "integration/attacks.t unit/test_resolve.c"),
	SERVER_KEY("stat_cache", CONF_BOOL, stat_cache, "yes",
		.help = "remember the files found under root, held open, until inotify reports a "
			"change to one of them or to a folder on their way, a second at most (as "
			"lighttpd's stat cache); what inotify misses (mmap writes, mounts, another "
			"machine's changes on a network file system) is seen within that second; "
			"`no` where a second is too long",
		.tests = "integration/static.t unit/test_resolve_cache.c"),
	SERVER_KEY("max_connections", CONF_UINT, max_connections, "512", .min = 1, .max = 65536,
		.flags = CONF_RESTART,
		.help = "open connections at most (an idle connection costs memory, not a thread); "
			"plxd raises its soft open-files limit to fit, and logs when the hard limit is lower",
		.limit = "a connection opened beyond it gets 503 with `Retry-After: 1` and is closed "
			"(up to 1/8 more, at least 16, are accepted just to say so; beyond that new "
			"sockets are closed unanswered); those already open are served on",
		.tests = "integration/limits.t integration/hostile.t integration/engine.t"),
	SERVER_KEY("per_ip_connections", CONF_UINT, per_ip_connections, "0", .max = 65536,
		.flags = CONF_RESTART,
		.help = "open connections at most from one client address, 0 for no limit; never "
			"applies to trusted_proxies",
		.limit = "a new connection from that address is held a quarter of a second (one "
			"its client closed may not be counted off yet), then, still over, closed "
			"unanswered and logged",
		.tests = "integration/limits.t"),
	SERVER_KEY("connection_timeout", CONF_DURATION, connection_timeout_ms, "30s",
		.min = 1000, .max = 3600 * 1000, .flags = CONF_RESTART,
		.help = "close a connection idle this long (keep-alive or a stalled client)",
		.limit = "the connection is closed; the timer restarts on every byte, so this alone "
			"bounds a slow reader, not a trickle",
		.tests = "integration/limits.t"),
	SERVER_KEY("header_timeout", CONF_DURATION, header_timeout_ms, "10s", .max = 3600 * 1000,
		.help = "close a connection whose request line and headers took longer than this, 0 "
			"for no limit (slow clients); counted from the connection's start or its "
			"previous request's end",
		.limit = "the connection is closed, however the bytes trickle in",
		.tests = "integration/limits.t integration/hostile.t"),
	SERVER_KEY("body_timeout", CONF_DURATION, body_timeout_ms, "20s", .max = 3600 * 1000,
		.help = "a request body must be in within this, extended by a second for each "
			"body_min_rate bytes received, as Apache's `RequestReadTimeout "
			"body=20,MinRate=500`; 0 for no limit (slow clients)",
		.limit = "the connection is closed and logged, and a CGI script reading the body is "
			"ended with it; a fast upload of any size is never cut",
		.tests = "integration/limits.t integration/cgi_body.t"),
	SERVER_KEY("body_min_rate", CONF_SIZE, body_min_rate, "500",
		.help = "bytes per second of request body that extend body_timeout; 0: the whole "
			"body within body_timeout",
		.tests = "integration/limits.t"),
	SERVER_KEY("max_header_size", CONF_SIZE, max_header_size, "8K", .min = 4096,
		.max = 1024 * 1024, .flags = CONF_RESTART,
		.help = "a request line and headers together at most (lighttpd's default); "
			"libmicrohttpd's memory for a connection is twice this, 64 bytes per "
			"max_header_fields and 3 KB, 32 KB at least, so a head at both limits "
			"fits, all cookie or not; above 32 KB that memory is mapped and "
			"unmapped for every connection",
		.limit = "served at the limit; one byte more: 414 when the request line is what "
			 "does not fit, else 431, and the connection closed",
		.tests = "integration/limits.t integration/attacks.t"),
	SERVER_KEY("max_header_fields", CONF_UINT, max_header_fields, "0", .max = 100000,
		.flags = CONF_RESTART,
		.help = "header lines, cookies and query parameters in one request head, "
			"together; 0: 25 for every KB of max_header_size, 200 at its default. "
			"libmicrohttpd keeps an entry of 64 bytes for each in the connection's "
			"memory, which grows by that much per entry allowed (Apache's "
			"LimitRequestFields counts header lines alone, 100). A chunked body's "
			"trailer lines count too. A head at both limits leaves a script about "
			"2.5 KB of that memory for its response's header block",
		.limit = "431 before the head is parsed, and the connection closed; behind a "
			 "request still being answered (pipelined), the connection is closed "
			 "after nothing more is read",
		.tests = "integration/limits.t unit/test_framing.c"),
	SERVER_KEY("max_body", CONF_SIZE, max_body, "64M",
		.help = "request body size at most; also what a CGI script may print while its "
			"request body is still arriving",
		.limit = "413 at once, and the connection closed, when Content-Length says so (any "
			"length up to 2^64 - 1); a chunked body that grows past it is answered 413 "
			"there and its connection closed, without reading the rest, logged",
		.tests = "integration/hostile.t integration/framing.t integration/cgi_body.t "
			 "integration/psgi_edges.t"),
	SERVER_KEY("shutdown_timeout", CONF_DURATION, shutdown_timeout_ms, "10s", .max = 3600 * 1000,
		.help = "on SIGTERM or SIGINT, wait this long for requests in flight to finish",
		.limit = "the connections of requests still running are closed, and plxd exits 0",
		.tests = "integration/logs_signals.t integration/cgi_limits.t"),
	SERVER_KEY("trusted_proxies", CONF_ADDRS, trusted_proxies, "",
		.help = "reverse proxies whose X-Forwarded-For and X-Forwarded-Proto are believed, "
			"and to which per_ip_connections never applies: IP addresses and CIDR ranges "
			"(`10.0.0.0/8`, `fd00::/8`) separated by spaces",
		.tests = "integration/balancer.t integration/cgi_env.t unit/test_addr.c unit/test_config.c"),
	SERVER_KEY("error_log", CONF_PATH, error_log, "-",
		.help = "error log file, `-` for stderr",
		.tests = "integration/logs_signals.t"),
	SERVER_KEY("access_log", CONF_PATH, access_log, "-",
		.help = "access log file (Combined Log Format plus microseconds), `-` for stderr, "
			"empty for none",
		.tests = "integration/logs_signals.t"),
	SERVER_KEY("log_level", CONF_STRING, log_level, "info", .check = check_log_level,
		.help = "error, warn, info or debug",
		.tests = "unit/test_config.c code:server/log.c"),
	SERVER_KEY("tmp_dir", CONF_PATH, tmp_dir, "/tmp",
		.help = "folder for request bodies too large to keep in memory (over 64 KiB), "
			"script output spooled before its response, and PLXD::Request's uploads",
		.tests = "integration/hostile.t integration/request_plx.t"),
	CONF_KEYS_END
};

#define STATUS_KEY(n, t, field, def, ...)                                            \
	{                                                                            \
		.name = n, .type = t, .offset = offsetof(struct status_conf, field), \
		.default_value = def, __VA_ARGS__                                    \
	}

const struct conf_key status_keys[] = {
	STATUS_KEY("path", CONF_STRING, path, "/plxd-status", .check = check_status_path,
		.help = "the URL path of plxd's status page (HTML; `?json` and `?prometheus` for "
			"the same figures as JSON and in Prometheus' text format), answered before "
			"any file of that name; empty for no page",
		.tests = "integration/status.t"),
	STATUS_KEY("allow", CONF_ADDRS, allow, "127.0.0.0/8 ::1",
		.help = "client addresses and CIDR ranges that may see the page, as for "
			"trusted_proxies; others get 404. From a trusted proxy, the client is the "
			"address X-Forwarded-For names, as for REMOTE_ADDR",
		.tests = "integration/status.t"),
	STATUS_KEY("counters", CONF_BOOL, counters, "on", .flags = CONF_RESTART,
		.help = "count requests, latencies, connection phases and per-script figures for "
			"the page; off leaves it the workers and the CGI children (to measure what "
			"counting costs: `bench/run --status-cost`)",
		.tests = "integration/status.t"),
	CONF_KEYS_END
};
/* clang-format on */

static const char *check_status_path(const char *value)
{
	if (value[0] && (value[0] != '/' || strpbrk(value, "?#% \t")))
		return "expected a path that starts with / (no query, no %-escapes), or nothing";
	return NULL;
}

int config_parse_listen(const char *text, char *host, size_t hostlen, unsigned *port)
{
	const char *colon;
	const char *h = text;
	size_t hlen;
	if (text[0] == '[') {
		const char *close = strchr(text, ']');
		if (!close || close[1] != ':')
			return -1;
		h = text + 1;
		hlen = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(text, ':');
		if (!colon)
			return -1;
		hlen = (size_t)(colon - text);
		if (memchr(text, ':', hlen))
			return -1; /* an IPv6 address needs brackets */
	}
	if (hlen + 1 > hostlen)
		return -1;
	if (hlen == 1 && h[0] == '*')
		hlen = 0;
	memcpy(host, h, hlen);
	host[hlen] = '\0';

	unsigned long long p;
	const char *digits = colon + 1;
	if (*digits == '\0' || strspn(digits, "0123456789") != strlen(digits)
			|| conf_parse_size(digits, &p) < 0 || p > 65535)
		return -1;
	if (hlen) {
		unsigned char buf[sizeof(struct in6_addr)];
		if (inet_pton(AF_INET, host, buf) != 1 && inet_pton(AF_INET6, host, buf) != 1)
			return -1;
	}
	*port = (unsigned)p;
	return 0;
}

static const char *check_listen(const char *value)
{
	char host[INET6_ADDRSTRLEN];
	unsigned port;
	if (config_parse_listen(value, host, sizeof host, &port) < 0)
		return "expected ADDRESS:PORT, such as 127.0.0.1:8080, [::1]:8080 or *:8080";
	return NULL;
}

static const char *check_log_level(const char *value)
{
	enum log_level level;
	return log_level_parse(value, &level) < 0 ? "expected error, warn, info or debug" : NULL;
}

/* ---- reading the file ---------------------------------------------------- */

struct entry {
	char *section;
	char *key;
	char *value;
	unsigned line;      /* 0 for the command line */
	const char *origin; /* the command-line option, or NULL */
	int used;
};

struct section_line {
	char *name;
	unsigned line;
};

struct parse {
	const char *file;
	FILE *stream;
	unsigned line;
	struct entry *entries;
	size_t nentries;
	struct section_line *sections;
	size_t nsections;
	char *errors;
	size_t nerrors;
	char *warnings;
	char *line_buf;
	size_t line_cap;
	size_t *route_sections; /* index into config->handlers, per route */
};

/* Appends a line made from fmt to *text, a string of lines or NULL. */
static void append_line(char **text, const char *fmt, va_list ap)
{
	char *msg;
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	char *joined = xasprintf("%s%s%s", *text ? *text : "", *text ? "\n" : "", msg ? msg : "?");
	free(msg);
	free(*text);
	*text = joined;
}

static void add_error(struct parse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_error(struct parse *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	append_line(&p->errors, fmt, ap);
	va_end(ap);
	p->nerrors++;
}

static void add_warning(struct parse *p, const char *fmt, ...)
		__attribute__((format(printf, 2, 3)));
static void add_warning(struct parse *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	append_line(&p->warnings, fmt, ap);
	va_end(ap);
}

/* Where an entry came from, for messages: "conf/plxd.conf:12" or "--listen". */
static void entry_error(struct parse *p, const struct entry *e, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));
static void entry_error(struct parse *p, const struct entry *e, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (e->origin)
		add_error(p, "%s: %s", e->origin, msg);
	else
		add_error(p, "%s:%u: [%s] %s: %s", p->file, e->line, e->section, e->key, msg);
}

/* libinih's reader, fed one line per call so that libinih's line numbers
 * and ours agree. It also rejects what libinih would silently accept:
 * indented lines (libinih joins them to the previous value) and lines too
 * long for libinih's buffer (it would split them in two). */
static char *read_line(char *str, int num, void *stream)
{
	struct parse *p = stream;
	ssize_t len = getline(&p->line_buf, &p->line_cap, p->stream);
	if (len < 0)
		return NULL;
	p->line++;
	char *text = p->line_buf;
	while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
		text[--len] = '\0';
	size_t lead = strspn(text, " \t");
	char first = text[lead];
	int blank_or_comment = first == '\0' || first == ';' || first == '#';

	if (len >= num - 1) {
		add_error(p, "%s:%u: line is longer than %d characters", p->file, p->line, num - 2);
		text = "";
	} else if (lead > 0 && !blank_or_comment) {
		add_error(p,
				"%s:%u: indented line: continuation lines are not supported, "
				"write each key on its own line from the first column",
				p->file, p->line);
		text = "";
	} else if (first == '[') {
		char *close = strchr(text, ']');
		if (close) {
			p->sections = xrealloc(p->sections,
					(p->nsections + 1) * sizeof *p->sections);
			p->sections[p->nsections].name =
					xstrndup(text + 1, (size_t)(close - text - 1));
			p->sections[p->nsections].line = p->line;
			p->nsections++;
		}
	}
	snprintf(str, (size_t)num, "%s\n", text);
	return str;
}

static int on_value(void *user, const char *section, const char *key, const char *value)
{
	struct parse *p = user;
	p->entries = xrealloc(p->entries, (p->nentries + 1) * sizeof *p->entries);
	p->entries[p->nentries++] = (struct entry){
		.section = xstrdup(section),
		.key = xstrdup(key),
		.value = xstrdup(value),
		.line = p->line,
	};
	return 1;
}

static void read_file(struct parse *p)
{
	p->stream = fopen(p->file, "re");
	if (!p->stream) {
		add_error(p, "%s: cannot open: %s", p->file, strerror(errno));
		return;
	}
	int bad_line = ini_parse_stream(read_line, p, on_value, p);
	if (bad_line > 0)
		add_error(p, "%s:%d: syntax error: expected [section], key = value or a comment",
				p->file, bad_line);
	fclose(p->stream);
	p->stream = NULL;
}

/* ---- building the config ------------------------------------------------- */

/* Sections of plxd's own, as opposed to a handler's. */
static int is_key_section(const char *name)
{
	return strcmp(name, "server") == 0 || strcmp(name, "handlers") == 0
			|| strcmp(name, "mount") == 0 || strcmp(name, "request") == 0
			|| strcmp(name, "status") == 0;
}

static int same_key(const struct entry *a, const struct entry *b)
{
	if (strcmp(a->section, b->section) != 0)
		return 0;
	/* Extensions match without regard to case, so they collide that way. */
	if (strcmp(a->section, "handlers") == 0)
		return strcasecmp(a->key, b->key) == 0;
	return strcmp(a->key, b->key) == 0;
}

static void reject_duplicates(struct parse *p)
{
	for (size_t i = 0; i < p->nentries; i++) {
		for (size_t j = 0; j < i; j++) {
			if (!p->entries[i].origin && !p->entries[j].origin
					&& same_key(&p->entries[i], &p->entries[j])) {
				entry_error(p, &p->entries[i],
						"duplicate key (first set on line %u)",
						p->entries[j].line);
				p->entries[i].used = 1;
				break;
			}
		}
	}
}

/* The last entry for section/key, so that command-line values win. */
static const struct entry *last_entry(struct parse *p, const char *section, const char *key)
{
	const struct entry *found = NULL;
	for (size_t i = 0; i < p->nentries; i++)
		if (strcmp(p->entries[i].section, section) == 0
				&& strcmp(p->entries[i].key, key) == 0)
			found = &p->entries[i];
	return found;
}

static struct handler_section *find_section(struct config *c, const char *name)
{
	for (size_t i = 0; i < c->nhandlers; i++)
		if (strcmp(c->handlers[i].name, name) == 0)
			return &c->handlers[i];
	return NULL;
}

/* Adds the section for handler name with its defaults, or returns the one
 * already there. Returns NULL after an error when there is no such handler. */
static struct handler_section *add_section(struct parse *p, struct config *c, const char *name,
		const char *base_dir, config_find_fn *find, void *ctx, const char *why_needed)
{
	struct handler_section *s = find_section(c, name);
	if (s)
		return s;
	const struct entry *load = last_entry(p, name, "load");
	char err[512] = "";
	/* [perl:thread] is an instance of the perl handler. */
	const char *colon = strchr(name, ':');
	char *module = xstrndup(name, colon ? (size_t)(colon - name) : strlen(name));
	const struct plxd_handler *h = colon && (!colon[1] || strchr(colon + 1, ':'))
			? NULL
			: find(module, load ? load->value : NULL, err, sizeof err, ctx);
	if (!h && colon && !err[0])
		snprintf(err, sizeof err, "an instance is named HANDLER:NAME");
	free(module);
	if (!h) {
		add_error(p, "%s: %s", why_needed, err[0] ? err : "no such handler");
		return NULL;
	}
	/* The array only grows before routes point into it (see config_load). */
	c->handlers = xrealloc(c->handlers, (c->nhandlers + 1) * sizeof *c->handlers);
	s = &c->handlers[c->nhandlers++];
	*s = (struct handler_section){ .name = xstrdup(name),
		.handler = h,
		.conf = xcalloc(1, h->conf_size),
		.load = load ? xstrdup(load->value) : NULL };
	if (conf_section_defaults(h->keys, s->conf, base_dir, err, sizeof err) < 0)
		add_error(p, "handler %s: bad default: %s", name, err);
	return s;
}

/* Whether e, which sets key under an old name, repeats a key the file
 * already set under its other name (reported as a duplicate, like the same
 * name twice: which one would win is not obvious to a reader). */
static int renamed_twice(struct parse *p, struct entry *e, const struct conf_key *key,
		const struct conf_key *keys)
{
	for (struct entry *o = p->entries; o < p->entries + p->nentries; o++) {
		if (o == e || o->origin || e->origin || strcmp(o->section, e->section) != 0
				|| strcmp(o->key, e->key) == 0
				|| conf_key_find(keys, o->key) != key)
			continue;
		struct entry *later = o->line > e->line ? o : e, *first = later == o ? e : o;
		entry_error(p, later,
				"duplicate key (first set on line %u as %s; %s is the old name of %s)",
				first->line, first->key, e->key, key->name);
		return 1;
	}
	return 0;
}

static void set_values(struct parse *p, const char *section, const struct conf_key *keys,
		void *target, const char *base_dir)
{
	for (size_t i = 0; i < p->nentries; i++) {
		struct entry *e = &p->entries[i];
		if (e->used || strcmp(e->section, section) != 0)
			continue;
		e->used = 1;
		if (!is_key_section(section) && strcmp(e->key, "load") == 0)
			continue;
		const struct conf_key *key = conf_key_find(keys, e->key);
		if (!key) {
			entry_error(p, e,
					"unknown key (plxd --help lists the keys of each section)");
			continue;
		}
		if (strcmp(key->name, e->key) != 0 && !renamed_twice(p, e, key, keys)) {
			if (e->origin)
				add_warning(p, "%s: [%s] %s is deprecated: it is now called %s",
						e->origin, section, e->key, key->name);
			else
				add_warning(p, "%s:%u: [%s] %s is deprecated: it is now called %s",
						p->file, e->line, section, e->key, key->name);
		}
		char err[512];
		char cwd[PATH_MAX];
		const char *dir = base_dir;
		if (e->origin) /* command-line paths are relative to where plxd was started */
			dir = getcwd(cwd, sizeof cwd) ? cwd : ".";
		if (conf_key_set(key, target, e->value, dir, err, sizeof err) < 0)
			entry_error(p, e, "%s", err);
	}
}

static int valid_extension(const char *ext)
{
	if (ext[0] != '.' || ext[1] == '\0')
		return 0;
	for (const char *s = ext + 1; *s; s++)
		if (*s == '/' || *s == '\\' || *s == ' ')
			return 0;
	return 1;
}

/* A [mount] prefix: "/", or "/" and segments without a trailing '/',
 * none empty, "." or "..", no '%' (paths are matched decoded). */
static int valid_prefix(const char *s)
{
	if (s[0] != '/')
		return 0;
	if (s[1] == '\0')
		return 1;
	for (const char *seg = s + 1;;) {
		const char *end = strchr(seg, '/');
		size_t len = end ? (size_t)(end - seg) : strlen(seg);
		if (len == 0 || (len == 1 && seg[0] == '.')
				|| (len == 2 && seg[0] == '.' && seg[1] == '.')
				|| memchr(seg, '%', len))
			return 0;
		if (!end)
			return 1;
		seg = end + 1;
	}
}

static int by_prefix_length(const void *a, const void *b)
{
	const struct mount *x = a, *y = b;
	return (y->prefix_len > x->prefix_len) - (y->prefix_len < x->prefix_len);
}

/* [mount] lines, once the routes are final: each file must exist and be
 * routed to a handler other than static. A relative file is relative to
 * the configuration file's folder (the command line's: where plxd
 * started). */
static void add_mounts(struct parse *p, struct config *c, const char *base_dir)
{
	for (size_t i = 0; i < p->nentries; i++) {
		struct entry *e = &p->entries[i];
		if (e->used || strcmp(e->section, "mount") != 0)
			continue;
		e->used = 1;
		if (!valid_prefix(e->key)) {
			entry_error(p, e,
					"expected a URL prefix: /, or /a/b without a trailing /, "
					"dot segments or %%");
			continue;
		}
		char cwd[PATH_MAX];
		const char *dir = e->origin ? (getcwd(cwd, sizeof cwd) ? cwd : ".") : base_dir;
		char *file = e->value[0] == '/' ? xstrdup(e->value)
						: xasprintf("%s/%s", dir, e->value);
		struct stat st;
		const char *name = strrchr(file, '/') + 1;
		const struct handler_section *section = config_route(c, name);
		int bad = stat(file, &st) < 0 ? errno : 0;
		if (bad || !S_ISREG(st.st_mode)) {
			entry_error(p, e, "%s: %s", file,
					bad ? strerror(bad) : "not a regular file");
			free(file);
			continue;
		}
		if (section == c->fallback) {
			entry_error(p, e,
					"%s: no [handlers] line routes its extension to a handler "
					"(a PSGI application needs .psgi = perl)",
					file);
			free(file);
			continue;
		}
		c->mounts = xrealloc(c->mounts, (c->nmounts + 1) * sizeof *c->mounts);
		c->mounts[c->nmounts++] = (struct mount){
			.prefix = xstrdup(e->key),
			.prefix_len = strlen(e->key),
			.file = file,
			.name = name,
			.section = (struct handler_section *)section,
		};
	}
	if (c->nmounts > 1) /* qsort's array must not be NULL, even empty */
		qsort(c->mounts, c->nmounts, sizeof *c->mounts, by_prefix_length);
}

static void add_routes(struct parse *p, struct config *c, const char *base_dir,
		config_find_fn *find, void *ctx)
{
	for (size_t i = 0; i < p->nentries; i++) {
		struct entry *e = &p->entries[i];
		if (e->used || strcmp(e->section, "handlers") != 0)
			continue;
		e->used = 1;
		if (!valid_extension(e->key)) {
			entry_error(p, e, "expected a file extension with its dot, such as .pl");
			continue;
		}
		char why[512];
		snprintf(why, sizeof why, "%s:%u: [handlers] %s", p->file, e->line, e->key);
		struct handler_section *section =
				add_section(p, c, e->value, base_dir, find, ctx, why);
		if (!section)
			continue;
		c->routes = xrealloc(c->routes, (c->nroutes + 1) * sizeof *c->routes);
		struct route *r = &c->routes[c->nroutes++];
		r->ext = xstrdup(e->key);
		for (char *s = r->ext; *s; s++)
			*s = (char)tolower((unsigned char)*s);
		r->ext_len = strlen(r->ext);
		r->section = NULL; /* set once the handlers array stops moving */
		p->route_sections =
				xrealloc(p->route_sections, c->nroutes * sizeof *p->route_sections);
		p->route_sections[c->nroutes - 1] = (size_t)(section - c->handlers);
	}
}

static void parse_free(struct parse *p)
{
	for (size_t i = 0; i < p->nentries; i++) {
		free(p->entries[i].section);
		free(p->entries[i].key);
		free(p->entries[i].value);
	}
	free(p->entries);
	for (size_t i = 0; i < p->nsections; i++)
		free(p->sections[i].name);
	free(p->sections);
	free(p->line_buf);
	free(p->route_sections);
	free(p->errors);
	free(p->warnings);
}

/* [static] deny, as the static section's own row stores it: the key
 * belongs with the static handler's other keys, but routing applies it
 * to every request, so that no handler serves a denied name. */
static const char *fallback_deny(const struct config *c)
{
	if (!c->fallback)
		return "";
	const struct conf_key *key = conf_key_find(c->fallback->handler->keys, "deny");
	if (!key || key->type != CONF_LIST)
		return "";
	const char *text = *(
			char *const *)(const void *)((const char *)c->fallback->conf + key->offset);
	return text ? text : "";
}

struct config *config_load(const char *file, const struct config_override *overrides,
		size_t noverrides, config_find_fn *find, void *ctx, char **errors)
{
	struct parse p = { .file = file ? file : "(no configuration file)" };
	struct config *c = xcalloc(1, sizeof *c);
	c->file = xstrdup(p.file);

	/* Relative paths in the file are relative to its folder, made absolute
	 * here: handlers change directory (a CGI child runs in its script's
	 * folder), so a relative root would name another place there. */
	char base_dir[PATH_MAX] = ".";
	char cwd[PATH_MAX];
	if (file) {
		char *copy = xstrdup(file);
		snprintf(base_dir, sizeof base_dir, "%s", dirname(copy));
		free(copy);
		read_file(&p);
	}
	if (base_dir[0] != '/' && getcwd(cwd, sizeof cwd)) {
		char *joined = strcmp(base_dir, ".") == 0 ? xstrdup(cwd)
							  : xasprintf("%s/%s", cwd, base_dir);
		snprintf(base_dir, sizeof base_dir, "%s", joined);
		free(joined);
	}
	for (size_t i = 0; i < noverrides; i++) {
		p.entries = xrealloc(p.entries, (p.nentries + 1) * sizeof *p.entries);
		p.entries[p.nentries++] = (struct entry){
			.section = xstrdup(overrides[i].section),
			.key = xstrdup(overrides[i].key),
			.value = xstrdup(overrides[i].value),
			.origin = overrides[i].origin,
		};
	}
	reject_duplicates(&p);

	char err[512];
	if (conf_section_defaults(server_keys, &c->server, base_dir, err, sizeof err) < 0)
		add_error(&p, "[server]: bad default: %s", err);
	/* Command-line overrides come last, so conf_key_set's later call wins;
	 * set_values walks entries in order. */
	set_values(&p, "server", server_keys, &c->server, base_dir);
	req_limits_defaults(&c->request);
	set_values(&p, "request", req_limits_keys, &c->request, base_dir);
	if (conf_section_defaults(status_keys, &c->status, base_dir, err, sizeof err) < 0)
		add_error(&p, "[status]: bad default: %s", err);
	set_values(&p, "status", status_keys, &c->status, base_dir);

	/* Handler sections: every section named in the file, then every handler
	 * [handlers] names, then the static fallback. */
	for (size_t i = 0; i < p.nsections; i++) {
		const char *name = p.sections[i].name;
		if (is_key_section(name) || find_section(c, name))
			continue;
		char why[512];
		snprintf(why, sizeof why, "%s:%u: [%s]: unknown section", p.file,
				p.sections[i].line, name);
		add_section(&p, c, name, base_dir, find, ctx, why);
	}
	add_routes(&p, c, base_dir, find, ctx);
	add_section(&p, c, "static", base_dir, find, ctx, "the static handler");
	for (size_t i = 0; i < c->nhandlers; i++)
		set_values(&p, c->handlers[i].name, c->handlers[i].handler->keys,
				c->handlers[i].conf, base_dir);

	/* Routes point into the handlers array only now that it has stopped
	 * growing. */
	for (size_t i = 0; i < c->nroutes; i++)
		c->routes[i].section = &c->handlers[p.route_sections[i]];
	c->fallback = find_section(c, "static");
	c->deny = deny_create(fallback_deny(c));
	add_mounts(&p, c, base_dir);

	/* Entries not consumed belong to sections no handler claimed: already
	 * reported as unknown sections, or given on the command line. */
	for (size_t i = 0; i < p.nentries; i++)
		if (!p.entries[i].used && p.entries[i].origin)
			entry_error(&p, &p.entries[i], "unknown setting [%s] %s",
					p.entries[i].section, p.entries[i].key);

	if (p.nerrors) {
		*errors = p.errors;
		p.errors = NULL;
		parse_free(&p);
		config_free(c);
		return NULL;
	}
	*errors = NULL;
	c->warnings = p.warnings;
	p.warnings = NULL;
	parse_free(&p);
	return c;
}

void config_free(struct config *c)
{
	if (!c)
		return;
	conf_section_free(server_keys, &c->server);
	conf_section_free(status_keys, &c->status);
	for (size_t i = 0; i < c->nhandlers; i++) {
		conf_section_free(c->handlers[i].handler->keys, c->handlers[i].conf);
		free(c->handlers[i].conf);
		free(c->handlers[i].load);
		free(c->handlers[i].name);
	}
	free(c->handlers);
	for (size_t i = 0; i < c->nroutes; i++)
		free(c->routes[i].ext);
	free(c->routes);
	for (size_t i = 0; i < c->nmounts; i++) {
		free(c->mounts[i].prefix);
		free(c->mounts[i].file);
	}
	free(c->mounts);
	deny_destroy(c->deny);
	free(c->warnings);
	free(c->file);
	free(c);
}

const struct handler_section *config_route(const struct config *c, const char *name)
{
	size_t len = strlen(name);
	for (size_t i = 0; i < c->nroutes; i++) {
		const struct route *r = &c->routes[i];
		if (len > r->ext_len && strcasecmp(name + len - r->ext_len, r->ext) == 0)
			return r->section;
	}
	return c->fallback;
}

const struct mount *config_mount(const struct config *c, const char *path)
{
	for (size_t i = 0; i < c->nmounts; i++) {
		const struct mount *m = &c->mounts[i];
		if (m->prefix_len == 1
				|| (strncmp(path, m->prefix, m->prefix_len) == 0
						&& (path[m->prefix_len] == '/'
								|| path[m->prefix_len] == '\0')))
			return m;
	}
	return NULL;
}

int config_bare_extension(const struct config *c, const char *name)
{
	for (size_t i = 0; i < c->nroutes; i++)
		if (strcasecmp(name, c->routes[i].ext) == 0)
			return 1;
	return 0;
}
