/* libFuzzer target for the Cookie header parser: it never fails on syntax,
 * never writes past its buffer, and hands out NUL-terminated names that are
 * never empty. */
#include "fuzz.h"
#include "req_cookie.h"

static int on_cookie(void *ctx, const char *name, size_t name_len, const char *value,
		size_t value_len)
{
	size_t *bytes = ctx;
	FUZZ_CHECK(name_len > 0 && name[name_len] == '\0' && value[value_len] == '\0');
	*bytes += name_len + value_len;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t bytes = 0;
	struct req_error err = { 0 };
	FUZZ_CHECK(req_cookie_parse((const char *)data, size, on_cookie, &bytes, &err) == 0);
	FUZZ_CHECK(bytes <= size);
	return 0;
}
