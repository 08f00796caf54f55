/* plxd-perl-worker: one persistent Perl interpreter serving .plx requests
 * for plxd's perl handler, which starts it with posix_spawn (never fork
 * from plxd's threads) and talks to it over fd 3 (perl_wire.h). This file
 * is the transport: it reads a request, lends its descriptors to the Perl
 * runtime (perl_interp.c), and answers with the outcome; it decides when
 * the worker retires (max_requests, max_rss, a changed module). The
 * runtime calls it (next_request, answer) rather than the other way round,
 * because a script written as a FastCGI accept loop answers requests and
 * waits for the next ones from inside its loop.
 *
 * fds: 0 is /dev/null between requests and the request's body during one;
 * 1 is the response pipe (perl_wire.h); 2 is a pipe to plxd's error log;
 * 3 is the control socket. */
#include "perl_interp.h"
#include "perl_wire.h"
#include "alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define CONTROL_FD 3

struct worker_settings {
	uint64_t max_requests;
	uint64_t max_rss_kb;
	uint64_t max_memory;
	char *preload;
	char **inc;
	enum perl_taint taint;
	int twin_at_start;
};

static int control = CONTROL_FD;

static void close_control_in_child(void);
static int read_init(char *buf, struct worker_settings *s);
static void say_ready(int ok, const char *message);
static struct perl_run *next_request(void *ctx);
static int answer(void *ctx, struct perl_run *run);
static uint64_t peak_rss_kb(void);
static uint64_t peak_rss_kb_past(uint64_t limit_kb);

#if defined(__SANITIZE_ADDRESS__)
/* Under AddressSanitizer: a script may crash the worker on purpose (tests
 * do), which must look like a crash to plxd, not like a sanitizer report;
 * and perl handles an allocation that fails. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0:"
	       "allocator_may_return_null=1";
}
#endif

/* A child the script forks must not hold the control socket: plxd would
 * not see the worker's end, and the child must never answer for it. */
static void close_control_in_child(void)
{
	if (control >= 0)
		close(control);
	control = -1;
}

static void say_ready(int ok, const char *message)
{
	struct perl_wire_ready ready = {
		.type = PERL_WIRE_READY,
		.ok = (uint32_t)ok,
		.pid = (int32_t)getpid(),
		.message_len = message ? (uint32_t)strlen(message) : 0,
	};
	/* clang-format off */
	struct iovec iov[2] = {
		{ &ready, sizeof ready },
		{ (void *)(message ? message : ""), ready.message_len },
	};
	/* clang-format on */
	if (perl_wire_send(control, iov, 2, NULL, 0) < 0)
		fprintf(stderr, "perl worker %d: cannot answer plxd: %s\n", (int)getpid(),
				strerror(errno));
}

static int read_init(char *buf, struct worker_settings *s)
{
	int fds[2], nfds;
	ssize_t n = perl_wire_recv(control, buf, PERL_WIRE_MAX, fds, &nfds, 0);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	struct perl_wire_init init;
	if (n < (ssize_t)sizeof init)
		return -1;
	memcpy(&init, buf, sizeof init);
	if (init.type != PERL_WIRE_INIT || init.version != PERL_WIRE_VERSION
			|| sizeof init + (size_t)init.preload_len + init.inc_len != (size_t)n)
		return -1;
	s->max_requests = init.max_requests;
	s->max_rss_kb = init.max_rss_kb;
	s->max_memory = init.max_memory;
	s->taint = init.taint <= PERL_TAINT_REFUSE ? (enum perl_taint)init.taint
						   : PERL_TAINT_REFUSE;
	s->twin_at_start = init.twin_at_start != 0;
	char *p = buf + sizeof init;
	s->preload = init.preload_len ? xstrndup(p, init.preload_len) : NULL;
	p += init.preload_len;
	size_t count = 0;
	for (uint32_t i = 0; i < init.inc_len; i++)
		count += p[i] == '\0';
	s->inc = xcalloc(count + 1, sizeof *s->inc);
	char *end = p + init.inc_len;
	for (size_t i = 0; i < count && p < end; i++) {
		s->inc[i] = xstrndup(p, (size_t)(end - p));
		p += strlen(s->inc[i]) + 1;
	}
	return 0;
}

/* The worker's own peak, VmHWM. Not getrusage's ru_maxrss: Linux keeps
 * that across execve, and plxd starts a worker with posix_spawn (a vfork
 * sharing plxd's memory until the exec), so it would carry plxd's peak and
 * retire every worker at once when plxd itself is past max_rss. */
static uint64_t peak_rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return 0;
	char line[128];
	unsigned long long kb = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* The worker's peak when it may be past limit_kb, else 0. ru_maxrss is
 * the larger of that peak and plxd's at the worker's start, so at or
 * below the limit it proves the peak is too; only past it is the peak read
 * (VmHWM, which costs an open, a read and the kernel writing the whole of
 * /proc/self/status: not for every request). */
static uint64_t peak_rss_kb_past(uint64_t limit_kb)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) == 0 && ru.ru_maxrss >= 0
			&& (uint64_t)ru.ru_maxrss <= limit_kb)
		return 0;
	return peak_rss_kb();
}

/* The transport lent to the Perl runtime: one request at a time, read
 * into buf, answered with DONE. */
struct worker {
	struct perl_interp *pi;
	const struct worker_settings *s;
	char *buf; /* the request being served: run points into it */
	char **env;
	size_t env_cap;
	struct perl_run run;
	uint64_t requests;
	int rc; /* the worker's exit status */
};

/* Whether plxd said the request's client left (PERL_WIRE_GONE waits on
 * the socket). */
static int gone(void *ctx)
{
	(void)ctx;
	uint32_t type;
	return control >= 0
			&& recv(control, &type, sizeof type, MSG_PEEK | MSG_DONTWAIT)
			== (ssize_t)sizeof type
			&& type == PERL_WIRE_GONE;
}

/* Reads the next request; NULL when plxd closes the socket (it stops, or
 * this worker is to be replaced) or on a protocol error. */
static struct perl_run *next_request(void *ctx)
{
	struct worker *w = ctx;
	int fds[2] = { -1, -1 }, nfds = 0;
	ssize_t n;
	/* A request's GONE that came after its app had returned. */
	do
		n = perl_wire_recv(control, w->buf, PERL_WIRE_MAX, fds, &nfds, 0);
	while (n == (ssize_t)sizeof(struct perl_wire_gone) && nfds == 0
			&& ((struct perl_wire_gone *)(void *)w->buf)->type == PERL_WIRE_GONE);
	if (n == 0)
		return NULL; /* plxd is stopping */
	struct perl_wire_request req;
	if (n < (ssize_t)sizeof req) {
		fprintf(stderr, "perl worker %d: bad message from plxd (%s)\n", (int)getpid(),
				n < 0 ? strerror(errno) : "short");
		goto fail;
	}
	memcpy(&req, w->buf, sizeof req);
	int want_fds = (req.flags & PERL_WIRE_STDIN) ? 1 : 0;
	if (req.type != PERL_WIRE_REQUEST || nfds != want_fds || req.script_len == 0
			|| sizeof req + (size_t)req.script_len + req.env_len != (size_t)n) {
		fprintf(stderr, "perl worker %d: malformed request from plxd\n", (int)getpid());
		goto fail;
	}
	char *script = w->buf + sizeof req;
	script[req.script_len - 1] = '\0';
	char *p = script + req.script_len, *end = p + req.env_len;
	size_t nenv = 0;
	while (p < end) {
		if (nenv + 1 >= w->env_cap) {
			w->env_cap *= 2;
			w->env = xrealloc(w->env, w->env_cap * sizeof *w->env);
		}
		w->env[nenv++] = p;
		char *nul = memchr(p, '\0', (size_t)(end - p));
		if (!nul) {
			end[-1] = '\0';
			break;
		}
		p = nul + 1;
	}
	w->env[nenv] = NULL;
	w->run = (struct perl_run){
		.script = script,
		.dev = req.dev,
		.ino = req.ino,
		.size = req.size,
		.mtime_sec = req.mtime_sec,
		.mtime_nsec = req.mtime_nsec,
		.env = w->env,
		.stdin_fd = want_fds ? fds[0] : -1,
		.want_running = (req.flags & PERL_WIRE_TIMING) != 0,
	};
	return &w->run;

fail:
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	w->rc = 1;
	return NULL;
}

/* Tells plxd the script is compiled and about to run (for its timing
 * header, should the headers go out before DONE). */
static void running(void *ctx, const struct perl_run *run)
{
	(void)ctx;
	struct perl_wire_running msg = {
		.type = PERL_WIRE_RUNNING,
		.flags = run->compiled ? PERL_WIRE_COMPILED : 0,
		.compile_us = run->compile_us,
	};
	struct iovec iov = { &msg, sizeof msg };
	perl_wire_send(control, &iov, 1, NULL, 0); /* plxd gone: DONE says so */
}

/* Sends DONE for run, deciding whether the worker retires after it. */
static int answer(void *ctx, struct perl_run *run)
{
	struct worker *w = ctx;
	const struct worker_settings *s = w->s;
	w->requests++;
	struct perl_wire_done done = {
		.type = PERL_WIRE_DONE,
		.outcome = perl_wire_outcome(run->outcome),
		.exit_status = run->exit_status,
		.flags = run->compiled ? PERL_WIRE_COMPILED : 0,
		.compile_us = run->compile_us,
		.run_us = run->run_us,
		.requests = w->requests,
	};
	if (s->max_rss_kb)
		done.rss_kb = peak_rss_kb_past(s->max_rss_kb);
	if (run->outcome == PERL_FATAL)
		done.retire = PERL_RETIRE_FATAL;
	else if (perl_interp_threads_left(w->pi))
		done.retire = PERL_RETIRE_THREADS;
	else if (run->harakiri || perl_interp_retire_next(w->pi))
		done.retire = PERL_RETIRE_HARAKIRI;
	else if (s->max_requests && w->requests >= s->max_requests)
		done.retire = PERL_RETIRE_MAX_REQUESTS;
	else if (s->max_rss_kb && done.rss_kb > s->max_rss_kb)
		done.retire = PERL_RETIRE_MAX_RSS;
	else if (perl_interp_modules_changed(w->pi))
		done.retire = PERL_RETIRE_MODULES;
	if (done.retire)
		done.flags |= PERL_WIRE_RETIRING;
	if (perl_interp_has_twin(w->pi))
		done.flags |= PERL_WIRE_TWIN;
	/* A process the script started may still hold fd 1: the next
	 * request gets a pipe of its own. */
	int fresh[2] = { -1, -1 };
	if (run->forked && !done.retire) {
		if (pipe2(fresh, O_CLOEXEC) == 0) {
			perl_interp_set_stdout(w->pi, fresh[1]);
			done.flags |= PERL_WIRE_NEW_STDOUT;
		} else {
			done.retire = PERL_RETIRE_FATAL;
			done.flags |= PERL_WIRE_RETIRING;
		}
	}
	/* clang-format off */
	struct iovec iov[2] = {
		{ &done, sizeof done },
		{ (void *)run->tail, run->tail_len },
	};
	/* clang-format on */
	int sent = perl_wire_send(control, iov, run->tail_len ? 2 : 1, &fresh[0],
			fresh[0] >= 0 ? 1 : 0);
	if (fresh[0] >= 0)
		close(fresh[0]);
	return sent < 0 || done.retire ? -1 : 0;
}

int main(int argc, char **argv)
{
	struct worker_settings settings = { 0 };
	char *buf = NULL;
	int rc = 1;
	if (argc != 2 || strcmp(argv[1], "--plxd-worker") != 0
			|| fcntl(CONTROL_FD, F_SETFD, FD_CLOEXEC) < 0) {
		fprintf(stderr, "plxd-perl-worker: started by plxd's perl handler only\n");
		return 2;
	}
	pthread_atfork(NULL, NULL, close_control_in_child);
	/* Start-up code (preload) runs in /; each request in its script's
	 * folder. */
	if (chdir("/") < 0)
		return 1;

	buf = xmalloc(PERL_WIRE_MAX);
	if (read_init(buf, &settings) < 0) {
		fprintf(stderr, "perl worker %d: no valid settings from plxd\n", (int)getpid());
		goto out;
	}
#if !defined(__SANITIZE_ADDRESS__)
	/* AddressSanitizer reserves terabytes of address space: there the
	 * limit cannot apply. */
	if (settings.max_memory) {
		struct rlimit rl = { settings.max_memory, settings.max_memory };
		if (setrlimit(RLIMIT_AS, &rl) < 0)
			fprintf(stderr, "perl worker %d: cannot limit memory: %s\n", (int)getpid(),
					strerror(errno));
	}
#endif
	struct perl_interp_options o = { .preload = settings.preload,
		.inc = settings.inc,
		.taint = settings.taint };
	char err[2048];
	struct perl_interp *pi = perl_interp_create(&o, argc, argv, err, sizeof err);
	if (!pi) {
		say_ready(0, err);
		goto out;
	}
	/* Without the twin the worker still serves what needs none; a -T
	 * request tries again and says why it cannot run. */
	if (settings.twin_at_start && settings.taint == PERL_TAINT_HONOUR
			&& perl_interp_twin_start(pi, err, sizeof err) < 0)
		fprintf(stderr,
				"perl worker %d: no interpreter with taint checks (-T) could be "
				"started: %s\n",
				(int)getpid(), err);
	say_ready(1, NULL);
	struct worker w = { .pi = pi, .s = &settings, .buf = buf, .env_cap = 64 };
	w.env = xmalloc(w.env_cap * sizeof *w.env);
	struct perl_transport t = { .next = next_request,
		.answer = answer,
		.running = running,
		.gone = gone,
		.ctx = &w };
	perl_interp_serve(pi, &t);
	rc = w.rc;
	free(w.env);
	perl_interp_destroy(pi);
out:
	free(buf);
	free(settings.preload);
	for (size_t i = 0; settings.inc && settings.inc[i]; i++)
		free(settings.inc[i]);
	free(settings.inc);
	if (control >= 0)
		close(control);
	return rc;
}
