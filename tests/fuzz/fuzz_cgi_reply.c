/* Fuzzes the CGI response header parser: the first byte picks the piece
 * size the output is fed in, the rest is a script's output. Whatever the
 * pieces, the result is the same as feeding it whole, and what a finished
 * block reports is fit to go into an HTTP response. */
#include "cgi_reply.h"
#include "fuzz.h"

#include <string.h>
#include <strings.h>

static int is_token(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')
				    || (*s >= '0' && *s <= '9') || strchr("!#$%&'*+-.^_`|~", *s)))
			return 0;
	return 1;
}

static int is_clean(const char *s)
{
	for (; *s; s++)
		if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7f)
			return 0;
	return 1;
}

/* Feeds in pieces of step bytes; returns the result and the body offset. */
static enum cgi_reply_result feed(struct cgi_reply *p, const uint8_t *data, size_t size,
		size_t step, size_t *body_at)
{
	size_t off = 0;
	*body_at = size;
	enum cgi_reply_result res = CGI_REPLY_MORE;
	while (off < size) {
		size_t n = size - off < step ? size - off : step;
		size_t used = 7777;
		res = cgi_reply_feed(p, (const char *)data + off, n, &used);
		FUZZ_CHECK(used <= n);
		if (res == CGI_REPLY_DONE) {
			*body_at = off + used;
			return res;
		}
		if (res == CGI_REPLY_ERROR) {
			FUZZ_CHECK(used == 0 && p->error);
			return res;
		}
		FUZZ_CHECK(used == n);
		off += n;
	}
	return cgi_reply_eof(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	size_t step = (size_t)data[0] % 17 + 1;
	data++;
	size--;

	struct cgi_reply whole, pieces;
	cgi_reply_init(&whole, 4096);
	cgi_reply_init(&pieces, 4096);
	size_t at_whole, at_pieces;
	enum cgi_reply_result a = feed(&whole, data, size, size ? size : 1, &at_whole);
	enum cgi_reply_result b = feed(&pieces, data, size, step, &at_pieces);
	FUZZ_CHECK(a == b);
	FUZZ_CHECK(a == CGI_REPLY_DONE || a == CGI_REPLY_ERROR);
	if (a == CGI_REPLY_ERROR)
		FUZZ_CHECK(whole.error && pieces.error && strcmp(whole.error, pieces.error) == 0);
	if (a == CGI_REPLY_DONE) {
		FUZZ_CHECK(at_whole == at_pieces && at_whole <= 4096);
		FUZZ_CHECK(whole.status == pieces.status);
		FUZZ_CHECK(whole.status >= 200 && whole.status <= 599);
		FUZZ_CHECK(whole.content_length >= -1);
		FUZZ_CHECK(whole.header_count == pieces.header_count);
		FUZZ_CHECK(!whole.location_local || (whole.location && whole.location[0] == '/'));
		if (whole.content_type)
			FUZZ_CHECK(*whole.content_type && is_clean(whole.content_type));
		if (whole.location)
			FUZZ_CHECK(*whole.location && is_clean(whole.location));
		if (whole.reason)
			FUZZ_CHECK(is_clean(whole.reason));
		for (size_t i = 0; i < whole.header_count; i++) {
			FUZZ_CHECK(is_token(whole.headers[i].name));
			FUZZ_CHECK(is_clean(whole.headers[i].value));
			FUZZ_CHECK(strcmp(whole.headers[i].name, pieces.headers[i].name) == 0);
			FUZZ_CHECK(strcmp(whole.headers[i].value, pieces.headers[i].value) == 0);
			FUZZ_CHECK(strcasecmp(whole.headers[i].name, "Transfer-Encoding") != 0);
			FUZZ_CHECK(strcasecmp(whole.headers[i].name, "Connection") != 0);
		}
	}
	cgi_reply_fini(&whole);
	cgi_reply_fini(&pieces);
	return 0;
}
