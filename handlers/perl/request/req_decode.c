/* Percent-decoding of form-encoded bytes, strict and lenient. */
#include "req_decode.h"

#include <string.h>

/* 0-15 for a hex digit, -1 for anything else. */
static int hex_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* The byte %XX at in[i] stands for, or -1 when it is no escape. */
static int escape_at(const char *in, size_t len, size_t i)
{
	if (len - i < 3)
		return -1;
	int hi = hex_value((unsigned char)in[i + 1]), lo = hex_value((unsigned char)in[i + 2]);
	return hi < 0 || lo < 0 ? -1 : hi << 4 | lo;
}

int req_decode_strict(const char *in, size_t len, char *out, size_t *out_len, size_t *bad_at)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		char c = in[i];
		if (c == '+') {
			out[o++] = ' ';
		} else if (c == '%') {
			int b = escape_at(in, len, i);
			if (b < 0) {
				*bad_at = i;
				return -1;
			}
			out[o++] = (char)b;
			i += 2;
		} else {
			out[o++] = c;
		}
	}
	*out_len = o;
	return 0;
}

size_t req_decode_lenient(const char *in, size_t len, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		char c = in[i];
		int b;
		if (c == '+') {
			out[o++] = ' ';
		} else if (c == '%' && (b = escape_at(in, len, i)) >= 0) {
			out[o++] = (char)b;
			i += 2;
		} else {
			out[o++] = c;
		}
	}
	return o;
}
