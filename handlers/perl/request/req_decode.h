/* Percent-decoding as HTML forms encode (application/x-www-form-urlencoded):
 * '+' is a space and %XX is the byte XX. Pure C: no libmicrohttpd, no Perl. */
#ifndef PLXD_REQ_DECODE_H
#define PLXD_REQ_DECODE_H

#include <stddef.h>

/* Decodes len bytes of in into out, which has room for len bytes and may
 * be in itself. Returns 0 with *out_len set, or -1 when a '%' is not
 * followed by two hex digits, with *bad_at its offset in in. */
int req_decode_strict(const char *in, size_t len, char *out, size_t *out_len, size_t *bad_at);

/* As req_decode_strict, but a bad escape is kept as it stands (cookies,
 * which other software may have set). Returns the decoded length. */
size_t req_decode_lenient(const char *in, size_t len, char *out);

#endif
