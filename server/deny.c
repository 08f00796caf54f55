/* The deny list: name patterns matched one path segment at a time; see
 * deny.h. */
#include "deny.h"
#include "alloc.h"

#include <fnmatch.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct deny_pattern {
	char *glob;
	int exception; /* written "!glob": never deny what it matches */
	/* A glob of literals with at most one '*' (every default one) is
	 * matched as a prefix and a suffix, without fnmatch: it runs on every
	 * segment of every request's path. */
	int simple;
	size_t prefix_len, suffix_len; /* around the '*', or the whole glob */
	int star;
};

struct deny_list {
	struct deny_pattern *patterns;
	size_t n;
};

static const char *word_problem(const char *word, size_t len);
static void classify(struct deny_pattern *d);
static int matches(const struct deny_pattern *d, const char *name, size_t len);

#define BLANKS " \t"

static const char *word_problem(const char *word, size_t len)
{
	size_t bang = word[0] == '!';
	if (len == bang)
		return "'!' must be followed by a pattern";
	if (memchr(word, '/', len))
		return "a pattern matches one name, so it cannot hold '/'";
	return NULL;
}

const char *deny_check(const char *text)
{
	for (const char *p = text + strspn(text, BLANKS); *p; p += strspn(p, BLANKS)) {
		size_t len = strcspn(p, BLANKS);
		const char *why = word_problem(p, len);
		if (why)
			return why;
		p += len;
	}
	return NULL;
}

struct deny_list *deny_create(const char *text)
{
	struct deny_list *list = xcalloc(1, sizeof *list);
	for (const char *p = text ? text + strspn(text, BLANKS) : ""; *p; p += strspn(p, BLANKS)) {
		size_t len = strcspn(p, BLANKS);
		if (!word_problem(p, len)) {
			int exception = p[0] == '!';
			list->patterns = xrealloc(list->patterns,
					(list->n + 1) * sizeof *list->patterns);
			struct deny_pattern *d = &list->patterns[list->n++];
			*d = (struct deny_pattern){
				.glob = xstrndup(p + exception, len - (size_t)exception),
				.exception = exception,
			};
			classify(d);
		}
		p += len;
	}
	return list;
}

void deny_destroy(struct deny_list *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->n; i++)
		free(list->patterns[i].glob);
	free(list->patterns);
	free(list);
}

static void classify(struct deny_pattern *d)
{
	const char *g = d->glob;
	if (strpbrk(g, "?[\\"))
		return;
	const char *star = strchr(g, '*');
	if (star && strchr(star + 1, '*'))
		return;
	d->simple = 1;
	d->star = star != NULL;
	d->prefix_len = star ? (size_t)(star - g) : strlen(g);
	d->suffix_len = star ? strlen(star + 1) : 0;
}

/* Without regard to case, as extensions are routed: x.pl.BAK is a backup
 * copy too. A leading dot needs no explicit match (no FNM_PERIOD), so
 * "*.swp" covers ".x.pl.swp". name is NUL-terminated at len. */
static int matches(const struct deny_pattern *d, const char *name, size_t len)
{
	if (!d->simple)
		return fnmatch(d->glob, name, FNM_CASEFOLD) == 0;
	if (!d->star)
		return len == d->prefix_len && strncasecmp(name, d->glob, len) == 0;
	return len >= d->prefix_len + d->suffix_len
			&& strncasecmp(name, d->glob, d->prefix_len) == 0
			&& strncasecmp(name + len - d->suffix_len, d->glob + d->prefix_len + 1,
					   d->suffix_len)
			== 0;
}

int deny_name(const struct deny_list *list, const char *name, size_t len)
{
	if (!list || !list->n || len == 0)
		return 0;
	char small[NAME_MAX + 1];
	char *copy = len < sizeof small ? small : xmalloc(len + 1);
	memcpy(copy, name, len);
	copy[len] = '\0';
	int denied = 0;
	for (size_t i = 0; i < list->n; i++) {
		if (!matches(&list->patterns[i], copy, len))
			continue;
		if (list->patterns[i].exception) {
			denied = 0;
			break;
		}
		denied = 1;
	}
	if (copy != small)
		free(copy);
	return denied;
}

int deny_path(const struct deny_list *list, const char *path, size_t len)
{
	size_t i = 0;
	while (i < len) {
		const char *slash = memchr(path + i, '/', len - i);
		size_t end = slash ? (size_t)(slash - path) : len;
		if (deny_name(list, path + i, end - i))
			return 1;
		i = end + 1;
	}
	return 0;
}
