/* The engine: event threads, each running a loop and a libmicrohttpd
 * daemon, with plxd's connection accounting (max and per-IP connections,
 * header and body deadlines). What arrives on each connection goes to the
 * callbacks it is started with (request.c), which it never calls by name. */
#ifndef PLXD_HTTP_H
#define PLXD_HTTP_H

#include <microhttpd.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config.h"

struct evthread;

/* Per connection, kept as libmicrohttpd's socket context. It belongs to
 * the event thread that accepted it: only that thread touches it. */
struct conn {
	struct conn *prev, *next; /* its thread's list */
	struct evthread *thread;
	struct MHD_Connection *connection;
	int fd;
	int ip_counted; /* counted against per_ip_connections */
	socklen_t peer_len;
	uint64_t held_until; /* held over per_ip_connections until then (ms) */
	struct sockaddr_storage local;
	struct sockaddr_storage peer;
	/* Start of the wait for the next request's headers (accept, or the end
	 * of the previous request), in ms; 0 once they are complete. */
	uint64_t waiting_since;
	/* While a request body is being read: when its headers were complete
	 * (ms), and the body bytes read so far; 0 and 0 otherwise. */
	uint64_t body_since;
	uint64_t body_bytes;
	int timed_out;      /* closed for a deadline */
	int client_left;    /* ... or because the client had left */
	unsigned opened_as; /* open connections, itself included,
					    when it was accepted */
	char *target;       /* raw request target of the current request */
	size_t target_cap;
	uint64_t request_start_us;
	unsigned char phase;  /* enum stats_phase: reading, writing, idle */
	unsigned queued_last; /* its send queue's bytes at the last tick */
	/* The bytes of the connection before the current request's: where
	 * libmicrohttpd's memory for it (pool) begins, in the stream. */
	uint64_t stream_at;
	const char *pool;
};

/* Binds and listens on "ADDR:PORT". Returns the socket, or -1 with err. */
int http_listen(const char *listen, char *err, size_t errlen);

/* Whether fd is a listening socket. Returns 0, or -1 with err. */
int http_listening(int fd, char *err, size_t errlen);

/* The address a socket is bound to, as an http:// URL. */
void http_url(int fd, char *out, size_t outlen);

/* What the engine calls for the requests of every connection (request.c
 * fills it; the engine knows nothing else of a request). */
struct loop;
struct http_handlers {
	MHD_AccessHandlerCallback access;
	MHD_RequestCompletedCallback completed;
	/* At a stop, on each event thread before its daemon stops: ends the
	 * requests of that thread's loop that wait for their handler. */
	void (*abort_all)(struct loop *loop);
};

/* Starts the event threads serving listen_fd (the engine owns it from
 * here), each calling handlers. */
int http_start(int listen_fd, const struct server_conf *server,
		const struct http_handlers *handlers, char *err, size_t errlen);

/* Stops accepting new connections, and closes the listening socket; waits
 * up to timeout_ms for every event thread to let go of it (one held by a
 * request that runs on it, an inline Perl run, may not). */
void http_quiesce(unsigned long timeout_ms);

/* Waits until no request is in flight or timeout_ms has passed. Returns the
 * number still in flight. */
unsigned http_wait_idle(unsigned long timeout_ms);

/* Closes every connection and stops the event threads, once what their
 * requests started has ended; one that missed the quiesce and does not end
 * within 2 s is left running, with all it uses (its handler's too), to the
 * process's end. Returns how many were left. */
unsigned http_stop(void);

/* The memory libmicrohttpd is given per connection, for [server]
 * max_header_size and max_header_fields: it keeps there the request head, a
 * copy of its Cookie header, HTTP_FIELD_COST bytes for every header line,
 * cookie and query parameter, and then the response's head. Twice
 * max_header_size, HTTP_FIELD_COST for each of max_header_fields and
 * HTTP_REPLY_ROOM: a head at both limits fits, all cookie or not; plxd
 * itself enforces both (request.c, recv_tap.c). Never less than
 * HTTP_POOL_MALLOC_MAX, which costs no more than less would: up to
 * there libmicrohttpd 0.9.75 takes the memory from malloc, beyond it from
 * mmap, an mmap and a munmap for every connection, which halved the
 * requests per second with a new connection each (8K is the default for
 * that reason). More memory also costs every keep-alive request:
 * libmicrohttpd clears what was used between two requests. */
#define HTTP_FIELD_COST      64
#define HTTP_REPLY_ROOM      (3 * 1024)
#define HTTP_POOL_MALLOC_MAX (32 * 1024)
size_t http_connection_memory(const struct server_conf *server);

/* [server] max_header_fields, or what its 0 stands for: 25 per KB of
 * max_header_size. */
unsigned long http_header_fields(const struct server_conf *server);

/* For request.c and status.c. */
unsigned http_open_connections(void);
unsigned http_threads(void);
struct conn *http_conn(struct MHD_Connection *connection);
void http_request_started(struct conn *c);
void http_request_ended(struct conn *c);
/* The body of the current request: is expected, has grown by len, is in. */
void http_body_started(struct conn *c);
void http_body_progress(struct conn *c, size_t len);
void http_body_ended(struct conn *c);

#endif
