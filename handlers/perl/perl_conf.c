/* The [perl] keys; see perl_conf.h. */
#include "perl_conf.h"
#include "perl_backend.h"
#include "perl_interp.h"
#include "log.h"

#include <stddef.h>
#include <string.h>

static const char *check_inc(const char *value);
static const char *check_isolation(const char *value);
static const char *check_taint(const char *value);

#define PERL_KEY(n, t, field, def, ...)                                            \
	{                                                                          \
		.name = n, .type = t, .offset = offsetof(struct perl_conf, field), \
		.default_value = def, __VA_ARGS__                                  \
	}

/* clang-format off */
const struct conf_key perl_conf_keys[] = {
	PERL_KEY("isolation", CONF_STRING, isolation, "process", .check = check_isolation,
		.flags = CONF_RESTART,
		.help = "`process`: scripts run in worker processes, one interpreter each; "
			"`thread`: in interpreter threads inside plxd, cloned from one parent "
			"(the ISAPI model: no process between plxd and the script; for trusted scripts only; "
			"doc/perl.md compares them)",
		.tests = "unit/test_perl_thread.c integration/perl_thread.t"),
	PERL_KEY("workers", CONF_UINT, workers, "0", .max = 256, .flags = CONF_RESTART,
		.help = "worker processes, one Perl interpreter each, started with plxd; "
			"0: one per CPU core",
		.tests = "integration/perl_basic.t integration/logs_signals.t"),
	PERL_KEY("queue", CONF_UINT, queue, "100", .max = 100000,
		.help = "requests that may wait for a busy worker",
		.limit = "503 with Retry-After, at once",
		.tests = "integration/perl_faults.t integration/hostile.t"),
	PERL_KEY("queue_timeout", CONF_DURATION, queue_timeout_ms, "10s", .max = 3600 * 1000,
		.help = "how long a request waits for a worker",
		.limit = "503 with Retry-After",
		.tests = "integration/perl_faults.t integration/hostile.t"),
	PERL_KEY("timeout", CONF_DURATION, timeout_ms, "60s", .min = 100, .max = 24 * 3600 * 1000,
		.help = "how long a script may run",
		.limit = "504 (the connection is closed if its headers were sent); its worker, and "
			"every process it started, is killed and replaced; in thread mode the "
			"processes it started are killed, the script is ended at its next Perl op "
			"(a system call it waits in is interrupted) and a fresh clone replaces its "
			"interpreter",
		.tests = "integration/perl_faults.t integration/script_failures.t "
			 "integration/perl_thread.t"),
	PERL_KEY("start_timeout", CONF_DURATION, start_timeout_ms, "30s", .min = 100,
		.max = 3600 * 1000,
		.help = "a new worker must have loaded Perl and the preload file within this",
		.limit = "the worker is killed and logged; at start-up, plxd does not start",
		.tests = "code:handlers/perl/perl_pool_keeper.c"),
	PERL_KEY("max_requests", CONF_UINT, max_requests, "0", .max = 1ul << 40,
		.help = "requests a worker serves at most; 0: no limit",
		.limit = "the worker is replaced after its request",
		.tests = "integration/perl_faults.t"),
	PERL_KEY("max_rss", CONF_SIZE, max_rss, "512M",
		.help = "peak resident memory of a worker; 0: no limit",
		.limit = "the worker is replaced after its request",
		.tests = "integration/perl_faults.t"),
	PERL_KEY("max_memory", CONF_SIZE, max_memory, "2G",
		.help = "address space of a worker (RLIMIT_AS); 0: no limit",
		.limit = "the allocation fails: the request gets 500 and the worker is replaced",
		.tests = "integration/perl_faults.t"),
	PERL_KEY("preload", CONF_PATH, preload, "",
		.help = "Perl file each worker requires once before serving (like mod_perl's "
			"PerlRequire): load shared modules here; it must return true, and if it "
			"dies plxd does not start. In thread mode it runs once, in the parent the "
			"threads are cloned from: what it loaded, no thread loads again (each "
			"thread's first compile of a script is one load at a time in plxd)",
		.tests = "integration/perl_faults.t integration/perl_hooks.t "
			 "integration/perl_thread_loads.t"),
	PERL_KEY("inc", CONF_LIST, inc, "", .check = check_inc,
		.help = "absolute folders put in front of @INC, in order; a module loaded from "
			"outside Perl's own folders that changes on disk retires its worker (checked "
			"at most once a second); in thread mode a fresh clone replaces the "
			"interpreter that loaded it, and one the preload loaded stays until a restart",
		.tests = "integration/perl_faults.t integration/perl_fastcgi.t"),
	PERL_KEY("path", CONF_STRING, path, "/usr/local/bin:/usr/bin:/bin",
		.help = "PATH in the scripts' environment (nothing else of plxd's environment "
			"is passed)",
		.tests = "unit/test_cgi_env.c code:handlers/perl/perl_req.c"),
	PERL_KEY("pass_authorization", CONF_BOOL, pass_authorization, "no",
		.help = "pass the Authorization header to scripts as HTTP_AUTHORIZATION",
		.tests = "unit/test_cgi_env.c code:handlers/perl/perl_req.c"),
	PERL_KEY("max_script_header_size", CONF_SIZE, max_script_header_size, "64K", .min = 1024,
		.max = 16 * 1024 * 1024,
		.help = "the header block a script prints at most; also bounded by what [server] "
			"max_header_size leaves beside the request (the connection's memory holds "
			"both heads, a request's cookies twice)",
		.limit = "500, and a log line naming the script",
		.tests = "unit/test_cgi_reply.c integration/config.t integration/gateway_edges.t"),
	CONF_ALIAS_KEY("max_header_size", "max_script_header_size"),
	PERL_KEY("timing", CONF_BOOL, timing, "no",
		.help = "add X-Plxd-Perl to responses: whether the compiled script was reused or "
			"compiled, and the compile and run times in microseconds (so far, marked "
			"partial, when the headers go out before the script returns)",
		.tests = "integration/perl_registry.t"),
	PERL_KEY("taint", CONF_STRING, taint, "honour", .check = check_taint,
		.help = "what a script with -T (or -t) on its #! line gets: `honour`: it runs in an "
			"interpreter started with taint checks, as perl -T runs it under CGI (one "
			"beside each worker's, or each interpreter thread's, made when the first such "
			"script comes; -t makes taint errors warnings); `warn`: it runs without them, "
			"after a line in the log; `refuse`: 500, and a line in the log",
		.tests = "integration/perl_taint.t integration/perl_shebang.t"),
	PERL_KEY("inline_budget", CONF_DURATION, inline_budget_ms, "1ms", .max = 10 * 1000,
		.help = "isolation = thread: a script (a .psgi application's route: the "
			"application with one PATH_INFO) whose last runs each took at most this, "
			"printed at most a quarter of what an event thread's pipe holds before "
			"its end, and started no process, runs on the event thread that owns "
			"its connection, with no hand-off (a request with no body); one run past "
			"it sends the script back to the interpreter threads until it has run "
			"short again, unless the run took no more CPU time than this, never "
			"waited and ended within 4 times this and 16 ms (its thread was "
			"preempted; the same for the runs on the interpreter threads that prove "
			"it short again), or took no more than twice this in CPU time, never "
			"waited, and its script's runs, smoothed, average within this (a "
			"straggler); 0: never inline (doc/perl.md)",
		.limit = "the next request of the script runs on the interpreter threads",
		.tests = "integration/perl_inline.t"),
	PERL_KEY("inline_after", CONF_UINT, inline_after, "3", .max = 1000000,
		.help = "isolation = thread: how many short runs in a row a script needs, on "
			"the interpreter threads, before it runs inline; 0: every request with "
			"no body runs inline from the script's first, compile included, however "
			"long its runs (for tests)",
		.tests = "integration/perl_inline.t"),
	CONF_KEYS_END
};
/* clang-format on */

static const char *check_inc(const char *value)
{
	const char *p = value;
	while (*p) {
		p += strspn(p, " \t");
		if (!*p)
			break;
		if (*p != '/')
			return "each folder must be an absolute path";
		p += strcspn(p, " \t");
	}
	return NULL;
}

static const char *check_isolation(const char *value)
{
	if (strcmp(value, "process") == 0 || strcmp(value, "thread") == 0)
		return NULL;
	return "must be process or thread";
}

static const char *check_taint(const char *value)
{
	if (strcmp(value, "honour") == 0 || strcmp(value, "warn") == 0
			|| strcmp(value, "refuse") == 0)
		return NULL;
	return "must be honour, warn or refuse";
}

unsigned perl_conf_taint(const struct perl_conf *c)
{
	if (!c->taint || strcmp(c->taint, "honour") == 0)
		return PERL_TAINT_HONOUR;
	return strcmp(c->taint, "warn") == 0 ? PERL_TAINT_WARN : PERL_TAINT_REFUSE;
}

const struct perl_backend *perl_conf_backend(const struct perl_conf *c)
{
	if (c->isolation && strcmp(c->isolation, "thread") == 0)
		return &perl_backend_thread;
	return &perl_backend_process;
}

void perl_conf_warn_restart(const struct perl_conf *c, unsigned long workers,
		const struct perl_backend *be)
{
	if (c->workers != workers)
		plxd_log(PLXD_LOG_WARN,
				"[perl] workers changed: it takes effect only after a restart");
	if (be != perl_conf_backend(c))
		plxd_log(PLXD_LOG_WARN,
				"[perl] isolation changed: it takes effect only after a restart");
}
