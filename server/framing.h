/* Message framing checks: the request line and headers that decide where a
 * request's body ends, and so where the next request on the connection
 * begins. A request that two HTTP parsers could frame differently is
 * refused before a byte of its body is read. Pure C: no libmicrohttpd. */
#ifndef PLXD_FRAMING_H
#define PLXD_FRAMING_H

#include <stddef.h>

/* State for checking one request's fields one by one: framing_begin, then
 * framing_field for each header in the order received, then framing_end. */
struct framing {
	int http10;                 /* HTTP/1.0: no Host needed, no chunked body */
	unsigned content_lengths;   /* Content-Length fields seen */
	unsigned transfer_encodings;
	unsigned hosts;
	unsigned status;            /* first problem found: 400 or 501; 0 if none */
	const char *why;
};

void framing_begin(struct framing *f, const char *method, const char *version);

/* One header field as received; name_len and value_len are the lengths the
 * parser reported (a NUL before them is refused). folded says the parser
 * joined an obsolete continuation line (obs-fold) into this field. */
void framing_field(struct framing *f, const char *name, size_t name_len, const char *value,
		size_t value_len, int folded);

/* Returns 0 when the request can be framed one way only, 400 (malformed,
 * ambiguous) or 501 (a method or transfer coding plxd does not implement),
 * with *why set to a short reason for the log. */
unsigned framing_end(struct framing *f, const char **why);

/* The same over a whole list, for tests and fuzzing. */
struct framing_header {
	const char *name;
	const char *value;
	int folded;
};
unsigned framing_check(const char *method, const char *version,
		const struct framing_header *headers, size_t nheaders, const char **why);

#endif
