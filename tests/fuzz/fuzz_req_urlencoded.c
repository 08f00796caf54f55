/* libFuzzer target for the form-encoded parser. The first byte picks the
 * limits (small ones, so every limit is reached); the rest is the input.
 * Checks what the parser promises: names and values within the field
 * limit and NUL-terminated, never more fields than allowed, usage counted. */
#include "fuzz.h"
#include "req_urlencoded.h"

#include <string.h>

struct seen {
	const struct req_limits *lim;
	unsigned long fields;
	size_t bytes;
};

static int on_field(void *ctx, const char *name, size_t name_len, const char *value,
		size_t value_len)
{
	struct seen *s = ctx;
	FUZZ_CHECK(name_len <= s->lim->max_field_size && value_len <= s->lim->max_field_size);
	FUZZ_CHECK(name[name_len] == '\0' && value[value_len] == '\0');
	s->fields++;
	s->bytes += name_len + value_len;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct req_limits lim;
	req_limits_defaults(&lim);
	if (data[0] & 1)
		lim.max_fields = 1 + (data[0] >> 4);
	if (data[0] & 2)
		lim.max_field_size = 1 + (data[0] >> 3);
	if (data[0] & 4)
		lim.max_total = data[0];
	struct req_usage used = { 0 };
	struct req_error err = { 0 };
	struct seen s = { .lim = &lim };
	const char *in = (const char *)data + 1;
	size_t len = size - 1;
	int rc = req_urlencoded_parse(in, len, "query string", &lim, &used, on_field, &s, &err);
	FUZZ_CHECK((rc == 0) == (err.code == REQ_OK));
	FUZZ_CHECK(s.fields <= lim.max_fields && s.fields <= used.fields && s.bytes <= len);
	FUZZ_CHECK(memchr(err.message, '\0', sizeof err.message) != NULL);
	FUZZ_CHECK(rc < 0 || (used.bytes == len && s.fields == used.fields));
	return 0;
}
