/* Allocation that cannot fail: plxd aborts on out-of-memory instead of
 * threading NULL checks through every call site (lighttpd's policy).
 * Running out of memory here means the machine is already lost; the Perl
 * workers, where scripts can allocate without bound, are separate processes. */
#ifndef PLXD_ALLOC_H
#define PLXD_ALLOC_H

#include <stddef.h>

void *xmalloc(size_t size);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *ptr, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* a followed by b, in a new string. */
char *xconcat(const char *a, const char *b);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
