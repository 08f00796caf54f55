/* Decoding and normalising request paths (RFC 3986 section 5.2.4, with
 * ".." above the root refused rather than clamped). */
#include "path.h"
#include "hex.h"

#include <string.h>
#include <strings.h>

/* Skips "http://authority" of an absolute-form target (RFC 9112 3.2.2). */
static const char *skip_absolute_form(const char *target)
{
	size_t scheme;
	if (strncasecmp(target, "http://", 7) == 0)
		scheme = 7;
	else if (strncasecmp(target, "https://", 8) == 0)
		scheme = 8;
	else
		return target;
	const char *path = target + scheme + strcspn(target + scheme, "/?");
	return path;
}

int path_from_target(const char *target, char *path, size_t pathlen, const char **query,
		const char **why)
{
	const char *p = skip_absolute_form(target);
	size_t raw_len = strcspn(p, "?");
	*query = p[raw_len] == '?' ? p + raw_len + 1 : "";

	if (p[0] != '/') {
		/* "http://host" alone, or "http://host?q", means "/". */
		if (p != target && (raw_len == 0)) {
			if (pathlen < 2)
				goto too_long;
			strcpy(path, "/");
			return 0;
		}
		*why = "the request target is not a path";
		return 400;
	}
	if (raw_len + 2 > pathlen)
		goto too_long;

	/* Decode into path, then normalise in place: decoding first means
	 * "%2e%2e" is treated as the ".." it names. */
	size_t n = 0;
	for (size_t i = 0; i < raw_len; i++) {
		char c = p[i];
		if (c == '%') {
			int hi = i + 2 < raw_len ? hex_digit_value(p[i + 1]) : -1;
			int lo = hi >= 0 ? hex_digit_value(p[i + 2]) : -1;
			if (hi < 0 || lo < 0) {
				*why = "bad percent escape in the path";
				return 400;
			}
			c = (char)(hi * 16 + lo);
			i += 2;
			if (c == '\0') {
				*why = "NUL in the path";
				return 400;
			}
			if (c == '/') {
				*why = "encoded slash in the path";
				return 400;
			}
		}
		path[n++] = c;
	}
	path[n] = '\0';

	/* Remove "." and "..", collapse "//". out never passes in. */
	size_t in = 0, out = 0;
	while (in < n) {
		/* in points at a '/' */
		size_t seg = in + 1;
		size_t end = seg;
		while (end < n && path[end] != '/')
			end++;
		size_t len = end - seg;
		int last = end == n;
		if (len == 0 || (len == 1 && path[seg] == '.')) {
			/* "//" or "/./": drop the segment, keep a trailing slash */
			if (last) {
				path[out++] = '/';
			}
		} else if (len == 2 && path[seg] == '.' && path[seg + 1] == '.') {
			if (out == 0) {
				*why = "the path leads above the document root";
				return 400;
			}
			while (out > 0 && path[out - 1] != '/')
				out--;
			out--; /* the slash before the removed segment */
			if (last)
				path[out++] = '/';
		} else {
			path[out++] = '/';
			memmove(path + out, path + seg, len);
			out += len;
		}
		in = end;
	}
	if (out == 0)
		path[out++] = '/';
	path[out] = '\0';
	return 0;

too_long:
	*why = "the path is too long";
	return 400;
}
