/* A parser of application/x-www-form-urlencoded data: query strings and
 * form bodies. Pure C: no libmicrohttpd, no Perl. */
#ifndef PLXD_REQ_URLENCODED_H
#define PLXD_REQ_URLENCODED_H

#include <stddef.h>

#include "req.h"
#include "req_limits.h"

/* Parses len bytes of s: pairs separated by '&' or ';' (as CGI.pm), each
 * name=value or a bare name (its value is empty); '+' is a space and %XX a
 * byte. Empty pairs ("a=1&&b=2") are skipped; an empty name ("=x") is a
 * parameter like any other. Calls fn once per pair, in order, with the
 * decoded name and value.
 *
 * Every pair counts against lim->max_fields in *used, len bytes against
 * lim->max_total; decoded names and values may not exceed
 * lim->max_field_size. where names the input in messages ("query string").
 * Returns 0, or -1 with err set: REQ_BAD_ESCAPE, REQ_TOO_MANY_FIELDS,
 * REQ_FIELD_TOO_LARGE, REQ_TOO_LARGE, REQ_STORE (fn returned -1),
 * REQ_NO_MEMORY. Memory: one buffer of len bytes while it runs. */
int req_urlencoded_parse(const char *s, size_t len, const char *where, const struct req_limits *lim,
		struct req_usage *used, req_field_fn *fn, void *ctx, struct req_error *err);

#endif
