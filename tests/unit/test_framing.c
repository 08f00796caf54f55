/* framing_check: requests that can be framed one way only pass; ambiguous
 * or unsupported framing is 400 or 501. framing_head and framing_field_at:
 * raw requests read through a model of libmicrohttpd 0.9.75 (mhd_head.h),
 * NULs, lines that end the head early and mixed line ends refused. */
#include "framing.h"
#include "mhd_head.h"
#include "tap.h"

#include <stdio.h>
#include <string.h>

#define MAX_HEADERS 6

struct row {
	const char *name;
	const char *method;
	const char *version;
	unsigned status;
	struct framing_header headers[MAX_HEADERS];
};

#define HOST                             \
	{                                \
		"Host", "example.com", 0 \
	}

/* clang-format off */
static const struct row rows[] = {
	{ "plain GET", "GET", "HTTP/1.1", 0, { HOST } },
	{ "POST with a length", "POST", "HTTP/1.1", 0, { HOST, { "Content-Length", "5", 0 } } },
	{ "chunked POST", "POST", "HTTP/1.1", 0, { HOST, { "Transfer-Encoding", "chunked", 0 } } },
	{ "chunked in capitals", "POST", "HTTP/1.1", 0, { HOST, { "transfer-encoding", "Chunked", 0 } } },
	{ "HTTP/1.0 without Host", "GET", "HTTP/1.0", 0, { { "Accept", "*/*", 0 } } },
	{ "every known method", "PATCH", "HTTP/1.1", 0, { HOST } },
	{ "OPTIONS", "OPTIONS", "HTTP/1.1", 0, { HOST } },
	{ "empty Host", "GET", "HTTP/1.1", 0, { { "Host", "", 0 } } },
	{ "Host with port", "GET", "HTTP/1.1", 0, { { "Host", "127.0.0.1:8080", 0 } } },
	{ "IPv6 Host", "GET", "HTTP/1.1", 0, { { "Host", "[::1]:8080", 0 } } },
	{ "token punctuation in a name", "GET", "HTTP/1.1", 0,
	  { HOST, { "X-A!#$%&'*+-.^_`|~1", "v", 0 } } },
	{ "tab in a value", "GET", "HTTP/1.1", 0, { HOST, { "X-A", "a\tb", 0 } } },
	{ "Content-Length 0", "GET", "HTTP/1.1", 0, { HOST, { "Content-Length", "0", 0 } } },

	{ "two Content-Length", "POST", "HTTP/1.1", 400,
	  { HOST, { "Content-Length", "0", 0 }, { "Content-Length", "44", 0 } } },
	{ "two equal Content-Length", "POST", "HTTP/1.1", 400,
	  { HOST, { "Content-Length", "5", 0 }, { "content-length", "5", 0 } } },
	{ "list-valued Content-Length", "POST", "HTTP/1.1", 400,
	  { HOST, { "Content-Length", "5, 5", 0 } } },
	{ "signed Content-Length", "POST", "HTTP/1.1", 400, { HOST, { "Content-Length", "+5", 0 } } },
	{ "empty Content-Length", "POST", "HTTP/1.1", 400, { HOST, { "Content-Length", "", 0 } } },
	{ "Content-Length with Transfer-Encoding", "POST", "HTTP/1.1", 400,
	  { HOST, { "Content-Length", "4", 0 }, { "Transfer-Encoding", "chunked", 0 } } },
	{ "Transfer-Encoding then Content-Length", "POST", "HTTP/1.1", 400,
	  { HOST, { "Transfer-Encoding", "chunked", 0 }, { "Content-Length", "4", 0 } } },
	{ "gzip", "POST", "HTTP/1.1", 501, { HOST, { "Transfer-Encoding", "gzip", 0 } } },
	{ "gzip, chunked", "POST", "HTTP/1.1", 501,
	  { HOST, { "Transfer-Encoding", "gzip, chunked", 0 } } },
	{ "chunked twice", "POST", "HTTP/1.1", 501,
	  { HOST, { "Transfer-Encoding", "chunked", 0 }, { "Transfer-Encoding", "chunked", 0 } } },
	{ "identity", "POST", "HTTP/1.1", 501, { HOST, { "Transfer-Encoding", "identity", 0 } } },
	{ "chunked in HTTP/1.0", "POST", "HTTP/1.0", 400,
	  { { "Transfer-Encoding", "chunked", 0 } } },
	{ "space before the colon", "POST", "HTTP/1.1", 400,
	  { HOST, { "Content-Length ", "5", 0 } } },
	{ "tab in a name", "GET", "HTTP/1.1", 400, { HOST, { "X\tA", "b", 0 } } },
	{ "colon in a name", "GET", "HTTP/1.1", 400, { HOST, { "X:A", "b", 0 } } },
	{ "empty name", "GET", "HTTP/1.1", 400, { HOST, { "", "b", 0 } } },
	{ "leading space in a name (folded first line)", "GET", "HTTP/1.1", 400,
	  { HOST, { " Content-Length", "5", 0 } } },
	{ "8-bit byte in a name", "GET", "HTTP/1.1", 400, { HOST, { "X-\xe9", "b", 0 } } },
	{ "bare CR in a value", "GET", "HTTP/1.1", 400,
	  { HOST, { "X", "a\rContent-Length: 5", 0 } } },
	{ "folded header", "POST", "HTTP/1.1", 400, { HOST, { "Content-Length", "5", 1 } } },
	{ "folded harmless header", "GET", "HTTP/1.1", 400, { HOST, { "X-Long", "a b", 1 } } },
	{ "no Host in HTTP/1.1", "GET", "HTTP/1.1", 400, { { "Accept", "*/*", 0 } } },
	{ "two Hosts", "GET", "HTTP/1.1", 400, { HOST, { "Host", "other", 0 } } },
	{ "Host with a slash", "GET", "HTTP/1.1", 400, { { "Host", "a/b", 0 } } },
	{ "Host with a space", "GET", "HTTP/1.1", 400, { { "Host", "a b", 0 } } },
	{ "Host with userinfo", "GET", "HTTP/1.1", 400, { { "Host", "u@a", 0 } } },
	{ "method with a parenthesis", "G(T", "HTTP/1.1", 400, { HOST } },
	{ "empty method", "", "HTTP/1.1", 400, { HOST } },
	{ "unknown method", "FOO", "HTTP/1.1", 501, { HOST } },
	{ "lower-case method", "get", "HTTP/1.1", 501, { HOST } },
	{ "unknown method and no Host: 400 wins", "FOO", "HTTP/1.1", 400, { { "A", "b", 0 } } },
	{ "gzip and two lengths: 400 wins", "POST", "HTTP/1.1", 400,
	  { HOST, { "Transfer-Encoding", "gzip", 0 }, { "Content-Length", "1", 0 },
	    { "Content-Length", "2", 0 } } },
};
/* clang-format on */

/* A raw request as plxd sees it through libmicrohttpd 0.9.75: its framing
 * status, or MHD_SELF when libmicrohttpd would answer it itself. */
#define MHD_SELF 999u
static unsigned raw_status(const char *req, size_t len, const char **why)
{
	struct mhd_head h;
	*why = NULL;
	if (mhd_head_parse(&h, req, len) < 0) {
		mhd_head_free(&h);
		return MHD_SELF;
	}
	struct framing f;
	framing_begin(&f, h.method, h.version);
	framing_head(&f, h.method, h.head_len, h.version);
	for (size_t i = 0; i < h.nfields; i++)
		framing_field_at(&f, h.fields[i].name, h.fields[i].name_len, h.fields[i].value,
				h.fields[i].value_len);
	unsigned status = framing_end(&f, why);
	mhd_head_free(&h);
	return status;
}

struct raw_row {
	const char *name;
	const char *req;
	size_t len;
	unsigned status;
};
#define RAW(name, req, status)                    \
	{                                         \
		name, req, sizeof req - 1, status \
	}

/* clang-format off */
static const struct raw_row raw_rows[] = {
	RAW("plain GET", "GET /a HTTP/1.1\r\nHost: a\r\n\r\n", 0),
	RAW("bare LF throughout", "GET /a HTTP/1.1\nHost: a\nX: b\n\n", 0),
	RAW("HTTP/1.0 without headers", "GET /a HTTP/1.0\r\n\r\n", 0),
	RAW("HTTP/1.0 without headers, bare LF", "GET /a HTTP/1.0\n\n", 0),
	RAW("empty lines before the request", "\r\n\r\nGET /a HTTP/1.1\r\nHost: a\r\n\r\n", 0),
	RAW("a body after the head", "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n"
	    "\0\0: x", 0),
	RAW("the next request after the head", "GET /a HTTP/1.1\r\nHost: a\r\n\r\n"
	    "GET /b HTTP/1.1\r\nHost: a\r\n\r\n", 0),
	RAW("blanks around values", "GET /a HTTP/1.1\r\nHost:a\r\nX:\t b \t\r\nY:\r\n\r\n", 0),
	RAW("a query", "GET /a?b=c HTTP/1.1\r\nHost: a\r\n\r\n", 0),

	RAW("NUL in Content-Length", "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 0\0" "37\r\n"
	    "\r\n", 400),
	RAW("NUL in Content-Length, not the last field", "POST /a HTTP/1.1\r\nContent-Length: 0\0"
	    "37\r\nHost: a\r\n\r\n", 400),
	RAW("NUL in Transfer-Encoding", "POST /a HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: chunked\0, identity\r\n\r\n", 400),
	RAW("NUL at the end of a value", "GET /a HTTP/1.1\r\nHost: a\0\r\n\r\n", 400),
	RAW("NUL at the end of a value, bare LF", "GET /a HTTP/1.1\nHost: a\0\n\n", 400),
	RAW("NUL first in a value", "GET /a HTTP/1.1\r\nHost: a\r\nX: \0b\r\n\r\n", 400),
	RAW("NUL alone as a value", "GET /a HTTP/1.1\r\nX: \0\r\nHost: a\r\n\r\n", 400),
	RAW("empty name ends the head", "GET /a HTTP/1.1\r\nHost: a\r\n: x\r\n"
	    "GET /b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
	RAW("empty name with nothing after it", "GET /a HTTP/1.1\r\nHost: a\r\n:\r\n"
	    "GET /b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
	RAW("empty name, bare LF throughout", "GET /a HTTP/1.1\nHost: a\n:\n"
	    "GET /b HTTP/1.1\nHost: a\n\n", 400),
	RAW("empty name in an HTTP/1.0 request", "GET /a HTTP/1.0\r\nX: y\r\n: x\r\n"
	    "GET /b HTTP/1.0\r\n\r\n", 400),
	RAW("empty name as the first field", "GET /a HTTP/1.1\r\n: x\r\nHost: a\r\n\r\n", 400),
	RAW("a line starting with NUL ends the head", "GET /a HTTP/1.1\r\nHost: a\r\n\0X: y\r\n"
	    "\r\n", 400),
	RAW("a line starting with NUL, HTTP/1.0", "GET /a HTTP/1.0\r\n\0X: y\r\n\r\n", 400),
	RAW("CRLF, then a bare LF", "GET /a HTTP/1.1\r\nHost: a\nX: y\r\n\r\n", 400),
	RAW("bare LF, then CRLF", "GET /a HTTP/1.1\nHost: a\r\n\n", 400),
	RAW("bare LF ends the head of a CRLF request", "GET /a HTTP/1.1\r\nHost: a\r\n\n", 400),
	RAW("CRLF ends the head of a bare-LF request", "GET /a HTTP/1.1\nHost: a\n\r\n", 400),
	RAW("bare LF request line, CRLF after", "GET /a HTTP/1.0\n\r\n", 400),
	RAW("folded header", "POST /a HTTP/1.1\r\nHost: a\r\nContent-: 5\r\n Length\r\n\r\n",
	    400),
	RAW("folded header, tab", "GET /a HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\nY: c\r\n\r\n", 400),
	RAW("fold on the first line", "GET /a HTTP/1.1\r\n X: a\r\nHost: a\r\n\r\n", 400),

	RAW("NUL in a name: libmicrohttpd's own 400", "GET /a HTTP/1.1\r\nHost: a\r\nX\0A: b\r\n"
	    "\r\n", MHD_SELF),
	RAW("no colon: libmicrohttpd's own 400", "GET /a HTTP/1.1\r\nHost: a\r\nX\r\n\r\n", MHD_SELF),
};
/* clang-format on */

/* Where plxd cannot tell: in a CRLF request, a NUL or a lone ':' followed
 * by a bare LF leaves the same two NULs as a CRLF (doc/security.md, "What plxd
 * cannot close"). */
/* clang-format off */
static const struct raw_row raw_blind[] = {
	RAW("NUL before a bare LF", "GET /a HTTP/1.1\r\nX: a\0\nHost: a\r\n\r\n", 0),
	RAW("a lone ':' before a bare LF, last", "GET /a HTTP/1.1\r\nHost: a\r\n:\n"
	    "GET /b HTTP/1.1\r\nHost: a\r\n\r\n", 0),
};
/* clang-format on */

static void raw_requests(void)
{
	for (size_t i = 0; i < sizeof raw_rows / sizeof raw_rows[0]; i++) {
		const struct raw_row *r = &raw_rows[i];
		const char *why;
		unsigned status = raw_status(r->req, r->len, &why);
		ok(status == r->status, "raw: %s: %u (got %u: %s)", r->name, r->status, status,
				why ? why : "no reason");
	}
	for (size_t i = 0; i < sizeof raw_blind / sizeof raw_blind[0]; i++) {
		const struct raw_row *r = &raw_blind[i];
		const char *why;
		ok(raw_status(r->req, r->len, &why) == r->status, "raw, out of reach: %s", r->name);
	}

	/* A NUL at every position of a value, in both kinds of line end. */
	static const char *const ends[] = { "\r\n", "\n" };
	for (size_t e = 0; e < 2; e++) {
		const char *value = "chunked, identity";
		for (size_t at = 0; at <= strlen(value); at++) {
			char req[256];
			int n = snprintf(req, sizeof req,
					"POST /a HTTP/1.1%sHost: a%sTransfer-Encoding: ", ends[e],
					ends[e]);
			memcpy(req + n, value, at);
			n += (int)at;
			req[n++] = '\0';
			n += snprintf(req + n, sizeof req - (size_t)n, "%s%s%s", value + at,
					ends[e], ends[e]);
			const char *why;
			unsigned status = raw_status(req, (size_t)n, &why);
			ok(status == 400, "a NUL at %zu of a %s value: 400 (got %u)", at,
					e ? "LF" : "CRLF", status);
		}
	}

	/* Where libmicrohttpd leaves things is what the check relies on: a
	 * head it does not recognise refuses the request. */
	struct framing f;
	const char *why;
	char head[] = "GET\0/\0HTTP/1.1\0\0Host\0 a\0\0\0\0";
	framing_begin(&f, "GET", "HTTP/1.1");
	framing_head(&f, head, sizeof head - 1, "HTTP/1.1");
	framing_field_at(&f, head + 16, 4, head + 22, 1);
	unsigned status = framing_end(&f, &why);
	ok(status == 400, "a version outside the head: 400 (%s)", why ? why : "-");
	framing_begin(&f, "GET", "HTTP/1.1");
	framing_head(&f, head, sizeof head - 1, head + 6);
	framing_field_at(&f, head + 16, 4, head + 22, 1);
	status = framing_end(&f, &why);
	ok(status == 0, "the same head laid out right: accepted (%s)", why ? why : "-");
	framing_begin(&f, "GET", "HTTP/1.1");
	framing_head(&f, head, 0, head + 6);
	ok(framing_end(&f, &why) == 400, "no head size: 400");
}

/* chunk_scan over a chunked body and what follows it: how it ends (1 the
 * body's end, found `length` bytes in; 0 still going or left to
 * libmicrohttpd; -1 refused), fed whole, then byte by byte. */
struct chunk_row {
	const char *name;
	const char *bytes;
	int how;
	size_t length; /* for how 1 */
};

#define NEXT "GET / HTTP/1.1\r\n"
/* clang-format off */
static const struct chunk_row chunk_rows[] = {
	{ "CRLF everywhere", "5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n" NEXT, 1, 23 },
	{ "chunk extensions", "5;a=b\r\nhello\r\n0;x\r\n\r\n" NEXT, 1, 21 },
	{ "trailers", "1\r\na\r\n0\r\nX-A: b\r\nX-B: c\r\n\r\n" NEXT, 1, 27 },
	{ "a bare CR inside a trailer", "0\r\nX-A: b\rc\r\n\r\n", -1, 0 },
	{ "a bare CR inside an extension", "5;a\rb\r\nhello\r\n0\r\n\r\n", -1, 0 },
	{ "a trailer line starting with a bare CR", "0\r\n\rX: b\r\n\r\n", -1, 0 },
	{ "a folded trailer line", "0\r\nX: a\r\n b\r\n\r\n", -1, 0 },
	{ "a trailer line with an empty name", "0\r\n: b\r\n\r\n", -1, 0 },
	{ "a trailer line without a colon", "0\r\nnocolon\r\n\r\n", -1, 0 },
	{ "a CR before the extension's CRLF", "5;a\r\r\nhello\r\n0\r\n\r\n", -1, 0 },
	{ "capital hex, leading zeros", "0000A\r\n0123456789\r\n0\r\n\r\n", 1, 24 },
	{ "an empty body", "0\r\n\r\n" NEXT, 1, 5 },
	{ "data holding LFs", "4\r\n\n\n\r\n\r\n0\r\n\r\n", 1, 14 },
	{ "not ended yet", "5\r\nhel", 0, 0 },
	{ "the first size line in a bare LF", "5\nhello\r\n0\r\n\r\n", -1, 0 },
	{ "a size line with an extension in a bare LF", "5;x=y\nhello\r\n0\r\n\r\n", -1, 0 },
	{ "a later size line in a bare LF", "5\r\nhello\r\n3\nabc\r\n0\r\n\r\n", -1, 0 },
	{ "a chunk's data followed by a bare LF", "5\r\nhello\n0\r\n\r\n", -1, 0 },
	{ "the last chunk's line in a bare LF", "5\r\nhello\r\n0\n\r\n" NEXT, -1, 0 },
	{ "... with an extension", "0;a\n\r\n", -1, 0 },
	{ "a trailer line in a bare LF", "0\r\nX-A: b\n\r\n", -1, 0 },
	{ "... whose CR is not last", "0\r\nX-A: b\r \n\r\n", -1, 0 },
	{ "the empty line in a bare LF", "0\r\n\n" NEXT, -1, 0 },
	{ "... after a trailer", "0\r\nX-A: b\r\n\n", -1, 0 },
	{ "a size that is not hex: libmicrohttpd's", "g\r\n\n\n", 0, 0 },
	{ "a size past 2^64 - 1: libmicrohttpd's", "10000000000000000\r\n\n", 0, 0 },
	{ "no CRLF after the data: libmicrohttpd's", "1\r\naXY\n", 0, 0 },
};
/* clang-format on */

static void chunk_framing(void)
{
	for (size_t i = 0; i < sizeof chunk_rows / sizeof chunk_rows[0]; i++) {
		const struct chunk_row *c = &chunk_rows[i];
		size_t len = strlen(c->bytes);
		struct chunk_scan s;
		chunk_scan_begin(&s);
		int how = chunk_scan(&s, c->bytes, len);
		ok(how == c->how && (how != 1 || s.length == c->length),
				"chunked, whole: %s: %d (got %d, length %zu)", c->name, c->how, how,
				(size_t)s.length);
		ok((how < 0) == (s.why != NULL),
				"chunked, whole: %s: a reason exactly when refused", c->name);
		chunk_scan_begin(&s);
		how = 0;
		for (size_t k = 0; k < len && !how; k++)
			how = chunk_scan(&s, c->bytes + k, 1);
		ok(how == c->how && (how != 1 || s.length == c->length),
				"chunked, byte by byte: %s: %d (got %d)", c->name, c->how, how);
		ok(chunk_scan(&s, "\n", 1) == how || how == 0,
				"chunked: %s: the same answer after the end", c->name);
	}
	/* A chunk of 2^64 - 1 bytes counts down without overflow. */
	struct chunk_scan s;
	chunk_scan_begin(&s);
	ok(chunk_scan(&s, "ffffffffffffffff\r\nab", 20) == 0 && s.size == UINT64_MAX - 2,
			"chunked: the largest size");
	/* A NUL first in a trailer line ends libmicrohttpd's trailers (what
	 * follows would be read as a request of its own); one inside it. */
	static const char nul_first[] = "0\r\n\0GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	static const char nul_inside[] = "0\r\nX: a\0b\r\n\r\n";
	chunk_scan_begin(&s);
	ok(chunk_scan(&s, nul_first, sizeof nul_first - 1) == -1,
			"chunked: a trailer line starting with a NUL: refused");
	chunk_scan_begin(&s);
	ok(chunk_scan(&s, nul_inside, sizeof nul_inside - 1) == -1,
			"chunked: a NUL inside a trailer line: refused");
	/* Trailer bytes (lines and the final CRLF) at exactly
	 * trailer_bytes_left, and one past it. */
	static const char bytes[] = "0\r\nA: 1\r\n\r\n"; /* 8 bytes of trailers */
	chunk_scan_begin(&s);
	s.trailer_bytes_left = 8;
	ok(chunk_scan(&s, bytes, sizeof bytes - 1) == 1,
			"chunked: 8 trailer bytes at trailer_bytes_left 8");
	chunk_scan_begin(&s);
	s.trailer_bytes_left = 7;
	ok(chunk_scan(&s, bytes, sizeof bytes - 1) == -1 && strstr(s.why, "max_header_size"),
			"chunked: 8 trailer bytes at trailer_bytes_left 7: refused");
	/* Trailer lines at exactly trailers_left, and one past it. */
	static const char two[] = "0\r\nA: 1\r\nB: 2\r\n\r\n";
	chunk_scan_begin(&s);
	s.trailers_left = 2;
	ok(chunk_scan(&s, two, sizeof two - 1) == 1, "chunked: 2 trailer lines at trailers_left 2");
	chunk_scan_begin(&s);
	s.trailers_left = 1;
	ok(chunk_scan(&s, two, sizeof two - 1) == -1 && strstr(s.why, "max_header_fields"),
			"chunked: 2 trailer lines at trailers_left 1: refused");
}

/* head_count: a head's entries (header lines, cookies, query parameters)
 * at max 4: how it ends (1 at its empty line, `used` bytes in; -1 at the
 * entry past max, which starts `used` bytes in; 0 going on), fed whole,
 * then byte by byte. */
struct head_row {
	const char *name;
	const char *bytes;
	int how;
	size_t used;
};

#define HEAD_MAX 4
/* clang-format off */
static const struct head_row head_rows[] = {
	{ "4 header lines: at max", "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\nbody", 1, 42 },
	{ "5 header lines: one past", "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n", -1, 40 },
	{ "4 query parameters", "GET /?a&b=1&c&d HTTP/1.1\r\n\r\n", 1, 28 },
	{ "5 query parameters", "GET /?a&b=1&c&d&e HTTP/1.1\r\n\r\n", -1, 15 },
	{ "an '&' in the path is no parameter", "GET /a&b&c&d&e HTTP/1.1\r\nA: 1\r\n\r\n", 1, 33 },
	{ "doubled spaces and a space in the target hide nothing", "GET  /?a b?&&& HTTP/1.1\r\n\r\n", 1, 27 },
	{ "... one '&' more", "GET  /?a b?&&&& HTTP/1.1\r\n\r\n", -1, 14 },
	{ "only the first '?' starts a parameter", "GET /?q=???????? HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", 1, 47 },
	{ "a comma splits cookies too", "GET / HTTP/1.1\r\nCookie: a=1, b=2; c=3,d\r\n\r\n", -1, 37 },
	{ "a Cookie line with 3 cookies: 4 entries", "GET / HTTP/1.1\r\nCookie: a=1; b=2; c=3\r\n\r\n", 1, 41 },
	{ "... with 4 cookies: 5", "GET / HTTP/1.1\r\ncookie: a=1; b=2; c=3; d=4\r\n\r\n", -1, 37 },
	{ "a name that only starts like Cookie", "GET / HTTP/1.1\r\nCookies: a;b;c;d;e\r\n\r\n", 1, 38 },
	{ "query, cookies and lines together", "GET /?a HTTP/1.1\r\nA: 1\r\nCOOKIE: x; y\r\n\r\n", -1, 33 },
	{ "empty lines before the request line", "\r\n\nGET / HTTP/1.1\r\nA: 1\r\n\r\n", 1, 27 },
	{ "bare LF line ends", "GET / HTTP/1.1\nA: 1\n\n", 1, 21 },
	{ "a head not ended yet", "GET / HTTP/1.1\r\nA: 1\r\n", 0, 0 },
};
/* clang-format on */

static void head_entries(void)
{
	for (size_t i = 0; i < sizeof head_rows / sizeof head_rows[0]; i++) {
		const struct head_row *c = &head_rows[i];
		size_t len = strlen(c->bytes), used = 0;
		struct head_count h;
		head_count_begin(&h);
		int how = head_count(&h, c->bytes, len, HEAD_MAX, &used);
		ok(how == c->how && (how == 0 || used == c->used),
				"head, whole: %s: %d at %zu (got %d at %zu)", c->name, c->how,
				c->used, how, used);
		head_count_begin(&h);
		how = 0;
		size_t k = 0;
		for (; k < len && !how; k++)
			how = head_count(&h, c->bytes + k, 1, HEAD_MAX, &used);
		ok(how == c->how && (how == 0 || k - 1 + used == c->used),
				"head, byte by byte: %s: %d (got %d)", c->name, c->how, how);
		if (how < 0)
			ok(head_count(&h, "\r\n\r\n", 4, HEAD_MAX, &used) == -1,
					"head: %s: -1 again after it", c->name);
	}
}

int main(void)
{
	raw_requests();
	chunk_framing();
	head_entries();

	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		const struct row *r = &rows[i];
		size_t n = 0;
		while (n < MAX_HEADERS && r->headers[n].name)
			n++;
		const char *why = "unset";
		unsigned status = framing_check(r->method, r->version, r->headers, n, &why);
		ok(status == r->status, "%s: %u (got %u: %s)", r->name, r->status, status,
				why ? why : "no reason");
		ok((status == 0) == (why == NULL), "%s: a reason exactly when refused", r->name);
	}

	/* Lengths as the parser reports them: a NUL inside is refused. */
	struct framing f;
	const char *why;
	framing_begin(&f, "GET", "HTTP/1.1");
	framing_field(&f, "Host", 4, "a", 1, 0);
	framing_field(&f, "X-A", 3, "b\0c", 3, 0);
	ok(framing_end(&f, &why) == 400, "NUL inside a value is refused");
	framing_begin(&f, "GET", "HTTP/1.1");
	framing_field(&f, "Host", 4, "a", 1, 0);
	framing_field(&f, "X\0A", 3, "b", 1, 0);
	ok(framing_end(&f, &why) == 400, "NUL inside a name is refused");
	framing_begin(&f, "GET", "HTTP/1.1");
	framing_field(&f, "Host", 4, NULL, 0, 0);
	ok(framing_end(&f, &why) == 0, "a NULL value counts as empty");
	return done_testing();
}
