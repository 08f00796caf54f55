/* The cgi handler: runs .pl (through a configured interpreter) and .cgi
 * (executed itself) as RFC 3875 CGI scripts, one process per request. This
 * file is the glue: configuration, the handler hooks, starting a script
 * (through the spawner thread) and ending it. Everything between the
 * script and the client is the gateway's (server/gateway/gateway.h). */
#include "alloc.h"
#include "cgi_env.h"
#include "cgi_spawner.h"
#include "clock.h"
#include "gateway.h"
#include "gw_request.h"
#include "handler.h"
#include "log.h"
#include "loop.h"
#include "spawn_child.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

struct cgi_conf {
	char *interpreters;
	char *path;
	int pass_authorization;
	unsigned long timeout_ms;
	unsigned long linger_ms;
	unsigned long kill_grace_ms;
	unsigned long max_children;
	unsigned long long max_script_header_size;
	unsigned long limit_cpu;
	unsigned long long limit_memory;
	unsigned long limit_processes;
};

struct cgi_state {
	atomic_ulong children; /* scripts running (slots taken) */
	struct cgi_spawner *spawner;
	char helper[PATH_MAX];   /* plxd-cgi-exec, beside this module */
	char perl5lib[PATH_MAX]; /* "PERL5LIB=" the perl5 folder beside this
				    module, where PLXD::Request lives */
};

/* One request's script, from its spawn to its reaping; it may outlive its
 * request (lingering, being ended). */
struct cgi_req {
	struct gw gw; /* first member: the gateway's ops get it */
	struct cgi_state *state;
	const struct cgi_conf *conf;
	struct loop *loop;
	char *script;  /* absolute file name, for log lines */
	char *program; /* interpreter, or NULL: the script itself */
	struct cgi_spawn_job job;
	char **env; /* the job's, until it is done */
	char *argv[4];
	char *dir;
	struct spawn_limits limits;
	int spawning; /* the spawner has the job */
	int started;  /* the child runs (or ran) */
	struct spawn_child child;
	struct loop_watch exit_w; /* the child's pidfd */
	struct loop_timer timer;  /* linger, kill grace; while spawning it
				       keeps the loop from looking idle */
	int stopped;              /* the gateway is done with it */
	int kill;                 /* ... and it is to be ended */
	int killed_by_us;         /* signals sent: its end is ours to explain */
	int unread;               /* its output was not read to its end */
	int out_eof;              /* its output ended, or was ended for it */
	int over;                 /* reaped and let go: only freeing is left */
	int free_posted;
};

static int cgi_start(const void *conf, void **state);
static int cgi_reconfigure(void *state, const void *conf);
static void cgi_stop(void *state);
static int cgi_begin(struct plxd_request *r);
static unsigned cgi_body(struct plxd_request *r, const char *data, size_t len, size_t *taken);
static int cgi_handle(struct plxd_request *r);
static void cgi_finished(struct plxd_request *r, enum plxd_end how);

static ssize_t script_read(struct gw *g, char *buf, size_t len);
static void script_stop(struct gw *g, enum gw_stop how);
static void spawned(struct cgi_spawn_job *job);
static void on_exit_fd(struct loop_watch *w, unsigned events);
static void on_timer(struct loop_timer *t);
static void end_script(struct cgi_req *q);
static void maybe_free(struct cgi_req *q);

static const struct gw_ops cgi_gw_ops = {
	.read = script_read,
	.stop = script_stop,
};

static const char *check_interpreters(const char *value);

#define CGI_KEY(n, t, field, def, ...)                                            \
	{                                                                         \
		.name = n, .type = t, .offset = offsetof(struct cgi_conf, field), \
		.default_value = def, __VA_ARGS__                                 \
	}

/* clang-format off */
static const struct conf_key cgi_keys[] = {
	CGI_KEY("interpreters", CONF_LIST, interpreters, ".pl=/usr/bin/perl",
		.check = check_interpreters,
		.help = "EXT=PROGRAM words: scripts ending in EXT run as PROGRAM SCRIPT; others "
			"(.cgi) are executed themselves (their #! line) and must be executable",
		.tests = "integration/cgi_env.t integration/request_cgi.t"),
	CGI_KEY("path", CONF_STRING, path, "/usr/local/bin:/usr/bin:/bin",
		.help = "PATH in the scripts' environment (nothing else of plxd's environment is passed)",
		.tests = "integration/cgi_env.t"),
	CGI_KEY("pass_authorization", CONF_BOOL, pass_authorization, "no",
		.help = "pass the Authorization header to scripts as HTTP_AUTHORIZATION",
		.tests = "integration/cgi_env.t unit/test_cgi_env.c"),
	CGI_KEY("timeout", CONF_DURATION, timeout_ms, "60s", .min = 100, .max = 24 * 3600 * 1000,
		.help = "how long a script may run",
		.limit = "the script is ended (TERM, then KILL to its process group after "
			"kill_grace): 504 before its headers, the connection closed after",
		.tests = "integration/cgi_limits.t integration/script_failures.t"),
	CGI_KEY("linger", CONF_DURATION, linger_ms, "2s", .max = 3600 * 1000,
		.help = "after the script exits, how long a background process may hold its output "
			"open (or the script run on after its output ended)",
		.limit = "the response ends and the script's process group is ended",
		.tests = "integration/cgi_stream.t"),
	CGI_KEY("kill_grace", CONF_DURATION, kill_grace_ms, "1s", .max = 60 * 1000,
		.help = "between TERM and KILL when a script is ended",
		.tests = "integration/cgi_limits.t"),
	CGI_KEY("max_children", CONF_UINT, max_children, "64", .min = 1, .max = 65536,
		.help = "scripts running at once at most",
		.limit = "503 with Retry-After",
		.tests = "integration/cgi_limits.t"),
	CGI_KEY("max_script_header_size", CONF_SIZE, max_script_header_size, "64K", .min = 1024,
		.max = 16 * 1024 * 1024,
		.help = "the header block a script prints at most; also bounded by what [server] "
			"max_header_size leaves beside the request (the connection's memory holds "
			"both heads, a request's cookies twice)",
		.limit = "500, and a log line naming the script",
		.tests = "unit/test_cgi_reply.c integration/config.t integration/gateway_edges.t"),
	CONF_ALIAS_KEY("max_header_size", "max_script_header_size"),
	CGI_KEY("limit_cpu", CONF_UINT, limit_cpu, "0", .max = 24 * 3600,
		.help = "RLIMIT_CPU of scripts in seconds, 0 for none; set before the script's first "
			"instruction by plxd-cgi-exec",
		.limit = "the kernel ends the script (SIGXCPU): 500 before its headers",
		.tests = "integration/cgi_limits.t"),
	CGI_KEY("limit_memory", CONF_SIZE, limit_memory, "0",
		.help = "RLIMIT_AS (address space) of scripts, 0 for none",
		.limit = "the allocation fails in the script",
		.tests = "integration/cgi_limits.t"),
	CGI_KEY("limit_processes", CONF_UINT, limit_processes, "0", .max = 1u << 22,
		.help = "RLIMIT_NPROC of scripts (counts every process of plxd's user; root "
			"is exempt), 0 for none",
		.limit = "fork fails in the script",
		.tests = "integration/cgi_limits.t"),
	CONF_KEYS_END
};
/* clang-format on */

static const char *check_interpreters(const char *value)
{
	const char *p = value;
	while (*p) {
		p += strspn(p, " \t");
		if (!*p)
			break;
		size_t len = strcspn(p, " \t");
		const char *eq = memchr(p, '=', len);
		if (p[0] != '.' || !eq || eq == p + 1)
			return "each word must be .EXT=PROGRAM";
		if (eq[1] != '/')
			return "each PROGRAM must be an absolute path";
		p += len;
	}
	return NULL;
}

/* The interpreter configured for the extension of name (the name the
 * request was routed by, which a link's own name is not), or NULL. */
static char *interpreter_for(const struct cgi_conf *conf, const char *name)
{
	const char *ext = strrchr(name, '.');
	if (!ext)
		return NULL;
	size_t elen = strlen(ext);
	const char *p = conf->interpreters;
	while (p && *p) {
		p += strspn(p, " \t");
		size_t len = strcspn(p, " \t");
		const char *eq = memchr(p, '=', len);
		if (eq && (size_t)(eq - p) == elen && strncasecmp(p, ext, elen) == 0)
			return xstrndup(eq + 1, len - (size_t)(eq - p) - 1);
		p += len;
	}
	return NULL;
}

static int limits_wanted(const struct cgi_conf *c)
{
	return c->limit_cpu || c->limit_memory || c->limit_processes;
}

/* With limits the child runs plxd-cgi-exec; refuse to start without it
 * rather than run scripts unlimited. */
static int check_helper(const struct cgi_state *st, const struct cgi_conf *c)
{
	if (!limits_wanted(c) || access(st->helper, X_OK) == 0)
		return 0;
	plxd_log(PLXD_LOG_ERROR, "cgi: limits are set but %s cannot be executed: %s", st->helper,
			strerror(errno));
	return -1;
}

static int cgi_start(const void *conf, void **state)
{
	struct cgi_state *st = xcalloc(1, sizeof *st);
	/* The helper is installed beside this module (build: modules/). */
	char self[PATH_MAX];
	if (plxd_module_dir(&plxd_handler_module, self, sizeof self) == 0) {
		if ((size_t)snprintf(st->helper, sizeof st->helper, "%s/plxd-cgi-exec", self)
				>= sizeof st->helper)
			st->helper[0] = '\0';
		if ((size_t)snprintf(st->perl5lib, sizeof st->perl5lib, "PERL5LIB=%s/perl5", self)
				>= sizeof st->perl5lib)
			st->perl5lib[0] = '\0';
	}
	char err[256];
	if (check_helper(st, conf) < 0 || !(st->spawner = cgi_spawner_create(err, sizeof err))) {
		if (!st->spawner && st->helper[0])
			plxd_log(PLXD_LOG_ERROR, "cgi: %s", err);
		free(st);
		return -1;
	}
	*state = st;
	return 0;
}

static int cgi_reconfigure(void *state, const void *conf)
{
	return check_helper(state, conf);
}

static void cgi_stop(void *state)
{
	struct cgi_state *st = state;
	if (!st)
		return;
	cgi_spawner_destroy(st->spawner);
	free(st);
}

/* Checks the script and takes a child slot. Returns the request's state,
 * or NULL after queuing an error response. */
static struct cgi_req *cgi_req_create(struct plxd_request *r)
{
	const struct cgi_conf *conf = r->conf;
	struct cgi_state *st = r->state;
	if (!S_ISREG(r->st.st_mode))
		return plxd_respond_error(r, 403), NULL;
	char *program = interpreter_for(conf, r->route_name);
	if (!program && !(r->st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH))) {
		plxd_log(PLXD_LOG_ERROR,
				"%s: not executable and no interpreter is configured for it",
				r->file);
		return plxd_respond_error(r, 403), NULL;
	}
	if (atomic_fetch_add(&st->children, 1) >= conf->max_children) {
		atomic_fetch_sub(&st->children, 1);
		free(program);
		plxd_log(PLXD_LOG_WARN, "%s: answered 503: max_children (%lu) scripts are running",
				r->file, conf->max_children);
		return plxd_respond_error(r, 503), NULL;
	}
	struct cgi_req *q = xcalloc(1, sizeof *q);
	q->state = st;
	q->conf = conf;
	q->loop = plxd_loop(r);
	q->script = xstrdup(r->file);
	q->program = program;
	spawn_child_init(&q->child);
	loop_watch_init(&q->exit_w);
	loop_timer_init(&q->timer);
	struct gw_settings set = {
		.timeout_ms = conf->timeout_ms,
		.max_script_header = (size_t)conf->max_script_header_size,
		.spool_limit = plxd_max_body(r),
		.tmp_dir = plxd_tmp_dir(r),
	};
	gw_init(&q->gw, &cgi_gw_ops, r, q->script, &set);
	r->data = q;
	return q;
}

/* Perl refuses to run a script whose #! line says -T (or -t) unless the
 * command line says it too ("-T" is on the #! line, it must also be used
 * on the command line), so a perl interpreter gets the switch from the
 * script's first line. Returns "-T", "-t" or NULL. */
static const char *taint_switch(const struct plxd_request *r, const char *program)
{
	const char *base = strrchr(program, '/');
	if (!strstr(base ? base + 1 : program, "perl"))
		return NULL;
	char line[256];
	ssize_t n = pread(r->fd, line, sizeof line - 1, 0);
	if (n < 3 || line[0] != '#' || line[1] != '!')
		return NULL;
	line[n] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	/* Switch clusters after the interpreter: "-wT", "-T", "-t". */
	for (char *word = strchr(line, ' '); word; word = strchr(word + 1, ' ')) {
		if (word[1] != '-')
			continue;
		size_t len = strcspn(word + 1, " \t");
		if (memchr(word + 1, 'T', len))
			return "-T";
		if (memchr(word + 1, 't', len))
			return "-t";
	}
	return NULL;
}

/* Hands the script to the spawner; it comes back in spawned(). */
static void cgi_req_spawn(struct cgi_req *q)
{
	struct plxd_request *r = q->gw.r;
	const struct cgi_conf *conf = q->conf;
	q->env = gw_request_env(r, conf->path, conf->pass_authorization,
			q->state->perl5lib[0] ? q->state->perl5lib : NULL);
	/* argv is the program and the script, never words of the query string:
	 * RFC 3875 4.4 makes them optional, and feeding client text to a
	 * command line is how PHP-CGI's CVE-2012-1823 happened. */
	q->argv[0] = q->program ? q->program : q->script;
	if (q->program) {
		const char *taint = taint_switch(r, q->program);
		q->argv[taint ? 2 : 1] = q->script;
		if (taint)
			q->argv[1] = (char *)taint;
	}
	const char *slash = strrchr(q->script, '/');
	q->dir = xstrndup(q->script, slash && slash != q->script ? (size_t)(slash - q->script) : 1);
	q->limits = (struct spawn_limits){
		.cpu_seconds = conf->limit_cpu,
		.address_space = conf->limit_memory,
		.processes = conf->limit_processes,
	};
	q->job.spec = (struct spawn_spec){
		.path = q->argv[0],
		.argv = q->argv,
		.envp = q->env,
		.dir = q->dir,
		.limits = &q->limits,
		.helper = q->state->helper,
	};
	q->job.loop = q->loop;
	q->job.done = spawned;
	q->spawning = 1;
	/* Until the job is back, the loop must not look idle (a stop waits
	 * for it): the timer is the script's timeout, which it cannot pass. */
	loop_timer_set(q->loop, &q->timer, clock_ms() + conf->timeout_ms + 60000, on_timer);
	cgi_spawner_submit(q->state->spawner, &q->job);
}

static void spawned(struct cgi_spawn_job *job)
{
	struct cgi_req *q = (struct cgi_req *)(void *)((char *)job - offsetof(struct cgi_req, job));
	q->spawning = 0;
	loop_timer_stop(q->loop, &q->timer);
	cgi_env_free(q->env);
	q->env = NULL;
	if (job->error) {
		plxd_log(PLXD_LOG_ERROR, "%s: cannot execute %s: %s", q->script, q->argv[0],
				strerror(job->error));
		gw_refuse(&q->gw, job->error == EAGAIN ? 503 : 500);
		q->stopped = 1;
		q->over = 1;
		gw_fini(&q->gw);
		maybe_free(q);
		return;
	}
	q->child = job->child;
	q->started = 1;
	loop_watch_add(q->loop, &q->exit_w, q->child.pidfd, LOOP_IN, on_exit_fd);
	int in = q->child.in;
	q->child.in = -1; /* the gateway feeds and closes it */
	gw_started(&q->gw, in, q->child.out, q->child.err);
	if (q->stopped) /* the request ended while it was being spawned */
		end_script(q);
}

/* ---- hooks ---- */

static int cgi_begin(struct plxd_request *r)
{
	struct cgi_req *q = cgi_req_create(r);
	if (!q)
		return PLXD_RESPONDED;
	/* A chunked body is spooled first: CONTENT_LENGTH must be known
	 * before the script starts (RFC 3875 4.1.2). */
	if (r->content_length < 0)
		return PLXD_SPOOL_BODY;
	cgi_req_spawn(q);
	return PLXD_STREAM_BODY;
}

static unsigned cgi_body(struct plxd_request *r, const char *data, size_t len, size_t *taken)
{
	struct cgi_req *q = r->data;
	if (!q) {
		*taken = len;
		return 500;
	}
	return gw_body(&q->gw, data, len, taken);
}

static int cgi_handle(struct plxd_request *r)
{
	struct cgi_req *q = r->data;
	/* No begin: a local redirect to this script. */
	if (!q && !(q = cgi_req_create(r)))
		return 0;
	if (!q->started && !q->spawning)
		cgi_req_spawn(q);
	return gw_handle(&q->gw);
}

static void cgi_finished(struct plxd_request *r, enum plxd_end how)
{
	struct cgi_req *q = r->data;
	if (!q)
		return;
	r->data = NULL;
	gw_finished(&q->gw, how);
	maybe_free(q);
}

/* ---- the script's side ---- */

/* The output, for the gateway, which watches the descriptor: it is closed
 * only once the gateway has stopped (end_script), never under its watch. */
static ssize_t script_read(struct gw *g, char *buf, size_t len)
{
	struct cgi_req *q = (struct cgi_req *)g;
	if (q->out_eof)
		return 0;
	for (;;) {
		ssize_t n = read(q->child.out, buf, len);
		if (n > 0)
			return n;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return -1;
		if (n < 0)
			plxd_log(PLXD_LOG_ERROR, "%s: reading its output: %s", q->script,
					strerror(errno));
		q->out_eof = 1;
		if (q->child.exited && !q->stopped)
			loop_timer_stop(q->loop, &q->timer); /* nothing holds the output */
		return 0;
	}
}

/* How the child ended, for the gateway. */
static void describe_end(struct cgi_req *q)
{
	struct gw_end *e = &q->gw.end;
	int st = q->child.status;
	e->known = 1;
	e->failed = !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	e->cut = WIFSIGNALED(st);
	spawn_describe_status(st, e->how, sizeof e->how);
}

static void on_exit_fd(struct loop_watch *w, unsigned events)
{
	(void)events;
	struct cgi_req *q =
			(struct cgi_req *)(void *)((char *)w - offsetof(struct cgi_req, exit_w));
	if (!spawn_peek_exit(&q->child))
		return; /* not yet: the pidfd says so again */
	loop_watch_del(q->loop, w);
	describe_end(q);
	if (q->stopped) {
		end_script(q);
		return;
	}
	gw_ended(&q->gw);
	/* A background process it started may hold its output open: the
	 * response waits for it only as long as linger allows. */
	if (!q->out_eof)
		loop_timer_set(q->loop, &q->timer, clock_ms() + q->conf->linger_ms, on_timer);
}

static void on_timer(struct loop_timer *t)
{
	struct cgi_req *q = (struct cgi_req *)(void *)((char *)t - offsetof(struct cgi_req, timer));
	if (q->spawning) {
		/* The spawner is stuck far past any timeout: say so, and wait
		 * on for its answer (freeing now would lose it). */
		plxd_log(PLXD_LOG_ERROR, "%s: the spawner has not answered for %lu ms", q->script,
				q->conf->timeout_ms + 60000);
		loop_timer_set(q->loop, t, clock_ms() + 60000, on_timer);
		return;
	}
	if (!q->stopped) {
		/* Exited, but a background process holds its output. */
		q->gw.out_cut = "exited, but a background process held its output past linger; "
				"its process group was ended";
		q->out_eof = 1;
		q->kill = 1; /* its process group goes with it */
		gw_output_ready(&q->gw);
		return;
	}
	if (!q->killed_by_us) {
		if (!q->kill)
			plxd_log(PLXD_LOG_INFO,
					"%s: still running %lu ms after its output ended; "
					"ended it",
					q->script, q->conf->linger_ms);
		q->kill = 1;
		end_script(q);
		return;
	}
	/* TERM was not enough within kill_grace. */
	spawn_signal(&q->child, SIGKILL);
}

/* The gateway is done with the script. */
static void script_stop(struct gw *g, enum gw_stop how)
{
	struct cgi_req *q = (struct cgi_req *)g;
	q->stopped = 1;
	q->kill |= how != GW_STOP_DONE;
	if (q->spawning)
		return; /* spawned() carries on */
	if (!q->started) {
		q->over = 1;
		gw_fini(g);
		return;
	}
	end_script(q);
}

/* Ends the script as the gateway asked: let it exit within linger, or
 * TERM its process group, then KILL after kill_grace; and once it is
 * reaped, lets go of it. */
static void end_script(struct cgi_req *q)
{
	if (q->child.out >= 0) {
		/* Unread output: closing it ends a script still printing
		 * (EPIPE), as HEAD, 204 and 304 answers leave it. */
		q->unread |= !q->out_eof;
		q->out_eof = 1;
		close(q->child.out);
		q->child.out = -1;
	}
	if (q->child.exited) {
		/* Reaped only now: until then its process group is its own. */
		if (q->kill)
			spawn_signal(&q->child, SIGKILL); /* background processes */
		spawn_reap_if_exited(&q->child);
		loop_timer_stop(q->loop, &q->timer);
		if (!q->kill && !q->unread)
			gw_log_end(&q->gw);
		q->over = 1;
		gw_fini(&q->gw);
		if (q->child.err >= 0)
			close(q->child.err);
		close(q->child.pidfd);
		q->child.err = q->child.pidfd = -1;
		maybe_free(q);
		return;
	}
	if (!q->kill) {
		if (!loop_timer_armed(&q->timer))
			loop_timer_set(q->loop, &q->timer, clock_ms() + q->conf->linger_ms,
					on_timer);
		return;
	}
	if (!q->killed_by_us) {
		q->killed_by_us = 1;
		spawn_signal(&q->child, SIGTERM);
		loop_timer_set(q->loop, &q->timer, clock_ms() + q->conf->kill_grace_ms, on_timer);
	}
}

static void free_req(void *arg)
{
	struct cgi_req *q = arg;
	atomic_fetch_sub(&q->state->children, 1);
	free(q->script);
	free(q->program);
	free(q->dir);
	free(q);
}

/* Frees q once both its request and its script are over. The free is
 * posted, so that it runs after whatever callback got here has returned:
 * the gateway and the hooks may still be on their way out through q. */
static void maybe_free(struct cgi_req *q)
{
	if (!q->over || q->gw.r || q->spawning || q->free_posted)
		return;
	q->free_posted = 1;
	loop_post(q->loop, free_req, q);
}

/* The status page's row: scripts running now (spawning, running, or
 * lingering after their response, until reaped). */
static void cgi_report(void *state, struct plxd_report *rep)
{
	struct cgi_state *st = state;
	plxd_report_gauge(rep, "children_running", atomic_load(&st->children));
}

const struct plxd_handler plxd_handler_module = {
	.abi = PLXD_HANDLER_ABI,
	.name = "cgi",
	.keys = cgi_keys,
	.conf_size = sizeof(struct cgi_conf),
	.start = cgi_start,
	.reconfigure = cgi_reconfigure,
	.stop = cgi_stop,
	.begin = cgi_begin,
	.body = cgi_body,
	.handle = cgi_handle,
	.finished = cgi_finished,
	.report = cgi_report,
};
