/* IP address lists: see addr.h. */
#include "addr.h"

#include "alloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const unsigned char v4_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

static void fold_mapped(struct addr_range *a)
{
	if (a->family == AF_INET6 && memcmp(a->bytes, v4_mapped, sizeof v4_mapped) == 0) {
		memmove(a->bytes, a->bytes + 12, 4);
		memset(a->bytes + 4, 0, 12);
		a->family = AF_INET;
		a->prefix = a->prefix >= 96 ? a->prefix - 96 : 0;
	}
}

int addr_parse(const char *text, size_t len, struct addr_range *out)
{
	char buf[INET6_ADDRSTRLEN + 1];
	while (len > 0 && (*text == ' ' || *text == '\t'))
		text++, len--;
	while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t'))
		len--;
	/* "[::1]", as some proxies write it. */
	if (len >= 2 && text[0] == '[' && text[len - 1] == ']')
		text++, len -= 2;
	if (len == 0 || len >= sizeof buf)
		return -1;
	memcpy(buf, text, len);
	buf[len] = '\0';
	memset(out, 0, sizeof *out);
	if (inet_pton(AF_INET, buf, out->bytes) == 1) {
		out->family = AF_INET;
		out->prefix = 32;
		return 0;
	}
	if (inet_pton(AF_INET6, buf, out->bytes) != 1)
		return -1;
	out->family = AF_INET6;
	out->prefix = 128;
	fold_mapped(out);
	return 0;
}

/* Whether the first bits bits of a and b agree. */
static int prefix_equal(const unsigned char *a, const unsigned char *b, unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;
	if (memcmp(a, b, whole) != 0)
		return 0;
	if (rest == 0)
		return 1;
	unsigned char mask = (unsigned char)(0xff << (8 - rest));
	return (a[whole] & mask) == (b[whole] & mask);
}

/* One word: an address, or ADDR/BITS. Returns 0, or -1 with err. */
static int range_parse(const char *word, size_t len, struct addr_range *out, char *err,
		size_t errlen)
{
	const char *slash = memchr(word, '/', len);
	size_t alen = slash ? (size_t)(slash - word) : len;
	if (addr_parse(word, alen, out) < 0 || (alen > 0 && word[0] == '[')) {
		snprintf(err, errlen, "'%.*s' is not an IP address", (int)alen, word);
		return -1;
	}
	if (!slash)
		return 0;
	const char *digits = slash + 1;
	size_t dlen = len - alen - 1;
	if (dlen == 0 || dlen > 3 || strspn(digits, "0123456789") < dlen) {
		snprintf(err, errlen, "'%.*s': the prefix length must be a number", (int)len, word);
		return -1;
	}
	unsigned bits = 0;
	for (size_t i = 0; i < dlen; i++)
		bits = bits * 10 + (unsigned)(digits[i] - '0');
	/* An IPv4-mapped address was folded to IPv4: its prefix counted the
	 * 96 bits before the IPv4 part. */
	int mapped = out->family == AF_INET && memchr(word, ':', alen);
	unsigned written = bits, max = mapped ? 128 : out->family == AF_INET ? 32 : 128;
	if (bits > max || (mapped && bits < 96)) {
		snprintf(err, errlen, "'%.*s': the prefix length must be %s%u at most", (int)len,
				word, mapped ? "96 at least and " : "", max);
		return -1;
	}
	if (mapped)
		bits -= 96;
	/* Bits past the prefix must be zero: "10.0.0.1/8" is a typo for one
	 * address or for a range, and plxd cannot tell which. */
	unsigned width = out->family == AF_INET ? 32 : 128;
	for (unsigned b = bits; b < width; b++)
		if (out->bytes[b / 8] & (0x80 >> (b % 8))) {
			snprintf(err, errlen,
					"'%.*s': the address has bits set past its /%u prefix",
					(int)len, word, written);
			return -1;
		}
	out->prefix = bits;
	return 0;
}

int addr_list_parse(const char *text, struct addr_list *out, char *err, size_t errlen)
{
	out->v = NULL;
	out->n = 0;
	size_t cap = 0;
	const char *p = text ? text : "";
	for (;;) {
		p += strspn(p, " \t\r\n");
		size_t len = strcspn(p, " \t\r\n");
		if (len == 0)
			return 0;
		struct addr_range r;
		if (range_parse(p, len, &r, err, errlen) < 0) {
			addr_list_free(out);
			return -1;
		}
		if (out->n == cap) {
			cap = cap ? cap * 2 : 4;
			out->v = xrealloc(out->v, cap * sizeof *out->v);
		}
		out->v[out->n++] = r;
		p += len;
	}
}

void addr_list_free(struct addr_list *l)
{
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

int addr_list_equal(const struct addr_list *a, const struct addr_list *b)
{
	if (a->n != b->n)
		return 0;
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i].family != b->v[i].family || a->v[i].prefix != b->v[i].prefix
				|| memcmp(a->v[i].bytes, b->v[i].bytes, sizeof a->v[i].bytes) != 0)
			return 0;
	return 1;
}

void addr_list_copy(struct addr_list *dst, const struct addr_list *src)
{
	dst->n = src->n;
	dst->v = src->n ? xmalloc(src->n * sizeof *src->v) : NULL;
	if (src->n)
		memcpy(dst->v, src->v, src->n * sizeof *src->v);
}

int addr_list_match_addr(const struct addr_list *l, const struct addr_range *a)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].family == a->family
				&& prefix_equal(l->v[i].bytes, a->bytes, l->v[i].prefix))
			return 1;
	return 0;
}

int addr_list_match(const struct addr_list *l, const struct sockaddr *sa)
{
	if (l->n == 0 || !sa)
		return 0;
	struct addr_range a = { .family = sa->sa_family };
	if (sa->sa_family == AF_INET) {
		memcpy(a.bytes, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		a.prefix = 32;
	} else if (sa->sa_family == AF_INET6) {
		memcpy(a.bytes, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		a.prefix = 128;
		fold_mapped(&a);
	} else {
		return 0;
	}
	return addr_list_match_addr(l, &a);
}

int addr_client(const struct addr_list *trusted, const struct addr_range *peer,
		const char *const *lines, size_t n, struct addr_range *out)
{
	*out = *peer;
	if (!trusted || !addr_list_match_addr(trusted, peer))
		return 0;
	int found = 0;
	for (size_t i = n; i-- > 0;) {
		const char *v = lines[i];
		size_t end = v ? strlen(v) : 0;
		if (end == 0)
			return -1; /* a header that names no one */
		while (end > 0) {
			size_t start = end;
			while (start > 0 && v[start - 1] != ',')
				start--;
			struct addr_range ip;
			/* Garbage: believe nothing further left. The client is then
			 * unknown, and an access rule must not take the last trusted
			 * hop for it. */
			if (addr_parse(v + start, end - start, &ip) < 0)
				return -1;
			*out = ip;
			found = 1;
			if (!addr_list_match_addr(trusted, &ip))
				return 1;
			end = start > 0 ? start - 1 : 0;
		}
	}
	return found;
}
