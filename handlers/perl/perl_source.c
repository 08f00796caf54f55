/* Script names to package names, and the __END__/__DATA__ split; see
 * perl_source.h. */
#include "perl_source.h"
#include "alloc.h"

#include <stdio.h>
#include <string.h>

#define MAX_HEREDOCS 8
#define MAX_TERMINATOR 64

struct heredoc {
	char id[MAX_TERMINATOR];
	size_t len;
	int indented; /* <<~: the terminator may be indented */
};

static int is_alnum(unsigned char c);
static int is_ident_start(unsigned char c);
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

char *perl_source_package(const char *path, unsigned generation)
{
	static const char prefix[] = "PLXD::Script";
	size_t len = strlen(path);
	/* Worst case: every byte escaped (3 bytes) plus a "::" per byte. */
	char *out = xmalloc(sizeof prefix + len * 5 + 32);
	char *p = out;
	memcpy(p, prefix, sizeof prefix - 1);
	p += sizeof prefix - 1;
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
	/* Appended to the last component, not nested below it: deleting the
	 * previous generation's package must not take this one along. */
	if (generation > 1)
		p += sprintf(p, "_g%u", generation);
	*p = '\0';
	return out;
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
			while (k + idlen < len && (is_alnum((unsigned char)line[k + idlen]) ||
						line[k + idlen] == '_'))
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

size_t perl_source_split(const char *src, size_t len, size_t *data_at, int *has_data,
		int *in_pod)
{
	struct heredoc docs[MAX_HEREDOCS];
	size_t ndocs = 0, doc = 0;
	int pod = 0;
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
			if (linelen >= 4 && memcmp(line, "=cut", 4) == 0 &&
					(linelen == 4 || !is_alnum((unsigned char)line[4])))
				pod = 0;
		} else if (linelen >= 2 && line[0] == '=' && is_ident_start((unsigned char)line[1])) {
			/* A POD block starts here; its first line never ends it,
			 * not even "=cut" (perl's own rule). */
			pod = 1;
		} else if (is_data_marker(line, linelen)) {
			*has_data = 1;
			*data_at = next;
			*in_pod = 0;
			return pos;
		} else {
			ndocs = scan_heredocs(line, linelen, docs, MAX_HEREDOCS);
			doc = 0;
		}
		pos = next;
	}
	*in_pod = pod;
	return len;
}
