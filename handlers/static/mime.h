/* Content types by file extension, read once at start from a mime.types
 * file (Debian's media-types package installs /etc/mime.types). Pure C. */
#ifndef PLXD_MIME_H
#define PLXD_MIME_H

#include <stddef.h>

struct mime_table;

/* Reads file ("type ext ext ..." lines, '#' comments). When it cannot be
 * read, returns a small built-in table and says why in err (a warning, not
 * an error). Never NULL. */
struct mime_table *mime_load(const char *file, char *err, size_t errlen);

/* The type for a file name, matched on its extensions without regard to
 * case, longest first ("a.tar.gz": "tar.gz", then "gz"), or NULL. */
const char *mime_lookup(const struct mime_table *table, const char *name);

size_t mime_count(const struct mime_table *table);

void mime_free(struct mime_table *table);

#endif
