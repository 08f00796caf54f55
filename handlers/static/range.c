/* Parsing "Range: bytes=..." into one byte range; see range.h. */
#include "range.h"

#include <stddef.h>
#include <strings.h>

static const char *skip_ows(const char *p);
static const char *parse_number(const char *p, uint64_t *out);

static const char *skip_ows(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* 1*DIGIT, saturating at UINT64_MAX (such a position is past any file).
 * Returns the end, or NULL when there is no digit. */
static const char *parse_number(const char *p, uint64_t *out)
{
	if (*p < '0' || *p > '9')
		return NULL;
	uint64_t v = 0;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
	}
	*out = v;
	return p;
}

enum range_result range_parse(const char *value, uint64_t size, uint64_t *first, uint64_t *last)
{
	if (strncasecmp(value, "bytes=", 6) != 0)
		return RANGE_NONE;
	const char *p = value + 6;
	unsigned specs = 0, satisfiable = 0;
	uint64_t one_first = 0, one_last = 0;

	/* 1#range-spec: elements separated by OWS "," OWS; empty ones allowed. */
	for (;;) {
		p = skip_ows(p);
		if (*p == ',') {
			p++;
			continue;
		}
		if (*p == '\0')
			break;
		uint64_t a, b;
		int ok;
		if (*p == '-') {
			/* suffix-range: the last b bytes */
			p = parse_number(p + 1, &b);
			if (!p)
				return RANGE_NONE;
			ok = b > 0 && size > 0;
			a = ok && b < size ? size - b : 0;
			b = size ? size - 1 : 0;
		} else {
			p = parse_number(p, &a);
			if (!p || *p != '-')
				return RANGE_NONE;
			p++;
			if (*p >= '0' && *p <= '9') {
				p = parse_number(p, &b);
				if (b < a)
					return RANGE_NONE;
			} else {
				b = UINT64_MAX;
			}
			ok = a < size;
			if (ok && b >= size)
				b = size - 1;
		}
		p = skip_ows(p);
		if (*p != ',' && *p != '\0')
			return RANGE_NONE;
		specs++;
		if (ok) {
			satisfiable++;
			one_first = a;
			one_last = b;
		}
	}
	if (specs == 0)
		return RANGE_NONE;
	if (satisfiable == 0)
		return RANGE_UNSATISFIABLE;
	if (specs > 1)
		return RANGE_MANY;
	*first = one_first;
	*last = one_last;
	return RANGE_ONE;
}
