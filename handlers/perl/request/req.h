/* What every request parser shares: the error report, the callback a parsed
 * field goes to, and the running count one request's parsers charge against
 * its limits. Pure C: no libmicrohttpd, no Perl. */
#ifndef PLXD_REQ_H
#define PLXD_REQ_H

#include <stddef.h>

/* What went wrong. Every code but REQ_OK, REQ_STORE and REQ_NO_MEMORY is the
 * client's fault (HTTP 400); req_code_status tells. */
enum req_code {
	REQ_OK = 0,
	REQ_BAD_ESCAPE,       /* '%' not followed by two hex digits */
	REQ_TOO_MANY_FIELDS,  /* more parameters than max_fields */
	REQ_FIELD_TOO_LARGE,  /* a parameter's name or value over max_field_size */
	REQ_UPLOAD_TOO_LARGE, /* an uploaded file over max_upload_size */
	REQ_TOO_LARGE,        /* query string and body together over max_total */
	REQ_TRUNCATED,        /* the body ended early (inside a multipart part) */
	REQ_NO_BOUNDARY,      /* a multipart body that never reaches its boundary */
	REQ_BAD_MULTIPART,    /* malformed multipart: boundary line, part headers */
	REQ_BAD_CONTENT_TYPE, /* a multipart Content-Type without a usable boundary */
	REQ_STORE,            /* the caller's callback refused (disk full...) */
	REQ_NO_MEMORY
};

#define REQ_MESSAGE_MAX 256

/* Filled by a parser that fails; message names the problem in words a
 * client may read (parameter names in it are cut short and stripped of
 * control bytes). */
struct req_error {
	enum req_code code;
	char message[REQ_MESSAGE_MAX];
};

/* Sets err (when err->code is still REQ_OK: the first problem wins, so a
 * callback may fill err itself before it returns -1). Returns -1. */
int req_error_set(struct req_error *err, enum req_code code, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));

/* Writes a parameter name for a message: at most 40 bytes, quoted,
 * bytes outside printable ASCII (and '"', '\\') as '?'. Returns out. */
const char *req_error_quote(char *out, size_t outlen, const char *name, size_t len);

/* "bad_escape", "too_many_fields"...: a stable name for scripts. */
const char *req_code_name(enum req_code code);

/* 400 for the client's mistakes, 500 for REQ_STORE and REQ_NO_MEMORY. */
unsigned req_code_status(enum req_code code);

/* One parsed field: name and value, decoded, each followed by a NUL that
 * len does not count (values may hold NULs of their own). Valid only
 * during the call. Returns 0, or -1 to stop the parser (REQ_STORE). */
typedef int req_field_fn(void *ctx, const char *name, size_t name_len, const char *value,
		size_t value_len);

/* What one request has used of its limits so far: every parser of the
 * request (query string, body) adds to the same one. Start it zeroed. */
struct req_usage {
	unsigned long fields;     /* parameters and uploads */
	unsigned long long bytes; /* query string and body bytes */
};

#endif
