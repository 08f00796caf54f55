/* Error reports of the request parsers: codes, their names and statuses,
 * and messages safe to show a client. */
#include "req.h"

#include <stdarg.h>
#include <stdio.h>

int req_error_set(struct req_error *err, enum req_code code, const char *fmt, ...)
{
	if (err->code != REQ_OK)
		return -1;
	err->code = code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof err->message, fmt, ap);
	va_end(ap);
	return -1;
}

const char *req_error_quote(char *out, size_t outlen, const char *name, size_t len)
{
	enum { SHOWN = 40 };
	size_t o = 0;
	if (outlen < 8) {
		if (outlen)
			out[0] = '\0';
		return out;
	}
	out[o++] = '"';
	for (size_t i = 0; i < len && i < SHOWN && o + 5 < outlen; i++) {
		unsigned char c = (unsigned char)name[i];
		out[o++] = c >= 0x20 && c < 0x7f && c != '"' && c != '\\' ? (char)c : '?';
	}
	if (len > SHOWN && o + 5 < outlen) {
		out[o++] = '.';
		out[o++] = '.';
		out[o++] = '.';
	}
	out[o++] = '"';
	out[o] = '\0';
	return out;
}

const char *req_code_name(enum req_code code)
{
	switch (code) {
	case REQ_OK:
		return "ok";
	case REQ_BAD_ESCAPE:
		return "bad_escape";
	case REQ_TOO_MANY_FIELDS:
		return "too_many_fields";
	case REQ_FIELD_TOO_LARGE:
		return "field_too_large";
	case REQ_UPLOAD_TOO_LARGE:
		return "upload_too_large";
	case REQ_TOO_LARGE:
		return "too_large";
	case REQ_TRUNCATED:
		return "truncated";
	case REQ_NO_BOUNDARY:
		return "no_boundary";
	case REQ_BAD_MULTIPART:
		return "bad_multipart";
	case REQ_BAD_CONTENT_TYPE:
		return "bad_content_type";
	case REQ_STORE:
		return "store";
	case REQ_NO_MEMORY:
		return "no_memory";
	}
	return "unknown";
}

unsigned req_code_status(enum req_code code)
{
	switch (code) {
	case REQ_OK:
		return 200;
	case REQ_STORE:
	case REQ_NO_MEMORY:
		return 500;
	default:
		return 400;
	}
}
