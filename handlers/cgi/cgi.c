/* The cgi handler: runs .pl (through a configured interpreter) and .cgi
 * (executed itself) as RFC 3875 CGI scripts, one process per request. This
 * file is the glue: configuration, the handler hooks, and turning the
 * script's output into a libmicrohttpd response streamed as it comes. */
#include "alloc.h"
#include "cgi_env.h"
#include "cgi_reply.h"
#include "cgi_request.h"
#include "cgi_run.h"
#include "cgi_spawn.h"
#include "handler.h"
#include "log.h"
#include "req_limits.h"
#include "version.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* How long an exited script's stdout may take to report its end before
 * the exit status is judged (its end and the exit race by microseconds). */
#define CGI_EXIT_SETTLE_MS 100

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
	atomic_ulong children;   /* scripts running (slots taken) */
	char helper[PATH_MAX];   /* plxd-cgi-exec, beside this module */
	char perl5lib[PATH_MAX]; /* "PERL5LIB=" the perl5 folder beside this
				    module, where PLXD::Request lives */
};

/* One request's script. */
struct cgi_req {
	struct plxd_request *r;
	struct cgi_state *state;
	const struct cgi_conf *conf;
	char *script;            /* absolute file name, for log lines */
	const char *program;     /* interpreter, or NULL: the script itself */
	int started;             /* the child was spawned */
	struct cgi_run run;
	struct cgi_reply reply;
	int reply_done;          /* the header block was parsed */
	uint64_t parsed;         /* spooled bytes given to the parser */
	uint64_t body_start;     /* spool offset of the response body */
	uint64_t served;         /* body bytes handed to libmicrohttpd */
	int failed;              /* ended early: its whole group is ended */
	int client_gone;
};

static const char *check_interpreters(const char *value);
static int cgi_start(const void *conf, void **state);
static int cgi_reconfigure(void *state, const void *conf);
static void cgi_stop(void *state);
static int cgi_begin(struct plxd_request *r);
static unsigned cgi_body(struct plxd_request *r, const char *data, size_t len);
static int cgi_handle(struct plxd_request *r);
static void cgi_finished(struct plxd_request *r, enum plxd_end how);
static unsigned bad_output(struct cgi_req *q, const char *why);
static unsigned timed_out(struct cgi_req *q);

#define CGI_KEY(n, t, field, def, ...) \
	{ .name = n, .type = t, .offset = offsetof(struct cgi_conf, field), \
	  .default_value = def, __VA_ARGS__ }

static const struct conf_key cgi_keys[] = {
	CGI_KEY("interpreters", CONF_LIST, interpreters, ".pl=/usr/bin/perl",
		.check = check_interpreters,
		.help = "EXT=PROGRAM words: scripts ending in EXT run as PROGRAM SCRIPT; others "
			"(.cgi) are executed themselves (their #! line) and must be executable"),
	CGI_KEY("path", CONF_STRING, path, "/usr/local/bin:/usr/bin:/bin",
		.help = "PATH in the scripts' environment (nothing else of plxd's environment is passed)"),
	CGI_KEY("pass_authorization", CONF_BOOL, pass_authorization, "no",
		.help = "pass the Authorization header to scripts as HTTP_AUTHORIZATION"),
	CGI_KEY("timeout", CONF_DURATION, timeout_ms, "60s", .min = 100, .max = 24 * 3600 * 1000,
		.help = "a script running longer is ended (TERM, then KILL to its process group): "
			"504 before its headers, the connection closed after"),
	CGI_KEY("linger", CONF_DURATION, linger_ms, "2s", .max = 3600 * 1000,
		.help = "after the script exits, how long a background process may hold its output "
			"open (or the script run on after its output ended) before its group is ended"),
	CGI_KEY("kill_grace", CONF_DURATION, kill_grace_ms, "1s", .max = 60 * 1000,
		.help = "between TERM and KILL when a script is ended"),
	CGI_KEY("max_children", CONF_UINT, max_children, "64", .min = 1, .max = 65536,
		.help = "scripts running at once at most; requests beyond get 503 with Retry-After"),
	CGI_KEY("max_script_header_size", CONF_SIZE, max_script_header_size, "64K", .min = 1024,
		.max = 16 * 1024 * 1024,
		.help = "the header block a script prints at most (500 beyond)"),
	CONF_ALIAS_KEY("max_header_size", "max_script_header_size"),
	CGI_KEY("limit_cpu", CONF_UINT, limit_cpu, "0", .max = 24 * 3600,
		.help = "RLIMIT_CPU of scripts in seconds, 0 for none"),
	CGI_KEY("limit_memory", CONF_SIZE, limit_memory, "0",
		.help = "RLIMIT_AS (address space) of scripts, 0 for none"),
	CGI_KEY("limit_processes", CONF_UINT, limit_processes, "0", .max = 1u << 22,
		.help = "RLIMIT_NPROC of scripts (counts every process of plxd's user; root "
			"is exempt), 0 for none"),
	CONF_KEYS_END
};

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
	if (cgi_request_module_dir(self, sizeof self) == 0) {
		if ((size_t)snprintf(st->helper, sizeof st->helper, "%s/plxd-cgi-exec", self) >=
				sizeof st->helper)
			st->helper[0] = '\0';
		if ((size_t)snprintf(st->perl5lib, sizeof st->perl5lib, "PERL5LIB=%s/perl5", self) >=
				sizeof st->perl5lib)
			st->perl5lib[0] = '\0';
	}
	if (check_helper(st, conf) < 0) {
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
	free(state);
}

static void cgi_release(struct cgi_req *q)
{
	if (q->started)
		cgi_run_fini(&q->run, (unsigned)q->conf->kill_grace_ms, q->failed);
	cgi_reply_fini(&q->reply);
	atomic_fetch_sub(&q->state->children, 1);
	free(q->script);
	free((char *)q->program);
	free(q);
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
		plxd_log(PLXD_LOG_ERROR, "%s: not executable and no interpreter is configured for it",
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
	q->r = r;
	q->state = st;
	q->conf = conf;
	q->script = xstrdup(r->file);
	q->program = program;
	cgi_reply_init(&q->reply, (size_t)conf->max_script_header_size);
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

/* Starts the script. Returns 0, or -1 after queuing an error response. */
static int cgi_req_spawn(struct cgi_req *q)
{
	struct plxd_request *r = q->r;
	const struct cgi_conf *conf = q->conf;
	cgi_run_init(&q->run, q->script, conf->timeout_ms, conf->linger_ms, plxd_max_body(r),
			plxd_tmp_dir(r));

	char **env = cgi_request_env(r, conf->path, conf->pass_authorization,
			q->state->perl5lib[0] ? q->state->perl5lib : NULL);
	/* argv is the program and the script, never words of the query string:
	 * RFC 3875 4.4 makes them optional, and feeding client text to a
	 * command line is how PHP-CGI's CVE-2012-1823 happened. */
	char *argv[4] = { (char *)(q->program ? q->program : q->script), NULL, NULL, NULL };
	if (q->program) {
		const char *taint = taint_switch(r, q->program);
		argv[taint ? 2 : 1] = q->script;
		if (taint)
			argv[1] = (char *)taint;
	}
	const char *slash = strrchr(q->script, '/');
	char *dir = xstrndup(q->script, slash && slash != q->script ? (size_t)(slash - q->script) : 1);
	struct cgi_limits limits = {
		.cpu_seconds = conf->limit_cpu,
		.address_space = conf->limit_memory,
		.processes = conf->limit_processes,
	};
	struct cgi_spawn_spec spec = {
		.path = argv[0],
		.argv = argv,
		.envp = env,
		.dir = dir,
		.limits = &limits,
		.helper = q->state->helper,
	};
	int rc = cgi_spawn_start(&spec, &q->run.child);
	int err = errno;
	free(dir);
	cgi_env_free(env);
	if (rc < 0) {
		plxd_log(PLXD_LOG_ERROR, "%s: cannot execute %s: %s", q->script, argv[0], strerror(err));
		plxd_respond_error(r, err == EAGAIN ? 503 : 500);
		return -1;
	}
	q->started = 1;
	return 0;
}

static int cgi_begin(struct plxd_request *r)
{
	struct cgi_req *q = cgi_req_create(r);
	if (!q)
		return PLXD_RESPONDED;
	/* A chunked body is spooled first: CONTENT_LENGTH must be known
	 * before the script starts (RFC 3875 4.1.2). */
	if (r->content_length < 0)
		return PLXD_SPOOL_BODY;
	if (cgi_req_spawn(q) < 0)
		return PLXD_RESPONDED;
	return PLXD_STREAM_BODY;
}

static unsigned cgi_body(struct plxd_request *r, const char *data, size_t len)
{
	struct cgi_req *q = r->data;
	if (!q || !q->started)
		return 500;
	unsigned status = cgi_run_feed(&q->run, data, len);
	if (status) {
		q->failed = 1;
		if (status == 504)
			timed_out(q);
	}
	return status;
}

/* Why a script ended without a usable header block, with its exit: the
 * script failed, 500. */
static unsigned bad_output(struct cgi_req *q, const char *why)
{
	char how[64];
	cgi_run_reap_within(&q->run, CGI_EXIT_SETTLE_MS);
	cgi_run_describe_exit(&q->run, how, sizeof how);
	cgi_request_log_failure(q->script, 500, why, how);
	return 500;
}

static unsigned timed_out(struct cgi_req *q)
{
	char why[64];
	snprintf(why, sizeof why, "ran longer than timeout (%lu ms)", q->conf->timeout_ms);
	cgi_request_log_failure(q->script, 504, why, "");
	return 504;
}

/* Reads until the header block is complete. Returns 0, or an HTTP status
 * (q->client_gone: the client left, nothing can be sent). */
static unsigned read_headers(struct cgi_req *q)
{
	struct cgi_run *run = &q->run;
	for (;;) {
		while (q->parsed < run->spool_size) {
			char buf[16384];
			ssize_t n = cgi_run_spool_read(run, q->parsed, buf, sizeof buf);
			if (n < 0)
				return 500;
			size_t used;
			enum cgi_reply_result res = cgi_reply_feed(&q->reply, buf, (size_t)n, &used);
			if (res == CGI_REPLY_DONE) {
				q->body_start = q->parsed + used;
				q->reply_done = 1;
				return 0;
			}
			if (res == CGI_REPLY_ERROR)
				return bad_output(q, q->reply.error);
			q->parsed += (uint64_t)n;
		}
		if (run->out_eof) {
			cgi_reply_eof(&q->reply);
			return bad_output(q, q->reply.error);
		}
		unsigned ev = cgi_run_wait(run, 0, 1);
		if (ev & CGI_RUN_CLIENT_GONE) {
			plxd_log(PLXD_LOG_INFO, "%s: the client left before the script's headers; ended it",
					q->script);
			q->client_gone = 1;
			return 500;
		}
		if (ev & CGI_RUN_TIMEOUT)
			return timed_out(q);
		if (ev & CGI_RUN_LINGER)
			return bad_output(q, "exited, but a background process holds its output");
		unsigned status = (ev & CGI_RUN_OUT) ? cgi_run_spool_out(run, 16384) : 0;
		if (status)
			return status;
	}
}

/* Whether a local redirect comes without a body: waits for the end of the
 * output. Returns 1 (empty), 0 (a body follows), or an HTTP status. */
static unsigned local_body_empty(struct cgi_req *q)
{
	struct cgi_run *run = &q->run;
	for (;;) {
		if (run->spool_size > q->body_start)
			return 0;
		if (run->out_eof)
			return 1;
		unsigned ev = cgi_run_wait(run, 0, 1);
		if (ev & CGI_RUN_CLIENT_GONE) {
			q->client_gone = 1;
			return 500;
		}
		if (ev & CGI_RUN_TIMEOUT)
			return timed_out(q);
		if (ev & CGI_RUN_LINGER)
			return 1; /* its background process is ended with it */
		unsigned status = (ev & CGI_RUN_OUT) ? cgi_run_spool_out(run, 16384) : 0;
		if (status)
			return status;
	}
}

/* RFC 3875 6.2.2: plxd serves the local path itself, as a GET. */
static int redirect_local(struct cgi_req *q)
{
	struct plxd_request *r = q->r;
	char *target = xstrdup(q->reply.location);
	plxd_log(PLXD_LOG_DEBUG, "%s: local redirect to %s", q->script, target);
	/* This script is over: end it before the new target runs (it may be
	 * a script again and need a slot). */
	q->failed |= !q->run.out_eof;
	r->data = NULL;
	cgi_release(q);
	int rc = plxd_serve_local(r, target);
	free(target);
	return rc;
}

static ssize_t served(struct cgi_req *q, ssize_t n)
{
	q->served += (uint64_t)n;
	q->r->bytes_sent += (uint64_t)n;
	return n;
}

/* The end of the script's output while streaming. */
static ssize_t stream_end(struct cgi_req *q)
{
	int64_t length = q->reply.content_length;
	if (length >= 0 && q->served < (uint64_t)length) {
		plxd_log(PLXD_LOG_ERROR, "%s: output ended after %llu of the %lld bytes its "
				"Content-Length announced; connection closed", q->script,
				(unsigned long long)q->served, (long long)length);
		q->failed = 1;
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	/* A script killed mid-output must not look complete: close the
	 * connection instead of ending the chunked body. */
	if (cgi_run_reap_within(&q->run, CGI_EXIT_SETTLE_MS) && WIFSIGNALED(q->run.child.status)) {
		char how[64];
		cgi_run_describe_exit(&q->run, how, sizeof how);
		plxd_log(PLXD_LOG_ERROR, "%s: %s; response cut short, connection closed", q->script, how);
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	return MHD_CONTENT_READER_END_OF_STREAM;
}

/* libmicrohttpd's content reader: the response body, read from the
 * script as libmicrohttpd can send it. Blocks in the connection's own
 * thread, watching the client too, so a client that leaves ends the
 * script at once. */
static ssize_t stream(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct cgi_req *q = cls;
	int64_t length = q->reply.content_length;
	if (length >= 0) {
		if (q->served >= (uint64_t)length)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (max > (uint64_t)length - q->served)
			max = (size_t)((uint64_t)length - q->served);
	}
	uint64_t at = q->body_start + q->served;
	if (at < q->run.spool_size) {
		ssize_t n = cgi_run_spool_read(&q->run, at, buf, max);
		if (n < 0) {
			q->failed = 1;
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		return served(q, n);
	}
	for (;;) {
		ssize_t n = cgi_run_read(&q->run, buf, max);
		if (n > 0)
			return served(q, n);
		if (n == 0)
			return stream_end(q);
		unsigned ev = cgi_run_wait(&q->run, 0, 1);
		if (ev & CGI_RUN_CLIENT_GONE) {
			plxd_log(PLXD_LOG_INFO, "%s: the client left during the response; ended the script",
					q->script);
			q->failed = q->client_gone = 1;
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		if (ev & CGI_RUN_TIMEOUT) {
			plxd_log(PLXD_LOG_ERROR, "%s: timed out after %lu ms; connection closed", q->script,
					q->conf->timeout_ms);
			q->failed = 1;
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		if (ev & CGI_RUN_LINGER) {
			plxd_log(PLXD_LOG_WARN, "%s: exited, but a background process held its output "
					"%lu ms later; response ended, process group ended", q->script,
					q->conf->linger_ms);
			q->failed = 1;
			return length >= 0 ? MHD_CONTENT_READER_END_WITH_ERROR
					   : MHD_CONTENT_READER_END_OF_STREAM;
		}
	}
}

static int client_fd(struct plxd_request *r)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->connection,
			MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

static int respond(struct cgi_req *q)
{
	struct plxd_request *r = q->r;
	unsigned status = read_headers(q);
	if (status) {
		q->failed = 1;
		if (q->client_gone)
			return -1;
		return plxd_respond_error(r, status);
	}
	const struct cgi_reply *rep = &q->reply;
	if (rep->location_local) {
		status = local_body_empty(q);
		if (status == 1)
			return redirect_local(q);
		if (status > 1) {
			q->failed = 1;
			return q->client_gone ? -1 : plxd_respond_error(r, status);
		}
	}
	uint64_t size = rep->content_length >= 0 ? (uint64_t)rep->content_length
						 : MHD_SIZE_UNKNOWN;
	struct MHD_Response *resp = plxd_response_stream(r, rep->status, size, stream, q);
	if (!resp) {
		q->failed = 1;
		return plxd_respond_error(r, 500);
	}
	cgi_request_add_headers(resp, rep, q->script);
	return plxd_respond(r, rep->status, resp);
}

static int cgi_handle(struct plxd_request *r)
{
	struct cgi_req *q = r->data;
	/* No begin: a local redirect to this script. */
	if (!q && !(q = cgi_req_create(r)))
		return 0;
	if (!q->started) {
		if (cgi_req_spawn(q) < 0)
			return 0;
		char buf[65536];
		ssize_t n;
		while ((n = plxd_body_read(r, buf, sizeof buf)) > 0) {
			unsigned status = cgi_body(r, buf, (size_t)n);
			if (status)
				return plxd_respond_error(r, status);
		}
	}
	cgi_spawn_close_in(&q->run.child);
	q->run.client_fd = client_fd(r);
	return respond(q);
}

/* After a complete response with a Content-Length: the script should end
 * now. More output is an error the client cannot see, so the connection
 * is closed (the next request on it would read garbage otherwise). */
static void check_tail(struct cgi_req *q)
{
	struct cgi_run *run = &q->run;
	char scratch[512];
	int more = run->spool_size > q->body_start + q->served; /* read with the headers */
	while (more || !run->out_eof) {
		ssize_t n = more ? 1 : cgi_run_read(run, scratch, sizeof scratch);
		if (n > 0) {
			plxd_log(PLXD_LOG_ERROR, "%s: printed more than the %lld bytes its Content-Length "
					"announced; connection closed", q->script,
					(long long)q->reply.content_length);
			int fd = client_fd(q->r);
			if (fd >= 0)
				shutdown(fd, SHUT_RDWR);
			q->failed = 1;
			return;
		}
		if (n == 0)
			return;
		unsigned ev = cgi_run_wait(run, 0, 1);
		if (ev & (CGI_RUN_TIMEOUT | CGI_RUN_LINGER)) {
			q->failed = 1;
			return;
		}
	}
}

/* After the output ended: gives the script up to linger to exit by
 * itself, logging its stderr meanwhile. */
static void await_exit(struct cgi_req *q)
{
	struct cgi_run *run = &q->run;
	uint64_t until = cgi_run_now_ms() + q->conf->linger_ms;
	if (until < run->deadline_ms)
		run->deadline_ms = until;
	while (!run->child.exited) {
		if (cgi_run_wait(run, 0, 0) & (CGI_RUN_TIMEOUT | CGI_RUN_LINGER)) {
			plxd_log(PLXD_LOG_INFO, "%s: still running %lu ms after its output ended; ended it",
					q->script, q->conf->linger_ms);
			q->failed = 1;
			return;
		}
	}
}

static void cgi_finished(struct plxd_request *r, enum plxd_end how)
{
	struct cgi_req *q = r->data;
	if (!q)
		return;
	r->data = NULL;
	if (q->started) {
		q->run.client_fd = -1;
		if (how != PLXD_END_DONE)
			q->failed = 1;
		int unread = 0;
		if (!q->failed && q->reply_done) {
			if (q->reply.content_length >= 0 && q->served == (uint64_t)q->reply.content_length)
				check_tail(q);
			/* HEAD, 204, 304: libmicrohttpd sent no body, so nobody reads
			 * the rest; closing it ends a script still printing (EPIPE). */
			unread = !q->run.out_eof;
			cgi_run_close_out(&q->run);
			if (!q->failed)
				await_exit(q);
		}
		int killed_by_us = q->failed || unread;
		cgi_run_fini(&q->run, (unsigned)q->conf->kill_grace_ms, q->failed);
		q->started = 0;
		char exit_how[64];
		cgi_run_describe_exit(&q->run, exit_how, sizeof exit_how);
		if (exit_how[0] && !killed_by_us)
			plxd_log(PLXD_LOG_INFO, "%s: %s", q->script, exit_how);
	}
	cgi_release(q);
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
};
