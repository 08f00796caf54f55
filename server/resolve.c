/* Path resolution under the document root; see resolve.h. */
#include "resolve.h"
#include "alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int open_beneath(int root_fd, const char *rel, int follow_outside)
{
	/* O_NONBLOCK: a FIFO in the root must not block the open. */
	int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
	if (follow_outside)
		return openat(root_fd, rel, flags);
	struct open_how how = {
		.flags = (unsigned long long)flags,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	return (int)syscall(SYS_openat2, root_fd, rel, &how, sizeof how);
}

static int status_for(int err)
{
	switch (err) {
	case ENOENT:
	case ENOTDIR:
		return 404;
	case EXDEV:  /* a link that leads outside the root */
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

int resolve_path(int root_fd, const char *path, int follow_outside, struct resolved *out)
{
	out->fd = -1;
	out->name_len = 0;
	size_t len = strlen(path);
	char *rel = xmalloc(len + 2);
	int status = 0;
	if (len <= 1)
		strcpy(rel, ".");
	else
		memcpy(rel, path + 1, len);
	size_t rel_len = len > 1 ? len - 1 : 1;

	/* Try the whole path, then shorter prefixes while the kernel says a
	 * component is not a folder: "/a.pl/x/y" is a.pl with PATH_INFO /x/y. */
	for (;;) {
		int fd = open_beneath(root_fd, rel, follow_outside);
		if (fd >= 0) {
			if (fstat(fd, &out->st) < 0) {
				status = 500;
				close(fd);
				break;
			}
			int shortened = rel_len < (len > 1 ? len - 1 : 1);
			if (shortened && !S_ISREG(out->st.st_mode)) {
				close(fd);
				status = 404;
				break;
			}
			if (!S_ISREG(out->st.st_mode) && !S_ISDIR(out->st.st_mode)) {
				close(fd);
				status = 403;
				break;
			}
			out->fd = fd;
			out->name_len = len <= 1 ? len : rel_len + 1;
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
	free(rel);
	return status;
}
