/* Finding the file a normalised path names under the document root, without
 * ever leaving it: openat2(RESOLVE_BENEATH) makes the kernel refuse any
 * step, symbolic links included, that would end outside the root. */
#ifndef PLXD_RESOLVE_H
#define PLXD_RESOLVE_H

#include <stddef.h>
#include <sys/stat.h>

struct resolved {
	int fd;          /* open read-only on the file or folder; -1 on error */
	struct stat st;
	size_t name_len; /* bytes of path that name it; the rest is PATH_INFO */
};

/* path is normalised and starts with '/'. follow_outside allows symbolic
 * links that lead outside the root. Returns 0, or an HTTP status (403, 404,
 * 414, 500) with out->fd = -1. */
int resolve_path(int root_fd, const char *path, int follow_outside, struct resolved *out);

#endif
