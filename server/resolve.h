/* Finding the file a normalised path names under the document root, without
 * ever leaving it: openat2(RESOLVE_BENEATH) makes the kernel refuse any
 * step, symbolic links included, that would end outside the root. */
#ifndef PLXD_RESOLVE_H
#define PLXD_RESOLVE_H

#include <limits.h>
#include <stddef.h>
#include <sys/stat.h>

/* What a path ending in '/' is served by, when its folder has one. */
#define RESOLVE_INDEX "index.html"

struct resolved {
	int fd; /* open read-only on the file or folder; -1 on error */
	struct stat st;
	/* Bytes of path that name the file; the rest is PATH_INFO. With index
	 * set, they count path followed by index. */
	size_t name_len;
	/* RESOLVE_INDEX when path named a folder, with its trailing slash, that
	 * holds one: fd is that file. NULL otherwise. */
	const char *index;
	/* The file's own name when a symbolic link led to it (x.txt -> x.pl
	 * gives "x.pl"), so that the caller can route by it too; "" when no
	 * link was followed. */
	char real_name[NAME_MAX + 1];
};

/* Opens rel (relative to root_fd) with flags, O_CLOEXEC added, refusing
 * every symbolic link and any step out of the root. Returns the descriptor,
 * or -1 with errno. */
int resolve_open_plain(int root_fd, const char *rel, int flags);

/* path is normalised and starts with '/'. follow_outside allows symbolic
 * links that lead outside the root. Returns 0, or an HTTP status with
 * out->fd = -1: 404 (nothing there), 403 (a link leading outside, a loop,
 * no permission, not a file or folder, or a link whose target cannot be
 * named), 414 (a name too long), 500 (with errno saying why). */
int resolve_path(int root_fd, const char *path, int follow_outside, struct resolved *out);

#endif
