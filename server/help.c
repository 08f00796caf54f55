/* --help in each of its forms (help.h): text, Markdown, plxd(8), plxd.conf(5).
 *
 * Every string below, and every key table's help and limit, may hold
 * `code` spans: Markdown keeps them, a man page makes them bold, text drops
 * the backticks. "@CONFIG@" is the default configuration file. A key's
 * tests (conf_key.h) appear only in Markdown, as the table's last column,
 * which tests/doc_claims reads like any claim's test. Strings are ASCII, so
 * that groff reads the man pages as they are. */
#include "help.h"
#include "config.h"
#include "handler.h"
#include "modules.h"
#include "req_limits.h"
#include "version.h"

#include <stdlib.h>
#include <string.h>

#ifndef PLXD_DEFAULT_CONFIG
#define PLXD_DEFAULT_CONFIG "/usr/local/etc/plxd/plxd.conf"
#endif
#ifndef PLXD_MODULE_DIR
#define PLXD_MODULE_DIR "/usr/local/lib/plxd"
#endif
#ifndef PLXD_DEFAULT_ROOT
#define PLXD_DEFAULT_ROOT "/usr/local/share/plxd/cgi-bin"
#endif
/* The same paths as doc/configuration.md writes them, whatever the prefix
 * of this build: the page describes every build. */
#ifndef PLXD_DOC_CONFIG
#define PLXD_DOC_CONFIG "PREFIX/etc/plxd/plxd.conf"
#endif
#ifndef PLXD_DOC_MODULE_DIR
#define PLXD_DOC_MODULE_DIR "PREFIX/lib/plxd"
#endif
#ifndef PLXD_DOC_ROOT
#define PLXD_DOC_ROOT "PREFIX/share/plxd/cgi-bin"
#endif
/* Plack::Handler::Plxd, installed where perl looks under the prefix. */
#ifndef PLXD_PLACKUP_HANDLER
#define PLXD_PLACKUP_HANDLER "/usr/local/share/perl/5.36.0/Plack/Handler/Plxd.pm"
#endif

struct out {
	FILE *f;
	enum help_format format;
	int in_cell; /* Markdown table cell: '|' is escaped */
};

static void put_text(struct out *o, const char *s);
static void put_paragraph(struct out *o, const char *s);
static void put_path(struct out *o, const char *real, const char *doc);
static void print_text(FILE *f);
static void print_markdown(FILE *f);
static void print_man8(FILE *f);
static void print_man5(FILE *f);

/* ---- what is said -------------------------------------------------------- */

struct help_option {
	char shortopt; /* 0: none */
	const char *longopt;
	const char *arg; /* NULL: none; "[=FORMAT]": optional */
	const char *help;
	const char *tests;
};

/* The options main.c's getopt table takes, in the same order. */
/* clang-format off */
static const struct help_option options[] = {
	{ 'c', "config", "FILE",
	  "the configuration file (default: the one installed with this plxd, looked for from "
	  "its own folder first, then `@CONFIG@`); when there is none, every key has its "
	  "default and `[handlers]` is empty",
	  "integration/startup.t integration/install.t" },
	{ 'l', "listen", "ADDR:PORT",
	  "the address to listen on, over `[server] listen`: `127.0.0.1:8080`, `[::1]:8080`, "
	  "`*:8080`; port 0 picks a free port",
	  "integration/startup.t" },
	{ 'r', "root", "DIR",
	  "the document root, over `[server] root`; a relative DIR is relative to the current "
	  "folder",
	  "integration/startup.t" },
	{ 'a', "app", "FILE",
	  "serve the PSGI application FILE at `/` for every path, as `plackup FILE` does "
	  "(`[mount]` `/ = FILE`); without `--config` no configuration file is read, "
	  "`.psgi = perl` is the one handler line and FILE's folder is the root",
	  "integration/psgi_mount.t" },
	{ 0, "check", NULL,
	  "validate the configuration, and that the document root opens, then exit: 0 after "
	  "printing `plxd: FILE: configuration OK`, 1 after printing every mistake",
	  "integration/config.t" },
	{ 0, "no-master", NULL,
	  "run without the master process, over `[server] master`: one process serves, and a "
	  "crash ends it (for debugging, or under a supervisor that restarts it)",
	  "integration/master.t" },
	{ 'V', "version", NULL,
	  "print the version, the git revision and the handler interface version, and exit",
	  "integration/cli.t" },
	{ 'h', "help", "[=FORMAT]",
	  "print the options and every key of every section, and exit; FORMAT `markdown` prints "
	  "doc/configuration.md, `man8` the page plxd(8), `man5` the page plxd.conf(5)",
	  "integration/cli.t integration/install.t" },
};
/* clang-format on */

/* clang-format off */
static const char *const description[] = {
	"plxd is a small web server that runs Perl scripts two ways: `.pl` and `.cgi` files as "
	"classic CGI (RFC 3875), a new process for every request, and `.plx` files in persistent "
	"worker processes, each with an embedded Perl interpreter that keeps every script "
	"compiled between requests. Every other file under the document root is served as a "
	"static file.",
	"plxd reads its configuration, binds its address (or takes the socket systemd passes, "
	"`LISTEN_FDS`), opens its logs, becomes `[server] user` when started as root, starts its "
	"handlers and, once it accepts connections, prints one line to standard output: "
	"`listening on http://ADDRESS:PORT/`.",
	"plxd runs as two processes: a master, which holds the listening socket and does "
	"nothing else, and the serving process it starts, which runs the handlers and serves. "
	"When the serving process dies, the master logs why and starts another on the same "
	"socket: only the requests in flight are lost. Under systemd (`Type=notify`) the master "
	"sends `READY=1`, `RELOADING=1`, `STOPPING=1` and `WATCHDOG=1`.",
	NULL
};
/* clang-format on */

struct help_signal {
	const char *name;
	const char *help;
	const char *tests;
};

/* clang-format off */
static const struct help_signal signals[] = {
	{ "`SIGHUP`",
	  "reopen both logs (after a rotation), read the configuration again and apply it to the "
	  "requests that start after it: requests in flight finish with the configuration they "
	  "started with, and none is refused or cut. A new configuration that is invalid is "
	  "logged line by line and the running one kept; a changed key that needs a restart is "
	  "logged and keeps its running value. The Perl handler replaces its workers with a "
	  "new generation one at a time, each old one serving until its replacement is ready; "
	  "CGI settings apply from the next script started.",
	  "integration/logs_signals.t integration/reload_load.t integration/perl_reload.t" },
	{ "`SIGTERM`, `SIGINT`",
	  "stop gracefully: no new connections; requests in flight get `[server] "
	  "shutdown_timeout` to finish, then their connections are closed; the handlers stop "
	  "and plxd exits 0 (the master, with the serving process's exit status).",
	  "integration/logs_signals.t integration/master.t" },
	{ "`SIGPIPE`",
	  "ignored: a client or a script that goes away is an EPIPE error, never the end of plxd.",
	  "code:server/main.c" },
};
/* clang-format on */

/* clang-format off */
static const char *const exit_status[] = {
	"0 after a graceful stop, and for `--check` with a valid configuration, `--help` and "
	"`--version`; 1 for an invalid configuration, a bad option, or a start that failed "
	"(the address in use, a handler that could not start), after saying why on standard "
	"error or in the error log. A serving process that dies of a signal while stopping "
	"ends the master with 128 + the signal's number.",
	NULL
};
/* clang-format on */

/* clang-format off */
static const char *const file_format[] = {
	"The configuration is an INI file, read with libinih: a `[section]` line starts a "
	"section, each `key = value` line sets a key, and lines that start with `;` or `#` are "
	"comments. `conf/plxd.conf` in the source tree, installed as the default configuration, "
	"is a commented example.",
	"`[server]` and `[request]` are plxd's own sections. `[handlers]` maps file extensions "
	"to handlers. Each handler has a section of its own, named after it, with its keys and, "
	"for a handler that is a module, `load`. A handler's section is checked even when no "
	"extension maps to it.",
	"A relative path is relative to the configuration file's folder (on the command line, "
	"to the current folder). A size is a number of bytes, or a number followed by `K`, `M` "
	"or `G` (times 1024, 1024^2, 1024^3). A duration is a number followed by `ms`, `s`, `m` "
	"or `h`; a bare number is seconds. A yes|no value is `yes`, `on`, `true` or `1`, or "
	"`no`, `off`, `false` or `0`. A number is decimal digits only. A value that does not "
	"parse whole, or falls outside its key's range, is an error.",
	"Every mistake stops plxd before it serves anything (on a reload, the running "
	"configuration is kept) and names the file, the line and the key: an unknown section "
	"or key, a value of the wrong type or out of range, a duplicate key, an indented line "
	"(libinih would join it to the previous value), a line too long, a file that cannot be "
	"opened. `plxd --check` reports them all without starting.",
	"A renamed key keeps working under its old name, with a warning that names the file, "
	"the line, the old and the new name (in the error log at start-up and on each reload, "
	"on standard error with `--check`); setting both names is a duplicate key.",
	"Without a configuration file every key has its default and `[handlers]` is empty: "
	"every file is then a static file, scripts included.",
	NULL
};
/* clang-format on */

/* clang-format off */
static const char *const reading_tables[] = {
	"Each section below lists its keys with their type (and range), their default, and "
	"what a reload (SIGHUP) does with a new value: `applies` (to the requests that start "
	"after it) or `restart` (the change is logged and waits for a restart). The last "
	"column names the tests that check what the row says, or, as `code: FILE`, the file "
	"it was read against where no test checks it.",
	NULL
};
/* clang-format on */

/* Sections of plxd's own, before [handlers] and the handlers' sections
 * (which come from the handler registry). A new section of plxd's own is
 * one more row here, besides its table and config.c's is_key_section. */
struct help_section {
	const char *name;
	const struct conf_key *keys;
	const char *about;
};

/* clang-format off */
static const struct help_section core_sections[] = {
	{ "server", server_keys,
	  "The address plxd listens on, the document root, the connection and request limits, "
	  "the logs, and the user plxd runs as." },
	{ "request", req_limits_keys,
	  "The limits of PLXD::Request, the request object of `.pl` and `.plx` scripts. Scripts "
	  "get them in their environment as `PLXD_REQUEST_MAX_FIELDS`, "
	  "`PLXD_REQUEST_MAX_FIELD_SIZE`, `PLXD_REQUEST_MAX_UPLOAD_SIZE` and "
	  "`PLXD_REQUEST_MAX_TOTAL`, with `PLXD_REQUEST_TMPDIR` set to `[server] tmp_dir`; a "
	  "script run outside plxd gets the defaults. A request over one gets a 400 that names "
	  "the problem." },
	{ "status", status_keys,
	  "plxd's status page: uptime, connections, requests by handler and status class, "
	  "latency percentiles, CGI children, each Perl worker and each persistent script, as "
	  "HTML, JSON or Prometheus text (`doc/status.md`)." },
};
/* clang-format on */

static const char handlers_about[] =
		"Each line maps a file extension to a handler. The extension is matched against the "
		"name of the file a request's path resolves to, in any case (`/X.PL` runs `X.PL`, "
		"never sends it); a file whose extension no line names is served by the built-in "
		"static handler. A handler other than static is a module, `NAME.so`, looked for in "
		"`modules/` beside the plxd binary (a build tree), then in the installed module "
		"folder; `load = PATH` in its section names the file instead. `HANDLER:NAME` is "
		"another instance of a handler, with a `[HANDLER:NAME]` section of its own: started "
		"apart, with settings and state of its own (`.plz = perl:other` runs a second perl "
		"pool beside `[perl]`'s).";

static const char mount_about[] =
		"Each line serves one file for every path under a URL prefix, whatever the "
		"document root holds there: `/ = app.psgi` serves a PSGI application at `/` with "
		"`SCRIPT_NAME` `''`, `/api = /srv/api/app.psgi` at `/api` (`/api` and `/api/...`, "
		"not `/apix`) with `SCRIPT_NAME` `/api` and `PATH_INFO` the rest (`doc/psgi.md`). "
		"The longest prefix wins; the status page's path is never a mount's. A relative "
		"FILE is relative to the configuration file's folder. FILE must exist, and its "
		"extension be routed by `[handlers]` to a handler other than static.";

/* ---- inline markup ------------------------------------------------------- */

/* One character of text, escaped for the format. code: inside `...`. */
static void put_char(struct out *o, char c, int code)
{
	switch (o->format) {
	case HELP_MAN8:
	case HELP_MAN5:
		if (c == '\\')
			fputs("\\e", o->f);
		else if (c == '-' && code)
			fputs("\\-", o->f);
		else
			fputc(c, o->f);
		return;
	case HELP_MARKDOWN:
		if (c == '|' && o->in_cell)
			fputs("\\|", o->f);
		else
			fputc(c, o->f);
		return;
	case HELP_TEXT:
		fputc(c, o->f);
		return;
	}
}

static void put_text(struct out *o, const char *s)
{
	int code = 0;
	for (; *s; s++) {
		if (*s == '`') {
			code = !code;
			if (o->format == HELP_MARKDOWN)
				fputc('`', o->f);
			else if (o->format != HELP_TEXT)
				fputs(code ? "\\fB" : "\\fR", o->f);
			continue;
		}
		if (strncmp(s, "@CONFIG@", 8) == 0) {
			const char *path = o->format == HELP_MARKDOWN ? PLXD_DOC_CONFIG
								      : PLXD_DEFAULT_CONFIG;
			for (const char *c = path; *c; c++)
				put_char(o, *c, code);
			s += 7;
			continue;
		}
		put_char(o, *s, code);
	}
	if (code && o->format != HELP_TEXT && o->format != HELP_MARKDOWN)
		fputs("\\fR", o->f);
}

/* s as a literal value: `s` in Markdown, bold in a man page. */
static void put_code(struct out *o, const char *s)
{
	int man = o->format == HELP_MAN8 || o->format == HELP_MAN5;
	fputs(man ? "\\fB" : o->format == HELP_MARKDOWN ? "`" : "", o->f);
	for (; *s; s++)
		put_char(o, *s, 1);
	fputs(man ? "\\fR" : o->format == HELP_MARKDOWN ? "`" : "", o->f);
}

/* A man page line must not start with a control character. */
static void man_line_start(struct out *o, const char *s)
{
	if (s[0] == '.' || s[0] == '\'')
		fputs("\\&", o->f);
}

/* Markdown: s rendered, then wrapped at 96 columns, never before a word
 * that would start a list, a heading, a quote or a table at a line's start.
 * Man: one line; roff fills it. */
static void put_paragraph(struct out *o, const char *s)
{
	if (o->format != HELP_MARKDOWN) {
		man_line_start(o, s);
		put_text(o, s);
		fputc('\n', o->f);
		return;
	}
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	if (!mem)
		return;
	struct out m = { .f = mem, .format = o->format };
	put_text(&m, s);
	fclose(mem);
	size_t col = 0;
	for (char *p = buf; *p;) {
		size_t n = strcspn(p, " ");
		int risky = strchr("-+*#>|=<", p[0]) != NULL
				|| (p[0] >= '0' && p[0] <= '9'
						&& (p[strspn(p, "0123456789")] == '.'
								|| p[strspn(p, "0123456789")]
										== ')'));
		if (col && col + 1 + n > 96 && !risky) {
			fputc('\n', o->f);
			col = 0;
		} else if (col) {
			fputc(' ', o->f);
			col++;
		}
		fwrite(p, 1, n, o->f);
		col += n;
		p += n;
		p += strspn(p, " ");
	}
	fputc('\n', o->f);
	free(buf);
}

static void put_paragraphs(struct out *o, const char *const *paragraphs)
{
	for (const char *const *p = paragraphs; *p; p++) {
		if (o->format == HELP_MARKDOWN && p != paragraphs)
			fputc('\n', o->f);
		else if (o->format != HELP_MARKDOWN)
			fputs(".PP\n", o->f);
		put_paragraph(o, *p);
	}
}

/* A path compiled in: as it is in man pages and --help, as every build has
 * it in Markdown. */
static void put_path(struct out *o, const char *real, const char *doc)
{
	fputs(o->format == HELP_MARKDOWN ? doc : real, o->f);
}

/* The Markdown form of a key's default: the installed root as every build
 * has it. */
static const char *doc_value(enum help_format format, const char *value)
{
	if (format == HELP_MARKDOWN && strcmp(value, PLXD_DEFAULT_ROOT) == 0)
		return PLXD_DOC_ROOT;
	return value;
}

/* "(test: ...)" links in a table cell: tests paths, or code:FILE. */
static void put_tests_cell(struct out *o, const char *tests)
{
	const char *p = tests ? tests : "";
	int first = 1;
	while (*p) {
		p += strspn(p, " ");
		size_t n = strcspn(p, " ");
		if (!n)
			break;
		const char *base = p;
		for (const char *q = p; q < p + n; q++)
			if (*q == '/')
				base = q + 1;
		if (strncmp(p, "code:", 5) == 0)
			fprintf(o->f, "%scode: [%.*s](../%.*s)", first ? "" : ", ",
					(int)(p + n - base), base, (int)(n - 5), p + 5);
		else
			fprintf(o->f, "%s[%.*s](../tests/%.*s)", first ? "" : ", ",
					(int)(p + n - base), base, (int)n, p);
		first = 0;
		p += n;
	}
}

/* ---- keys ---------------------------------------------------------------- */

static void format_size(char *out, size_t outlen, unsigned long long v)
{
	static const char units[] = "GMK";
	for (int i = 0; i < 3; i++) {
		unsigned long long unit = 1ULL << (10 * (3 - i));
		if (v >= unit && v % unit == 0) {
			snprintf(out, outlen, "%llu%c", v / unit, units[i]);
			return;
		}
	}
	snprintf(out, outlen, "%llu", v);
}

static void format_duration(char *out, size_t outlen, unsigned long long ms)
{
	if (ms && ms % 3600000 == 0)
		snprintf(out, outlen, "%lluh", ms / 3600000);
	else if (ms && ms % 60000 == 0)
		snprintf(out, outlen, "%llum", ms / 60000);
	else if (ms && ms % 1000 == 0)
		snprintf(out, outlen, "%llus", ms / 1000);
	else
		snprintf(out, outlen, "%llums", ms);
}

/* "number, 1 to 65536", "duration, at most 1h", or the type alone. */
static void format_type(char *out, size_t outlen, const struct conf_key *k)
{
	const char *type = conf_type_name(k->type);
	if (k->type != CONF_UINT && k->type != CONF_SIZE && k->type != CONF_DURATION) {
		snprintf(out, outlen, "%s", type);
		return;
	}
	if (!k->min && !k->max) {
		snprintf(out, outlen, "%s", type);
		return;
	}
	char lo[32], hi[32];
	void (*fmt)(char *, size_t, unsigned long long) = k->type == CONF_SIZE ? format_size
			: k->type == CONF_DURATION                             ? format_duration
									       : NULL;
	if (fmt) {
		fmt(lo, sizeof lo, k->min);
		fmt(hi, sizeof hi, k->max);
	} else {
		snprintf(lo, sizeof lo, "%llu", k->min);
		snprintf(hi, sizeof hi, "%llu", k->max);
	}
	if (k->min && k->max)
		snprintf(out, outlen, "%s, %s to %s", type, lo, hi);
	else if (k->max)
		snprintf(out, outlen, "%s, at most %s", type, hi);
	else
		snprintf(out, outlen, "%s, at least %s", type, lo);
}

/* The row plxd adds to every module's section. */
static const struct conf_key load_key = {
	.name = "load",
	.type = CONF_PATH,
	.flags = CONF_RESTART,
	.help = "the shared object to load this handler from, instead of `NAME.so` in the module "
		"folders",
	.tests = "integration/handlers.t integration/config.t",
};

static void text_key(struct out *o, const struct conf_key *k)
{
	if (k->type == CONF_ALIAS) {
		fprintf(o->f, "  %-24s %-9s the old name of %s (deprecated)\n", k->name,
				conf_type_name(k->type), k->alias_of);
		return;
	}
	const char *def = k == &load_key                        ? "(found by name)"
			: k->default_value && *k->default_value ? k->default_value
								: "(empty)";
	fprintf(o->f, "  %-24s %-9s default: %s%s\n      ", k->name, conf_type_name(k->type), def,
			k->flags & CONF_RESTART ? "  (changes need a restart)" : "");
	put_text(o, k->help);
	fputc('\n', o->f);
	if (k->limit) {
		fputs("      at the limit: ", o->f);
		put_text(o, k->limit);
		fputc('\n', o->f);
	}
}

static void markdown_key(struct out *o, const struct conf_key *k)
{
	char type[96];
	o->in_cell = 1;
	if (k->type == CONF_ALIAS) {
		fprintf(o->f,
				"| `%s` | alias | | as `%s` | the old name of `%s`: it still works, and "
				"logs a deprecation line naming file, line and both names | ",
				k->name, k->alias_of, k->alias_of);
		put_tests_cell(o, "integration/config.t");
		fputs(" |\n", o->f);
		o->in_cell = 0;
		return;
	}
	format_type(type, sizeof type, k);
	fprintf(o->f, "| `%s` | ", k->name);
	put_text(o, type);
	fputs(" | ", o->f);
	if (k == &load_key)
		fputs("(found by name)", o->f);
	else if (k->default_value && *k->default_value)
		put_code(o, doc_value(o->format, k->default_value));
	else
		fputs("(empty)", o->f);
	fprintf(o->f, " | %s | ", k->flags & CONF_RESTART ? "restart" : "applies");
	put_text(o, k->help);
	if (k->limit) {
		fputs(". **At the limit:** ", o->f);
		put_text(o, k->limit);
	}
	fputs(" | ", o->f);
	put_tests_cell(o, k->tests);
	fputs(" |\n", o->f);
	o->in_cell = 0;
}

static void man_key(struct out *o, const struct conf_key *k)
{
	char type[96];
	fprintf(o->f, ".TP\n.B %s\n", k->name);
	if (k->type == CONF_ALIAS) {
		fprintf(o->f,
				"The old name of \\fB%s\\fR: it still works, and logs a deprecation "
				"line naming file, line and both names.\n",
				k->alias_of);
		return;
	}
	format_type(type, sizeof type, k);
	fprintf(o->f, "\\fI%s\\fR; default ", type);
	if (k == &load_key)
		fputs("found by name", o->f);
	else if (k->default_value && *k->default_value)
		put_code(o, k->default_value);
	else
		fputs("empty", o->f);
	fputs(k->flags & CONF_RESTART ? "; a change needs a restart.\n" : ".\n", o->f);
	fputs(".br\n", o->f);
	man_line_start(o, k->help);
	put_text(o, k->help);
	fputs(".\n", o->f);
	if (k->limit) {
		fputs("At the limit: ", o->f);
		put_text(o, k->limit);
		fputs(".\n", o->f);
	}
}

static void put_key(struct out *o, const struct conf_key *k)
{
	if (o->format == HELP_TEXT)
		text_key(o, k);
	else if (o->format == HELP_MARKDOWN)
		markdown_key(o, k);
	else
		man_key(o, k);
}

/* A section's keys, and load for a module's. */
static void section_keys(struct out *o, const struct conf_key *keys, int module)
{
	if (o->format == HELP_MARKDOWN)
		fputs("| key | type | default | on reload | what it sets, and what happens at the "
		      "limit | test |\n|---|---|---|---|---|---|\n",
				o->f);
	for (const struct conf_key *k = keys; k && k->name; k++)
		put_key(o, k);
	if (module)
		put_key(o, &load_key);
}

static void section_start(struct out *o, const char *name, const char *about)
{
	switch (o->format) {
	case HELP_TEXT:
		fprintf(o->f, "\n[%s]\n", name);
		return;
	case HELP_MARKDOWN:
		fprintf(o->f, "\n## `[%s]`\n\n", name);
		if (about) {
			put_paragraph(o, about);
			fputc('\n', o->f);
		}
		return;
	case HELP_MAN5:
	case HELP_MAN8:
		fprintf(o->f, ".SS [%s]\n", name);
		if (about)
			put_paragraph(o, about);
		return;
	}
}

/* Handlers in a stable order: built-ins first, then modules by name. */
struct known {
	const struct plxd_handler *h;
	int builtin;
};
struct known_list {
	struct known *v;
	size_t n;
};

static void collect(const struct plxd_handler *h, int builtin, void *ctx)
{
	struct known_list *l = ctx;
	struct known *v = realloc(l->v, (l->n + 1) * sizeof *v);
	if (!v)
		return;
	l->v = v;
	l->v[l->n++] = (struct known){ h, builtin };
}

static int by_kind_then_name(const void *a, const void *b)
{
	const struct known *x = a, *y = b;
	if (x->builtin != y->builtin)
		return y->builtin - x->builtin;
	return strcmp(x->h->name, y->h->name);
}

static void all_sections(struct out *o)
{
	for (size_t i = 0; i < sizeof core_sections / sizeof core_sections[0]; i++) {
		section_start(o, core_sections[i].name, core_sections[i].about);
		section_keys(o, core_sections[i].keys, 0);
	}

	section_start(o, "handlers", o->format == HELP_TEXT ? NULL : handlers_about);
	if (o->format == HELP_TEXT)
		fputs("  .EXT = HANDLER           files ending in .EXT (any case) go to HANDLER;\n"
		      "                           others are served by the static handler\n"
		      "  .EXT = HANDLER:NAME      ... to the instance [HANDLER:NAME] of HANDLER\n",
				o->f);
	else if (o->format == HELP_MARKDOWN) {
		fputs("| line | what it does | test |\n|---|---|---|\n"
		      "| `.EXT = HANDLER` | files whose name ends in `.EXT`, in any case, go to "
		      "HANDLER: `.pl = cgi`, `.cgi = cgi`, `.plx = perl` | ",
				o->f);
		put_tests_cell(o, "integration/handlers.t integration/attacks.t");
		fputs(" |\n| `.EXT = HANDLER:NAME` | files ending in `.EXT` go to the instance "
		      "`[HANDLER:NAME]` of HANDLER | ",
				o->f);
		put_tests_cell(o, "integration/handlers.t");
		fputs(" |\n", o->f);
	} else
		fputs(".TP\n.BI . EXT \" = \" HANDLER\nFiles whose name ends in \\fI.EXT\\fR, in "
		      "any case, go to \\fIHANDLER\\fR: \\fB.pl = cgi\\fR, \\fB.plx = perl\\fR.\n"
		      ".TP\n.BI . EXT \" = \" HANDLER : NAME\nFiles ending in \\fI.EXT\\fR go to "
		      "the instance \\fB[\\fIHANDLER\\fB:\\fINAME\\fB]\\fR of \\fIHANDLER\\fR.\n",
				o->f);

	section_start(o, "mount", o->format == HELP_TEXT ? NULL : mount_about);
	if (o->format == HELP_TEXT)
		fputs("  /PREFIX = FILE           every path under /PREFIX (/ for all) is served by\n"
		      "                           FILE, with SCRIPT_NAME /PREFIX ('' for /)\n",
				o->f);
	else if (o->format == HELP_MARKDOWN) {
		fputs("| line | what it does | test |\n|---|---|---|\n"
		      "| `/PREFIX = FILE` | every path under `/PREFIX` (`/`: every path) is served "
		      "by FILE, with `SCRIPT_NAME` `/PREFIX` (`''` for `/`) and `PATH_INFO` the rest | ",
				o->f);
		put_tests_cell(o, "integration/psgi_mount.t integration/psgi_suite.t");
		fputs(" |\n", o->f);
	} else
		fputs(".TP\n.BI / PREFIX \" = \" FILE\nEvery path under \\fI/PREFIX\\fR (\\fB/\\fR: "
		      "every path) is served by \\fIFILE\\fR, with SCRIPT_NAME \\fI/PREFIX\\fR.\n",
				o->f);

	struct known_list l = { 0 };
	modules_each_known(collect, &l);
	qsort(l.v, l.n, sizeof *l.v, by_kind_then_name);
	for (size_t i = 0; i < l.n; i++) {
		char about[256];
		snprintf(about, sizeof about,
				l.v[i].builtin ? "The keys of the %s handler, which is built in."
					       : "The keys of the %s handler, the module `%s.so`.",
				l.v[i].h->name, l.v[i].h->name);
		section_start(o, l.v[i].h->name, o->format == HELP_TEXT ? NULL : about);
		section_keys(o, l.v[i].h->keys, !l.v[i].builtin);
	}
	free(l.v);
}

/* ---- the four forms ------------------------------------------------------ */

static void option_flags(struct out *o, const struct help_option *opt)
{
	int man = o->format == HELP_MAN8 || o->format == HELP_MAN5;
	char flag[64];
	if (opt->shortopt) {
		snprintf(flag, sizeof flag, "-%c", opt->shortopt);
		put_code(o, flag);
		fputs(", ", o->f);
	}
	snprintf(flag, sizeof flag, "--%s", opt->longopt);
	if (o->format == HELP_MARKDOWN) {
		/* One span: `--config FILE`, `--help[=FORMAT]`. */
		fprintf(o->f, "`%s%s%s`", flag, opt->arg && opt->arg[0] != '[' ? " " : "",
				opt->arg ? opt->arg : "");
		return;
	}
	put_code(o, flag);
	if (!opt->arg)
		return;
	int optional = opt->arg[0] == '[';
	const char *name = optional ? opt->arg + 2 : opt->arg;
	size_t len = strcspn(name, "]");
	if (man)
		fprintf(o->f, optional ? "[=\\fI%.*s\\fR]" : " \\fI%.*s\\fR", (int)len, name);
	else
		fprintf(o->f, optional ? "[=%.*s]" : " %.*s", (int)len, name);
}

void help_usage(FILE *f)
{
	struct out o = { .f = f, .format = HELP_TEXT };
	fputs("usage: plxd [--config FILE] [--listen ADDR:PORT] [--root DIR] [--app FILE] [--check]\n"
	      "            [--no-master] [--version] [--help[=FORMAT]]\n\n",
			f);
	for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
		char *flags = NULL;
		size_t len = 0;
		FILE *mem = open_memstream(&flags, &len);
		if (!mem)
			return;
		struct out m = { .f = mem, .format = HELP_TEXT };
		fputs(options[i].shortopt ? "" : "    ", mem);
		option_flags(&m, &options[i]);
		fclose(mem);
		fprintf(f, "  %-22s ", flags);
		free(flags);
		put_text(&o, options[i].help);
		fputc('\n', f);
	}
}

static void print_text(FILE *f)
{
	struct out o = { .f = f, .format = HELP_TEXT };
	help_usage(f);
	fputs("\nConfiguration keys (INI; sizes take K, M or G; durations ms, s, m or h):\n", f);
	all_sections(&o);
}

static void print_markdown(FILE *f)
{
	struct out o = { .f = f, .format = HELP_MARKDOWN };
	fputs("<!-- Generated by `plxd --help=markdown` from the key tables the parser reads "
	      "(server/help.c says how).\n"
	      "     Edit the tables, then: build/plxd --help=markdown > doc/configuration.md\n"
	      "     tests/integration/cli.t fails when this page and the binary differ. -->\n"
	      "# Configuration reference\n\n",
			f);
	put_paragraph(&o,
			"Every section and key plxd reads, with its type, its default, what a "
			"reload does with it and what happens at its limit. plxd prints this page "
			"itself (`plxd --help=markdown`), from the same tables its parser reads, as it "
			"prints `plxd --help` and the man pages plxd(8) and plxd.conf(5): a key cannot be "
			"added, renamed or given another default without this page changing too. What "
			"each key does in context is in the pages on each part: [running.md](running.md), "
			"[cgi.md](cgi.md), [perl.md](perl.md), [request.md](request.md), "
			"[security.md](security.md).");

	fputs("\n## The command line\n\n", f);
	fputs("```\nplxd [--config FILE] [--listen ADDR:PORT] [--root DIR] [--app FILE] [--check] "
	      "[--no-master] [--version] [--help[=FORMAT]]\n```\n\n",
			f);
	put_paragraphs(&o, description);
	fputs("\n| option | what it does | test |\n|---|---|---|\n", f);
	for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
		fputs("| ", f);
		option_flags(&o, &options[i]);
		fputs(" | ", f);
		o.in_cell = 1;
		put_text(&o, options[i].help);
		fputs(" | ", f);
		put_tests_cell(&o, options[i].tests);
		o.in_cell = 0;
		fputs(" |\n", f);
	}

	fputs("\n## Signals\n\n| signal | what plxd does | test |\n|---|---|---|\n", f);
	for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) {
		fputs("| ", f);
		o.in_cell = 1;
		put_text(&o, signals[i].name);
		fputs(" | ", f);
		put_text(&o, signals[i].help);
		fputs(" | ", f);
		put_tests_cell(&o, signals[i].tests);
		o.in_cell = 0;
		fputs(" |\n", f);
	}

	fputs("\n## Exit status\n\n", f);
	put_paragraphs(&o, exit_status);

	fputs("\n## Files\n\n| path | what it holds | test |\n|---|---|---|\n", f);
	fputs("| `", f);
	put_path(&o, PLXD_DEFAULT_CONFIG, PLXD_DOC_CONFIG);
	fputs("` | the default configuration | ", f);
	put_tests_cell(&o, "integration/install.t");
	fputs(" |\n| `", f);
	put_path(&o, PLXD_MODULE_DIR, PLXD_DOC_MODULE_DIR);
	fputs("` | the module folder: handler modules (`cgi.so`, `perl.so`, `echo.so`) and their "
	      "programs (`plxd-cgi-exec`, `plxd-perl-worker`); `perl5/` holds PLXD::Request | ",
			f);
	put_tests_cell(&o, "integration/install.t");
	fputs(" |\n| `", f);
	put_path(&o, PLXD_DEFAULT_ROOT, PLXD_DOC_ROOT);
	fputs("` | the default document root: the samples of `cgi-bin/` | ", f);
	put_tests_cell(&o, "integration/install.t");
	fputs(" |\n| `", f);
	put_path(&o, PLXD_PLACKUP_HANDLER, "PERL_LIB/Plack/Handler/Plxd.pm");
	fputs("` | `plackup -s Plxd` ([psgi.md](psgi.md#plackup--s-plxd)), which starts the plxd "
	      "installed beside it; `PERL_LIB` is perl's module folder under the prefix: "
	      "`/usr/share/perl5` for `/usr`, `PREFIX/share/perl/VERSION` for any other | ",
			f);
	put_tests_cell(&o, "integration/install.t");
	fputs(" |\n", f);

	fputs("\n## The file\n\n", f);
	put_paragraphs(&o, file_format);
	fputs("\n## Reading the tables\n\n", f);
	put_paragraphs(&o, reading_tables);
	all_sections(&o);
}

static void man_header(struct out *o, const char *title, int section, const char *volume)
{
	fprintf(o->f,
			".\\\" Generated by plxd --help=man%d from the tables its parser reads.\n"
			".TH %s %d \"\" \"plxd %s\" \"%s\"\n",
			section, title, section, PLXD_VERSION, volume);
}

static void man_files(struct out *o)
{
	fprintf(o->f, ".SH FILES\n.TP\n.I %s\nThe default configuration.\n", PLXD_DEFAULT_CONFIG);
	fprintf(o->f,
			".TP\n.I %s\nHandler modules (\\fBcgi.so\\fR, \\fBperl.so\\fR, "
			"\\fBecho.so\\fR) and their programs (\\fBplxd\\-cgi\\-exec\\fR, "
			"\\fBplxd\\-perl\\-worker\\fR); \\fBperl5/\\fR holds PLXD::Request.\n",
			PLXD_MODULE_DIR);
	fprintf(o->f, ".TP\n.I %s\nThe default document root: the samples.\n", PLXD_DEFAULT_ROOT);
	fprintf(o->f,
			".TP\n.I %s\nPlack::Handler::Plxd, for \\fBplackup \\-s Plxd\\fR: it starts "
			"the plxd installed beside it.\n",
			PLXD_PLACKUP_HANDLER);
}

static void print_man8(FILE *f)
{
	struct out o = { .f = f, .format = HELP_MAN8 };
	man_header(&o, "PLXD", 8, "System Manager's Manual");
	fputs(".SH NAME\nplxd \\- a web server that runs Perl scripts per request (CGI) and "
	      "persistently\n.SH SYNOPSIS\n.B plxd\n",
			f);
	for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
		fputs("[", f);
		option_flags(&o, &options[i]);
		fputs("]\n", f);
	}
	fputs(".SH DESCRIPTION\n", f);
	put_paragraphs(&o, description);
	fputs(".PP\nThe configuration file and every key are described in "
	      "\\fBplxd.conf\\fR(5).\n.SH OPTIONS\n",
			f);
	for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
		fputs(".TP\n", f);
		option_flags(&o, &options[i]);
		fputc('\n', f);
		put_paragraph(&o, options[i].help);
	}
	fputs(".SH SIGNALS\n", f);
	for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) {
		fputs(".TP\n", f);
		put_text(&o, signals[i].name);
		fputc('\n', f);
		put_paragraph(&o, signals[i].help);
	}
	fputs(".SH EXIT STATUS\n", f);
	put_paragraphs(&o, exit_status);
	man_files(&o);
	fputs(".SH SEE ALSO\n\\fBplxd.conf\\fR(5), \\fBPLXD::Request\\fR(3pm); "
	      "the \\fBdoc/\\fR folder of the source tree.\n",
			f);
}

static void print_man5(FILE *f)
{
	struct out o = { .f = f, .format = HELP_MAN5 };
	man_header(&o, "PLXD.CONF", 5, "File Formats Manual");
	fprintf(f,
			".SH NAME\nplxd.conf \\- configuration file of the plxd web server\n"
			".SH SYNOPSIS\n.I %s\n.SH DESCRIPTION\n",
			PLXD_DEFAULT_CONFIG);
	put_paragraphs(&o, file_format);
	fputs(".SH SECTIONS\n", f);
	fputs(".PP\nEach key below gives its type (and range) and its default, then what it "
	      "sets and what happens at its limit. A reload (SIGHUP) applies a new value to the "
	      "requests that start after it, unless the key says that a change needs a "
	      "restart.\n",
			f);
	all_sections(&o);
	man_files(&o);
	fputs(".SH SEE ALSO\n\\fBplxd\\fR(8), \\fBPLXD::Request\\fR(3pm)\n", f);
}

int help_format_parse(const char *name, enum help_format *out)
{
	static const struct {
		const char *name;
		enum help_format format;
	} formats[] = {
		{ "text", HELP_TEXT },
		{ "markdown", HELP_MARKDOWN },
		{ "man8", HELP_MAN8 },
		{ "man5", HELP_MAN5 },
	};
	for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
		if (strcmp(name, formats[i].name) == 0) {
			*out = formats[i].format;
			return 0;
		}
	}
	return -1;
}

void help_print(FILE *f, enum help_format format)
{
	switch (format) {
	case HELP_TEXT:
		print_text(f);
		return;
	case HELP_MARKDOWN:
		print_markdown(f);
		return;
	case HELP_MAN8:
		print_man8(f);
		return;
	case HELP_MAN5:
		print_man5(f);
		return;
	}
}
