/* libFuzzer target for the multipart parser. Input: one byte picking the
 * limits, one picking a chunk size, the Content-Type up to the first
 * newline, then the body. The body is parsed twice, whole and in chunks:
 * the outcome must not depend on where chunks split (the same success and
 * the same fields and files, hashed), and every promise of the sink
 * interface is checked (sizes within limits, file sizes adding up). */
#include "fuzz.h"
#include "req_multipart.h"

#include <string.h>

struct seen {
	const struct req_limits *lim;
	uint64_t hash;
	int in_file;
	unsigned long long file_bytes;
	unsigned long parts;
};

static void mix(struct seen *s, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		s->hash = (s->hash ^ b[i]) * 0x100000001b3ULL;
}

static int on_field(void *ctx, const char *name, size_t name_len, const char *value,
		size_t value_len)
{
	struct seen *s = ctx;
	FUZZ_CHECK(!s->in_file && value_len <= s->lim->max_field_size);
	FUZZ_CHECK(name[name_len] == '\0' && value[value_len] == '\0');
	s->parts++;
	mix(s, "F", 1);
	mix(s, name, name_len + 1);
	mix(s, value, value_len + 1);
	return 0;
}

static int on_file_begin(void *ctx, const struct req_part *part)
{
	struct seen *s = ctx;
	FUZZ_CHECK(!s->in_file && part->filename && part->filename[0]);
	FUZZ_CHECK(part->name[part->name_len] == '\0');
	s->in_file = 1;
	s->file_bytes = 0;
	s->parts++;
	mix(s, "B", 1);
	mix(s, part->name, part->name_len + 1);
	mix(s, part->filename, strlen(part->filename) + 1);
	if (part->content_type)
		mix(s, part->content_type, strlen(part->content_type) + 1);
	return 0;
}

static int on_file_data(void *ctx, const char *data, size_t len)
{
	struct seen *s = ctx;
	FUZZ_CHECK(s->in_file && len > 0);
	s->file_bytes += len;
	FUZZ_CHECK(s->file_bytes <= s->lim->max_upload_size);
	mix(s, data, len);
	return 0;
}

static int on_file_end(void *ctx, unsigned long long size)
{
	struct seen *s = ctx;
	FUZZ_CHECK(s->in_file && size == s->file_bytes);
	s->in_file = 0;
	mix(s, "E", 1);
	return 0;
}

static const struct req_multipart_sink sink = {
	.field = on_field,
	.file_begin = on_file_begin,
	.file_data = on_file_data,
	.file_end = on_file_end,
};

/* Returns 0 when the body parsed, -1 otherwise; s gets the hash. */
static int parse(const char *type, const struct req_limits *lim, const char *body, size_t len,
		size_t chunk, struct seen *s)
{
	struct req_usage used = { 0 };
	struct req_error err = { 0 };
	*s = (struct seen){ .lim = lim, .hash = 0xcbf29ce484222325ULL };
	struct req_multipart *m = req_multipart_create(type, lim, &used, &sink, s, &err);
	if (!m) {
		FUZZ_CHECK(err.code != REQ_OK);
		return -1;
	}
	int rc = 0;
	for (size_t off = 0; off < len && rc == 0; off += chunk)
		rc = req_multipart_feed(m, body + off, len - off < chunk ? len - off : chunk);
	if (rc == 0)
		rc = req_multipart_finish(m);
	req_multipart_destroy(m);
	FUZZ_CHECK((rc == 0) == (err.code == REQ_OK));
	FUZZ_CHECK(used.fields <= lim->max_fields && s->parts <= used.fields && used.bytes <= len);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	const char *rest = (const char *)data + 2;
	const char *nl = memchr(rest, '\n', size - 2);
	if (!nl)
		return 0;
	char type[256];
	size_t tlen = (size_t)(nl - rest);
	if (tlen >= sizeof type)
		return 0;
	memcpy(type, rest, tlen);
	type[tlen] = '\0';
	const char *body = nl + 1;
	size_t len = size - 2 - tlen - 1;

	struct req_limits lim;
	req_limits_defaults(&lim);
	if (data[0] & 1)
		lim.max_fields = 1 + (data[0] >> 5);
	if (data[0] & 2)
		lim.max_field_size = 1 + (data[0] >> 2);
	if (data[0] & 4)
		lim.max_upload_size = data[0] >> 2;
	if (data[0] & 8)
		lim.max_total = 16 + data[0];
	size_t chunk = 1 + data[1] % 97;

	struct seen whole, chunked;
	int a = parse(type, &lim, body, len, len ? len : 1, &whole);
	int b = parse(type, &lim, body, len, chunk, &chunked);
	FUZZ_CHECK(a == b);
	FUZZ_CHECK(a < 0 || whole.hash == chunked.hash);
	return 0;
}
