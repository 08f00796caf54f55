/* The multipart/form-data parser: a state machine over a small window of
 * input. Only the last few bytes that could begin a delimiter are held back
 * between chunks, so memory stays bounded whatever the chunk sizes. */
#include "req_multipart.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Input held at once: every state keeps less than a delimiter line
 * (delimiter, padding, CRLF), except headers, which stop at
 * REQ_MULTIPART_HEADERS_MAX. */
#define WINDOW (64 * 1024)
/* Blanks allowed between a boundary and its line end (RFC 2046's
 * transport padding); more means the boundary line never ends. */
#define PADDING_MAX 256
/* RFC 2046: a boundary is 1 to 70 characters. */
#define BOUNDARY_MAX 70

enum state { PREAMBLE, HEADERS, BODY, EPILOGUE, FAILED };

struct req_multipart {
	const struct req_limits *lim;
	struct req_usage *used;
	const struct req_multipart_sink *sink;
	void *ctx;
	struct req_error *err;
	enum state state;

	char delim[4 + BOUNDARY_MAX + 1]; /* "\r\n--" boundary */
	size_t dlen;
	char *buf; /* input not yet parsed */
	size_t len;
	unsigned long long fed; /* body bytes so far */
	size_t header_bytes;    /* the current part's header block */
	size_t scanned;         /* bytes of the current header line
					     already searched for its end */

	/* The current part. */
	char *name, *filename, *content_type;
	size_t name_len;
	int has_disposition;
	int is_file;
	char *value; /* a field's value so far */
	size_t value_len, value_cap;
	unsigned long long file_size;
};

static int step(struct req_multipart *m);
static int header_line(struct req_multipart *m, const char *line, size_t len);
static int part_begin(struct req_multipart *m);
static int part_data(struct req_multipart *m, const char *data, size_t len);
static int part_end(struct req_multipart *m);
static void part_reset(struct req_multipart *m);

/* ---- parameters of a header value: "; name=value; name="quoted"" -------- */

struct span {
	const char *b, *e;
};

static int is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static struct span trimmed(const char *b, const char *e)
{
	while (b < e && is_blank(*b))
		b++;
	while (e > b && is_blank(e[-1]))
		e--;
	return (struct span){ b, e };
}

static int span_is(struct span s, const char *word)
{
	size_t n = strlen(word);
	return (size_t)(s.e - s.b) == n && strncasecmp(s.b, word, n) == 0;
}

/* The value before the first ';' (a media type or disposition type). */
static struct span first_word(const char *s, const char *end, const char **rest)
{
	const char *semi = memchr(s, ';', (size_t)(end - s));
	*rest = semi ? semi : end;
	return trimmed(s, *rest);
}

/* Reads the next "; name=value" from *p. Returns 1 with name and value
 * (quotes removed: a quoted value runs to the next '"', without escapes,
 * as browsers send them), 0 at the end, -1 when malformed. */
static int next_param(const char **p, const char *end, struct span *name, struct span *value)
{
	const char *s = *p;
	while (s < end && (*s == ';' || is_blank(*s)))
		s++;
	if (s == end)
		return 0;
	const char *stop = s;
	while (stop < end && *stop != '=' && *stop != ';')
		stop++;
	*name = trimmed(s, stop);
	if (stop == end || *stop == ';' || name->b == name->e)
		return -1;
	s = stop + 1;
	while (s < end && is_blank(*s))
		s++;
	if (s < end && *s == '"') {
		const char *close = memchr(s + 1, '"', (size_t)(end - s - 1));
		if (!close)
			return -1;
		*value = (struct span){ s + 1, close };
		s = close + 1;
		while (s < end && is_blank(*s))
			s++;
		if (s < end && *s != ';')
			return -1;
	} else {
		stop = s;
		while (stop < end && *stop != ';')
			stop++;
		*value = trimmed(s, stop);
		s = stop;
	}
	*p = s;
	return 1;
}

static char *span_dup(struct span s)
{
	size_t n = (size_t)(s.e - s.b);
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, s.b, n);
		d[n] = '\0';
	}
	return d;
}

/* ---- creating ------------------------------------------------------------ */

static int boundary_from(struct req_multipart *m, const char *content_type)
{
	const char *end = content_type + strlen(content_type), *p;
	if (!span_is(first_word(content_type, end, &p), "multipart/form-data"))
		return req_error_set(m->err, REQ_BAD_CONTENT_TYPE,
				"the body is not multipart/form-data");
	struct span name, value;
	int r;
	while ((r = next_param(&p, end, &name, &value)) > 0) {
		if (!span_is(name, "boundary"))
			continue;
		size_t n = (size_t)(value.e - value.b);
		if (n == 0 || n > BOUNDARY_MAX)
			return req_error_set(m->err, REQ_BAD_CONTENT_TYPE,
					"the multipart boundary must be 1 to %d characters long",
					BOUNDARY_MAX);
		memcpy(m->delim, "\r\n--", 4);
		memcpy(m->delim + 4, value.b, n);
		m->dlen = 4 + n;
		return 0;
	}
	return req_error_set(m->err, REQ_BAD_CONTENT_TYPE,
			r < 0 ? "malformed parameters in the multipart Content-Type"
			      : "multipart/form-data without a boundary");
}

struct req_multipart *req_multipart_create(const char *content_type, const struct req_limits *lim,
		struct req_usage *used, const struct req_multipart_sink *sink, void *ctx,
		struct req_error *err)
{
	struct req_multipart *m = calloc(1, sizeof *m);
	if (!m) {
		req_error_set(err, REQ_NO_MEMORY, "out of memory parsing the request body");
		return NULL;
	}
	*m = (struct req_multipart){ .lim = lim,
		.used = used,
		.sink = sink,
		.ctx = ctx,
		.err = err,
		.state = PREAMBLE };
	if (boundary_from(m, content_type) < 0)
		goto fail;
	m->buf = malloc(WINDOW);
	if (!m->buf) {
		req_error_set(err, REQ_NO_MEMORY, "out of memory parsing the request body");
		goto fail;
	}
	/* A body may open with its first boundary; a line end in front makes
	 * that the same delimiter as every other one. */
	memcpy(m->buf, "\r\n", 2);
	m->len = 2;
	return m;
fail:
	req_multipart_destroy(m);
	return NULL;
}

void req_multipart_destroy(struct req_multipart *m)
{
	if (!m)
		return;
	part_reset(m);
	free(m->value);
	free(m->buf);
	free(m);
}

/* ---- feeding ------------------------------------------------------------- */

int req_multipart_feed(struct req_multipart *m, const char *data, size_t len)
{
	if (m->state == FAILED)
		return -1;
	if (len > m->lim->max_total || m->used->bytes > m->lim->max_total - len) {
		m->state = FAILED;
		return req_error_set(m->err, REQ_TOO_LARGE,
				"the request is larger than %llu bytes (query string and body)",
				m->lim->max_total);
	}
	m->used->bytes += len;
	m->fed += len;
	while (len > 0) {
		size_t n = WINDOW - m->len < len ? WINDOW - m->len : len;
		memcpy(m->buf + m->len, data, n);
		m->len += n;
		data += n;
		len -= n;
		if (step(m) < 0) {
			m->state = FAILED;
			return -1;
		}
	}
	return 0;
}

int req_multipart_finish(struct req_multipart *m)
{
	char shown[64];
	switch (m->state) {
	case EPILOGUE:
		return 0;
	case FAILED:
		return -1;
	case PREAMBLE:
		if (m->fed == 0)
			return 0;
		m->state = FAILED;
		return req_error_set(m->err, REQ_NO_BOUNDARY,
				"the multipart body never reaches its boundary %s",
				req_error_quote(shown, sizeof shown, m->delim + 4, m->dlen - 4));
	case BODY:
		m->state = FAILED;
		return req_error_set(m->err, REQ_TRUNCATED,
				"the multipart body ends inside part %s, before its closing boundary",
				req_error_quote(shown, sizeof shown, m->name, m->name_len));
	default:
		m->state = FAILED;
		return req_error_set(m->err, REQ_TRUNCATED,
				"the multipart body ends before its closing boundary");
	}
}

static size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* What follows a delimiter found at hit (n bytes from hit on): a boundary
 * line ("--" for the last one, or blanks then CRLF), or, as CGI.pm and Go's
 * mime/multipart read it, mere content that happens to contain the
 * delimiter. */
enum delimiter { DELIM_MORE, DELIM_NOT, DELIM_OPEN, DELIM_CLOSE, DELIM_ENDLESS };

static enum delimiter delimiter_kind(const struct req_multipart *m, const char *hit, size_t n,
		size_t *line)
{
	size_t i = m->dlen;
	if (n - i >= 2 && hit[i] == '-' && hit[i + 1] == '-') {
		*line = i + 2;
		return DELIM_CLOSE;
	}
	if (n - i == 1 && hit[i] == '-')
		return DELIM_MORE;
	while (i < n && is_blank(hit[i]))
		if (++i - m->dlen > PADDING_MAX)
			return DELIM_ENDLESS;
	if (n - i < 2)
		return i < n && hit[i] != '\r' ? DELIM_NOT : DELIM_MORE;
	if (hit[i] != '\r' || hit[i + 1] != '\n')
		return DELIM_NOT;
	*line = i + 2;
	return DELIM_OPEN;
}

/* Parses what the window holds, keeping back only what could be the start
 * of a delimiter line or an unfinished header line. */
static int step(struct req_multipart *m)
{
	size_t pos = 0;
	for (;;) {
		const char *p = m->buf + pos;
		size_t n = m->len - pos;
		const char *hit;
		size_t line = 0, skip;

		switch (m->state) {
		case PREAMBLE:
		case BODY:
			hit = memmem(p, n, m->delim, m->dlen);
			if (!hit) {
				skip = n - min_size(n, m->dlen - 1);
			} else {
				switch (delimiter_kind(m, hit, n - (size_t)(hit - p), &line)) {
				case DELIM_MORE:
					skip = (size_t)(hit - p);
					break;
				case DELIM_NOT:
					skip = (size_t)(hit - p) + 1;
					break;
				case DELIM_ENDLESS:
					return req_error_set(m->err, REQ_BAD_MULTIPART,
							"a multipart boundary line does not end");
				default:
					skip = 0;
				}
			}
			if (!line) {
				/* No boundary line yet: what comes before is data. */
				if (m->state == BODY && part_data(m, p, skip) < 0)
					return -1;
				pos += skip;
				if (hit && skip > (size_t)(hit - p))
					continue;
				goto keep;
			}
			if (m->state == BODY
					&& (part_data(m, p, (size_t)(hit - p)) < 0
							|| part_end(m) < 0))
				return -1;
			pos += (size_t)(hit - p) + line;
			if (hit[m->dlen] == '-') {
				m->state = EPILOGUE;
				continue;
			}
			part_reset(m);
			m->state = HEADERS;
			continue;

		case HEADERS: {
			size_t from = m->scanned ? m->scanned - 1 : 0;
			hit = n > from ? memmem(p + from, n - from, "\r\n", 2) : NULL;
			if (!hit) {
				if (m->header_bytes + n > REQ_MULTIPART_HEADERS_MAX)
					return req_error_set(m->err, REQ_BAD_MULTIPART,
							"a multipart part's headers are longer than %d bytes",
							REQ_MULTIPART_HEADERS_MAX);
				m->scanned = n;
				goto keep;
			}
			line = (size_t)(hit - p);
			m->header_bytes += line + 2;
			m->scanned = 0;
			if (m->header_bytes > REQ_MULTIPART_HEADERS_MAX)
				return req_error_set(m->err, REQ_BAD_MULTIPART,
						"a multipart part's headers are longer than %d bytes",
						REQ_MULTIPART_HEADERS_MAX);
			if (line == 0) {
				pos += 2;
				if (part_begin(m) < 0)
					return -1;
				m->state = BODY;
				continue;
			}
			if (header_line(m, p, line) < 0)
				return -1;
			pos += line + 2;
			continue;
		}

		case EPILOGUE:
			pos = m->len;
			goto keep;

		case FAILED:
			return -1;
		}
	}
keep:
	memmove(m->buf, m->buf + pos, m->len - pos);
	m->len -= pos;
	return 0;
}

/* ---- parts --------------------------------------------------------------- */

static void part_reset(struct req_multipart *m)
{
	free(m->name);
	free(m->filename);
	free(m->content_type);
	m->name = m->filename = m->content_type = NULL;
	m->name_len = 0;
	m->has_disposition = m->is_file = 0;
	m->value_len = 0;
	m->file_size = 0;
	m->header_bytes = 0;
	m->scanned = 0;
}

static int malformed(struct req_multipart *m, const char *what)
{
	return req_error_set(m->err, REQ_BAD_MULTIPART, "a multipart part has %s", what);
}

static int no_memory(struct req_multipart *m)
{
	return req_error_set(m->err, REQ_NO_MEMORY, "out of memory parsing the request body");
}

static int disposition(struct req_multipart *m, const char *s, const char *end)
{
	const char *p;
	if (m->has_disposition)
		return malformed(m, "two Content-Disposition headers");
	m->has_disposition = 1;
	if (!span_is(first_word(s, end, &p), "form-data"))
		return malformed(m, "a Content-Disposition other than form-data");
	struct span name, value;
	int r;
	while ((r = next_param(&p, end, &name, &value)) > 0) {
		char **field = span_is(name, "name")        ? &m->name
				: span_is(name, "filename") ? &m->filename
							    : NULL;
		if (!field)
			continue;
		if (*field)
			return malformed(m, "a Content-Disposition parameter given twice");
		if (!(*field = span_dup(value)))
			return no_memory(m);
		if (field == &m->name)
			m->name_len = (size_t)(value.e - value.b);
	}
	return r < 0 ? malformed(m, "a malformed Content-Disposition header") : 0;
}

static int header_line(struct req_multipart *m, const char *line, size_t len)
{
	const char *end = line + len;
	for (const char *s = line; s < end; s++)
		if ((unsigned char)*s < 0x20 && *s != '\t')
			return malformed(m, "a control character in its headers");
	if (is_blank(line[0]))
		return malformed(m, "a folded header line");
	const char *colon = memchr(line, ':', len);
	if (!colon)
		return malformed(m, "a header line without ':'");
	struct span name = trimmed(line, colon);
	if (span_is(name, "Content-Disposition"))
		return disposition(m, colon + 1, end);
	if (span_is(name, "Content-Type")) {
		if (m->content_type)
			return malformed(m, "two Content-Type headers");
		if (!(m->content_type = span_dup(trimmed(colon + 1, end))))
			return no_memory(m);
	}
	return 0;
}

static int part_begin(struct req_multipart *m)
{
	char shown[64];
	if (!m->name)
		return malformed(m, "no form-data name");
	if (m->name_len > m->lim->max_field_size)
		return req_error_set(m->err, REQ_FIELD_TOO_LARGE,
				"a parameter name in the body is larger than %llu bytes",
				m->lim->max_field_size);
	if (m->used->fields >= m->lim->max_fields)
		return req_error_set(m->err, REQ_TOO_MANY_FIELDS, "more than %lu parameters",
				m->lim->max_fields);
	m->used->fields++;
	m->is_file = m->filename && m->filename[0];
	if (!m->is_file)
		return 0;
	if (m->lim->max_upload_size == 0)
		return req_error_set(m->err, REQ_UPLOAD_TOO_LARGE,
				"upload %s: file uploads are not accepted",
				req_error_quote(shown, sizeof shown, m->name, m->name_len));
	struct req_part part = { .name = m->name,
		.name_len = m->name_len,
		.filename = m->filename,
		.content_type = m->content_type };
	if (m->sink->file_begin(m->ctx, &part) < 0)
		return req_error_set(m->err, REQ_STORE, "cannot store upload %s",
				req_error_quote(shown, sizeof shown, m->name, m->name_len));
	return 0;
}

static int part_data(struct req_multipart *m, const char *data, size_t len)
{
	char shown[64];
	if (len == 0)
		return 0;
	if (m->is_file) {
		if (len > m->lim->max_upload_size - m->file_size)
			return req_error_set(m->err, REQ_UPLOAD_TOO_LARGE,
					"upload %s is larger than %llu bytes",
					req_error_quote(shown, sizeof shown, m->name, m->name_len),
					m->lim->max_upload_size);
		m->file_size += len;
		if (m->sink->file_data(m->ctx, data, len) < 0)
			return req_error_set(m->err, REQ_STORE, "cannot store upload %s",
					req_error_quote(shown, sizeof shown, m->name, m->name_len));
		return 0;
	}
	if (len > m->lim->max_field_size - m->value_len)
		return req_error_set(m->err, REQ_FIELD_TOO_LARGE,
				"the value of parameter %s in the body is larger than %llu bytes",
				req_error_quote(shown, sizeof shown, m->name, m->name_len),
				m->lim->max_field_size);
	if (m->value_len + len + 1 > m->value_cap) {
		/* Doubling, but never past what the limit allows. */
		size_t cap = m->value_cap ? m->value_cap * 2 : 256;
		size_t need = m->value_len + len + 1;
		if (cap < need)
			cap = need;
		if (cap > m->lim->max_field_size + 1)
			cap = (size_t)m->lim->max_field_size + 1;
		char *v = realloc(m->value, cap);
		if (!v)
			return no_memory(m);
		m->value = v;
		m->value_cap = cap;
	}
	memcpy(m->value + m->value_len, data, len);
	m->value_len += len;
	return 0;
}

static int part_end(struct req_multipart *m)
{
	if (m->is_file) {
		if (m->sink->file_end(m->ctx, m->file_size) < 0)
			return req_error_set(m->err, REQ_STORE, "cannot store an upload");
		return 0;
	}
	const char *value = "";
	if (m->value_len) {
		m->value[m->value_len] = '\0';
		value = m->value;
	}
	if (m->sink->field(m->ctx, m->name, m->name_len, value, m->value_len) < 0)
		return req_error_set(m->err, REQ_STORE, "cannot store a parameter");
	return 0;
}
