/* Script names to package names, and the __END__/__DATA__ split; see
 * perl_source.h. */
#include "perl_source.h"
#include "alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PACKAGE_PREFIX "PLXD::Script"
#define MAX_HEREDOCS   8
#define MAX_TERMINATOR 64

struct heredoc {
	char id[MAX_TERMINATOR];
	size_t len;
	int indented; /* <<~: the terminator may be indented */
};

static int is_alnum(unsigned char c);
static int is_ident_start(unsigned char c);
static size_t readable_package(const char *path, char *out);
static uint64_t path_hash(const char *path, unsigned clash);
static size_t cut_at(const char *name, size_t len, size_t room);
static size_t scan_heredocs(const char *line, size_t len, struct heredoc *docs, size_t max);
static int is_terminator(const char *line, size_t len, const struct heredoc *doc);
static int is_data_marker(const char *line, size_t len);

static int is_alnum(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static int is_ident_start(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* The readable name: the prefix, then "::" and each component escaped.
 * Returns its length; out must hold sizeof PACKAGE_PREFIX + strlen(path) * 5
 * bytes (every byte escaped, and a "::" per byte). */
static size_t readable_package(const char *path, char *out)
{
	char *p = out;
	memcpy(p, PACKAGE_PREFIX, sizeof PACKAGE_PREFIX - 1);
	p += sizeof PACKAGE_PREFIX - 1;
	const char *s = path;
	while (*s) {
		while (*s == '/')
			s++;
		if (!*s)
			break;
		*p++ = ':';
		*p++ = ':';
		for (; *s && *s != '/'; s++) {
			unsigned char c = (unsigned char)*s;
			if (is_alnum(c)) {
				*p++ = (char)c;
			} else {
				p += sprintf(p, "_%02x", c);
			}
		}
	}
	*p = '\0';
	return (size_t)(p - out);
}

/* FNV-1a, 64 bits, of the path and the clash number. */
static uint64_t path_hash(const char *path, unsigned clash)
{
	uint64_t h = 0xcbf29ce484222325u;
	for (const unsigned char *c = (const unsigned char *)path; *c; c++)
		h = (h ^ *c) * 0x100000001b3u;
	for (unsigned i = 0; i < sizeof clash; i++)
		h = (h ^ ((clash >> (8 * i)) & 0xff)) * 0x100000001b3u;
	return h;
}

/* Where to cut the readable name so that at most room bytes stay: not
 * inside an escape (every '_' of a readable name starts one) nor after a
 * ':'. room is always past the prefix. */
static size_t cut_at(const char *name, size_t len, size_t room)
{
	size_t at = room < len ? room : len;
	if (name[at - 1] == '_')
		at -= 1;
	else if (name[at - 2] == '_')
		at -= 2;
	while (name[at - 1] == ':')
		at--;
	return at;
}

char *perl_source_package(const char *path, unsigned generation, unsigned clash)
{
	size_t len = strlen(path);
	char *out = xmalloc(sizeof PACKAGE_PREFIX + len * 5 + 64);
	size_t n = readable_package(path, out);
	char gen[16] = "";
	/* Appended to the last component, not nested below it: deleting the
	 * previous generation's package must not take this one along. */
	if (generation > 1)
		snprintf(gen, sizeof gen, "_g%u", generation);
	size_t glen = strlen(gen);
	if (n + glen > PERL_SOURCE_PACKAGE_MAX) {
		/* "_h" and 16 hex digits, which no readable name holds. */
		size_t room = PERL_SOURCE_PACKAGE_MAX - glen - 18;
		n = cut_at(out, n, room);
		n += (size_t)sprintf(out + n, "_h%016llx",
				(unsigned long long)path_hash(path, clash));
	}
	memcpy(out + n, gen, glen + 1);
	return out;
}

/* open(2) refuses a path of PATH_MAX bytes or more (ENAMETOOLONG), while
 * plxd reaches such a file below its root: then its folders are opened a
 * part shorter than PATH_MAX at a time, each part ending before a '/',
 * and the rest relative to the last. */
int perl_source_open(const char *path, int flags)
{
	int fd = open(path, flags);
	if (fd >= 0 || errno != ENAMETOOLONG)
		return fd;
	int dir = AT_FDCWD;
	const char *rest = path;
	fd = -1;
	while (strlen(rest) >= PATH_MAX) {
		const char *cut = rest + PATH_MAX - 1;
		while (cut > rest && *cut != '/')
			cut--;
		if (cut == rest) {
			errno = ENAMETOOLONG;
			goto out;
		}
		char *part = xstrndup(rest, (size_t)(cut - rest));
		int next = openat(dir, part, O_PATH | O_DIRECTORY | O_CLOEXEC);
		int e = errno;
		free(part);
		errno = e;
		if (next < 0)
			goto out;
		if (dir != AT_FDCWD)
			close(dir);
		dir = next;
		rest = cut + 1;
	}
	fd = openat(dir, rest, flags);
out:;
	int e = errno;
	if (dir != AT_FDCWD)
		close(dir);
	errno = e;
	return fd;
}

/* Here-document openers on one line of code: <<ID, <<"ID", <<'ID', and the
 * same with ~. A heuristic (a "<<" inside a string also counts), good
 * enough to keep a __END__ line inside a here-doc from ending the code. */
static size_t scan_heredocs(const char *line, size_t len, struct heredoc *docs, size_t max)
{
	size_t n = 0;
	size_t i = 0;
	while (i < len && (line[i] == ' ' || line[i] == '\t'))
		i++;
	if (i < len && line[i] == '#')
		return 0;
	for (; i + 2 < len && n < max; i++) {
		if (line[i] != '<' || line[i + 1] != '<')
			continue;
		size_t j = i + 2;
		int indented = 0;
		if (j < len && line[j] == '~') {
			indented = 1;
			j++;
		}
		size_t k = j;
		while (k < len && line[k] == ' ')
			k++;
		const char *id;
		size_t idlen = 0;
		if (k < len && (line[k] == '"' || line[k] == '\'')) {
			char q = line[k];
			id = line + k + 1;
			while (k + 1 + idlen < len && line[k + 1 + idlen] != q)
				idlen++;
			if (k + 1 + idlen >= len)
				continue;
			i = k + 1 + idlen;
		} else if (k == j && k < len && is_ident_start((unsigned char)line[k])) {
			id = line + k;
			while (k + idlen < len
					&& (is_alnum((unsigned char)line[k + idlen])
							|| line[k + idlen] == '_'))
				idlen++;
			i = k + idlen - 1;
		} else {
			continue;
		}
		if (idlen == 0 || idlen >= MAX_TERMINATOR)
			continue;
		memcpy(docs[n].id, id, idlen);
		docs[n].id[idlen] = '\0';
		docs[n].len = idlen;
		docs[n].indented = indented;
		n++;
	}
	return n;
}

static int is_terminator(const char *line, size_t len, const struct heredoc *doc)
{
	if (len > 0 && line[len - 1] == '\r')
		len--;
	if (doc->indented)
		while (len > 0 && (*line == ' ' || *line == '\t')) {
			line++;
			len--;
		}
	return len == doc->len && memcmp(line, doc->id, len) == 0;
}

/* "__END__" or "__DATA__" as a token at the start of the line. */
static int is_data_marker(const char *line, size_t len)
{
	size_t n;
	if (len >= 7 && memcmp(line, "__END__", 7) == 0)
		n = 7;
	else if (len >= 8 && memcmp(line, "__DATA__", 8) == 0)
		n = 8;
	else
		return 0;
	return n == len || !(is_alnum((unsigned char)line[n]) || line[n] == '_');
}

/* Whether the word w (n bytes) is a quote-like operator: q, qq, qw, qr, m,
 * s, y, tr. */
static int is_quote_like(const char *w, size_t n)
{
	static const char *const ops[] = { "q", "qq", "qw", "qr", "m", "s", "y", "tr" };
	for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
		if (strlen(ops[i]) == n && memcmp(ops[i], w, n) == 0)
			return 1;
	return 0;
}

/* "__END__" or "__DATA__" after code on its line ("sub { [200, [], ['x']] };
 * __END__"): perl's lexer ends the code at the token wherever it stands,
 * and the wrapper's closing brace after it would be lost. Taken only where
 * the line plainly is code up to it: a ';' or '}' just before it (spaces
 * between), single- and double-quoted strings closed on the line, and no
 * comment, regex, here-doc or quote-like operator before it, any of which
 * could hold the word as text. Returns its offset; 0 for none, or not
 * sure on this line (the line stays code, as before); NOT_SURE when what
 * the line opened may go on past it (a string, a quote-like operator, a
 * regex), so that no later line is read as plain code either. */
#define NOT_SURE ((size_t)-1)
static size_t mid_line_marker(const char *line, size_t len)
{
	char last = 0; /* the last character before i that is not a space */
	size_t i = 0;
	while (i < len) {
		unsigned char c = (unsigned char)line[i];
		if (c == '\'' || c == '"') {
			size_t j = i + 1;
			while (j < len && line[j] != (char)c)
				j += line[j] == '\\' ? 2 : 1;
			if (j >= len)
				return NOT_SURE; /* a string goes on past the line */
			last = (char)c;
			i = j + 1;
			continue;
		}
		if (c == '#' || (c == '<' && i + 1 < len && line[i + 1] == '<'))
			return 0; /* a comment, a here-doc */
		if (c == '/' || c == '`')
			return NOT_SURE;
		if (is_ident_start(c)) {
			size_t j = i;
			while (j < len && (is_alnum((unsigned char)line[j]) || line[j] == '_'))
				j++;
			if (is_quote_like(line + i, j - i))
				return NOT_SURE;
			if ((last == ';' || last == '}') && is_data_marker(line + i, len - i))
				return i;
			last = line[j - 1];
			i = j;
			continue;
		}
		if (c != ' ' && c != '\t' && c != '\r')
			last = (char)c;
		i++;
	}
	return 0;
}

size_t perl_source_split(const char *src, size_t len, size_t *data_at, int *has_data, int *in_pod)
{
	struct heredoc docs[MAX_HEREDOCS];
	size_t ndocs = 0, doc = 0;
	int pod = 0, not_sure = 0;
	size_t pos = 0;
	*has_data = 0;
	*data_at = len;
	while (pos < len) {
		const char *line = src + pos;
		const char *nl = memchr(line, '\n', len - pos);
		size_t linelen = nl ? (size_t)(nl - line) : len - pos;
		size_t next = nl ? pos + linelen + 1 : len;
		if (doc < ndocs) {
			if (is_terminator(line, linelen, &docs[doc]))
				doc++;
		} else if (pod) {
			if (linelen >= 4 && memcmp(line, "=cut", 4) == 0
					&& (linelen == 4 || !is_alnum((unsigned char)line[4])))
				pod = 0;
		} else if (linelen >= 2 && line[0] == '='
				&& is_ident_start((unsigned char)line[1])) {
			/* A POD block starts here; its first line never ends it,
			 * not even "=cut" (perl's own rule). */
			pod = 1;
		} else if (is_data_marker(line, linelen)) {
			*has_data = 1;
			*data_at = next;
			*in_pod = 0;
			return pos;
		} else {
			size_t at = not_sure ? 0 : mid_line_marker(line, linelen);
			if (at == NOT_SURE)
				not_sure = 1;
			else if (at) {
				*has_data = 1;
				*data_at = next;
				*in_pod = 0;
				return pos + at;
			}
			ndocs = scan_heredocs(line, linelen, docs, MAX_HEREDOCS);
			doc = 0;
		}
		pos = next;
	}
	*in_pod = pod;
	return len;
}

/* ---- the #! line ---- */

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int is_octal(char c)
{
	return c >= '0' && c <= '7';
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* grok_oct over at most max digits: the value, and *n the digits used. */
static unsigned oct_value(const char *s, size_t max, size_t *n)
{
	unsigned v = 0;
	size_t i = 0;
	while (i < max && is_octal(s[i]))
		v = v * 8 + (unsigned)(s[i++] - '0');
	*n = i;
	return v;
}

static void refuse(struct perl_shebang *sb, char *why)
{
	if (!sb->refused)
		sb->refused = why;
	else
		free(why);
}

static char *word(const char *s, const char **end)
{
	const char *e = s;
	while (*e && !is_space(*e))
		e++;
	*end = e;
	return xstrndup(s, (size_t)(e - s));
}

/* -C: perl refuses it on the #! line unless what it asks for is what the
 * command line already set (nothing: plxd passes no -C), so only an empty
 * or zero value passes. */
static const char *unicode_switch(struct perl_shebang *sb, const char *s)
{
	const char *start = s - 1, *p = s;
	unsigned long value = 0;
	int bad = 0;
	if (is_digit(*p)) {
		while (is_digit(*p))
			value = value * 10 + (unsigned long)(*p++ - '0');
		if (*p && !is_space(*p))
			bad = 1;
	} else if (*p == '\0') {
		value = 1; /* -C alone at the very end: perl's default, SDL */
	} else {
		for (; *p && !is_space(*p); p++) {
			if (!strchr("IOEiSDALa", *p)) {
				bad = 1;
				break;
			}
			value = 1;
		}
	}
	if (bad) {
		refuse(sb, xasprintf("Unknown Unicode option letter '%c'", *p));
		return NULL;
	}
	if (value != 0) {
		const char *e;
		char *w = word(start, &e);
		refuse(sb, xasprintf("Too late for \"-%s\" option", w));
		free(w);
		return NULL;
	}
	return p;
}

/* -I: perl takes everything up to the last word before the next switch as
 * one folder ("-I /a /b -w" is the folder "/a /b"). */
static const char *inc_switch(struct perl_shebang *sb, const char *s)
{
	while (is_space(*s))
		s++;
	if (!*s) {
		refuse(sb, xstrdup("No directory specified for -I"));
		return NULL;
	}
	const char *e, *p = s;
	do {
		for (e = p; *e && !is_space(*e); e++)
			;
		p = e;
		while (is_space(*p))
			p++;
	} while (*p && *p != '-');
	size_t n = 0;
	while (sb->inc && sb->inc[n])
		n++;
	sb->inc = xrealloc(sb->inc, (n + 2) * sizeof *sb->inc);
	sb->inc[n] = xstrndup(s, (size_t)(e - s));
	sb->inc[n + 1] = NULL;
	return *p == '-' ? p + 1 : p;
}

/* One switch at s (after its '-'), as perl's moreswitches() reads it.
 * Returns where the next one starts, or NULL at the end (or once refused). */
static const char *one_switch(struct perl_shebang *sb, const char *s)
{
	const char *e;
	size_t n;
	unsigned v;
	switch (*s) {
	case '0':
		if (s[1] == 'x' && s[2]) {
			/* -0xHH is read up to the end of the line, whose newline
			 * is no hex digit: perl then takes it as -0 and -x. */
			sb->rs = (struct perl_separator){ .set = 1, .len = 1 };
			return s + 1;
		}
		v = oct_value(s, 4, &n);
		if (v > 0xff)
			sb->rs = (struct perl_separator){ .set = 1, .undef = 1 };
		else if (v == 0 && n >= 2)
			sb->rs = (struct perl_separator){ .set = 1 };
		else
			sb->rs = (struct perl_separator){ .set = 1,
				.len = 1,
				.bytes = { (char)v } };
		return s + n;
	case 'C':
		return unicode_switch(sb, s + 1);
	case 'F':
		sb->minus_a = sb->minus_n = 1;
		free(sb->split);
		sb->split = word(s + 1, &e);
		return e;
	case 'a':
		sb->minus_a = sb->minus_n = 1;
		return s + 1;
	case 'c':
		sb->check_only = 1;
		return s + 1;
	case 'd':
		refuse(sb, xstrdup("-d runs the Perl debugger, which needs a terminal"));
		return NULL;
	case 'D':
		sb->debugging = 1;
		for (s++; is_digit(*s) || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')
				|| *s == '_';
				s++)
			;
		return s;
	case 'g':
		sb->rs = (struct perl_separator){ .set = 1, .undef = 1 };
		return s + 1;
	case '?':
	case 'h':
		refuse(sb, xasprintf("-%c prints perl's usage instead of running the script", *s));
		return NULL;
	case 'i':
		free(sb->inplace);
		sb->inplace = word(s + 1, &e);
		return e;
	case 'I':
		return inc_switch(sb, s + 1);
	case 'l':
		sb->minus_l = 1;
		s++;
		if (is_digit(*s)) {
			v = oct_value(s, 3 + (*s == '0'), &n);
			sb->ors = (struct perl_separator){ .set = 1,
				.len = 1,
				.bytes = { (char)v } };
			return s + n;
		}
		/* $\ becomes $/ as the switches so far left it. */
		if (!sb->rs.set)
			sb->ors = (struct perl_separator){ .set = 1, .len = 1, .bytes = { '\n' } };
		else if (!sb->rs.undef && sb->rs.len == 0)
			sb->ors = (struct perl_separator){ .set = 1,
				.len = 2,
				.bytes = { '\n', '\n' } };
		else
			sb->ors = sb->rs;
		return s;
	case 'M':
	case 'm': {
		char *w = word(s, &e);
		refuse(sb, xasprintf("Too late for \"-%s\" option", w));
		free(w);
		return NULL;
	}
	case 'n':
		sb->minus_n = 1;
		return s + 1;
	case 'p':
		sb->minus_p = 1;
		return s + 1;
	case 's':
		/* Switch parsing of the arguments: a script plxd runs has none. */
		return s + 1;
	case 't':
	case 'T':
		if (!sb->taint || *s == 'T')
			sb->taint = *s;
		return s + 1;
	case 'u':
		refuse(sb, xstrdup("-u dumps core after compiling the script"));
		return NULL;
	case 'U':
		sb->unsafe = 1;
		return s + 1;
	case 'v':
		refuse(sb, xstrdup("-v prints perl's version instead of running the script"));
		return NULL;
	case 'w':
		if (sb->warnings == PERL_WARN_DEFAULT)
			sb->warnings = PERL_WARN_ON;
		return s + 1;
	case 'W':
		sb->warnings = PERL_WARN_ALL;
		return s + 1;
	case 'X':
		sb->warnings = PERL_WARN_NONE;
		return s + 1;
	case '*':
	case ' ':
		while (*s == ' ')
			s++;
		return *s == '-' ? s + 1 : NULL;
	case '-':
	case '\0':
	case '\r':
	case '\n':
	case '\t':
		return NULL;
	case 'e':
	case 'f':
	case 'x':
	case 'E':
	case 'S':
	case 'V':
		refuse(sb, xasprintf("Can't emulate -%c on #! line", *s));
		return NULL;
	default:
		refuse(sb, xasprintf("Unrecognized switch: -%c  (-h will show valid options)", *s));
		return NULL;
	}
}

int perl_source_shebang(const char *src, size_t len, struct perl_shebang *sb)
{
	memset(sb, 0, sizeof *sb);
	const char *nl = memchr(src, '\n', len);
	size_t linelen = nl ? (size_t)(nl - src) + 1 : len;
	/* The common case, no #! line, costs no copy. */
	size_t i = 0;
	if (linelen >= 3 && memcmp(src, "\xef\xbb\xbf", 3) == 0)
		i = 3; /* perl swallows a UTF-8 byte order mark */
	while (i < linelen && is_space(src[i]) && src[i] != '\n')
		i++;
	if (i < linelen && src[i] == ':' && (i + 1 >= linelen || src[i + 1] != ':'))
		i++; /* for csh execing sh scripts */
	if (i + 1 >= linelen || src[i] != '#' || src[i + 1] != '!')
		return 0;
	/* The line with its newline, as perl's lexer holds it: switches end
	 * at the newline, and -0x, -C and -I read up to it. */
	char *line = xstrndup(src + i, linelen - i);

	const char *d = line + 2;
	while (*d == ' ' || *d == '\t')
		d++;
	const char *ipath = d;
	while (*d && !is_space(*d))
		d++;
	int ipath_len = (int)(d - ipath);

	const char *perl = strstr(line, "perl -");
	if (!perl)
		perl = strstr(line, "perl");
	if (!perl) {
		/* perl itself would hand the file to that program. */
		if (ipath_len > 0 && !strstr(line, "indir"))
			sb->refused = xasprintf("its #! line names another interpreter (%.*s)",
					ipath_len, ipath);
		free(line);
		return sb->refused != NULL;
	}
	d = perl;
	while (*d && !is_space(*d))
		d++;
	while (*d == ' ' || *d == '\t')
		d++;
	if (*d == '-') {
		d++;
		do
			d = one_switch(sb, d);
		while (d && !sb->refused);
	}
	free(line);
	int any = sb->warnings || sb->rs.set || sb->ors.set || sb->minus_n || sb->minus_p
			|| sb->minus_a || sb->inplace || sb->inc || sb->check_only || sb->unsafe
			|| sb->debugging || sb->taint || sb->refused;
	if (!any)
		perl_source_shebang_free(sb);
	return any;
}

void perl_source_shebang_free(struct perl_shebang *sb)
{
	free(sb->split);
	free(sb->inplace);
	for (size_t i = 0; sb->inc && sb->inc[i]; i++)
		free(sb->inc[i]);
	free(sb->inc);
	free(sb->refused);
	memset(sb, 0, sizeof *sb);
}
