/* Request targets to safe paths: plxd decodes and normalises the raw target
 * itself instead of trusting libmicrohttpd's decoded URL, which cuts a path
 * at "%00" ("/x.pl%00.txt" would arrive as "/x.pl"). Pure C. */
#ifndef PLXD_PATH_H
#define PLXD_PATH_H

#include <stddef.h>

/* Splits target into a decoded, normalised path and the raw query string.
 * path gets at most strlen(target) + 2 bytes. query points into target
 * (after '?'), or to "" when there is none. Absolute-form targets
 * ("http://host/x") lose their scheme and authority.
 * Returns 0, or 400 with *why set: NUL or an encoded slash, a bad escape,
 * ".." above the root, or a target that is not a path. */
int path_from_target(const char *target, char *path, size_t pathlen, const char **query,
		const char **why);

#endif
