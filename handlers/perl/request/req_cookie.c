/* The Cookie header parser: split on ';', trim, decode. */
#include "req_cookie.h"
#include "req_decode.h"

#include <stdlib.h>
#include <string.h>

static int is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Narrows [*b, *e) to drop blanks on both sides. */
static void trim(const char **b, const char **e)
{
	while (*b < *e && is_blank(**b))
		(*b)++;
	while (*e > *b && is_blank((*e)[-1]))
		(*e)--;
}

int req_cookie_parse(const char *s, size_t len, req_field_fn *fn, void *ctx, struct req_error *err)
{
	if (len == 0)
		return 0;
	char *buf = malloc(len + 2);
	if (!buf)
		return req_error_set(err, REQ_NO_MEMORY, "out of memory parsing cookies");
	int rc = 0;
	const char *end = s + len;
	for (const char *p = s; p < end;) {
		const char *stop = memchr(p, ';', (size_t)(end - p));
		if (!stop)
			stop = end;
		const char *eq = memchr(p, '=', (size_t)(stop - p));
		const char *nb = p, *ne = eq, *vb = eq ? eq + 1 : NULL, *ve = stop;
		p = stop < end ? stop + 1 : end;
		if (!eq)
			continue;
		trim(&nb, &ne);
		trim(&vb, &ve);
		if (nb == ne)
			continue;
		size_t name_len = req_decode_lenient(nb, (size_t)(ne - nb), buf);
		buf[name_len] = '\0';
		char *value = buf + name_len + 1;
		size_t value_len = req_decode_lenient(vb, (size_t)(ve - vb), value);
		value[value_len] = '\0';
		if (fn(ctx, buf, name_len, value, value_len) < 0) {
			rc = req_error_set(err, REQ_STORE, "cannot store a cookie");
			break;
		}
	}
	free(buf);
	return rc;
}
