/* The CGI response header parser: takes the script's output in whatever
 * pieces the pipe delivers, checks each header line as soon as it is
 * complete (a script that prints no headers is refused at its first line,
 * not after 64 KiB) and stops at the blank line. See cgi_reply.h. */
#include "cgi_reply.h"

#include "alloc.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define REPLY_DEFAULT_MAX (64 * 1024)
/* The buffer starts small (a typical header block is a few lines; a
 * 64 KiB allocation per request costs more than the parse) and grows to
 * max as needed. */
#define REPLY_FIRST_CAP 2048

enum { ST_FIRST_LINE, ST_HEADERS, ST_DONE, ST_ERROR };

static int reply_fail(struct cgi_reply *p, const char *why);
static int is_token_char(unsigned char c);
static int parse_status(const char *s, unsigned *status, const char **reason);
static int parse_length(const char *s, int64_t *out);
static int line_take(struct cgi_reply *p, char *line, size_t len);
static int field_take(struct cgi_reply *p, char *name, char *value);
static int block_finish(struct cgi_reply *p);
static int buf_grow(struct cgi_reply *p);

void cgi_reply_init(struct cgi_reply *p, size_t max_bytes)
{
	memset(p, 0, sizeof *p);
	p->max = max_bytes ? max_bytes : REPLY_DEFAULT_MAX;
	p->content_length = -1;
	p->state = ST_FIRST_LINE;
}

void cgi_reply_fini(struct cgi_reply *p)
{
	free(p->buf);
	free(p->headers);
	p->buf = NULL;
	p->headers = NULL;
	p->header_count = 0;
}

static int reply_fail(struct cgi_reply *p, const char *why)
{
	p->error = why;
	p->state = ST_ERROR;
	return -1;
}

/* RFC 9110 tchar. */
static int is_token_char(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return 1;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* "NNN" or "NNN reason": a final status a server can send. */
static int parse_status(const char *s, unsigned *status, const char **reason)
{
	if (!(s[0] >= '0' && s[0] <= '9' && s[1] >= '0' && s[1] <= '9' && s[2] >= '0'
			    && s[2] <= '9'))
		return -1;
	if (s[3] != '\0' && s[3] != ' ' && s[3] != '\t')
		return -1;
	unsigned code = (unsigned)(s[0] - '0') * 100 + (unsigned)(s[1] - '0') * 10
			+ (unsigned)(s[2] - '0');
	if (code < 200 || code > 599)
		return -1;
	*status = code;
	s += 3;
	s += strspn(s, " \t");
	*reason = *s ? s : NULL;
	return 0;
}

static int parse_length(const char *s, int64_t *out)
{
	size_t n = strspn(s, "0123456789");
	if (n == 0 || n > 18 || s[n] != '\0')
		return -1;
	*out = (int64_t)strtoll(s, NULL, 10);
	return 0;
}

static int field_take(struct cgi_reply *p, char *name, char *value)
{
	/* clang-format off */
	static const char *const hop_by_hop[] = {
		"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Upgrade",
	};
	/* clang-format on */
	if (strcasecmp(name, "Status") == 0) {
		if (p->status)
			return reply_fail(p, "repeated Status");
		if (parse_status(value, &p->status, &p->reason) < 0)
			return reply_fail(p, "bad Status line");
		return 0;
	}
	if (strcasecmp(name, "Content-Type") == 0) {
		if (p->content_type)
			return reply_fail(p, "repeated Content-Type");
		if (!*value)
			return reply_fail(p, "empty Content-Type");
		p->content_type = value;
		return 0;
	}
	if (strcasecmp(name, "Location") == 0) {
		if (p->location)
			return reply_fail(p, "repeated Location");
		if (!*value)
			return reply_fail(p, "empty Location");
		p->location = value;
		return 0;
	}
	if (strcasecmp(name, "Content-Length") == 0) {
		int64_t length;
		if (parse_length(value, &length) < 0)
			return reply_fail(p, "bad Content-Length");
		if (p->content_length >= 0 && p->content_length != length)
			return reply_fail(p, "conflicting Content-Length");
		p->content_length = length;
		return 0;
	}
	if (strcasecmp(name, "Transfer-Encoding") == 0)
		return reply_fail(p, "Transfer-Encoding from a script");
	for (size_t i = 0; i < sizeof hop_by_hop / sizeof *hop_by_hop; i++)
		if (strcasecmp(name, hop_by_hop[i]) == 0)
			return 0;
	p->headers = xrealloc(p->headers, (p->header_count + 1) * sizeof *p->headers);
	p->headers[p->header_count].name = name;
	p->headers[p->header_count].value = value;
	p->header_count++;
	return 0;
}

/* One complete line, without its LF (and CR), NUL-terminated in place. */
static int line_take(struct cgi_reply *p, char *line, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)line[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return reply_fail(p,
					c == '\r' ? "CR inside a header line"
							: c == '\0'
							? "NUL inside a header line"
							: "control character inside a header line");
	}
	int first = p->state == ST_FIRST_LINE;
	p->state = ST_HEADERS;
	if (first && strncmp(line, "HTTP/", 5) == 0) {
		if (strncmp(line, "HTTP/1.0 ", 9) != 0 && strncmp(line, "HTTP/1.1 ", 9) != 0)
			return reply_fail(p, "bad NPH status line");
		if (parse_status(line + 9, &p->status, &p->reason) < 0)
			return reply_fail(p, "bad NPH status line");
		p->nph = 1;
		return 0;
	}
	if (line[0] == ' ' || line[0] == '\t')
		return reply_fail(p, "folded header line");
	size_t nlen = 0;
	while (nlen < len && is_token_char((unsigned char)line[nlen]))
		nlen++;
	if (nlen == 0 || nlen == len || line[nlen] != ':')
		return reply_fail(p, "malformed header line (no headers?)");
	line[nlen] = '\0';
	char *value = line + nlen + 1;
	value += strspn(value, " \t");
	char *end = line + len;
	while (end > value && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	*end = '\0';
	return field_take(p, line, value);
}

static int block_finish(struct cgi_reply *p)
{
	if (!p->status && !p->content_type && !p->location)
		return reply_fail(p, "no Content-Type, Location or Status");
	p->location_local =
			p->location && !p->status && p->location[0] == '/' && p->location[1] != '/';
	if (!p->status)
		p->status = p->location ? 302 : 200;
	p->state = ST_DONE;
	return 0;
}

/* Makes room for more of the block, up to max. The parsed fields point
 * into the buffer: they are moved with it. Returns 0, or -1 at max. */
static int buf_grow(struct cgi_reply *p)
{
	if (p->cap >= p->max)
		return -1;
	size_t cap = p->cap ? p->cap * 2 : REPLY_FIRST_CAP;
	if (cap > p->max)
		cap = p->max;
	char *buf = xmalloc(cap + 1);
	if (p->len)
		memcpy(buf, p->buf, p->len);
#define MOVED(ptr) ((ptr) ? buf + ((ptr)-p->buf) : NULL)
	p->reason = MOVED(p->reason);
	p->content_type = MOVED(p->content_type);
	p->location = MOVED(p->location);
	for (size_t i = 0; i < p->header_count; i++) {
		p->headers[i].name = MOVED(p->headers[i].name);
		p->headers[i].value = MOVED(p->headers[i].value);
	}
#undef MOVED
	free(p->buf);
	p->buf = buf;
	p->cap = cap;
	return 0;
}

enum cgi_reply_result cgi_reply_feed(struct cgi_reply *p, const char *data, size_t len,
		size_t *used)
{
	*used = 0;
	if (p->state == ST_DONE)
		return CGI_REPLY_DONE;
	if (p->state == ST_ERROR)
		return CGI_REPLY_ERROR;
	size_t old = p->len, taken = 0;
	do {
		if (p->len == p->cap && buf_grow(p) < 0)
			break;
		size_t take = len - taken < p->cap - p->len ? len - taken : p->cap - p->len;
		memcpy(p->buf + p->len, data + taken, take);
		p->len += take;
		taken += take;

		/* p->scanned is where the current, incomplete line starts. */
		for (size_t i = p->scanned; i < p->len; i++) {
			if (p->buf[i] != '\n')
				continue;
			char *line = p->buf + p->scanned;
			size_t llen = i - p->scanned;
			if (llen > 0 && line[llen - 1] == '\r')
				llen--;
			line[llen] = '\0';
			p->scanned = i + 1;
			if (llen == 0) {
				if (p->state == ST_FIRST_LINE)
					return reply_fail(p, "no headers before the blank line"),
					       CGI_REPLY_ERROR;
				if (block_finish(p) < 0)
					return CGI_REPLY_ERROR;
				*used = i + 1 - old;
				return CGI_REPLY_DONE;
			}
			if (line_take(p, line, llen) < 0)
				return CGI_REPLY_ERROR;
		}
	} while (taken < len);
	if (p->len == p->cap && p->cap >= p->max) {
		reply_fail(p, "header block too large");
		return CGI_REPLY_ERROR;
	}
	*used = taken;
	return CGI_REPLY_MORE;
}

enum cgi_reply_result cgi_reply_eof(struct cgi_reply *p)
{
	if (p->state == ST_DONE)
		return CGI_REPLY_DONE;
	if (p->state == ST_ERROR)
		return CGI_REPLY_ERROR;
	reply_fail(p, p->len == 0 ? "no output" : "output ended inside the header block");
	return CGI_REPLY_ERROR;
}
