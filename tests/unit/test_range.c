/* range_parse: single ranges, suffixes, clamping, several ranges, and the
 * headers that are ignored or unsatisfiable. */
#include "range.h"
#include "tap.h"

#include <inttypes.h>

struct row {
	const char *value;
	uint64_t size;
	enum range_result result;
	uint64_t first, last;
};

/* clang-format off */
static const struct row rows[] = {
	{ "bytes=0-0", 10, RANGE_ONE, 0, 0 },
	{ "bytes=0-4", 10, RANGE_ONE, 0, 4 },
	{ "bytes=2-", 10, RANGE_ONE, 2, 9 },
	{ "bytes=9-", 10, RANGE_ONE, 9, 9 },
	{ "bytes=-3", 10, RANGE_ONE, 7, 9 },
	{ "bytes=-10", 10, RANGE_ONE, 0, 9 },
	{ "bytes=-100", 10, RANGE_ONE, 0, 9 },
	{ "bytes=5-100", 10, RANGE_ONE, 5, 9 },
	{ "bytes=0-18446744073709551615", 10, RANGE_ONE, 0, 9 },
	{ "bytes=0-99999999999999999999999", 10, RANGE_ONE, 0, 9 },
	{ "BYTES=1-2", 10, RANGE_ONE, 1, 2 },
	{ "bytes=1-2 ", 10, RANGE_ONE, 1, 2 },
	{ "bytes= 1-2", 10, RANGE_ONE, 1, 2 },
	{ "bytes=,1-2,", 10, RANGE_ONE, 1, 2 },
	{ "bytes=1-2, 20-30", 10, RANGE_MANY, 0, 0 },
	{ "bytes=0-1,2-3", 10, RANGE_MANY, 0, 0 },
	{ "bytes=0-1,-2", 10, RANGE_MANY, 0, 0 },

	{ "bytes=10-", 10, RANGE_UNSATISFIABLE, 0, 0 },
	{ "bytes=10-20", 10, RANGE_UNSATISFIABLE, 0, 0 },
	{ "bytes=-0", 10, RANGE_UNSATISFIABLE, 0, 0 },
	{ "bytes=0-", 0, RANGE_UNSATISFIABLE, 0, 0 },
	{ "bytes=-5", 0, RANGE_UNSATISFIABLE, 0, 0 },
	{ "bytes=10-11,20-21", 10, RANGE_UNSATISFIABLE, 0, 0 },
	{ "bytes=99999999999999999999999-", 10, RANGE_UNSATISFIABLE, 0, 0 },

	{ "", 10, RANGE_NONE, 0, 0 },
	{ "bytes=", 10, RANGE_NONE, 0, 0 },
	{ "bytes=,", 10, RANGE_NONE, 0, 0 },
	{ "bytes", 10, RANGE_NONE, 0, 0 },
	{ "bytes 0-1", 10, RANGE_NONE, 0, 0 },
	{ "items=0-1", 10, RANGE_NONE, 0, 0 },
	{ "bytes=5-3", 10, RANGE_NONE, 0, 0 },
	{ "bytes=1-2,5-3", 10, RANGE_NONE, 0, 0 },
	{ "bytes=-", 10, RANGE_NONE, 0, 0 },
	{ "bytes=a-b", 10, RANGE_NONE, 0, 0 },
	{ "bytes=1", 10, RANGE_NONE, 0, 0 },
	{ "bytes=+1-2", 10, RANGE_NONE, 0, 0 },
	{ "bytes=1-2x", 10, RANGE_NONE, 0, 0 },
	{ "bytes=1 -2", 10, RANGE_NONE, 0, 0 },
	{ "bytes=1- 2", 10, RANGE_NONE, 0, 0 },
	{ "bytes=0x1-2", 10, RANGE_NONE, 0, 0 },
	{ "bytes=--1", 10, RANGE_NONE, 0, 0 },
};
/* clang-format on */

int main(void)
{
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		const struct row *r = &rows[i];
		uint64_t first = 12345, last = 12345;
		enum range_result got = range_parse(r->value, r->size, &first, &last);
		ok(got == r->result, "'%s' on %" PRIu64 " bytes gives %d (got %d)", r->value,
				r->size, r->result, got);
		if (r->result == RANGE_ONE && got == RANGE_ONE)
			ok(first == r->first && last == r->last,
					"'%s': %" PRIu64 "-%" PRIu64 " (got %" PRIu64 "-%" PRIu64
					")",
					r->value, r->first, r->last, first, last);
	}
	uint64_t first, last;
	ok(range_parse("bytes=0-", UINT64_MAX, &first, &last) == RANGE_ONE
					&& last == UINT64_MAX - 1,
			"the largest size does not overflow");
	return done_testing();
}
