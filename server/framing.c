/* Refusing requests whose framing is ambiguous (RFC 9112 sections 3, 5 and
 * 6, RFC 9110 section 5). libmicrohttpd 0.9.75 uses the first of two
 * Content-Length fields, lets Transfer-Encoding win over Content-Length,
 * reads a body of unknown coding until the connection closes, keeps
 * "Content-Length : 5" as a header of another name, cuts a value at a NUL
 * and ends the head at a line with an empty name: each lets a client
 * smuggle a second request past a proxy that reads the bytes differently.
 * What its API hides is looked for where it leaves the head in its read
 * buffer (framing_head); a chunked body's line ends are read as the bytes
 * arrive (chunk_scan). */
#include "framing.h"
#include "hex.h"

#include <ctype.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

static int is_tchar(unsigned char c);
static int is_token(const char *s, size_t len);
static int is_digits(const char *s, size_t len);
static int valid_host(const char *s, size_t len);
static int known_method(const char *method);
static void problem(struct framing *f, unsigned status, const char *why);
static int within(const struct framing *f, const char *p, size_t len);
static void line_ends(struct framing *f, const char *from, const char *to, size_t lines,
		const char *why_bytes);

/* RFC 9110 5.6.2: tchar. */
static int is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return 1;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int is_token(const char *s, size_t len)
{
	if (len == 0)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!is_tchar((unsigned char)s[i]))
			return 0;
	return 1;
}

/* The methods of RFC 9110 and PATCH; others are 501 before any handler
 * sees them. Case-sensitive, as methods are. */
static int known_method(const char *method)
{
	/* clang-format off */
	static const char *const known[] = {
		"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
	};
	/* clang-format on */
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		if (strcmp(method, known[i]) == 0)
			return 1;
	return 0;
}

/* Keeps the first 400; a 501 only stands when the request is otherwise well
 * formed. */
static void problem(struct framing *f, unsigned status, const char *why)
{
	if (f->status == 400 || (f->status == 501 && status == 501))
		return;
	f->status = status;
	f->why = why;
}

static int is_digits(const char *s, size_t len)
{
	if (len == 0)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

/* RFC 9110 7.2: Host is uri-host [ ":" port ]: reg-name, IPv4 or an IPv6
 * literal in brackets, so no space, slash, backslash or "@". */
static int valid_host(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
			continue;
		if (strchr("-._~!$&'()*+,;=:[]%", c) == NULL || c == '\0')
			return 0;
	}
	return 1;
}

void framing_begin(struct framing *f, const char *method, const char *version)
{
	memset(f, 0, sizeof *f);
	f->http10 = version && strcmp(version, "HTTP/1.0") == 0;
	if (!method || !is_token(method, strlen(method)))
		problem(f, 400, "the method is not a token");
	else if (!known_method(method))
		problem(f, 501, "unknown method");
}

void framing_field(struct framing *f, const char *name, size_t name_len, const char *value,
		size_t value_len, int folded)
{
	if (!value) {
		value = "";
		value_len = 0;
	}
	if (folded) {
		/* RFC 9112 5.2 allows rejecting obs-fold; libmicrohttpd joins the
		 * folded text onto the field's name, which can make a framing
		 * field out of two harmless lines. */
		problem(f, 400, "obsolete line folding in a header");
		return;
	}
	if (strnlen(name, name_len) != name_len || !is_token(name, name_len)) {
		problem(f, 400, "a header name is not a token");
		return;
	}
	/* RFC 9110 5.5: CR, LF and NUL in a value are dangerous; libmicrohttpd
	 * keeps a bare CR in the value. */
	for (size_t i = 0; i < value_len; i++) {
		if (value[i] == '\0' || value[i] == '\r' || value[i] == '\n') {
			problem(f, 400, "CR, LF or NUL in a header value");
			return;
		}
	}
	if (name_len == 14 && strncasecmp(name, "Content-Length", 14) == 0) {
		f->content_lengths++;
		if (f->content_lengths > 1)
			problem(f, 400, "more than one Content-Length");
		else if (!is_digits(value, value_len))
			problem(f, 400, "Content-Length is not a number");
	} else if (name_len == 17 && strncasecmp(name, "Transfer-Encoding", 17) == 0) {
		f->transfer_encodings++;
		if (f->transfer_encodings > 1 || value_len != 7
				|| strncasecmp(value, "chunked", 7) != 0)
			problem(f, 501, "a transfer coding other than chunked");
	} else if (name_len == 4 && strncasecmp(name, "Host", 4) == 0) {
		f->hosts++;
		if (f->hosts > 1)
			problem(f, 400, "more than one Host");
		else if (!valid_host(value, value_len))
			problem(f, 400, "Host is not a host name");
	}
}

/* Whether [p, p + len) lies inside the head. Compared as integers: a
 * folded name is in another buffer altogether. */
static int within(const struct framing *f, const char *p, size_t len)
{
	uintptr_t a = (uintptr_t)p, lo = (uintptr_t)f->head, hi = (uintptr_t)f->head_end;
	return p && a >= lo && a <= hi && len <= hi - a;
}

/* Checks what lies between the content of one line and the next (or the
 * end of the head): libmicrohttpd turned each line end into one NUL (LF)
 * or two (CRLF), so there must be `lines` line ends there, each as long
 * as the request line's. Bytes other than NUL are what followed a NUL that
 * cut a value, or a line libmicrohttpd took for the end of the head; the
 * wrong number of NULs is a NUL just before a line end, or mixed line
 * ends. */
static void line_ends(struct framing *f, const char *from, const char *to, size_t lines,
		const char *why_bytes)
{
	if (!within(f, from, 0) || !within(f, to, 0) || (uintptr_t)to < (uintptr_t)from) {
		problem(f, 400, "the request head is not laid out as libmicrohttpd 0.9.75 leaves it");
		return;
	}
	size_t n = (size_t)(to - from);
	for (size_t i = 0; i < n; i++) {
		if (from[i] != '\0') {
			problem(f, 400, why_bytes);
			return;
		}
	}
	if (!f->eol && n % lines == 0 && (n / lines == 1 || n / lines == 2))
		f->eol = n / lines;
	if (n != lines * f->eol)
		problem(f, 400, "a NUL before a line end, or lines ending in CRLF and in bare LF");
}

void framing_head(struct framing *f, const char *head, size_t head_len, const char *version)
{
	f->head = head;
	f->head_end = head ? head + head_len : NULL;
	f->eol = 0;
	/* libmicrohttpd accepts only "HTTP/x.y" as a version, and nothing
	 * after it on the line but the line end. */
	size_t vlen = version && within(f, version, 0)
			? strnlen(version, (size_t)(f->head_end - version))
			: 0;
	if (!head || vlen != 8 || !within(f, version, vlen)) {
		problem(f, 400, "the request head is not laid out as libmicrohttpd 0.9.75 leaves it");
		f->head = NULL;
		return;
	}
	f->line_end = version + vlen;
}

void framing_field_at(struct framing *f, const char *name, size_t name_len, const char *value,
		size_t value_len)
{
	if (!f->head) {
		framing_field(f, name, name_len, value, value_len, 0);
		return;
	}
	/* In its line: the name after the previous line, then its ':' (a NUL
	 * now), blanks, the value. A folded field's name was moved. */
	int in_line = within(f, name, name_len) && within(f, value, value_len)
			&& (uintptr_t)name >= (uintptr_t)f->line_end
			&& (uintptr_t)value > (uintptr_t)name + name_len;
	if (!in_line) {
		framing_field(f, name, name_len, value, value_len, 1);
		return;
	}
	for (const char *p = name + name_len + 1; p < value; p++) {
		if (*p != ' ' && *p != '\t') {
			problem(f, 400,
					"the request head is not laid out as libmicrohttpd 0.9.75 "
					"leaves it");
			break;
		}
	}
	line_ends(f, f->line_end, name, 1, "NUL in a header value");
	f->line_end = value + value_len;
	framing_field(f, name, name_len, value, value_len, 0);
}

unsigned framing_end(struct framing *f, const char **why)
{
	/* The last line, then the empty one: any other line there is one
	 * libmicrohttpd took for the end of the head. */
	if (f->head)
		line_ends(f, f->line_end, f->head_end, 2,
				"NUL in a header value, or a line that "
				"ends the head for libmicrohttpd (an empty name, or a NUL first)");
	if (f->content_lengths && f->transfer_encodings)
		problem(f, 400, "both Content-Length and Transfer-Encoding");
	if (f->transfer_encodings && f->http10)
		problem(f, 400, "Transfer-Encoding in an HTTP/1.0 request");
	if (!f->hosts && !f->http10)
		problem(f, 400, "no Host in an HTTP/1.1 request");
	*why = f->status ? f->why : NULL;
	return f->status;
}

void chunk_scan_begin(struct chunk_scan *s)
{
	*s = (struct chunk_scan){ .state = CHUNK_SIZE,
		.trailers_left = ULONG_MAX,
		.trailer_bytes_left = UINT64_MAX };
}

/* The end of a chunk-size line: the data, or after the last chunk (size
 * 0) the trailers. */
static void size_line_done(struct chunk_scan *s)
{
	s->state = s->size ? CHUNK_DATA : CHUNK_TRAILER;
	s->cr = 0;
}

/* Malformed in a way libmicrohttpd refuses itself, with status. */
static void leave(struct chunk_scan *s, unsigned status)
{
	s->state = CHUNK_LEFT;
	s->left_status = status;
}

static int refuse_lf(struct chunk_scan *s, const char *why)
{
	s->state = CHUNK_REFUSED;
	s->why = why;
	return -1;
}

int chunk_scan(struct chunk_scan *s, const char *p, size_t n)
{
	static const char size_lf[] = "a chunk-size line ending in a bare LF";
	static const char last_lf[] = "the last chunk's line ending in a bare LF";
	static const char trailers_big[] = "trailers larger than max_header_size leaves beside "
					   "the head";
	static const char bare_cr[] = "a bare CR (not before an LF) in a chunk extension or a "
				      "trailer";
	size_t i = 0;
	while (i < n) {
		unsigned char c = (unsigned char)p[i];
		int d;
		switch (s->state) {
		case CHUNK_DONE:
			return 1;
		case CHUNK_REFUSED:
			return -1;
		case CHUNK_LEFT:
			return 0;
		case CHUNK_DATA: {
			size_t take = n - i < s->size ? n - i : (size_t)s->size;
			s->size -= take;
			s->length += take;
			i += take;
			if (!s->size)
				s->state = CHUNK_DATA_CR;
			continue;
		}
		case CHUNK_SIZE:
			/* libmicrohttpd reads digits up to ';' or the line end,
			 * all hex, and refuses a size past 2^64 - 1 (413). */
			if ((d = hex_digit_value(c)) >= 0) {
				if (s->size > UINT64_MAX >> 4)
					leave(s, 413);
				s->size = s->size << 4 | (uint64_t)d;
				s->digits = 1;
			} else if (c == ';' && s->digits) {
				s->state = CHUNK_EXT;
				s->cr = 0;
			} else if (c == '\r') {
				s->state = CHUNK_SIZE_CR;
			} else if (c == '\n') {
				return refuse_lf(s, s->digits && !s->size ? last_lf : size_lf);
			} else {
				leave(s, 400);
			}
			break;
		case CHUNK_SIZE_CR:
			if (c == '\n' && s->digits)
				size_line_done(s);
			else
				leave(s, 400);
			break;
		case CHUNK_EXT:
			/* libmicrohttpd ends the line at its first LF, whatever the
			 * extension holds; a parser that ends it at a CR too reads
			 * a bare one as the line's end. */
			if (c == '\n') {
				if (!s->cr)
					return refuse_lf(s, s->size ? size_lf : last_lf);
				size_line_done(s);
			} else if (s->cr) {
				return refuse_lf(s, bare_cr);
			} else {
				s->cr = c == '\r';
			}
			break;
		case CHUNK_DATA_CR:
			if (c == '\n')
				return refuse_lf(s,
						"a chunk's data followed by a bare LF instead of CRLF");
			if (c == '\r')
				s->state = CHUNK_DATA_LF;
			else
				leave(s, 400);
			break;
		case CHUNK_DATA_LF:
			if (c == '\n') {
				s->state = CHUNK_SIZE;
				s->size = 0;
				s->digits = 0;
			} else {
				leave(s, 400);
			}
			break;
		case CHUNK_TRAILER:
			if (!s->trailer_bytes_left--)
				return refuse_lf(s, trailers_big);
			if (c == '\n')
				return refuse_lf(s,
						"the line ending a chunked body's trailers in a bare LF");
			if (c == '\r') {
				s->state = CHUNK_END_LF;
				s->cr = 1;
				break;
			}
			/* libmicrohttpd ends the trailers at a line that starts
			 * with a NUL, takes one that starts with a space or a tab
			 * as part of the one before, and refuses one with no
			 * name; each costs it an entry in the connection's memory
			 * (head_count). */
			if (c == '\0' || c == ' ' || c == '\t' || c == ':')
				return refuse_lf(s,
						"a trailer line starting with a NUL, a space, a tab "
						"or a colon");
			if (!s->trailers_left)
				return refuse_lf(s,
						"more trailer lines than max_header_fields leaves "
						"beside the head");
			s->trailers_left--;
			s->state = CHUNK_TRAILER_LINE;
			s->cr = s->colon = 0;
			break;
		case CHUNK_END_LF:
			if (!s->trailer_bytes_left--)
				return refuse_lf(s, trailers_big);
			if (c == '\n') {
				s->length++;
				s->state = CHUNK_DONE;
				return 1;
			}
			/* A line that starts with a bare CR. */
			return refuse_lf(s, bare_cr);
		case CHUNK_TRAILER_LINE:
			if (!s->trailer_bytes_left--)
				return refuse_lf(s, trailers_big);
			if (c == '\n') {
				if (!s->cr)
					return refuse_lf(s, "a trailer line ending in a bare LF");
				if (!s->colon)
					return refuse_lf(s, "a trailer line without a colon");
				s->state = CHUNK_TRAILER;
			} else if (s->cr) {
				return refuse_lf(s, bare_cr);
			} else if (c == '\0') {
				return refuse_lf(s, "a NUL in a trailer line");
			}
			s->colon |= c == ':';
			s->cr = c == '\r';
			break;
		}
		s->length++;
		i++;
	}
	return s->state == CHUNK_DONE ? 1 : s->state == CHUNK_REFUSED ? -1 : 0;
}

void head_count_begin(struct head_count *h)
{
	*h = (struct head_count){ 0 };
}

int head_count(struct head_count *h, const char *p, size_t n, unsigned long max, size_t *used)
{
	static const char cookie[] = "cookie:";
	*used = 0;
	if (h->entries > max)
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		int entry = 0;
		if (c == '\n') {
			if (h->in_line) {
				h->lines++;
			} else if (h->lines) {
				*used = i + 1;
				return 1;
			}
			h->in_line = h->past_method = h->query = h->matched = h->cookie = 0;
			continue;
		}
		if (c == '\r')
			continue;
		if (!h->lines) {
			/* The request line: its query's parameters. libmicrohttpd
			 * takes the target to the line's last space, and its
			 * query from the first '?' in it, split at each '&'. */
			if (c == ' ') {
				h->past_method = 1;
			} else if (h->past_method
					&& (c == '&' ? h->query : c == '?' && !h->query)) {
				h->query = 1;
				entry = 1;
			}
		} else if (!h->in_line) {
			entry = 1; /* a header line */
			h->matched = tolower(c) == cookie[0];
		} else if (h->cookie) {
			entry = c == ';' || c == ','; /* libmicrohttpd splits at both */
		} else if (h->matched && h->matched < sizeof cookie - 1) {
			h->matched = tolower(c) == cookie[h->matched] ? h->matched + 1 : 0;
			if (h->matched == sizeof cookie - 1)
				h->cookie = entry = 1; /* its first cookie */
		}
		h->in_line = 1;
		if (entry && ++h->entries > max) {
			*used = i;
			return -1;
		}
	}
	return 0;
}

unsigned framing_check(const char *method, const char *version,
		const struct framing_header *headers, size_t nheaders, const char **why)
{
	struct framing f;
	framing_begin(&f, method, version);
	for (size_t i = 0; i < nheaders; i++)
		framing_field(&f, headers[i].name, strlen(headers[i].name), headers[i].value,
				headers[i].value ? strlen(headers[i].value) : 0, headers[i].folded);
	return framing_end(&f, why);
}
