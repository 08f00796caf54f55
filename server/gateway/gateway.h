/* The gateway: the response path below every script handler, as lighttpd
 * keeps its CGI/1.1 glue below mod_cgi and mod_fastcgi. A script handler
 * (cgi for .pl, perl for .plx) only starts a script its own way, says how
 * to read more of its output, and says when and how it ended. The gateway
 * does the rest, the same way for both:
 *
 *   - feeds the request body to the script's stdin, spooling what the
 *     script prints meanwhile, so a script that prints before it reads
 *     cannot deadlock;
 *   - parses the header block (cgi_reply.h) and maps every failure before
 *     it to a status, with one log line "SCRIPT: answered STATUS: WHY; HOW"
 *     (the script's own failure 500, its timeout 504);
 *   - serves RFC 3875 local redirects, ends bodiless responses (HEAD,
 *     1xx, 204, 304) at their headers, and enforces the script's
 *     Content-Length;
 *   - sends the response whole when the script had ended before it could
 *     start, and streams it otherwise, reading no faster than the client
 *     takes it (backpressure, bounded memory);
 *   - relays stderr to the error log, a line at a time, control bytes made
 *     harmless, each line prefixed with the script's name;
 *   - adds the timing header the handler describes;
 *   - and tells the handler when the request no longer needs the script.
 *
 * Everything happens on the request's event thread and never blocks: the
 * gateway watches the script's descriptors in the request's loop. */
#ifndef PLXD_GATEWAY_H
#define PLXD_GATEWAY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgi_reply.h"
#include "handler.h"
#include "log.h"
#include "loop.h"
#include "spool.h"

struct gw;

/* How the script ended, as far as the handler knows. */
struct gw_end {
	int known;    /* the rest is valid */
	int failed;   /* died, exited non-zero, was killed or lost */
	int cut;      /* what it printed may be incomplete (killed by a
			       signal, its worker lost): a response in
			       progress is cut short, the connection closed */
	char how[96]; /* "exited with status 3", "killed by signal 11
			       (SIGSEGV)", "died", or "" */
};

/* Why the request needs the script no more. */
enum gw_stop {
	GW_STOP_DONE,    /* its response is complete (or it redirected) */
	GW_STOP_ABANDON, /* its response failed, or the client left: its
			     output is not wanted, it should end soon */
	GW_STOP_TIMEOUT  /* it ran past its timeout: end it now */
};

struct gw_ops {
	/* More of the script's output, without blocking: bytes read, 0 at its
	 * end, or -1 with errno EAGAIN when there is none now (the gateway
	 * then waits for out_fd, or for gw_output_ready). */
	ssize_t (*read)(struct gw *g, char *buf, size_t len);
	/* The request needs the script no more (how says why): the gateway
	 * reads nothing from now on, and watches only its stderr. The handler
	 * ends the script or lets it finish (within its linger), calls
	 * gw_fini when it is done with it, and frees what holds g once g->r is
	 * NULL too (the request has ended). */
	void (*stop)(struct gw *g, enum gw_stop how);
	/* Optional: the value of the timing header (X-Plxd-Perl) into out;
	 * partial when the headers go out before the script has ended.
	 * Returns 0 for none. */
	int (*timing)(struct gw *g, char *out, size_t outlen, int partial);
};

struct gw_settings {
	uint64_t timeout_ms;      /* the script's time, from gw_init */
	size_t max_script_header; /* the header block it may print */
	uint64_t spool_limit;     /* output held before the response can start */
	const char *tmp_dir;      /* where that goes past memory */
	/* 0: the script's output and stderr are watched from its start.
	 * Otherwise only once it has run this long: a handler that also
	 * learns of the script's end another way (gw_output_ready) spares a
	 * quick script's watches and the read of its output at its start,
	 * and a script that fills a pipe meanwhile waits that long at most. */
	unsigned watch_after_ms;
};

/* Embedded in the handler's per-request struct. Fields marked private are
 * the gateway's. */
struct gw {
	const struct gw_ops *ops;
	struct plxd_request *r; /* NULL once the request has ended */
	const char *script;     /* names it in log lines; the handler's */
	struct loop *loop;
	struct gw_end end;   /* the handler fills it, then gw_ended */
	const char *out_cut; /* set by the handler before its read()
				      returns 0 when the output was ended for
				      it (a background process held it) */

	/* Private. */
	struct gw_settings set;
	int phase;
	int in_fd, out_fd, err_fd;
	struct loop_watch in_w, out_w, err_w;
	struct loop_timer deadline, settle, watch_later;
	struct cgi_reply reply;
	struct spool spool;  /* output before the response started */
	uint64_t spool_sent; /* of it, handed to libmicrohttpd */
	uint64_t sent;       /* body bytes handed to libmicrohttpd */
	uint64_t counted;    /* HEAD: the body's length */
	int out_eof;
	int handled;           /* handle() ran: the request is complete */
	int stream_waits;      /* the reader waits for output */
	unsigned fail_status;  /* a failure waiting for the end to be known */
	unsigned deferred;     /* an error answered after the request body */
	int settled;           /* waited SETTLE_MS for the end: no more */
	int header_room_binds; /* the connection's memory, not the setting,
				      bounds the header block */
	const char *fail_why;
	char why[96];
	char *feed_buf; /* request body on its way to stdin */
	size_t feed_len, feed_off;
	int feed_done;
	struct log_lines lines; /* stderr: the line being assembled */
	int stopped;
};

/* Prepares g for request r, whose script is named script; the timeout
 * starts now. */
void gw_init(struct gw *g, const struct gw_ops *ops, struct plxd_request *r, const char *script,
		const struct gw_settings *set);

/* The script runs: the write end of its stdin (-1: it gets none; the
 * gateway closes it once the body is in), its output (read() is called
 * when it is readable; -1: only gw_output_ready wakes the gateway), and
 * its stderr (relayed; never closed by the gateway). */
void gw_started(struct gw *g, int in_fd, int out_fd, int err_fd);

/* The script could not be started (or no worker could be had): answers
 * status, which the handler has logged why. */
void gw_refuse(struct gw *g, unsigned status);

/* body() of a handler that streams the request body to the script: takes
 * what stdin takes now (see handler.h). Returns 0, or an HTTP status. */
unsigned gw_body(struct gw *g, const char *data, size_t len, size_t *taken);

/* handle(): the request is complete; a spooled body is fed to the script.
 * Returns PLXD_PENDING, or 0 when it was answered at once. */
int gw_handle(struct gw *g);

/* The handler's finished(). */
void gw_finished(struct gw *g, enum plxd_end how);

/* read() may have more now. */
void gw_output_ready(struct gw *g);

/* g->end has been filled in. */
void gw_ended(struct gw *g);

/* The script ran past timeout where the deadline's timer could not see it
 * (it ran before gw_started, on the request's own thread): answered as at
 * the deadline. */
void gw_timed_out(struct gw *g);

/* The script can write no more to its stderr (a worker answered for it):
 * what is there is relayed now, and what comes later is not its. empty:
 * the handler has seen that there is nothing (no read is made). */
void gw_stderr_end(struct gw *g, int empty);

/* The script's output is all in the handler's hands (its read() gives
 * the rest without the pipe): the gateway no longer watches out_fd, whose
 * runner may serve another request from now. Returns -1, and changes
 * nothing, while the request's body is still being fed to the script. */
int gw_output_taken(struct gw *g);

/* The handler is done with the script: the last of its stderr is logged,
 * and the gateway lets go of everything it watched or held. */
void gw_fini(struct gw *g);

/* After a response the script completed: logs how it ended ("SCRIPT: died",
 * "SCRIPT: exited with status 4") when that was not a plain success, as
 * both handlers say it. */
void gw_log_end(const struct gw *g);

#endif
