/* The handler interface: what a request handler is and what it may call.
 *
 * A handler turns a routed request into a response. The static handler is
 * built in; others (echo, cgi, perl) are shared objects that export
 * `plxd_handler_module`, and may open a plugin of their own
 * (plxd_plugin_load, below). [handlers] in the configuration maps file
 * extensions to handler names; a request whose file has no mapped extension
 * goes to the static handler.
 *
 * Hooks, in the order plxd calls them:
 *
 *   hook         called when...                              thread
 *   start        plxd starts, before it accepts a connection  main
 *   begin        (optional) a request's headers are in, its   the request's
 *                body not yet read: may refuse (503) early,   event thread
 *                or ask for the body as it arrives
 *   body         (optional) a chunk of body arrives, for a    the request's
 *                request whose begin asked for streaming      event thread
 *   handle       the request is complete: headers read and    the request's
 *                body spooled (plxd_body_read) or streamed    event thread
 *   finished     the request has ended, however it ended;     the request's
 *                called once for every request routed to the  event thread
 *                handler, even one that never reached handle
 *                (body cut short, or refused with 413)
 *   reconfigure  plxd re-read its configuration (SIGHUP)      main
 *   report       (optional) the status page is asked for:     an event
 *                the handler's figures (short locks only)     thread
 *   stop         plxd shuts down, after the last request      main
 *
 * No hook may block. An event thread carries many connections: a handler
 * that waits (for a child process, a worker) returns and carries on from
 * callbacks of the request's loop (plxd_loop(r), loop.h), where it may
 * watch descriptors and arm timers. handle() then answers PLXD_PENDING and
 * queues the response later with plxd_respond*(); a streamed response's
 * reader answers 0 when it has nothing yet, and plxd_stream_resume() says
 * it has; body() takes what it can and plxd_body_resume() asks for the rest.
 * Meanwhile the connection waits, costing no thread. Everything a handler
 * does for one request happens on that request's event thread, so its
 * per-request state needs no lock.
 *
 * Threads and locks of plxd (each lock guards only what it names):
 *
 *   thread          runs                              locks it takes
 *   main            start-up, signals, reload, stop   site (swap), quiesce
 *   event (N)       a loop and a libmicrohttpd        site (acquire), ip
 *                   daemon: connections, requests,    (per-IP counts), idle
 *                   handler callbacks                 (requests in flight),
 *                                                     a handler's own
 *   cgi spawner     posix_spawn of CGI scripts        spawn queue
 *   perl keeper     starting and ending Perl workers  perl pool
 *   perl interp (N) scripts, for isolation = thread   job, threads, clone,
 *                   (handlers/perl/perl_thread.c)     posts (of a loop)
 *   perl watchdog   the inline runs' timeouts and     inline, job
 *                   pipes (handlers/perl/perl_inline.c)
 *
 *   site      server/site.c       the current configuration's pointer
 *   ip        server/http.c       per_ip_connections counts
 *   idle      server/http.c       requests in flight, for a graceful stop
 *   quiesce   server/http.c       event threads yet to let go of the socket
 *   posts     server/loop.c       functions posted to a loop from elsewhere,
 *                                 and whether it waits (to be woken)
 *   spawn     handlers/cgi        CGI spawns waiting for the spawner
 *   pool      handlers/perl       idle workers and the requests queued for
 *                                 one (its perl_queue.c queue)
 *   scripts   handlers/perl       the per-script figures of the status page
 *   threads   handlers/perl       which interpreter threads are busy, and the
 *                                 requests queued for one (its perl_queue.c
 *                                 queue)
 *   job       handlers/perl       the request handed to one interpreter thread
 *   clone     handlers/perl       the parent interpreter while it is cloned
 *   abandoned handlers/perl       the interpreter threads a stop left running
 *                                 (stuck in C code), kept until plxd exits
 *   inline    handlers/perl       the scripts proven short, the event threads'
 *                                 interpreters and the run each has in progress
 *   inlines   handlers/perl       the event threads' interpreters, for a stop
 *
 * An event thread also runs scripts inline (a .plt proven short), taking
 * inline, and clone when it makes its interpreter.
 *
 * Order: pool then posts (a stopping pool posts its queued requests'
 * answers under its lock); inline then job, and inlines then job (the
 * watchdog and a stop end an inline run under theirs); a request is handed to a
 * worker or thread, and its loop woken, after the pool's or threads' lock
 * is released. Every other lock is a leaf: nothing else is taken while it
 * is held. Into libperl, whose own locks (PerlIO's, the op tree's, the
 * locales' and %ENV's) are taken inside it, plxd calls holding only clone,
 * around perl_clone; no lock of plxd's is held while a script runs.
 *
 * The status page's request counters (server/stats.c) take no lock: each
 * event thread counts into its own struct, read with relaxed atomics.
 */
#ifndef PLXD_HANDLER_H
#define PLXD_HANDLER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "addr.h"
#include "conf_key.h"

/* PLXD_HANDLER_ABI: the start of a SHA-256 of every plxd header a
 * handler's C files include, directly or not (this one, gateway.h,
 * perl_thread.h...), computed by CMake. A module or plugin built against
 * another version of them is refused at load. */
#include "handler_abi.h"

struct MHD_Connection;
struct MHD_Response;

enum plxd_end {
	PLXD_END_DONE,        /* the response was sent completely */
	PLXD_END_CLIENT_GONE, /* the client closed the connection or failed to read */
	PLXD_END_TIMEOUT,     /* the connection timed out */
	PLXD_END_ERROR        /* plxd gave up on the request (error, shutdown) */
};

/* What a handler sees of a request. Strings stay valid until finished()
 * returns. */
struct plxd_request {
	struct MHD_Connection *connection;
	const char *method;
	const char *version;     /* "HTTP/1.1" */
	const char *target;      /* the request target exactly as received */
	const char *path;        /* decoded and normalised; starts with '/' */
	const char *query;       /* raw, undecoded query string; "" when none */
	const char *root;        /* document root, absolute */
	const char *file;        /* file the path resolved to, absolute */
	const char *route_name;  /* the name the request was routed by: file's
				    last component, or, when a symbolic link
				    with a harmless name led to a file whose own
				    name chose the handler (x.txt -> x.pl), that
				    name. Pick anything by extension from it. */
	const char *script_name; /* the part of path that names file */
	const char *path_info;   /* the part of path after file; "" when none */
	int fd;                  /* open on file, read-only; owned by plxd */
	struct stat st;          /* of fd */
	const struct sockaddr *client;
	const struct sockaddr *local;
	int64_t content_length; /* from Content-Length; -1 for a chunked body */
	uint64_t body_length;   /* bytes of request body received (or spooled) */

	const void *conf; /* this handler's config section, for this request */
	void *state;      /* what start() made */
	void *data;       /* the handler's own; free it in finished() */

	unsigned status;     /* set by plxd_respond() */
	uint64_t bytes_sent; /* body bytes, for the access log; set by
				    plxd_respond() from the response size, a
				    streaming handler adds its own count */
};

struct plxd_report;

struct plxd_handler {
	unsigned abi;                /* PLXD_HANDLER_ABI */
	const char *name;            /* as named in [handlers] and its [section] */
	const struct conf_key *keys; /* its [section]'s keys, CONF_KEYS_END last */
	size_t conf_size;            /* bytes of the struct those keys fill */

	/* Returns 0, or -1 after logging why (plxd then refuses to start). */
	int (*start)(const void *conf, void **state);
	/* Returns 0, or -1 after logging why (the old settings stay). */
	int (*reconfigure)(void *state, const void *conf);
	void (*stop)(void *state);

	/* Optional. Returns PLXD_SPOOL_BODY (plxd keeps the body for
	 * plxd_body_read), PLXD_STREAM_BODY (body() gets it as it arrives), or
	 * PLXD_RESPONDED after queuing a response (plxd then closes the
	 * connection if a body was coming). Only a response queued here or in
	 * handle reaches the client: libmicrohttpd accepts none in between. */
	int (*begin)(struct plxd_request *r);
	/* Optional, with PLXD_STREAM_BODY: one chunk of body, of which it
	 * takes *taken bytes (len unless it sets it lower; then the rest waits
	 * for plxd_body_resume, and is offered again with what came since).
	 * Returns 0, or an HTTP status: plxd drops the rest of the body and
	 * answers with it (handle is not called). */
	unsigned (*body)(struct plxd_request *r, const char *data, size_t len, size_t *taken);

	/* Queues a response with plxd_respond*() and returns 0; or returns
	 * PLXD_PENDING and queues it later, from a callback on plxd_loop(r);
	 * or returns -1 when it could not: plxd then answers 500 if nothing
	 * was queued. */
	int (*handle)(struct plxd_request *r);
	void (*finished)(struct plxd_request *r, enum plxd_end how);

	/* Optional: the handler's rows of the status page, given with the
	 * plxd_report_* calls below. Runs on the event thread serving the
	 * page, at any time between start and stop: it may take a lock
	 * briefly, never wait. */
	void (*report)(void *state, struct plxd_report *rep);
};

/* The status page's rows (server/status.c copies what they point to). */
/* A figure of the handler's own: "children_running". */
void plxd_report_gauge(struct plxd_report *rep, const char *name, uint64_t value);

struct plxd_report_worker {
	long pid;
	const char *state;  /* "idle", "busy", "starting", "down" */
	const char *script; /* the script it runs, or NULL */
	uint64_t script_us; /* for how long it has run it */
	uint64_t requests;  /* served since it started */
	uint64_t rss_kb;    /* resident size now; 0 when unknown */
	uint64_t scripts_compiled;
};
void plxd_report_worker(struct plxd_report *rep, const struct plxd_report_worker *w);

struct plxd_report_script {
	const char *path;
	uint64_t compiles, runs;
	uint64_t run_us_sum, run_us_p99;
};
void plxd_report_script(struct plxd_report *rep, const struct plxd_report_script *s);

/* Whether the status page's figures are counted ([status] counters, fixed
 * at start): a handler keeps its per-request figures only then. */
int plxd_counting(void);

enum { PLXD_SPOOL_BODY, PLXD_STREAM_BODY, PLXD_RESPONDED };

/* handle(): the response comes later. */
#define PLXD_PENDING 1

/* The loop of the request's event thread: its handler's watches and
 * timers go there. */
struct loop;
struct loop *plxd_loop(struct plxd_request *r);

/* A module's one exported symbol. */
extern const struct plxd_handler plxd_handler_module;

/* Queues response with status and releases it: in handle(), or later for a
 * request whose handle() answered PLXD_PENDING. Returns 0, or -1. */
int plxd_respond(struct plxd_request *r, unsigned status, struct MHD_Response *response);

/* A response whose body read(cls, ...) produces as libmicrohttpd sends it
 * (size MHD_SIZE_UNKNOWN: chunked). read returns bytes written to buf, 0
 * when it has nothing yet (the connection then waits for
 * plxd_stream_resume), MHD_CONTENT_READER_END_OF_STREAM, or
 * MHD_CONTENT_READER_END_WITH_ERROR (the connection is closed: the
 * response was cut short). Where HTTP allows no body (HEAD, 1xx, 204, 304;
 * plxd_response_bodiless) read is never called and the response ends at
 * its headers; for HEAD, size should be what GET would send. Add headers,
 * then plxd_respond. Returns NULL when libmicrohttpd has no memory. */
typedef ssize_t plxd_reader_fn(void *cls, uint64_t pos, char *buf, size_t max);
struct MHD_Response *plxd_response_stream(struct plxd_request *r, unsigned status, uint64_t size,
		plxd_reader_fn *read, void *cls);

/* Whether a response with status to r has no body (RFC 9112 6.3). */
int plxd_response_bodiless(struct plxd_request *r, unsigned status);

/* How many bytes of response headers fit in r's connection memory beside
 * its request: a handler passing on headers it did not write (a script's)
 * refuses more with a 500 rather than have the connection cut. */
size_t plxd_reply_header_room(struct plxd_request *r);

/* Whether the client asked HEAD: a local redirect's GET answers it too, so
 * its response still ends at its headers. */
int plxd_request_head(struct plxd_request *r);

/* Queues a response the handler keeps, to queue it again for other
 * requests (libmicrohttpd counts its references): plxd adds nothing to it
 * and does not release it, so it must have been made fit once with
 * plxd_response_share. Returns 0, or -1 when r needs a response of its own
 * (one that closes the connection, which a shared one cannot say). */
int plxd_respond_shared(struct plxd_request *r, unsigned status, struct MHD_Response *response);
/* Adds what plxd puts on every response (its Server header). */
void plxd_response_share(struct MHD_Response *response);

/* The connection closes after r's response, whatever keep-alive said: what
 * followed the response on it cannot be trusted. */
void plxd_connection_close(struct plxd_request *r);

/* The reader of r's streamed response has something again. */
void plxd_stream_resume(struct plxd_request *r);

/* body() can take more of r's body. */
void plxd_body_resume(struct plxd_request *r);

/* Queues plxd's small HTML page for an error status (503 gets Retry-After). */
int plxd_respond_error(struct plxd_request *r, unsigned status);

/* A plugin: a shared object that a module opens itself, only when its
 * settings need what the plugin holds (perl.so opens plxd-perl-threads.so,
 * which links libperl, only for an instance with isolation = thread).
 * It exports one struct whose first member is this. */
struct plxd_plugin {
	unsigned abi; /* PLXD_HANDLER_ABI */
	/* Optional: a shared library (its soname, "libperl.so.5.36") whose
	 * symbols the plugin needs global. For one that embeds Perl:
	 * Debian's XS modules (POSIX.so, ...) do not link libperl and
	 * resolve Perl_* in the global scope. */
	const char *global_library;
};

/* Opens the plugin at path RTLD_NOW | RTLD_LOCAL, as plxd opens a module,
 * and returns its exported symbol (a struct that starts with struct
 * plxd_plugin) once its abi is found to be PLXD_HANDLER_ABI and its
 * global_library, if any, is opened RTLD_GLOBAL. The plugin stays loaded
 * until plxd exits. Returns NULL with a message in err. Main thread only
 * (start, reconfigure). */
const void *plxd_plugin_load(const char *path, const char *symbol, char *err, size_t errlen);

/* The folder of the handler module that holds symbol (pass
 * &plxd_handler_module), where its helper programs and files sit. Returns
 * 0, or -1. */
int plxd_module_dir(const void *symbol, char *out, size_t outlen);

/* A request header's value, or NULL. Names are case-insensitive. */
const char *plxd_request_header(struct plxd_request *r, const char *name);
/* A list header's value (If-Match, Cache-Control, ...): its field lines
 * joined with ", ", as RFC 9110 5.3 combines them; NULL when absent. Valid
 * until the next call for r, or its end. */
const char *plxd_request_header_list(struct plxd_request *r, const char *name);

/* Reads the spooled request body sequentially. Returns bytes read, 0 at the
 * end, or -1 with errno. */
ssize_t plxd_body_read(struct plxd_request *r, void *buf, size_t len);

/* The [server] settings this request runs under: those of the
 * configuration it was routed by (a reload may change them for the next
 * request). Modules read the core's configuration only through these.
 * Valid until finished() returns. */
const char *plxd_tmp_dir(struct plxd_request *r); /* tmp_dir: folder for temp files */
uint64_t plxd_max_body(struct plxd_request *r);   /* max_body: bytes of request body */
/* trusted_proxies, parsed at load: match a peer with addr_list_match. */
const struct addr_list *plxd_trusted_proxies(struct plxd_request *r);
/* The client's address as REMOTE_ADDR gives it: the peer, or from a
 * trusted proxy the address X-Forwarded-For names (addr_client). Returns
 * 0, or -1 when the peer is no IP address or X-Forwarded-For hides the
 * client (an entry that is no address before an untrusted hop). */
int plxd_client_addr(struct plxd_request *r, struct addr_range *out);

/* The [request] limits and tmp_dir this request runs under, as a script's
 * environment gives them (req_limits_env in req_limits.h): NAME=VALUE
 * strings, NULL-terminated, made once per configuration. */
char *const *plxd_request_limits_env(struct plxd_request *r);

/* Answers r as if the client had asked "GET target": target (a path with
 * an optional query) is resolved under the document root and routed to its
 * handler, whose handle() runs now, with no request body. For a CGI local
 * redirect (RFC 3875 6.2.2). Call it with nothing queued (from handle, or
 * for a pending request), after releasing r->data: the caller's finished()
 * is not called for r unless target routes to the same handler again.
 * Gives up with 500 after 10 redirects in a row. Returns 0 (answered, or
 * pending with the new handler), or -1 when no response could be queued. */
int plxd_serve_local(struct plxd_request *r, const char *target);

#endif
