/* cgi_reply: the CGI response header parser, fed whole and byte by byte. */
#include "cgi_reply.h"
#include "tap.h"

#include <stdlib.h>

struct row {
	const char *name;
	const char *input;
	size_t len; /* 0: strlen(input) */
	enum cgi_reply_result result;
	unsigned status;
	const char *content_type;
	const char *location;
	int local;
	int nph;
	int64_t content_length; /* expected; 0 means -1 unless has_length */
	int has_length;
	size_t body;        /* bytes of input after the header block */
	const char *header; /* "Name: value" of the first other header */
	size_t header_count;
	const char *error; /* substring of the error */
};

#define B(s) s, sizeof(s) - 1

/* clang-format off */
static const struct row rows[] = {
	{ "hello world", "Content-Type: text/html\n\n<html>", .result = CGI_REPLY_DONE,
		.status = 200, .content_type = "text/html", .body = 6 },
	{ "CRLF", "Content-Type: text/plain\r\n\r\nx", .result = CGI_REPLY_DONE, .status = 200,
		.content_type = "text/plain", .body = 1 },
	{ "Status", "Status: 404 Not Found\nContent-Type: text/plain\n\n", .result = CGI_REPLY_DONE,
		.status = 404, .content_type = "text/plain" },
	{ "Status alone", "Status: 204\n\n", .result = CGI_REPLY_DONE, .status = 204 },
	{ "absolute Location is 302", "Location: http://example.com/\n\n", .result = CGI_REPLY_DONE,
		.status = 302, .location = "http://example.com/" },
	{ "local Location", "Location: /other.html?x=1\n\n", .result = CGI_REPLY_DONE,
		.status = 302, .location = "/other.html?x=1", .local = 1 },
	{ "//host is not local", "Location: //evil.com/\n\n", .result = CGI_REPLY_DONE,
		.status = 302, .location = "//evil.com/" },
	{ "Location with Status is a client redirect",
		"Status: 301 Moved\nLocation: /new\nContent-Type: text/html\n\nmoved",
		.result = CGI_REPLY_DONE, .status = 301, .location = "/new", .content_type = "text/html",
		.body = 5 },
	{ "other headers kept in order", "Content-Type: a/b\nX-One:  1 \nSet-Cookie: c=2\n\n",
		.result = CGI_REPLY_DONE, .status = 200, .content_type = "a/b", .header = "X-One: 1",
		.header_count = 2 },
	{ "case-insensitive names", "content-TYPE: a/b\nSTATUS: 201\n\n", .result = CGI_REPLY_DONE,
		.status = 201, .content_type = "a/b" },
	{ "Content-Length", "Content-Type: a/b\nContent-Length: 5\n\nhello",
		.result = CGI_REPLY_DONE, .status = 200, .content_type = "a/b", .content_length = 5,
		.has_length = 1, .body = 5 },
	{ "repeated equal Content-Length", "Content-Type: a/b\nContent-Length: 5\nContent-Length: 5\n\n",
		.result = CGI_REPLY_DONE, .status = 200, .content_type = "a/b", .content_length = 5,
		.has_length = 1 },
	{ "hop-by-hop headers dropped", "Content-Type: a/b\nConnection: close\nKeep-Alive: 1\n"
		"Upgrade: h2c\nX-Kept: y\n\n", .result = CGI_REPLY_DONE, .status = 200,
		.content_type = "a/b", .header = "X-Kept: y", .header_count = 1 },
	{ "NPH status line", "HTTP/1.1 200 OK\nContent-Type: a/b\nX-N: 1\n\nbody",
		.result = CGI_REPLY_DONE, .status = 200, .content_type = "a/b", .nph = 1, .body = 4,
		.header = "X-N: 1", .header_count = 1 },
	{ "NPH 1.0 with a status only", "HTTP/1.0 503 Busy\r\n\r\n", .result = CGI_REPLY_DONE,
		.status = 503, .nph = 1 },
	{ "empty value allowed", "Content-Type: a/b\nX-Empty:\n\n", .result = CGI_REPLY_DONE,
		.status = 200, .content_type = "a/b", .header = "X-Empty: ", .header_count = 1 },
	{ "binary body after the block", B("Content-Type: a/b\n\n\0\r\n\x01"),
		.result = CGI_REPLY_DONE, .status = 200, .content_type = "a/b", .body = 4 },
	{ "obs-text in a value", "Content-Type: a/b\nX-U: caf\xc3\xa9\n\n", .result = CGI_REPLY_DONE,
		.status = 200, .content_type = "a/b", .header = "X-U: caf\xc3\xa9", .header_count = 1 },

	{ "no headers", "Hello world\n\n", .result = CGI_REPLY_ERROR, .error = "malformed" },
	{ "blank line first", "\nContent-Type: a/b\n\n", .result = CGI_REPLY_ERROR,
		.error = "no headers" },
	{ "no CGI field", "X-Only: 1\n\n", .result = CGI_REPLY_ERROR,
		.error = "no Content-Type, Location or Status" },
	{ "bad Status text", "Status: OK\n\n", .result = CGI_REPLY_ERROR, .error = "bad Status" },
	{ "Status out of range", "Status: 099\n\n", .result = CGI_REPLY_ERROR, .error = "bad Status" },
	{ "1xx Status", "Status: 101 Switching\n\n", .result = CGI_REPLY_ERROR, .error = "bad Status" },
	{ "Status 600", "Status: 600\n\n", .result = CGI_REPLY_ERROR, .error = "bad Status" },
	{ "Status with 4 digits", "Status: 2000\n\n", .result = CGI_REPLY_ERROR, .error = "bad Status" },
	{ "repeated Status", "Status: 200\nStatus: 404\n\n", .result = CGI_REPLY_ERROR,
		.error = "repeated Status" },
	{ "repeated Location", "Location: /a\nLocation: /b\n\n", .result = CGI_REPLY_ERROR,
		.error = "repeated Location" },
	{ "CR inside a line", "Content-Type: a/b\rX-Evil: 1\n\n", .result = CGI_REPLY_ERROR,
		.error = "CR" },
	{ "NUL inside a line", B("Content-Type: a/b\0x\n\n"), .result = CGI_REPLY_ERROR,
		.error = "NUL" },
	{ "control byte", "Content-Type: a/\x1b" "b\n\n", .result = CGI_REPLY_ERROR,
		.error = "control" },
	{ "folded line", "Content-Type: a/b\n continued\n\n", .result = CGI_REPLY_ERROR,
		.error = "folded" },
	{ "space before colon", "Content-Type : a/b\n\n", .result = CGI_REPLY_ERROR,
		.error = "malformed" },
	{ "no colon", "Content-Type a/b\n\n", .result = CGI_REPLY_ERROR, .error = "malformed" },
	{ "Transfer-Encoding", "Content-Type: a/b\nTransfer-Encoding: chunked\n\n",
		.result = CGI_REPLY_ERROR, .error = "Transfer-Encoding" },
	{ "bad Content-Length", "Content-Type: a/b\nContent-Length: 12x\n\n",
		.result = CGI_REPLY_ERROR, .error = "bad Content-Length" },
	{ "negative Content-Length", "Content-Type: a/b\nContent-Length: -1\n\n",
		.result = CGI_REPLY_ERROR, .error = "bad Content-Length" },
	{ "huge Content-Length", "Content-Type: a/b\nContent-Length: 99999999999999999999\n\n",
		.result = CGI_REPLY_ERROR, .error = "bad Content-Length" },
	{ "conflicting Content-Length", "Content-Type: a/b\nContent-Length: 1\nContent-Length: 2\n\n",
		.result = CGI_REPLY_ERROR, .error = "conflicting" },
	{ "bad NPH line", "HTTP/2 200 OK\n\n", .result = CGI_REPLY_ERROR, .error = "NPH" },
	{ "NPH line not first", "Content-Type: a/b\nHTTP/1.1 200 OK\n\n", .result = CGI_REPLY_ERROR,
		.error = "malformed" },
	{ "empty Content-Type", "Content-Type:\n\n", .result = CGI_REPLY_ERROR,
		.error = "empty Content-Type" },

	{ "incomplete", "Content-Type: a/b\n", .result = CGI_REPLY_MORE },
	{ "incomplete CR", "Content-Type: a/b\r\n\r", .result = CGI_REPLY_MORE },
	{ "nothing", "", .result = CGI_REPLY_MORE },
};
/* clang-format on */

/* Feeds input in pieces of step bytes (0: whole). Returns the result and
 * where the body starts. */
static enum cgi_reply_result run(struct cgi_reply *p, const char *in, size_t len, size_t step,
		size_t *body_at)
{
	enum cgi_reply_result res = CGI_REPLY_MORE;
	size_t off = 0;
	*body_at = len;
	if (len == 0) {
		size_t used;
		return cgi_reply_feed(p, in, 0, &used);
	}
	while (off < len) {
		size_t n = step && step < len - off ? step : len - off;
		size_t used;
		res = cgi_reply_feed(p, in + off, n, &used);
		if (res == CGI_REPLY_DONE) {
			*body_at = off + used;
			return res;
		}
		if (res == CGI_REPLY_ERROR)
			return res;
		if (used != n) /* MORE takes every byte */
			return CGI_REPLY_ERROR;
		off += n;
	}
	return res;
}

static void check_row(const struct row *w, size_t step)
{
	size_t len = w->len ? w->len : strlen(w->input);
	struct cgi_reply p;
	cgi_reply_init(&p, 0);
	size_t body_at;
	enum cgi_reply_result res = run(&p, w->input, len, step, &body_at);
	const char *how = step ? "byte by byte" : "whole";
	if (!ok(res == w->result, "%s (%s): result %d (got %d%s%s)", w->name, how, w->result, res,
			    p.error ? ": " : "", p.error ? p.error : "")) {
		cgi_reply_fini(&p);
		return;
	}
	if (res == CGI_REPLY_ERROR) {
		ok(p.error && strstr(p.error, w->error), "%s (%s): error '%s' mentions '%s'",
				w->name, how, p.error ? p.error : "(null)", w->error);
		size_t used;
		ok(cgi_reply_feed(&p, "x", 1, &used) == CGI_REPLY_ERROR && used == 0,
				"%s (%s): stays an error", w->name, how);
	}
	if (res == CGI_REPLY_DONE) {
		ok(p.status == w->status, "%s (%s): status %u (got %u)", w->name, how, w->status,
				p.status);
		is_str(p.content_type, w->content_type, "%s (%s): content type", w->name, how);
		is_str(p.location, w->location, "%s (%s): location", w->name, how);
		ok(p.location_local == w->local, "%s (%s): local redirect %d", w->name, how,
				w->local);
		ok(p.nph == w->nph, "%s (%s): nph %d", w->name, how, w->nph);
		int64_t want_len = w->has_length ? w->content_length : -1;
		ok(p.content_length == want_len, "%s (%s): content length %lld (got %lld)", w->name,
				how, (long long)want_len, (long long)p.content_length);
		ok(len - body_at == w->body, "%s (%s): %zu body bytes follow (got %zu)", w->name,
				how, w->body, len - body_at);
		ok(p.header_count == w->header_count, "%s (%s): %zu other headers (got %zu)",
				w->name, how, w->header_count, p.header_count);
		if (w->header && p.header_count) {
			char h[256];
			snprintf(h, sizeof h, "%s: %s", p.headers[0].name, p.headers[0].value);
			is_str(h, w->header, "%s (%s): first other header", w->name, how);
		}
		size_t used;
		ok(cgi_reply_feed(&p, "more", 4, &used) == CGI_REPLY_DONE && used == 0,
				"%s (%s): stays done, takes nothing more", w->name, how);
		ok(cgi_reply_eof(&p) == CGI_REPLY_DONE, "%s (%s): end of output after it is fine",
				w->name, how);
	}
	if (res == CGI_REPLY_MORE) {
		ok(cgi_reply_eof(&p) == CGI_REPLY_ERROR, "%s (%s): end of output now is an error",
				w->name, how);
		ok(p.error && strstr(p.error, len ? "inside the header" : "no output"),
				"%s (%s): says why (%s)", w->name, how,
				p.error ? p.error : "(null)");
	}
	cgi_reply_fini(&p);
}

int main(void)
{
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		check_row(&rows[i], 0);
		check_row(&rows[i], 1);
		check_row(&rows[i], 7);
	}

	/* The block is bounded. */
	struct cgi_reply p;
	cgi_reply_init(&p, 1024);
	char line[100];
	memset(line, 'a', sizeof line);
	memcpy(line, "X-Long: ", 8);
	line[99] = '\n';
	size_t used;
	enum cgi_reply_result res = cgi_reply_feed(&p, "Content-Type: a/b\n", 18, &used);
	for (int i = 0; i < 20 && res == CGI_REPLY_MORE; i++)
		res = cgi_reply_feed(&p, line, sizeof line, &used);
	ok(res == CGI_REPLY_ERROR && strstr(p.error, "too large"), "a block over max is refused");
	cgi_reply_fini(&p);

	/* Exactly at the limit is fine. */
	cgi_reply_init(&p, 20);
	res = cgi_reply_feed(&p, "Content-Type: a/b\n\nbody", 23, &used);
	ok(res == CGI_REPLY_DONE && used == 19, "a block exactly as large as max is accepted");
	cgi_reply_fini(&p);

	/* A block of 20 KB, in one piece and in 100-byte pieces: the fields
	 * parsed before the buffer grew keep their values. */
	for (int piece = 0; piece < 2; piece++) {
		static char big[20 * 1024 + 200];
		size_t n = (size_t)snprintf(big, sizeof big,
				"Status: 299 Early Reason\nContent-Type: x/early\nX-First: one\n");
		while (n < 20 * 1024)
			n += (size_t)snprintf(big + n, sizeof big - n, "X-Pad: %0100d\n", 7);
		n += (size_t)snprintf(big + n, sizeof big - n, "Location: /late\n\nbody");
		cgi_reply_init(&p, 0);
		res = CGI_REPLY_MORE;
		size_t off = 0, step = piece ? 100 : n, at = 0;
		while (res == CGI_REPLY_MORE && off < n) {
			size_t k = n - off < step ? n - off : step;
			res = cgi_reply_feed(&p, big + off, k, &used);
			at = off + used;
			off += k;
		}
		const char *how = piece ? "in pieces" : "whole";
		ok(res == CGI_REPLY_DONE && n - at == 4, "a 20 KB block is read (%s)", how);
		ok(p.status == 299 && p.reason && strcmp(p.reason, "Early Reason") == 0,
				"its first Status survives the buffer growing (%s)", how);
		is_str(p.content_type, "x/early", "its Content-Type survives (%s)", how);
		is_str(p.location, "/late", "a field after the growth is right (%s)", how);
		ok(p.header_count > 100 && strcmp(p.headers[0].name, "X-First") == 0
						&& strcmp(p.headers[0].value, "one") == 0
						&& strcmp(p.headers[p.header_count - 1].name,
								   "X-Pad")
								== 0,
				"the other headers survive (%s)", how);
		cgi_reply_fini(&p);
	}

	/* A block that ends in the last byte of one chunk. */
	cgi_reply_init(&p, 0);
	res = cgi_reply_feed(&p, "Status: 200\n", 12, &used);
	res = cgi_reply_feed(&p, "\n", 1, &used);
	ok(res == CGI_REPLY_DONE && used == 1, "the blank line alone completes the block");
	cgi_reply_fini(&p);

	/* fini twice and on a fresh parser is safe. */
	cgi_reply_init(&p, 0);
	cgi_reply_fini(&p);
	cgi_reply_fini(&p);
	ok(1, "fini is idempotent");
	return done_testing();
}
