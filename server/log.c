/* Error and access logs. Lines are built in a stack buffer and written with
 * one write(2), so concurrent threads never interleave within a line and no
 * lock is taken on the request path. */
#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static atomic_int error_fd = 2;
static atomic_int access_fd = -1;
static atomic_int current_level = PLXD_LOG_INFO;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

int log_level_parse(const char *name, enum log_level *out)
{
	for (int i = PLXD_LOG_ERROR; i <= PLXD_LOG_DEBUG; i++) {
		if (strcasecmp(name, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -1;
}

static int log_enabled(enum log_level level)
{
	return (int)level <= atomic_load_explicit(&current_level, memory_order_relaxed);
}

static int open_log(const char *path, char *err, size_t errlen)
{
	if (strcmp(path, "-") == 0)
		return dup(2);
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0)
		snprintf(err, errlen, "cannot open log %s: %s", path, strerror(errno));
	return fd;
}

/* Replaces *slot with fd; the old descriptor is closed only after the swap
 * so that a concurrent writer at worst writes one line to the old file. */
static void install(atomic_int *slot, int fd)
{
	int old = atomic_exchange(slot, fd);
	if (old > 2)
		close(old);
}

int log_open(const char *error_log, const char *access_log, enum log_level level, char *err,
		size_t errlen)
{
	int efd = open_log(error_log && *error_log ? error_log : "-", err, errlen);
	if (efd < 0)
		return -1;
	int afd = -1;
	if (access_log && *access_log) {
		afd = open_log(access_log, err, errlen);
		if (afd < 0) {
			close(efd);
			return -1;
		}
	}
	install(&error_fd, efd);
	install(&access_fd, afd);
	atomic_store(&current_level, (int)level);
	return 0;
}

void log_close(void)
{
	install(&access_fd, -1);
	install(&error_fd, 2);
}

void log_chown(unsigned uid, unsigned gid)
{
	int fds[2] = { atomic_load(&error_fd), atomic_load(&access_fd) };
	for (int i = 0; i < 2; i++) {
		if (fds[i] > 2 && fchown(fds[i], uid, gid) < 0)
			plxd_log(PLXD_LOG_WARN, "cannot give a log file to uid %u: %s", uid,
					strerror(errno));
	}
}

static void write_line(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

/* Where a message too long for its line is cut, the line ends with this
 * marker: how many of the message's bytes are left out. */
#define CUT_MARKER " [cut: %zu more bytes]"

void plxd_log(enum log_level level, const char *fmt, ...)
{
	if (!log_enabled(level))
		return;
	int saved_errno = errno;
	char line[LOG_LINE_MAX];
	struct timeval tv;
	struct tm tm;
	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	size_t n = strftime(line, sizeof line, "%Y-%m-%d %H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof line - n, ".%03ld [%s] [pid %d] ",
			(long)(tv.tv_usec / 1000), level_names[level], (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof line - n, fmt, ap);
	va_end(ap);
	size_t want = m > 0 ? (size_t)m : 0;
	if (n + want + 1 <= sizeof line) {
		n += want;
	} else {
		/* Cut so that the kept part, the marker and the newline fill
		 * the line exactly. The marker's length depends on the count
		 * it gives, which depends on the marker's length: a few rounds
		 * settle both (each changes the count by a digit's worth). */
		size_t kept = sizeof line - 1 - n, marker = 0;
		for (int i = 0; i < 3; i++) {
			marker = (size_t)snprintf(NULL, 0, CUT_MARKER, want - kept);
			kept = sizeof line - 1 - n - marker;
		}
		char cut[48];
		snprintf(cut, sizeof cut, CUT_MARKER, want - kept);
		n += kept;
		memcpy(line + n, cut, marker);
		n += marker;
	}
	/* A message never spans lines: a script's text could forge entries. */
	for (size_t i = 0; i < n; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	line[n++] = '\n';
	write_line(atomic_load(&error_fd), line, n);
	errno = saved_errno;
}

/* An IPv4 address in dotted decimal, as inet_ntop writes it; glibc's
 * inet_ntop formats one with sprintf, thousands of instructions for what
 * every request asks twice (REMOTE_ADDR, SERVER_ADDR) and the access log
 * once more. Returns 0, or -1 when out is too small. */
static int format_ipv4(const unsigned char b[4], char *out, size_t outlen)
{
	char text[INET_ADDRSTRLEN];
	size_t len = 0;
	for (int i = 0; i < 4; i++) {
		unsigned v = b[i];
		if (v >= 100)
			text[len++] = (char)('0' + v / 100);
		if (v >= 10)
			text[len++] = (char)('0' + v / 10 % 10);
		text[len++] = (char)('0' + v % 10);
		text[len++] = i < 3 ? '.' : '\0';
	}
	if (len > outlen)
		return -1;
	memcpy(out, text, len);
	return 0;
}

void log_format_addr(const struct sockaddr *sa, char *out, size_t outlen)
{
	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		if (format_ipv4((const unsigned char *)&in->sin_addr, out, outlen) == 0)
			return;
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		if (inet_ntop(AF_INET6, &in6->sin6_addr, out, (socklen_t)outlen))
			return;
	}
	snprintf(out, outlen, "-");
}

/* A line being built; appends stop quietly at the end of the buffer,
 * which the fields' shares below keep from being reached. */
struct line {
	char buf[LOG_LINE_MAX];
	size_t len;
};

/* Each free-text field of an access log line gets a share of the line (in
 * escaped bytes), so that a long target still leaves room for the user
 * agent, and all of them with the fixed fields fit LOG_LINE_MAX. */
enum {
	SHARE_USER = 256,
	SHARE_METHOD = 64,
	SHARE_TARGET = 10240,
	SHARE_VERSION = 32,
	SHARE_REFERER = 2048,
	SHARE_AGENT = 1024,
};
#define FIELD_CUT_MARKER "[cut: %zu more bytes]"
/* The shares, a marker for each field, and the fixed fields (address,
 * time, status, size, duration, quotes) fit one line. */
_Static_assert(SHARE_USER + SHARE_METHOD + SHARE_TARGET + SHARE_VERSION + SHARE_REFERER
						+ SHARE_AGENT + 6 * 40 + 256
				<= LOG_LINE_MAX,
		"the access log's field shares must fit LOG_LINE_MAX");

static void put(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct line *l, const char *fmt, ...)
{
	size_t room = sizeof l->buf - l->len;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(l->buf + l->len, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		l->len += (size_t)n < room ? (size_t)n : room - 1;
}

/* Appends s for a quoted log field, escaping what could break the line or
 * the quoting (as Apache does, with \xHH), in at most share bytes; a
 * longer field is cut there (never inside an escape) and ends with how many
 * of its bytes were left out. */
static void put_escaped(struct line *l, const char *s, size_t share)
{
	static const char hex[] = "0123456789abcdef";
	if (!s)
		s = "-";
	size_t end = l->len + share;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		int escape = c < 0x20 || c == '"' || c == '\\' || c >= 0x7f;
		if (l->len + (escape ? 4 : 1) > end)
			break;
		if (escape) {
			l->buf[l->len++] = '\\';
			l->buf[l->len++] = 'x';
			l->buf[l->len++] = hex[c >> 4];
			l->buf[l->len++] = hex[c & 15];
		} else {
			l->buf[l->len++] = (char)c;
		}
	}
	if (*s)
		put(l, FIELD_CUT_MARKER, strlen(s));
}

/* The "[10/Oct/2000:13:55:36 +0000]" field, formatted once a second per
 * thread. */
static const char *clf_time(void)
{
	static __thread time_t cached_sec = -1;
	static __thread char cached[40];
	time_t now = time(NULL);
	if (now != cached_sec) {
		struct tm tm;
		localtime_r(&now, &tm);
		strftime(cached, sizeof cached, "[%d/%b/%Y:%H:%M:%S %z]", &tm);
		cached_sec = now;
	}
	return cached;
}

void log_access(const struct access_entry *e)
{
	int fd = atomic_load_explicit(&access_fd, memory_order_relaxed);
	if (fd < 0)
		return;
	struct line l = { .len = 0 };
	char addr[INET6_ADDRSTRLEN];
	log_format_addr(e->client, addr, sizeof addr);
	put(&l, "%s - ", addr);
	put_escaped(&l, e->user, SHARE_USER);
	put(&l, " %s \"", clf_time());
	put_escaped(&l, e->method, SHARE_METHOD);
	put(&l, " ");
	put_escaped(&l, e->target, SHARE_TARGET);
	put(&l, " ");
	put_escaped(&l, e->version, SHARE_VERSION);
	put(&l, "\" %u ", e->status);
	if (e->bytes)
		put(&l, "%llu", (unsigned long long)e->bytes);
	else
		put(&l, "-");
	put(&l, " \"");
	put_escaped(&l, e->referer, SHARE_REFERER);
	put(&l, "\" \"");
	put_escaped(&l, e->user_agent, SHARE_AGENT);
	put(&l, "\" %llu\n", (unsigned long long)e->duration_us);
	write_line(fd, l.buf, l.len);
}

static void lines_emit(struct log_lines *l, const char *label)
{
	size_t len = l->len;
	if (len > 0 && l->line[len - 1] == '\r')
		len--;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)l->line[i] < 0x20 && l->line[i] != '\t')
			l->line[i] = '?';
	plxd_log(PLXD_LOG_WARN, "%s: %.*s", label, (int)len, l->line);
	l->len = 0;
}

void log_lines_feed(struct log_lines *l, const char *label, const char *data, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (data[i] == '\n') {
			lines_emit(l, label);
			continue;
		}
		if (l->len == sizeof l->line)
			lines_emit(l, label);
		l->line[l->len++] = data[i];
	}
}

void log_lines_flush(struct log_lines *l, const char *label)
{
	if (l->len > 0)
		lines_emit(l, label);
}
