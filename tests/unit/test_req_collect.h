/* Test helper for the request parsers: a field callback that writes what it
 * is given as "name=value;" (bytes outside printable ASCII as \xNN), so a
 * table row can state a parser's whole output as one string. */
#ifndef PLXD_TEST_REQ_COLLECT_H
#define PLXD_TEST_REQ_COLLECT_H

#include <stdio.h>
#include <string.h>

struct collect {
	char out[8192];
	size_t len;
	int fail_after; /* > 0: the callback fails on this call */
	int calls;
};

__attribute__((unused)) static void collect_bytes(struct collect *c, const char *s, size_t n)
{
	for (size_t i = 0; i < n && c->len + 5 < sizeof c->out; i++) {
		unsigned char b = (unsigned char)s[i];
		if (b >= 0x20 && b < 0x7f && b != '\\')
			c->out[c->len++] = (char)b;
		else
			c->len += (size_t)snprintf(c->out + c->len, sizeof c->out - c->len,
					"\\x%02x", b);
	}
	c->out[c->len] = '\0';
}

__attribute__((unused)) static int collect_field(void *ctx, const char *name, size_t name_len,
		const char *value, size_t value_len)
{
	struct collect *c = ctx;
	if (++c->calls == c->fail_after)
		return -1;
	/* Parsers promise a NUL after each. */
	if (name[name_len] != '\0' || value[value_len] != '\0')
		collect_bytes(c, "!NUL!", 5);
	collect_bytes(c, name, name_len);
	collect_bytes(c, "=", 1);
	collect_bytes(c, value, value_len);
	collect_bytes(c, ";", 1);
	return 0;
}

#endif
