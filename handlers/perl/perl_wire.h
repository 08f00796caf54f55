/* The messages between plxd and a Perl worker. They travel over a
 * SOCK_SEQPACKET socketpair, one message per datagram, so a message is
 * read whole by one recvmsg; descriptors (the request's stdin and stdout)
 * go along as SCM_RIGHTS. Shared by both sides; no perl.h, no
 * microhttpd.h.
 *
 *   plxd                                 worker
 *   INIT (settings)             ---->
 *                               <----    READY (or why not)
 *   REQUEST [+ stdin]           ---->    compiles the script if need be
 *                               <----    RUNNING (when asked: timing)
 *                                        runs the script
 *                               <----    DONE + the script's last output
 *                                        [+ a new stdout pipe]
 *   ...                                  (exits after DONE when retiring,
 *   close                       ---->     and when plxd closes the socket)
 *
 * A worker's fd 1 is a pipe to plxd, the response channel of whatever
 * request it runs, so that programs a script starts write into the
 * response. The script's output reaches plxd through it while it runs
 * (when it flushes, its buffer fills, or a program it started writes);
 * what is still in its buffer when it returns comes with DONE. So DONE is
 * the end of the response, and output seen before DONE was flushed by the
 * script itself: that is what "headers already sent" means for a script
 * that dies afterwards.
 *
 * The pipe lasts as long as the worker, sparing a pipe per request. A
 * script that started processes may have left one holding it, writing
 * into later responses: then the worker moves fd 1 to a new pipe and
 * passes its read end with DONE; plxd reads the old one up to DONE and
 * closes it. */
#ifndef PLXD_PERL_WIRE_H
#define PLXD_PERL_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "perl_interp.h"

#define PERL_WIRE_VERSION 2
/* The largest message either side reads. A request's environment is
 * bounded by [server] max_header_size; a larger one is refused. */
#define PERL_WIRE_MAX (192 * 1024)

enum perl_wire_type {
	PERL_WIRE_INIT = 1,
	PERL_WIRE_READY,
	PERL_WIRE_REQUEST,
	PERL_WIRE_DONE,
	PERL_WIRE_RUNNING,
	PERL_WIRE_GONE /* plxd to worker: the request's client left */
};

/* While a PSGI app runs: its response is wanted no more (the client left).
 * Left on the socket for the app's writer to see (a peek); the worker
 * drops it before its next request. */
struct perl_wire_gone {
	uint32_t type;
	uint32_t reserved;
};

/* Followed by preload_len bytes (the preload file, NUL-terminated, or
 * nothing) and inc_len bytes (NUL-terminated folders). */
struct perl_wire_init {
	uint32_t type;
	uint32_t version;
	uint64_t max_requests; /* 0: no limit */
	uint64_t max_rss_kb;   /* 0: no limit */
	uint64_t max_memory;   /* address space limit in bytes; 0: none */
	uint32_t preload_len;
	uint32_t inc_len;
	uint32_t taint; /* enum perl_taint ([perl] taint) */
	/* Make the tainted twin before READY: a worker of this pool has made
	 * one (its DONE said PERL_WIRE_TWIN), so the site has -T scripts,
	 * and the twin's preload must not run while a request waits. */
	uint32_t twin_at_start;
};

/* Followed by message_len bytes of text when ok is 0. */
struct perl_wire_ready {
	uint32_t type;
	uint32_t ok;
	int32_t pid;
	uint32_t message_len;
};

#define PERL_WIRE_STDIN  1u /* a descriptor (a pipe) carries the body */
#define PERL_WIRE_TIMING 2u /* send RUNNING once the script is compiled */

/* Followed by script_len bytes (the file name with its NUL) and env_len
 * bytes ("NAME=value" strings, each NUL-terminated). */
struct perl_wire_request {
	uint32_t type;
	uint32_t flags;
	uint32_t script_len;
	uint32_t env_len;
	uint64_t dev, ino, size; /* the script as plxd opened it */
	int64_t mtime_sec, mtime_nsec;
};

/* How the script ended (the worker's enum perl_outcome, on the wire). */
enum perl_wire_outcome {
	PERL_WIRE_OK,
	PERL_WIRE_EXIT,
	PERL_WIRE_DIED,
	PERL_WIRE_COMPILE_ERROR,
	PERL_WIRE_NOT_FOUND,
	PERL_WIRE_FATAL
};

#define PERL_WIRE_COMPILED   1u /* the script was compiled for this request */
#define PERL_WIRE_RETIRING   2u /* the worker exits after this message */
#define PERL_WIRE_NEW_STDOUT 4u /* a descriptor: the new response pipe */
#define PERL_WIRE_TWIN       8u /* the worker has its tainted twin */

enum perl_wire_retire {
	PERL_RETIRE_NONE,
	PERL_RETIRE_MAX_REQUESTS,
	PERL_RETIRE_MAX_RSS,
	PERL_RETIRE_MODULES, /* a module file changed */
	PERL_RETIRE_FATAL,   /* the interpreter cannot go on */
	PERL_RETIRE_THREADS, /* Perl threads a script started run on */
	PERL_RETIRE_HARAKIRI /* a PSGI app set psgix.harakiri.commit */
};

/* With PERL_WIRE_TIMING, before the script runs: whether it was compiled
 * for this request, and how long that took, for a timing header that goes
 * out before DONE (a script that flushes its headers early). */
struct perl_wire_running {
	uint32_t type;
	uint32_t flags; /* PERL_WIRE_COMPILED */
	uint64_t compile_us;
};

/* Followed by the output left in the script's buffer. */
struct perl_wire_done {
	uint32_t type;
	uint32_t outcome;
	int32_t exit_status;
	uint32_t flags;
	uint32_t retire;
	uint32_t reserved;
	uint64_t compile_us;
	uint64_t run_us;
	uint64_t requests; /* served by this worker so far */
	uint64_t rss_kb;   /* its peak resident size when past max_rss, else 0 */
};

/* Sends one message made of iov, with nfds descriptors (0 to 2). Returns
 * 0, or -1 with errno (EPIPE or ECONNRESET: the peer is gone; EMSGSIZE:
 * too large). Never raises SIGPIPE. */
int perl_wire_send(int sock, const struct iovec *iov, int iovcnt, const int *fds, int nfds);

/* Receives one message into buf (cap bytes); descriptors that came with it
 * are stored in fds (O_CLOEXEC) and counted in *nfds, at most 2. flags:
 * MSG_DONTWAIT or 0. Returns the message's length, 0 when the peer closed
 * the socket, or -1 with errno (EMSGSIZE when it was longer than cap: any
 * descriptors are closed then). */
ssize_t perl_wire_recv(int sock, void *buf, size_t cap, int *fds, int *nfds, int flags);

const char *perl_wire_retire_text(uint32_t retire);

/* How a run ended (perl_interp.h), as DONE says it. */
enum perl_wire_outcome perl_wire_outcome(enum perl_outcome o);

#endif
