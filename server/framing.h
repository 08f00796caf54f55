/* Message framing checks: the request line and headers that decide where a
 * request's body ends, and so where the next request on the connection
 * begins. A request that two HTTP parsers could frame differently is
 * refused before a byte of its body is read. Pure C: no libmicrohttpd. */
#ifndef PLXD_FRAMING_H
#define PLXD_FRAMING_H

#include <stddef.h>
#include <stdint.h>

/* State for checking one request's fields one by one: framing_begin, then
 * framing_field for each header in the order received, then framing_end.
 * plxd itself goes through framing_head and framing_field_at instead of
 * framing_field, so that what libmicrohttpd hides is seen too. */
struct framing {
	int http10;               /* HTTP/1.0: no Host needed, no chunked body */
	unsigned content_lengths; /* Content-Length fields seen */
	unsigned transfer_encodings;
	unsigned hosts;
	unsigned status; /* first problem found: 400 or 501; 0 if none */
	const char *why;
	/* The request head in libmicrohttpd's read buffer (framing_head);
	 * head is NULL when fields come as plain strings. */
	const char *head, *head_end;
	const char *line_end; /* where the last line read so far ends its content */
	size_t eol;           /* bytes of a line end in this head: 2 (CRLF), 1 (LF), 0 unknown */
};

void framing_begin(struct framing *f, const char *method, const char *version);

/* libmicrohttpd 0.9.75 hands plxd a header's value cut at its first NUL
 * (length included) and ends the head at a line with an empty name (": x")
 * or a NUL as its first byte, taking the lines after it for the body or
 * the next request. Neither shows through its API; both show in its read
 * buffer, where each line still lies in the order received, its CRLF (or
 * bare LF) and the ':' overwritten with NULs.
 *
 * head is that buffer from the request line's first byte (the method
 * libmicrohttpd passes) for head_len bytes (its
 * MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE: up to and with the empty line);
 * version points into it. After this call, framing_field_at checks that
 * between two reported lines there is nothing but one line end, and
 * framing_end that the head ends with two, each as long as the request
 * line's: so a request whose lines end both in CRLF and in bare LF is
 * refused too, as a bare LF could hide a line made only of ':'. Where a
 * bare LF and such a line (or a NUL) even out, the buffer holds what a
 * CRLF leaves and nothing can be told (doc/security.md, "What plxd cannot close").
 * A head not laid out like this (another libmicrohttpd) refuses every
 * request. */
void framing_head(struct framing *f, const char *head, size_t head_len, const char *version);

/* One header field as libmicrohttpd 0.9.75 reported it, name and value
 * pointing where it left them, after framing_head. A field whose name is
 * not in its line before its value was folded (libmicrohttpd copies the
 * name elsewhere to glue the continuation onto it). */
void framing_field_at(struct framing *f, const char *name, size_t name_len, const char *value,
		size_t value_len);

/* One header field as received; name_len and value_len are the lengths the
 * parser reported (a NUL before them is refused). folded says the parser
 * joined an obsolete continuation line (obs-fold) into this field. */
void framing_field(struct framing *f, const char *name, size_t name_len, const char *value,
		size_t value_len, int folded);

/* Returns 0 when the request can be framed one way only, 400 (malformed,
 * ambiguous) or 501 (a method or transfer coding plxd does not implement),
 * with *why set to a short reason for the log. */
unsigned framing_end(struct framing *f, const char **why);

/* A chunked body's framing (RFC 9112 7.1), read as it arrives: every line
 * of it (each chunk-size line, the CRLF after each chunk's data, the last
 * chunk's line, each trailer line and the empty line after them) must end
 * in CRLF. libmicrohttpd 0.9.75 decodes the body itself and takes a bare LF
 * for a CRLF in each of them, so a front end that reads the bytes by the
 * RFC finds the body ending elsewhere; and it keeps a bare CR inside a
 * chunk extension or a trailer line, where a parser that ends lines at a
 * CR finds a line end. plxd hands chunk_scan every byte libmicrohttpd
 * reads after the head, in order (server/recv_tap.c), and refuses the
 * request at the first bare LF or bare CR. Trailer lines are held to what
 * plxd takes in a head: one that libmicrohttpd would read as the end of the
 * trailers (a NUL first), as part of the line before (a space or tab
 * first), or refuse itself (no name, no colon, a NUL inside) is refused
 * here, and so is one past trailers_left. A body libmicrohttpd refuses
 * itself (a size that is not hex, or past 2^64 - 1; no CRLF after a
 * chunk's data) is left to it. */
enum chunk_state {
	CHUNK_SIZE,         /* the chunk-size's digits */
	CHUNK_SIZE_CR,      /* a CR after them */
	CHUNK_EXT,          /* a chunk extension, to the line's end */
	CHUNK_DATA,         /* size: the bytes of data still to come */
	CHUNK_DATA_CR,      /* the CRLF after the data */
	CHUNK_DATA_LF,      /* ... its LF */
	CHUNK_TRAILER,      /* the start of a trailer line, or of the empty one */
	CHUNK_TRAILER_LINE, /* inside a trailer line */
	CHUNK_END_LF,       /* the LF of the empty line that ends the body */
	CHUNK_DONE,         /* the body has ended: what follows is not its own */
	CHUNK_REFUSED,      /* a bare LF: why says where */
	CHUNK_LEFT          /* malformed in a way libmicrohttpd refuses itself */
};
struct chunk_scan {
	enum chunk_state state;
	int digits; /* the size line has a digit */
	int cr;     /* the byte before is a CR */
	int colon;  /* the trailer line so far has a ':' */
	/* Trailer lines still allowed, and their bytes: chunk_scan_begin
	 * allows any; plxd allows what max_header_fields and max_header_size
	 * leave beside the head, as libmicrohttpd keeps trailers where it
	 * keeps the head (past that memory it answered 431 itself). */
	unsigned long trailers_left;
	uint64_t trailer_bytes_left;
	uint64_t size;   /* the chunk-size read so far, then the data left */
	uint64_t length; /* bytes of the body on the wire, to its end once done */
	const char *why;
	/* CHUNK_LEFT: what libmicrohttpd answers such a body, 413 for a size
	 * past 2^64 - 1, else 400. */
	unsigned left_status;
};

void chunk_scan_begin(struct chunk_scan *s);

/* Takes the next n bytes after the head. Returns 0 while the body goes on
 * (or is left to libmicrohttpd), 1 once it has ended (bytes past its end
 * are not looked at: s->length is the body's length), -1 when refused
 * (s->why says why); the same again after that. */
int chunk_scan(struct chunk_scan *s, const char *p, size_t n);

/* The entries libmicrohttpd 0.9.75 keeps for a request head, counted as
 * its bytes arrive, before libmicrohttpd parses them: one per header line,
 * one per cookie of a Cookie line, one per query parameter. It keeps each
 * in its fixed memory for the connection (http_connection_memory), and a
 * head with more than that memory holds was answered twice over, not at
 * all, or with a 500 blamed on the script, depending on the count. The
 * count errs high (an empty query parameter, an '&' after a '?' in the
 * version, a ';' or ',' anywhere in a Cookie line, a folded line), never
 * low. */
struct head_count {
	unsigned long entries;
	unsigned long lines;       /* lines ended; empty lines before the request line are not */
	unsigned char in_line;     /* the line so far has a byte other than CR */
	unsigned char past_method; /* in the request line: a space seen */
	unsigned char query;       /* in the request line: a '?' seen after it */
	unsigned char matched;     /* bytes of "cookie:" matched from a header line's start */
	unsigned char cookie;      /* in a Cookie line's value */
};

void head_count_begin(struct head_count *h);

/* Takes the next n bytes of a head, with at most max entries. Returns 0
 * when all were taken and the head goes on; 1 when it ended, *used then
 * being the bytes up to and with its empty line's LF; -1 when the entry
 * that comes past max starts at p[*used]. The same -1 again after that. */
int head_count(struct head_count *h, const char *p, size_t n, unsigned long max, size_t *used);

/* The same over a whole list, for tests and fuzzing. */
struct framing_header {
	const char *name;
	const char *value;
	int folded;
};
unsigned framing_check(const char *method, const char *version,
		const struct framing_header *headers, size_t nheaders, const char **why);

#endif
