/* Path resolution under the document root; see resolve.h. */
#include "resolve.h"
#include "alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int openat2_retry(int root_fd, const char *rel, struct open_how *how);
static int open_beneath(int root_fd, const char *rel, int follow_outside, int *via_link);
static int status_for(int err);
static int name_target(int fd, const struct stat *st, char *name, size_t len);
static int find_index(int root_fd, const char *rel, size_t rel_len, int follow_outside,
		struct resolved *out);

static int openat2_retry(int root_fd, const char *rel, struct open_how *how)
{
	/* openat2 says EAGAIN when a rename raced the resolution under
	 * RESOLVE_BENEATH; a retry sees a settled tree. */
	int fd;
	int tries = 0;
	do
		fd = (int)syscall(SYS_openat2, root_fd, rel, how, sizeof *how);
	while (fd < 0 && errno == EAGAIN && ++tries < 16);
	return fd;
}

int resolve_open_plain(int root_fd, const char *rel, int flags)
{
	struct open_how how = {
		.flags = (unsigned long long)flags | O_CLOEXEC,
		.resolve = RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH,
	};
	return openat2_retry(root_fd, rel, &how);
}

/* Opens rel, first refusing every symbolic link: most paths have none, and
 * then the name asked for is the file's own. Only when that fails on a
 * link (ELOOP) is it opened again following links, with *via_link set. */
static int open_beneath(int root_fd, const char *rel, int follow_outside, int *via_link)
{
	*via_link = 0;
	/* O_NONBLOCK: a FIFO in the root must not block the open. */
	int fd = resolve_open_plain(root_fd, rel, O_RDONLY | O_NOCTTY | O_NONBLOCK);
	if (fd >= 0 || errno != ELOOP)
		return fd;
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
		.resolve = RESOLVE_NO_MAGICLINKS | (follow_outside ? 0 : RESOLVE_BENEATH),
	};
	*via_link = 1;
	return openat2_retry(root_fd, rel, &how);
}

static int status_for(int err)
{
	switch (err) {
	case ENOENT:
	case ENOTDIR:
		return 404;
	case EXDEV: /* a link that leads outside the root */
	case ELOOP:
	case EACCES:
	case EPERM:
		return 403;
	case ENAMETOOLONG:
		return 414;
	default:
		return 500;
	}
}

/* The last component of the path fd is open on, from /proc. Returns 0, or
 * -1 when it cannot be told (no /proc): the caller must then refuse. */
static int name_target(int fd, const struct stat *st, char *name, size_t len)
{
	char proc[64], target[PATH_MAX + 16];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(proc, target, sizeof target - 1);
	if (n <= 0 || target[0] != '/')
		return -1;
	target[n] = '\0';
	/* An unlinked file reads "/x/y.pl (deleted)". */
	static const char deleted[] = " (deleted)";
	size_t dlen = sizeof deleted - 1;
	if (st->st_nlink == 0 && (size_t)n > dlen && strcmp(target + n - dlen, deleted) == 0)
		target[n - dlen] = '\0';
	const char *base = strrchr(target, '/') + 1;
	if (strlen(base) >= len)
		return -1;
	strcpy(name, base);
	return 0;
}

/* path named a folder with its slash (rel, rel_len: relative, ending in
 * '/', or "."): serve its index file when there is one. Returns 0 (out
 * unchanged when there is no index), or an HTTP status. */
static int find_index(int root_fd, const char *rel, size_t rel_len, int follow_outside,
		struct resolved *out)
{
	char *index_rel = strcmp(rel, ".") == 0
			? xstrdup(RESOLVE_INDEX)
			: xasprintf("%.*s%s", (int)rel_len, rel, RESOLVE_INDEX);
	int via_link;
	int fd = open_beneath(root_fd, index_rel, follow_outside, &via_link);
	free(index_rel);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : status_for(errno);
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd); /* a folder or FIFO named index.html: no index */
		return 0;
	}
	char real_name[NAME_MAX + 1] = "";
	if (via_link && name_target(fd, &st, real_name, sizeof real_name) < 0) {
		close(fd);
		return 403;
	}
	close(out->fd);
	out->fd = fd;
	out->st = st;
	out->index = RESOLVE_INDEX;
	out->name_len += strlen(RESOLVE_INDEX);
	strcpy(out->real_name, real_name);
	return 0;
}

int resolve_path(int root_fd, const char *path, int follow_outside, struct resolved *out)
{
	out->fd = -1;
	out->name_len = 0;
	out->index = NULL;
	out->real_name[0] = '\0';
	size_t len = strlen(path);
	char *rel = xmalloc(len + 2);
	int status = 0;
	if (len <= 1)
		strcpy(rel, ".");
	else
		memcpy(rel, path + 1, len);
	size_t rel_len = len > 1 ? len - 1 : 1;
	size_t full_len = rel_len;

	/* Try the whole path, then shorter prefixes while the kernel says a
	 * component is not a folder: "/a.pl/x/y" is a.pl with PATH_INFO /x/y. */
	for (;;) {
		int via_link;
		int fd = open_beneath(root_fd, rel, follow_outside, &via_link);
		if (fd >= 0) {
			if (fstat(fd, &out->st) < 0) {
				int err = errno;
				status = 500;
				close(fd);
				errno = err;
				break;
			}
			int shortened = rel_len < full_len;
			if ((shortened && !S_ISREG(out->st.st_mode))
					|| (!S_ISREG(out->st.st_mode)
							&& !S_ISDIR(out->st.st_mode))) {
				close(fd);
				status = shortened ? 404 : 403;
				break;
			}
			if (via_link
					&& name_target(fd, &out->st, out->real_name,
							   sizeof out->real_name)
							< 0) {
				close(fd);
				status = 403;
				break;
			}
			out->fd = fd;
			out->name_len = len <= 1 ? len : rel_len + 1;
			if (S_ISDIR(out->st.st_mode) && path[len - 1] == '/') {
				status = find_index(root_fd, rel, rel_len, follow_outside, out);
				if (status) {
					close(out->fd);
					out->fd = -1;
				}
			}
			break;
		}
		if (errno != ENOTDIR) {
			status = status_for(errno);
			break;
		}
		char *slash = memrchr(rel, '/', rel_len);
		if (!slash) {
			status = 404;
			break;
		}
		*slash = '\0';
		rel_len = (size_t)(slash - rel);
	}
	int err = errno;
	free(rel);
	errno = err;
	return status;
}
