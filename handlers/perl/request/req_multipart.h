/* An incremental parser of multipart/form-data bodies (RFC 7578): fed the
 * body in chunks of any size, it hands complete fields to the caller and
 * streams file parts to a caller-supplied sink, holding at most one
 * field's value and a small window of input in memory.
 * Pure C: no libmicrohttpd, no Perl. */
#ifndef PLXD_REQ_MULTIPART_H
#define PLXD_REQ_MULTIPART_H

#include <stddef.h>

#include "req.h"
#include "req_limits.h"

/* A part's header block holds at most this many bytes. */
#define REQ_MULTIPART_HEADERS_MAX 8192

/* A file part, as its headers describe it. Strings are NUL-terminated and
 * valid during file_begin only. */
struct req_part {
	const char *name; /* Content-Disposition's name, as sent */
	size_t name_len;
	const char *filename;     /* Content-Disposition's filename, as sent (a
				     browser sends the base name; old ones a path) */
	const char *content_type; /* the part's Content-Type, or NULL when absent */
};

/* Where parts go; ctx is the caller's. Each returns 0, or -1 to stop the
 * parser with REQ_STORE (a callback may fill the parser's err itself first,
 * to say why: the first error set wins). */
struct req_multipart_sink {
	/* A part without a filename (or with an empty one, as a browser sends
	 * for a file input left empty: CGI.pm does the same) is a field, given
	 * whole once its last byte is in. */
	req_field_fn *field;
	/* A part with a non-empty filename: begin, its data in pieces of any
	 * size, end with its size. After an error, a file that began gets no
	 * file_end: the caller removes what it stored. */
	int (*file_begin)(void *ctx, const struct req_part *part);
	int (*file_data)(void *ctx, const char *data, size_t len);
	int (*file_end)(void *ctx, unsigned long long size);
};

struct req_multipart;

/* Prepares to parse a body whose Content-Type is content_type
 * ("multipart/form-data; boundary=..."). lim, used, sink, ctx and err must
 * outlive the parser. Every part counts against lim->max_fields in *used,
 * every byte fed against lim->max_total. Returns the parser, or NULL with
 * err set: REQ_BAD_CONTENT_TYPE (not multipart/form-data, no boundary, a
 * boundary longer than 70 bytes), REQ_NO_MEMORY. */
struct req_multipart *req_multipart_create(const char *content_type, const struct req_limits *lim,
		struct req_usage *used, const struct req_multipart_sink *sink, void *ctx,
		struct req_error *err);

/* Parses the next len bytes of the body. Returns 0, or -1 with err set;
 * after an error every call returns -1. Errors: REQ_TOO_LARGE,
 * REQ_TOO_MANY_FIELDS, REQ_FIELD_TOO_LARGE, REQ_UPLOAD_TOO_LARGE,
 * REQ_BAD_MULTIPART (a boundary followed by anything but "--" or a line
 * end, part headers malformed, too long, or without a form-data name),
 * REQ_STORE, REQ_NO_MEMORY. */
int req_multipart_feed(struct req_multipart *m, const char *data, size_t len);

/* The body has ended. Returns 0 when it was complete (its closing
 * boundary seen, or no byte at all), or -1 with err set: REQ_NO_BOUNDARY
 * (the boundary never appeared), REQ_TRUNCATED (it ended inside a part or
 * its headers, before the closing boundary). */
int req_multipart_finish(struct req_multipart *m);

/* Frees m (NULL is fine). Does not call the sink. */
void req_multipart_destroy(struct req_multipart *m);

#endif
