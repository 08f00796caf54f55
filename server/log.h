/* Error log (timestamp, level, message) and access log (Combined Log
 * Format plus the request's duration in microseconds). Each goes to a file
 * or to stderr ("-"); both are reopened on SIGHUP. Thread-safe: each line is
 * one write(2) to an O_APPEND descriptor. */
#ifndef PLXD_LOG_H
#define PLXD_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

enum log_level { PLXD_LOG_ERROR, PLXD_LOG_WARN, PLXD_LOG_INFO, PLXD_LOG_DEBUG };

/* Opens (or reopens) both logs. An empty access_log path turns it off.
 * Returns 0, or -1 with a message in err; the old files stay open then. */
int log_open(const char *error_log, const char *access_log, enum log_level level, char *err,
		size_t errlen);
void log_close(void);

/* Gives the open log files to uid/gid, so that a reopen after dropping
 * privileges still works. */
void log_chown(unsigned uid, unsigned gid);

int log_level_parse(const char *name, enum log_level *out);

/* The longest error log line, with its newline. A longer message is cut
 * to fit, and the line then ends with " [cut: N more bytes]". A line is
 * one write(2), so lines from many threads never mix. */
#define LOG_LINE_MAX 16384
void plxd_log(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct access_entry {
	const struct sockaddr *client;
	const char *user; /* NULL: "-" */
	const char *method;
	const char *target;
	const char *version;
	unsigned status;
	uint64_t bytes;
	const char *referer;
	const char *user_agent;
	uint64_t duration_us;
};

void log_access(const struct access_entry *e);

/* Formats an address as text without port ("127.0.0.1", "::1"). */
/* What a program writes to its stderr (a script, a Perl worker), logged a
 * line at a time as "LABEL: line" warnings; control characters become '?'
 * so that it cannot forge log lines, and a line longer than the buffer
 * goes out in pieces. */
struct log_lines {
	char line[2048];
	size_t len;
};
void log_lines_feed(struct log_lines *l, const char *label, const char *data, size_t n);
/* Logs a last line that had no end yet. */
void log_lines_flush(struct log_lines *l, const char *label);

/* sa's address as text, as inet_ntop writes it; "-" for none, another
 * family, or an out too small for it. */
void log_format_addr(const struct sockaddr *sa, char *out, size_t outlen);

#endif
