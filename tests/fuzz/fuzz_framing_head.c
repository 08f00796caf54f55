/* Fuzzes framing_head and framing_field_at with raw requests, read the
 * way libmicrohttpd 0.9.75 reads them (tests/unit/mhd_head.h). Property:
 * a request plxd accepts is one that RFC 9112 frames the same way, so that
 * no proxy in front can read it differently: its head, read strictly
 * (lines all ending in CRLF or all in LF, each field "name:value" with no
 * NUL or CR, no folding, then an empty line), ends where libmicrohttpd's
 * ends and holds the same fields. Out of reach, and so not checked: in a
 * CRLF head, a NUL byte or a line holding only ':' can stand in for the
 * CR a bare LF lacks, as both leave one NUL (doc/security.md, "What plxd cannot
 * close"); CRLF heads with both a bare LF and a NUL or a line starting
 * with ':' are left out, and so are heads without fields (below). */
#include "framing.h"
#include "fuzz.h"
#include "../unit/mhd_head.h"

#include <string.h>

struct strict_field {
	const uint8_t *name;
	size_t name_len;
	const uint8_t *value;
	size_t value_len;
};

static size_t strict_head(const uint8_t *p, size_t len, struct strict_field *fields,
		size_t *nfields);

/* The strict reading of the head at p (from its request line): its length,
 * or 0 when it is not well formed. */
static size_t strict_head(const uint8_t *p, size_t len, struct strict_field *fields,
		size_t *nfields)
{
	size_t pos = 0, eol = 0, n = 0;
	for (int first = 1;; first = 0) {
		const uint8_t *lf = memchr(p + pos, '\n', len - pos);
		if (!lf)
			return 0;
		size_t end = (size_t)(lf - p);
		size_t this_eol = end > pos && p[end - 1] == '\r' ? 2 : 1;
		if (eol && this_eol != eol)
			return 0;
		eol = this_eol;
		const uint8_t *line = p + pos;
		size_t line_len = end + 1 - this_eol - pos;
		pos = end + 1;
		if (first) /* the request line, as libmicrohttpd took it */
			continue;
		if (line_len == 0) {
			*nfields = n;
			return pos;
		}
		if (memchr(line, '\r', line_len) || memchr(line, '\0', line_len))
			return 0;
		const uint8_t *colon = memchr(line, ':', line_len);
		if (!colon || colon == line || line[0] == ' ' || line[0] == '\t'
				|| n == MHD_HEAD_MAX_FIELDS)
			return 0;
		const uint8_t *v = colon + 1, *v_end = line + line_len;
		while (v < v_end && (*v == ' ' || *v == '\t'))
			v++;
		while (v_end > v && (v_end[-1] == ' ' || v_end[-1] == '\t'))
			v_end--;
		fields[n++] = (struct strict_field){ line, (size_t)(colon - line), v,
			(size_t)(v_end - v) };
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mhd_head h;
	if (mhd_head_parse(&h, (const char *)data, size) < 0) {
		mhd_head_free(&h);
		return 0;
	}
	struct framing f;
	framing_begin(&f, h.method, h.version);
	framing_head(&f, h.method, h.head_len, h.version);
	for (size_t i = 0; i < h.nfields; i++)
		framing_field_at(&f, h.fields[i].name, h.fields[i].name_len, h.fields[i].value,
				h.fields[i].value_len);
	const char *why = NULL;
	unsigned status = framing_end(&f, &why);
	FUZZ_CHECK(status == 0 || status == 400 || status == 501);
	FUZZ_CHECK((status == 0) == (why == NULL));

	size_t start = (size_t)(h.method - h.buf);
	const uint8_t *head = data + start;
	const uint8_t *first_lf = memchr(head, '\n', h.head_len);
	int crlf = first_lf && first_lf > head && first_lf[-1] == '\r';
	int bare_lf = 0, nul = 0;
	for (size_t i = 0; i < h.head_len; i++) {
		bare_lf |= head[i] == '\n' && (i == 0 || head[i - 1] != '\r');
		nul |= head[i] == '\0' || (head[i] == ':' && i > 0 && head[i - 1] == '\n');
	}
	/* Without a field, nothing tells how the request line ended: only an
	 * HTTP/1.0 request passes so (1.1 needs Host), and its connection
	 * closes after the response, before anything behind it is read. */
	int blind = (crlf && bare_lf && nul) || h.nfields == 0;
	if (status == 0 && !blind) {
		struct strict_field fields[MHD_HEAD_MAX_FIELDS];
		size_t n = 0;
		FUZZ_CHECK(strict_head(head, size - start, fields, &n) == h.head_len);
		FUZZ_CHECK(n == h.nfields);
		for (size_t i = 0; i < n; i++) {
			const struct mhd_head_field *m = &h.fields[i];
			size_t vlen = m->value_len;
			while (vlen && (m->value[vlen - 1] == ' ' || m->value[vlen - 1] == '\t'))
				vlen--;
			FUZZ_CHECK(m->name_len == fields[i].name_len
					&& memcmp(m->name, fields[i].name, m->name_len) == 0);
			FUZZ_CHECK(vlen == fields[i].value_len
					&& memcmp(m->value, fields[i].value, vlen) == 0);
		}
	}
	mhd_head_free(&h);
	return 0;
}
