/* A running CGI script's I/O: one poll over its stdin, stdout, stderr,
 * exit (pidfd) and the client socket, bounded by the script's deadline.
 * Memory is bounded everywhere: stdout goes to a temp file past 64 KiB,
 * stderr is logged line by line from a fixed buffer. */
#include "cgi_run.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Output spooled in memory before it goes to a temp file. */
#define RUN_MEM_MAX (64 * 1024)
/* stderr read per wakeup, so a script flooding it cannot starve the rest. */
#define RUN_STDERR_BURST (64 * 1024)

static void close_fd(int *fd);
static void stderr_emit(struct cgi_run *run);
static unsigned spool_append(struct cgi_run *run, const char *data, size_t len);

uint64_t cgi_run_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void cgi_run_init(struct cgi_run *run, const char *script, uint64_t timeout_ms,
		uint64_t linger_ms, uint64_t spool_limit, const char *tmp_dir)
{
	memset(run, 0, sizeof *run);
	cgi_child_init(&run->child);
	run->script = script;
	run->client_fd = -1;
	run->spool_fd = -1;
	run->deadline_ms = cgi_run_now_ms() + timeout_ms;
	run->linger_ms = linger_ms;
	run->spool_limit = spool_limit;
	run->tmp_dir = tmp_dir;
}

/* One stderr line to the error log, control characters made harmless so
 * a script cannot forge log lines. */
static void stderr_emit(struct cgi_run *run)
{
	size_t len = run->line_len;
	if (len > 0 && run->line[len - 1] == '\r')
		len--;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)run->line[i] < 0x20 && run->line[i] != '\t')
			run->line[i] = '?';
	plxd_log(PLXD_LOG_WARN, "%s: %.*s", run->script, (int)len, run->line);
	run->line_len = 0;
}

void cgi_run_drain_stderr(struct cgi_run *run, int final)
{
	char buf[4096];
	size_t total = 0;
	while (run->child.err >= 0 && total < RUN_STDERR_BURST) {
		ssize_t n = read(run->child.err, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			close_fd(&run->child.err);
			final = 1;
			break;
		}
		total += (size_t)n;
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] == '\n') {
				stderr_emit(run);
				continue;
			}
			if (run->line_len == sizeof run->line)
				stderr_emit(run); /* a very long line goes out in pieces */
			run->line[run->line_len++] = buf[i];
		}
	}
	if (final && run->line_len > 0)
		stderr_emit(run);
}

unsigned cgi_run_wait(struct cgi_run *run, int want_in, int want_out)
{
	struct cgi_child *c = &run->child;
	for (;;) {
		uint64_t now = cgi_run_now_ms();
		if (now >= run->deadline_ms)
			return CGI_RUN_TIMEOUT;
		if (run->linger_until && now >= run->linger_until)
			return CGI_RUN_LINGER;
		uint64_t until = run->deadline_ms;
		if (run->linger_until && run->linger_until < until)
			until = run->linger_until;

		struct pollfd p[5];
		int n = 0, i_in = -1, i_out = -1, i_err = -1, i_pid = -1, i_client = -1;
		if (want_in && c->in >= 0) {
			i_in = n;
			p[n++] = (struct pollfd){ .fd = c->in, .events = POLLOUT };
		}
		if (want_out && c->out >= 0) {
			i_out = n;
			p[n++] = (struct pollfd){ .fd = c->out, .events = POLLIN };
		}
		if (c->err >= 0) {
			i_err = n;
			p[n++] = (struct pollfd){ .fd = c->err, .events = POLLIN };
		}
		if (c->pidfd >= 0 && !c->exited) {
			i_pid = n;
			p[n++] = (struct pollfd){ .fd = c->pidfd, .events = POLLIN };
		}
		if (run->client_fd >= 0) {
			i_client = n;
			p[n++] = (struct pollfd){ .fd = run->client_fd, .events = POLLIN | POLLRDHUP };
		}
		uint64_t wait = until - now;
		int k = poll(p, (nfds_t)n, wait > INT_MAX ? INT_MAX : (int)wait);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			plxd_log(PLXD_LOG_ERROR, "%s: poll: %s", run->script, strerror(errno));
			return CGI_RUN_TIMEOUT;
		}
		unsigned ev = 0;
		if (i_err >= 0 && p[i_err].revents)
			cgi_run_drain_stderr(run, 0);
		if (i_pid >= 0 && p[i_pid].revents) {
			c->exited = 1;
			ev |= CGI_RUN_EXITED;
			if (c->out >= 0 && !run->linger_until)
				run->linger_until = cgi_run_now_ms() + run->linger_ms;
		}
		if (i_in >= 0 && p[i_in].revents)
			ev |= CGI_RUN_IN; /* POLLERR too: the write then says EPIPE */
		if (i_out >= 0 && p[i_out].revents)
			ev |= CGI_RUN_OUT;
		if (i_client >= 0 && p[i_client].revents) {
			if (p[i_client].revents & (POLLRDHUP | POLLHUP | POLLERR))
				ev |= CGI_RUN_CLIENT_GONE;
			else
				run->client_fd = -1; /* a pipelined request: it stays readable */
		}
		if (ev)
			return ev;
	}
}

/* Returns 0, or an HTTP status (logged): 500 when the script printed more
 * than the spool takes, 502 when the spool itself failed. */
static unsigned spool_append(struct cgi_run *run, const char *data, size_t len)
{
	if (run->spool_size + len > run->spool_limit) {
		plxd_log(PLXD_LOG_ERROR, "%s: printed more than %llu bytes before its response could "
				"start", run->script, (unsigned long long)run->spool_limit);
		return 500;
	}
	if (run->spool_fd < 0 && run->mem_len + len > RUN_MEM_MAX) {
		run->spool_fd = open(run->tmp_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (run->spool_fd < 0) {
			plxd_log(PLXD_LOG_ERROR, "%s: cannot create a temp file in %s: %s", run->script,
					run->tmp_dir, strerror(errno));
			return 502;
		}
		if (run->mem_len > 0 && write(run->spool_fd, run->mem, run->mem_len) !=
				(ssize_t)run->mem_len) {
			plxd_log(PLXD_LOG_ERROR, "%s: cannot write to a temp file in %s: %s",
					run->script, run->tmp_dir, strerror(errno));
			return 502;
		}
		free(run->mem);
		run->mem = NULL;
		run->mem_len = run->mem_cap = 0;
	}
	if (run->spool_fd >= 0) {
		if (pwrite(run->spool_fd, data, len, (off_t)run->spool_size) != (ssize_t)len) {
			plxd_log(PLXD_LOG_ERROR, "%s: cannot write to a temp file in %s: %s", run->script,
					run->tmp_dir, strerror(errno));
			return 502;
		}
	} else {
		if (run->mem_len + len > run->mem_cap) {
			size_t cap = run->mem_cap ? run->mem_cap : 4096;
			while (cap < run->mem_len + len)
				cap *= 2;
			char *mem = realloc(run->mem, cap);
			if (!mem)
				abort(); /* plxd's out-of-memory policy (alloc.h) */
			run->mem = mem;
			run->mem_cap = cap;
		}
		memcpy(run->mem + run->mem_len, data, len);
		run->mem_len += len;
	}
	run->spool_size += len;
	return 0;
}

ssize_t cgi_run_read(struct cgi_run *run, char *buf, size_t len)
{
	if (run->child.out < 0)
		return 0;
	for (;;) {
		ssize_t n = read(run->child.out, buf, len);
		if (n > 0)
			return n;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return -1;
		if (n < 0)
			plxd_log(PLXD_LOG_ERROR, "%s: reading its output: %s", run->script, strerror(errno));
		close_fd(&run->child.out);
		run->out_eof = 1;
		run->linger_until = 0; /* nothing holds the output any more */
		return 0;
	}
}

void cgi_run_close_out(struct cgi_run *run)
{
	close_fd(&run->child.out);
	run->out_eof = 1;
	run->linger_until = 0;
}

unsigned cgi_run_spool_out(struct cgi_run *run, size_t max)
{
	char buf[16384];
	ssize_t n;
	while (max > 0 && (n = cgi_run_read(run, buf, max < sizeof buf ? max : sizeof buf)) > 0) {
		unsigned status = spool_append(run, buf, (size_t)n);
		if (status)
			return status;
		max -= (size_t)n;
	}
	return 0;
}

ssize_t cgi_run_spool_read(struct cgi_run *run, uint64_t offset, char *buf, size_t len)
{
	if (offset >= run->spool_size)
		return 0;
	if (len > run->spool_size - offset)
		len = (size_t)(run->spool_size - offset);
	if (run->spool_fd < 0) {
		memcpy(buf, run->mem + offset, len);
		return (ssize_t)len;
	}
	ssize_t n = pread(run->spool_fd, buf, len, (off_t)offset);
	if (n <= 0) {
		plxd_log(PLXD_LOG_ERROR, "%s: reading its spooled output: %s", run->script,
				n < 0 ? strerror(errno) : "short file");
		return -1;
	}
	return n;
}

unsigned cgi_run_feed(struct cgi_run *run, const char *data, size_t len)
{
	while (len > 0 && run->child.in >= 0) {
		unsigned ev = cgi_run_wait(run, 1, 1);
		if (ev & CGI_RUN_TIMEOUT)
			return 504;
		unsigned status = (ev & CGI_RUN_OUT) ? cgi_run_spool_out(run, SIZE_MAX) : 0;
		if (status)
			return status;
		if (ev & CGI_RUN_LINGER)
			break; /* exited; a background process holds stdin but never reads */
		if (!(ev & CGI_RUN_IN))
			continue;
		ssize_t n = write(run->child.in, data, len);
		if (n > 0) {
			data += n;
			len -= (size_t)n;
		} else if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		else
			break; /* EPIPE: the script stopped reading; the rest is dropped */
	}
	if (len > 0)
		cgi_spawn_close_in(&run->child);
	return 0;
}

int cgi_run_reap_within(struct cgi_run *run, uint64_t ms)
{
	struct cgi_child *c = &run->child;
	if (c->reaped)
		return 1;
	if (c->pid <= 0)
		return 0;
	if (!c->exited) {
		struct pollfd p = { .fd = c->pidfd, .events = POLLIN };
		int k;
		while ((k = poll(&p, 1, ms > INT_MAX ? INT_MAX : (int)ms)) < 0 && errno == EINTR)
			;
		if (k <= 0)
			return 0;
		c->exited = 1;
	}
	return cgi_spawn_reap_if_exited(c);
}

void cgi_run_describe_exit(const struct cgi_run *run, char *out, size_t outlen)
{
	out[0] = '\0';
	if (run->child.reaped)
		cgi_spawn_describe_status(run->child.status, out, outlen);
}

void cgi_run_fini(struct cgi_run *run, unsigned grace_ms, int kill_group)
{
	cgi_run_drain_stderr(run, 1);
	cgi_spawn_end(&run->child, grace_ms, kill_group);
	free(run->mem);
	run->mem = NULL;
	close_fd(&run->spool_fd);
}
