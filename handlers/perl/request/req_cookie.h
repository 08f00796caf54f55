/* A parser of the Cookie request header (RFC 6265 section 5.4, leniently).
 * Pure C: no libmicrohttpd, no Perl. */
#ifndef PLXD_REQ_COOKIE_H
#define PLXD_REQ_COOKIE_H

#include <stddef.h>

#include "req.h"

/* Parses len bytes of s, "a=1; b=2": pairs separated by ';', blanks around
 * names and values dropped, then decoded as CGI.pm does ('+' a space, %XX a
 * byte; a bad escape is kept as it stands, since cookies are set by other
 * software too). Double quotes around a value are kept, as CGI.pm keeps
 * them (RFC 6265 makes them part of the value). Pairs without
 * '=' or with an empty name are skipped. Calls fn for each cookie in the
 * order sent; a name sent twice comes twice (the first is the most
 * specific, RFC 6265 5.4). Never fails on syntax: the header has already
 * been bounded by the server's header size limit.
 * Returns 0, or -1 with err set: REQ_STORE (fn returned -1), REQ_NO_MEMORY. */
int req_cookie_parse(const char *s, size_t len, req_field_fn *fn, void *ctx, struct req_error *err);

#endif
