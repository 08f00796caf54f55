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

/* Sizes the table to the descriptor limit; before any connection. */
int recv_tap_init(void);

/* A client socket accepted (reads from now on are counted), or closed. */
void recv_tap_open(int fd);
void recv_tap_close(int fd);

/* The bytes read from fd since recv_tap_open, and where the first read
 * went (libmicrohttpd's read buffer: the start of its memory for the
 * connection). Returns 0, or -1 when fd is not tapped or not read yet. */
int recv_tap_state(int fd, uint64_t *bytes, const char **first);

/* fn is called with what each read from fd brings, until called with NULL. */
void recv_tap_watch(int fd, recv_tap_fn *fn, void *cls);

#endif
