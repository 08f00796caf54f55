/* A model of how libmicrohttpd 0.9.75 reads a request head into its read
 * buffer, for testing framing_head and framing_field_at without a server
 * (test_framing.c, fuzz_framing_head.c). It follows connection.c of that
 * release: get_next_header_line (a line ends at CRLF or a bare LF, both
 * overwritten with NULs), parse_initial_message_line, process_header_line
 * (the name ends at the first ':', found with strchr, which stops at a NUL;
 * the ':' becomes a NUL) and process_broken_line (an obs-fold line is
 * glued onto the name, which moves to memory of its own; a line whose
 * first byte is a NUL once its ':' is, ends the head), and the states that
 * call them. Names and values are reported with strlen, so a NUL cuts
 * them. tests/integration/framing.t checks the real library against the
 * same cases. */
#ifndef PLXD_TEST_MHD_HEAD_H
#define PLXD_TEST_MHD_HEAD_H

#include <stdlib.h>
#include <string.h>

#define MHD_HEAD_MAX_FIELDS 64

struct mhd_head_field {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

struct mhd_head {
	char *buf; /* the read buffer: the request, changed in place */
	size_t len;
	size_t pos;         /* bytes consumed */
	const char *method; /* start of the head, as passed to the handler */
	const char *version;
	size_t head_len; /* MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE */
	struct mhd_head_field fields[MHD_HEAD_MAX_FIELDS];
	size_t nfields;
	char *moved[MHD_HEAD_MAX_FIELDS]; /* names a fold copied out */
	size_t nmoved;
};

/* The next line, its end overwritten with NULs, or NULL when none is
 * complete. */
static char *mhd_head_line(struct mhd_head *h, size_t *line_len)
{
	for (size_t i = h->pos; i < h->len; i++) {
		char *line = h->buf + h->pos;
		size_t end = 0;
		if (h->buf[i] == '\r' && i + 1 < h->len && h->buf[i + 1] == '\n')
			end = 2;
		else if (h->buf[i] == '\n')
			end = 1;
		if (!end)
			continue;
		*line_len = i - h->pos;
		memset(h->buf + i, 0, end);
		h->pos = i + end;
		return line;
	}
	return NULL;
}

static int mhd_head_version(const char *v, size_t len)
{
	return len == 8 && memcmp(v, "HTTP/", 5) == 0 && v[6] == '.' && v[5] == '1' && v[7] >= '0'
			&& v[7] <= '9';
}

/* parse_initial_message_line, minus what only touches the target. */
static int mhd_head_request_line(struct mhd_head *h, char *line, size_t line_len)
{
	char *uri = memchr(line, ' ', line_len);
	if (!uri || uri == line)
		return -1;
	*uri++ = '\0';
	h->method = line;
	while (*uri == ' ' && (size_t)(uri - line) < line_len)
		uri++;
	if ((size_t)(uri - line) == line_len)
		return -1; /* no version: libmicrohttpd answers 400 */
	char *v = line + line_len - 1;
	while (*v == ' ' && v > uri)
		v--;
	while (*v != ' ' && v > uri)
		v--;
	if (v <= uri)
		return -1;
	*v = '\0';
	h->version = v + 1;
	if (!mhd_head_version(h->version, line_len - (size_t)(h->version - line)))
		return -1;
	char *args = memchr(uri, '?', (size_t)(v - uri));
	if (args)
		*args = '\0';
	return 0;
}

/* process_header_line: -1 where libmicrohttpd answers 400. */
static int mhd_head_header_line(char *line, char **last, char **value)
{
	char *colon = strchr(line, ':');
	if (!colon)
		return -1;
	*colon++ = '\0';
	while (*colon == ' ' || *colon == '\t')
		colon++;
	*last = line;
	*value = colon;
	return 0;
}

static void mhd_head_free(struct mhd_head *h)
{
	for (size_t i = 0; i < h->nmoved; i++)
		free(h->moved[i]);
	free(h->buf);
	memset(h, 0, sizeof *h);
}

/* Reads the request in req. Returns 0 when libmicrohttpd would call the
 * handler with this head, -1 when it would answer the request itself or
 * wait for more bytes (or the model's limits are reached). */
static int mhd_head_parse(struct mhd_head *h, const char *req, size_t len)
{
	memset(h, 0, sizeof *h);
	h->buf = malloc(len + 1);
	if (!h->buf)
		return -1;
	memcpy(h->buf, req, len);
	h->buf[len] = '\0';
	h->len = len;

	size_t line_len;
	char *line;
	do { /* empty lines (and lines starting with a NUL) before a request are skipped */
		if (!(line = mhd_head_line(h, &line_len)))
			return -1;
	} while (line[0] == '\0');
	if (mhd_head_request_line(h, line, line_len) < 0)
		return -1;

	char *last = NULL, *value = NULL;
	for (;;) {
		if (!(line = mhd_head_line(h, &line_len)))
			return -1;
		if (!last) { /* MHD_CONNECTION_URL_RECEIVED */
			if (line[0] == '\0')
				break;
			if (mhd_head_header_line(line, &last, &value) < 0)
				return -1;
			continue;
		}
		/* MHD_CONNECTION_HEADER_PART_RECEIVED: process_broken_line */
		if (line[0] == ' ' || line[0] == '\t') {
			if (h->nmoved == MHD_HEAD_MAX_FIELDS)
				return -1;
			size_t last_len = strlen(last);
			char *tmp = line;
			while (*tmp == ' ' || *tmp == '\t')
				tmp++;
			size_t tmp_len = strlen(tmp);
			char *moved = malloc(last_len + tmp_len + 1);
			if (!moved)
				return -1;
			memcpy(moved, last, last_len + 1);
			if (last >= h->buf && last < h->buf + h->len)
				memset(last, 0, last_len + 1); /* the pool zeroes what it moved */
			memcpy(moved + last_len, tmp, tmp_len + 1);
			h->moved[h->nmoved++] = moved;
			last = moved;
			continue;
		}
		if (h->nfields == MHD_HEAD_MAX_FIELDS)
			return -1;
		h->fields[h->nfields++] = (struct mhd_head_field){
			.name = last,
			.name_len = strlen(last),
			.value = value,
			.value_len = strlen(value),
		};
		if (line[0] != '\0' && mhd_head_header_line(line, &last, &value) < 0)
			return -1;
		if (line[0] == '\0') /* the empty line, or one whose ':' or NUL came first */
			break;
	}
	h->head_len = h->pos - (size_t)(h->method - h->buf);
	return 0;
}

#endif
