/* The extension to content type table: a sorted array searched with
 * bsearch, built once and then only read (by every request thread). */
#include "mime.h"
#include "alloc.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct mime_entry {
	char *ext;        /* lower case, without its dot */
	const char *type; /* into types */
	size_t order;     /* position in the file: the first line naming an
			     extension wins, as with other readers of mime.types */
};

struct mime_table {
	struct mime_entry *entries;
	size_t count;
	char **types; /* owned type strings */
	size_t ntypes;
};

static void add_type(struct mime_table *t, const char *type, const char *const *exts, size_t n);
static int compare_entries(const void *a, const void *b);
static int compare_order(const void *a, const void *b);
static void load_builtin(struct mime_table *t);
static int load_file(struct mime_table *t, const char *file);

/* Used when the file cannot be read: the types a small site needs. */
static const struct {
	const char *type;
	const char *exts[4];
} builtin[] = {
	{ "text/html", { "html", "htm" } },
	{ "text/css", { "css" } },
	{ "text/javascript", { "js", "mjs" } },
	{ "text/plain", { "txt", "text" } },
	{ "text/csv", { "csv" } },
	{ "application/json", { "json" } },
	{ "application/xml", { "xml" } },
	{ "application/pdf", { "pdf" } },
	{ "application/wasm", { "wasm" } },
	{ "application/zip", { "zip" } },
	{ "application/gzip", { "gz" } },
	{ "image/png", { "png" } },
	{ "image/jpeg", { "jpg", "jpeg" } },
	{ "image/gif", { "gif" } },
	{ "image/webp", { "webp" } },
	{ "image/svg+xml", { "svg" } },
	{ "image/vnd.microsoft.icon", { "ico" } },
	{ "font/woff", { "woff" } },
	{ "font/woff2", { "woff2" } },
	{ "audio/mpeg", { "mp3" } },
	{ "video/mp4", { "mp4" } },
	{ "video/webm", { "webm" } },
};

static void add_type(struct mime_table *t, const char *type, const char *const *exts, size_t n)
{
	t->types = xrealloc(t->types, (t->ntypes + 1) * sizeof *t->types);
	char *owned = t->types[t->ntypes++] = xstrdup(type);
	t->entries = xrealloc(t->entries, (t->count + n) * sizeof *t->entries);
	for (size_t i = 0; i < n; i++) {
		char *ext = xstrdup(exts[i]);
		for (char *s = ext; *s; s++)
			*s = (char)tolower((unsigned char)*s);
		t->entries[t->count] =
				(struct mime_entry){ .ext = ext, .type = owned, .order = t->count };
		t->count++;
	}
}

static int compare_entries(const void *a, const void *b)
{
	return strcmp(((const struct mime_entry *)a)->ext, ((const struct mime_entry *)b)->ext);
}

static int compare_order(const void *a, const void *b)
{
	const struct mime_entry *x = a, *y = b;
	int c = strcmp(x->ext, y->ext);
	return c ? c : (x->order > y->order) - (x->order < y->order);
}

static void load_builtin(struct mime_table *t)
{
	for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++) {
		size_t n = 0;
		while (n < 4 && builtin[i].exts[n])
			n++;
		add_type(t, builtin[i].type, builtin[i].exts, n);
	}
}

/* Returns 0, or -errno. */
static int load_file(struct mime_table *t, const char *file)
{
	FILE *f = fopen(file, "re");
	if (!f)
		return -errno;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) >= 0) {
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *save = NULL;
		const char *type = strtok_r(line, " \t\r\n", &save);
		if (!type || !strchr(type, '/'))
			continue;
		const char *exts[64];
		size_t n = 0;
		const char *ext;
		while (n < 64 && (ext = strtok_r(NULL, " \t\r\n", &save)))
			exts[n++] = ext;
		if (n)
			add_type(t, type, exts, n);
	}
	int failed = ferror(f) ? (errno ? errno : EIO) : 0;
	free(line);
	fclose(f);
	return -failed;
}

struct mime_table *mime_load(const char *file, char *err, size_t errlen)
{
	struct mime_table *t = xcalloc(1, sizeof *t);
	err[0] = '\0';
	int rc = file && file[0] ? load_file(t, file) : -ENOENT;
	if (rc < 0) {
		if (file && file[0])
			snprintf(err, errlen, "cannot read %s (%s): using %zu built-in types", file,
					strerror(-rc), sizeof builtin / sizeof builtin[0]);
		mime_free(t);
		t = xcalloc(1, sizeof *t);
		load_builtin(t);
	}
	/* Sorted by extension, then file order; later duplicates dropped. */
	qsort(t->entries, t->count, sizeof *t->entries, compare_order);
	size_t kept = 0;
	for (size_t i = 0; i < t->count; i++) {
		if (kept && strcmp(t->entries[kept - 1].ext, t->entries[i].ext) == 0) {
			free(t->entries[i].ext);
			continue;
		}
		t->entries[kept++] = t->entries[i];
	}
	t->count = kept;
	return t;
}

const char *mime_lookup(const struct mime_table *t, const char *name)
{
	/* Every suffix after a dot, longest first; a leading dot (".profile")
	 * starts no extension. */
	for (const char *dot = strchr(name + (name[0] == '.'), '.'); dot;
			dot = strchr(dot + 1, '.')) {
		char ext[64];
		size_t len = strlen(dot + 1);
		if (len == 0 || len >= sizeof ext)
			continue;
		for (size_t i = 0; i <= len; i++)
			ext[i] = (char)tolower((unsigned char)dot[1 + i]);
		struct mime_entry key = { .ext = ext };
		const struct mime_entry *e =
				bsearch(&key, t->entries, t->count, sizeof *e, compare_entries);
		if (e)
			return e->type;
	}
	return NULL;
}

size_t mime_count(const struct mime_table *t)
{
	return t->count;
}

void mime_free(struct mime_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->count; i++)
		free(t->entries[i].ext);
	free(t->entries);
	for (size_t i = 0; i < t->ntypes; i++)
		free(t->types[i]);
	free(t->types);
	free(t);
}
