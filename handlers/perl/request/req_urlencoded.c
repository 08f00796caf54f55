/* The form-encoded parser: splits pairs, decodes them strictly, and charges
 * them against the request's limits. */
#include "req_urlencoded.h"
#include "req_decode.h"

#include <stdlib.h>
#include <string.h>

/* The end of the pair starting at s: the next '&' or ';', or end. */
static const char *pair_end(const char *s, const char *end)
{
	for (; s < end; s++)
		if (*s == '&' || *s == ';')
			return s;
	return end;
}

static int bad_escape(struct req_error *err, const char *where, const char *at, const char *end)
{
	char shown[16];
	size_t n = (size_t)(end - at) < 3 ? (size_t)(end - at) : 3;
	return req_error_set(err, REQ_BAD_ESCAPE, "bad percent escape %s in the %s",
			req_error_quote(shown, sizeof shown, at, n), where);
}

/* Decodes raw into *out (advancing it past the result and its NUL), within
 * max bytes. Returns 0, or -1 with err set. */
static int decode(const char *raw, size_t len, char **out, size_t *out_len, unsigned long long max,
		const char *what, const char *name, size_t name_len, const char *where,
		struct req_error *err)
{
	size_t bad;
	if (req_decode_strict(raw, len, *out, out_len, &bad) < 0)
		return bad_escape(err, where, raw + bad, raw + len);
	if (*out_len > max) {
		char shown[64];
		return req_error_set(err, REQ_FIELD_TOO_LARGE,
				"the %s of parameter %s in the %s is larger than %llu bytes", what,
				req_error_quote(shown, sizeof shown, name, name_len), where, max);
	}
	(*out)[*out_len] = '\0';
	*out += *out_len + 1;
	return 0;
}

int req_urlencoded_parse(const char *s, size_t len, const char *where, const struct req_limits *lim,
		struct req_usage *used, req_field_fn *fn, void *ctx, struct req_error *err)
{
	if (len == 0)
		return 0;
	if (len > lim->max_total || used->bytes > lim->max_total - len)
		return req_error_set(err, REQ_TOO_LARGE,
				"the request is larger than %llu bytes (query string and body)",
				lim->max_total);
	used->bytes += len;

	/* Decoding never lengthens: one buffer holds any pair and two NULs. */
	char *buf = malloc(len + 2);
	if (!buf)
		return req_error_set(err, REQ_NO_MEMORY, "out of memory parsing the %s", where);
	int rc = 0;
	const char *end = s + len;
	for (const char *p = s; p < end;) {
		const char *stop = pair_end(p, end);
		if (stop == p) {
			p++;
			continue;
		}
		if (used->fields >= lim->max_fields) {
			rc = req_error_set(err, REQ_TOO_MANY_FIELDS, "more than %lu parameters",
					lim->max_fields);
			break;
		}
		used->fields++;
		const char *eq = memchr(p, '=', (size_t)(stop - p));
		const char *value = eq ? eq + 1 : stop;
		char *out = buf, *name = buf;
		size_t name_len, value_len;
		if (decode(p, (size_t)((eq ? eq : stop) - p), &out, &name_len, lim->max_field_size,
				    "name", p, (size_t)((eq ? eq : stop) - p), where,
				    err) < 0
				|| decode(value, (size_t)(stop - value), &out, &value_len,
						   lim->max_field_size, "value", name, name_len,
						   where, err)
						< 0) {
			rc = -1;
			break;
		}
		if (fn(ctx, name, name_len, name + name_len + 1, value_len) < 0) {
			rc = req_error_set(err, REQ_STORE, "cannot store parameter from the %s",
					where);
			break;
		}
		p = stop < end ? stop + 1 : end;
	}
	free(buf);
	return rc;
}
