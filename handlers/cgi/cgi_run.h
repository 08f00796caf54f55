/* One running CGI script's I/O, for the handler's request thread: feeding
 * its stdin, spooling what it prints meanwhile (memory, then a temp file),
 * its stderr turned into error-log lines, and waiting on all of it at once
 * together with the child's exit, the client socket and the deadlines.
 * No libmicrohttpd: the glue in cgi.c turns events into responses. */
#ifndef PLXD_CGI_RUN_H
#define PLXD_CGI_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgi_spawn.h"

#define CGI_RUN_LINE_MAX 2048

struct cgi_run {
	struct cgi_child child;
	const char *script;      /* names the script in log lines; not owned */
	int client_fd;           /* watched for a client that left; -1: not watched */
	uint64_t deadline_ms;    /* the script's time is up (monotonic ms) */
	uint64_t linger_ms;      /* how long stdout may stay open after the exit */
	uint64_t linger_until;   /* set when the child exited with stdout still open */
	int out_eof;             /* stdout reached its end (and is closed) */

	/* stdout read before the response could start. */
	char *mem;
	size_t mem_len, mem_cap;
	int spool_fd;            /* temp file once mem is full; -1: none */
	uint64_t spool_size;     /* bytes spooled in all */
	uint64_t spool_limit;    /* more than this is an error */
	const char *tmp_dir;     /* for the temp file; not owned */

	/* stderr: the line being assembled. */
	char line[CGI_RUN_LINE_MAX];
	size_t line_len;
};

/* What cgi_run_wait saw. */
enum {
	CGI_RUN_IN = 1,          /* stdin can take more */
	CGI_RUN_OUT = 2,         /* stdout has data or its end */
	CGI_RUN_CLIENT_GONE = 4, /* the client closed its connection */
	CGI_RUN_TIMEOUT = 8,     /* deadline_ms passed */
	CGI_RUN_LINGER = 16,     /* the child exited and linger_ms passed with
				    stdout still open (a background process) */
	CGI_RUN_EXITED = 32      /* the child exited (reported once) */
};

uint64_t cgi_run_now_ms(void);

/* Prepares run for a child that cgi_spawn_start will fill in. */
void cgi_run_init(struct cgi_run *run, const char *script, uint64_t timeout_ms,
		uint64_t linger_ms, uint64_t spool_limit, const char *tmp_dir);

/* Waits for any wanted event, logging stderr lines meanwhile. Returns a
 * mask of CGI_RUN_* (never 0). */
unsigned cgi_run_wait(struct cgi_run *run, int want_in, int want_out);

/* Writes a chunk of request body to the script's stdin, spooling its
 * stdout meanwhile so that a script that prints before it reads cannot
 * deadlock. A script that stops reading (closed stdin, exited) gets the
 * rest dropped. Returns 0, or an HTTP status: 504 (timeout), 500 (output
 * beyond spool_limit), 502 (the spool failed). */
unsigned cgi_run_feed(struct cgi_run *run, const char *data, size_t len);

/* Reads stdout without blocking. Returns bytes read, 0 at the end (out_eof
 * set, descriptor closed), or -1 when nothing is available now. */
ssize_t cgi_run_read(struct cgi_run *run, char *buf, size_t len);

/* Closes stdout unread: a script still printing gets EPIPE (SIGPIPE). */
void cgi_run_close_out(struct cgi_run *run);

/* Reads what stdout has now, up to max bytes, into the spool. Returns 0,
 * or an HTTP status (logged): 500 when the script printed more than the
 * spool takes (the script's failure), 502 when it cannot be written. */
unsigned cgi_run_spool_out(struct cgi_run *run, size_t max);

/* Copies spooled bytes from offset. Returns bytes copied (0 at the end of
 * the spool), or -1 (logged). */
ssize_t cgi_run_spool_read(struct cgi_run *run, uint64_t offset, char *buf, size_t len);

/* Logs what stderr holds now, without blocking; with final, also the last
 * unterminated line. */
void cgi_run_drain_stderr(struct cgi_run *run, int final);

/* Waits up to ms for the child to exit and reaps it. Returns 1 when reaped. */
int cgi_run_reap_within(struct cgi_run *run, uint64_t ms);

/* How the child ended, for a log line: "exited with status 3", "killed by
 * signal 9", or "" when it exited with 0 or has not been reaped. */
void cgi_run_describe_exit(const struct cgi_run *run, char *out, size_t outlen);

/* Ends the child (see cgi_spawn_end), logs its last stderr, frees the spool. */
void cgi_run_fini(struct cgi_run *run, unsigned grace_ms, int kill_group);

#endif
