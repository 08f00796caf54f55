/* Fuzzes chunk_scan, the check of a chunked body's line ends. Input: the
 * bytes after a request head. The answer must not depend on how the bytes
 * are split across reads (whole, byte by byte, in two at every point), and
 * a body it finds ended must read the same by a strict parser written
 * apart (every line in CRLF) to the same length. */
#include "framing.h"
#include "fuzz.h"

#include <string.h>

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (unsigned char)(c | 0x20);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The length of a well-formed chunked body at the start of p, by RFC 9112
 * 7.1 (no CR inside an extension or a trailer but before its LF); 0 when p
 * does not start with one. */
static size_t strict_length(const unsigned char *p, size_t n)
{
	size_t i = 0;
	for (;;) {
		uint64_t size = 0;
		size_t digits = 0;
		int d;
		while (i < n && (d = hexval(p[i])) >= 0) {
			if (size > UINT64_MAX >> 4)
				return 0;
			size = size << 4 | (uint64_t)d;
			digits++;
			i++;
		}
		if (!digits || i >= n)
			return 0;
		if (p[i] == ';') {
			while (i < n && p[i] != '\n')
				if (p[i++] == '\r' && i < n && p[i] != '\n')
					return 0;
		} else
			i++; /* past the CR, checked below */
		if (i >= n || p[i] != '\n' || p[i - 1] != '\r')
			return 0;
		i++;
		if (!size)
			break;
		if (n - i < size || n - i - size < 2)
			return 0;
		i += (size_t)size;
		if (p[i] != '\r' || p[i + 1] != '\n')
			return 0;
		i += 2;
	}
	/* Trailer lines, then the empty one. */
	for (;;) {
		size_t start = i;
		while (i < n && p[i] != '\n')
			if (p[i++] == '\r' && i < n && p[i] != '\n')
				return 0;
		if (i >= n || i == start || p[i - 1] != '\r')
			return 0;
		i++;
		if (i - start == 2)
			return i;
	}
}

static int scan(const uint8_t *data, size_t size, size_t step, size_t split, struct chunk_scan *s)
{
	chunk_scan_begin(s);
	if (split) {
		chunk_scan(s, (const char *)data, split);
		return chunk_scan(s, (const char *)data + split, size - split);
	}
	int how = 0;
	for (size_t i = 0; i < size && !how; i += step)
		how = chunk_scan(s, (const char *)data + i, size - i < step ? size - i : step);
	return how;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct chunk_scan whole, other;
	int how = scan(data, size, size ? size : 1, 0, &whole);
	FUZZ_CHECK(how >= -1 && how <= 1);
	FUZZ_CHECK((how < 0) == (whole.why != NULL));
	FUZZ_CHECK(how != 1 || (whole.length <= size && strict_length(data, size) == whole.length));
	FUZZ_CHECK(scan(data, size, 1, 0, &other) == how);
	FUZZ_CHECK(how != 1 || other.length == whole.length);
	for (size_t split = 1; split < size && size <= 512; split++) {
		FUZZ_CHECK(scan(data, size, 0, split, &other) == how);
		FUZZ_CHECK(how != 1 || other.length == whole.length);
	}
	return 0;
}
