/* Fuzzes head_count, the count of a request head's entries. Input: the
 * bytes of a head and what follows. The answer must not depend on how the
 * bytes are split across reads (whole, byte by byte, in two at every
 * point), and must agree with a count written apart, line by line: a head
 * found ended ends where that count finds its empty line, within the
 * limit; an entry found past the limit is the one that takes that count
 * from MAX to MAX + 1. */
#include "framing.h"
#include "fuzz.h"

#include <ctype.h>
#include <strings.h>

#define MAX 8

/* The entries of p's first n bytes, line by line (CRs dropped): the
 * request line's first '?' after a space and each '&' after that; a line
 * for each header line; a Cookie line's first cookie and each ';' or ','
 * after its colon. *end: the bytes up to and with the empty line that ends the
 * head, 0 when none does. */
static unsigned long by_lines(const unsigned char *p, size_t n, size_t *end)
{
	unsigned long entries = 0;
	int request_seen = 0;
	size_t i = 0;
	*end = 0;
	while (i < n) {
		char line[1024];
		size_t len = 0, k = i;
		for (; k < n && p[k] != '\n'; k++)
			if (p[k] != '\r' && len < sizeof line)
				line[len++] = (char)p[k];
		int complete = k < n;
		if (!len && complete && request_seen) {
			*end = k + 1;
			return entries;
		}
		if (len && !request_seen) {
			int past_method = 0, query = 0;
			for (size_t j = 0; j < len; j++) {
				if (line[j] == ' ')
					past_method = 1;
				else if (past_method && line[j] == '?' && !query)
					entries++, query = 1;
				else if (past_method && line[j] == '&' && query)
					entries++;
			}
			request_seen = 1;
		} else if (len) {
			entries++;
			if (len >= 7 && strncasecmp(line, "cookie:", 7) == 0) {
				entries++;
				for (size_t j = 7; j < len; j++)
					entries += line[j] == ';' || line[j] == ',';
			}
		}
		i = k + 1;
	}
	return entries;
}

static int count(const uint8_t *data, size_t size, size_t step, size_t split, size_t *at)
{
	struct head_count h;
	size_t used = 0;
	head_count_begin(&h);
	*at = 0;
	if (split) {
		int how = head_count(&h, (const char *)data, split, MAX, &used);
		if (how) {
			*at = used;
			return how;
		}
		how = head_count(&h, (const char *)data + split, size - split, MAX, &used);
		*at = split + used;
		return how;
	}
	for (size_t i = 0; i < size; i += step) {
		size_t n = size - i < step ? size - i : step;
		int how = head_count(&h, (const char *)data + i, n, MAX, &used);
		if (how) {
			*at = i + used;
			return how;
		}
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Lines longer than by_lines keeps are not compared. */
	if (size > 1000)
		return 0;
	size_t at, other_at, end;
	int how = count(data, size, size ? size : 1, 0, &at);
	FUZZ_CHECK(how >= -1 && how <= 1);
	FUZZ_CHECK(how == 0 || at <= size);
	unsigned long whole = by_lines(data, size, &end);
	if (how == 1)
		FUZZ_CHECK(end == at && by_lines(data, at, &end) <= MAX);
	if (how == -1)
		FUZZ_CHECK(by_lines(data, at, &end) == MAX
				&& by_lines(data, at + 1, &end) == MAX + 1);
	if (how == 0)
		FUZZ_CHECK(end == 0 && whole <= MAX);
	FUZZ_CHECK(count(data, size, 1, 0, &other_at) == how && (how == 0 || other_at == at));
	for (size_t split = 1; split < size && size <= 512; split++)
		FUZZ_CHECK(count(data, size, 0, split, &other_at) == how
				&& (how == 0 || other_at == at));
	return 0;
}
