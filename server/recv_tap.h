/* What libmicrohttpd reads from each client socket, seen as it reads it.
 * libmicrohttpd 0.9.75 decodes a chunked body itself and hands plxd only
 * the data, never the bytes that frame it; plxd defines recv() in the
 * executable, where the dynamic linker binds libmicrohttpd's calls to it,
 * and passes each read on to the one request that asked (recv_tap_watch).
 * A socket no request watches costs a table look-up per read. */
#ifndef PLXD_RECV_TAP_H
#define PLXD_RECV_TAP_H

#include <stddef.h>
#include <stdint.h>

typedef void recv_tap_fn(void *cls, const char *data, size_t len);

/* Sizes the table to the descriptor limit; before any connection.
 * max_entries: [server] max_header_fields, the entries (header lines,
 * cookies, query parameters) a request head may have (framing.h's
 * head_count); a head with more is refused before libmicrohttpd parses it. */
int recv_tap_init(unsigned long max_entries);

/* A client socket accepted (reads from now on are counted), or closed. */
void recv_tap_open(int fd);
void recv_tap_close(int fd);

/* The bytes read from fd since recv_tap_open, and where the first read
 * went (libmicrohttpd's read buffer: the start of its memory for the
 * connection). Returns 0, or -1 when fd is not tapped or not read yet. */
int recv_tap_state(int fd, uint64_t *bytes, const char **first);

/* fn is called with what each read from fd brings, until called with NULL. */
void recv_tap_watch(int fd, recv_tap_fn *fn, void *cls);

/* A request's head is in and it is being answered: its next head starts at
 * byte at of the stream, and held (held_len bytes) is what was read of it
 * already, in libmicrohttpd's memory. Returns -1 when held already has too
 * many entries: the caller closes the connection after its answer. The
 * socket's later reads are counted as they come; a head with too many is
 * answered 431 there, or, when an answer is still in progress on the
 * connection, never handed to libmicrohttpd (recv_tap_closing). */
int recv_tap_next_head(int fd, uint64_t at, const char *held, size_t held_len);

/* The request's answer has ended. */
void recv_tap_idle(int fd);

/* Whether a head pipelined behind the request being answered had too many
 * entries: that answer must close the connection, and nothing more is
 * read from it. */
int recv_tap_closing(int fd);

/* Reads and drops what the client has already sent (a few reads, never
 * waiting), so that closing the connection after an answer written to fd
 * does not reset it before the client has read that answer. */
void recv_tap_drain(int fd);

#endif
