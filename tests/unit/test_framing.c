/* framing_check: requests that can be framed one way only pass; ambiguous
 * or unsupported framing is 400 or 501. */
#include "framing.h"
#include "tap.h"

#define MAX_HEADERS 6

struct row {
	const char *name;
	const char *method;
	const char *version;
	unsigned status;
	struct framing_header headers[MAX_HEADERS];
};

#define HOST { "Host", "example.com", 0 }

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

int main(void)
{
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
