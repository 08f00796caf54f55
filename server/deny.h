/* Names plxd never serves, whatever handler their extension maps to:
 * hidden files and folders, editor and backup leftovers. A list of
 * fnmatch(3) patterns, each matched against one name (one segment of a
 * path), without regard to case; a pattern starting with '!' is an
 * exception ("!.well-known"): a name it matches is never denied. Pure C:
 * no libmicrohttpd. */
#ifndef PLXD_DENY_H
#define PLXD_DENY_H

#include <stddef.h>

struct deny_list;

/* A conf_check_fn for the list as written in the configuration (patterns
 * separated by blanks): NULL when fine, or what is wrong. */
const char *deny_check(const char *text);

/* The list from its text (checked with deny_check; bad words are
 * skipped). Never NULL; an empty text denies nothing. */
struct deny_list *deny_create(const char *text);
void deny_destroy(struct deny_list *list);

/* Whether list denies the name of len bytes (a file or folder name, no
 * '/'). NULL denies nothing. */
int deny_name(const struct deny_list *list, const char *name, size_t len);

/* Whether list denies any segment of path (len bytes, segments separated
 * by '/'). */
int deny_path(const struct deny_list *list, const char *path, size_t len);

#endif
