/* The byte store: see spool.h. */
#include "spool.h"
#include "alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void spool_init(struct spool *s, const char *dir, size_t mem_max)
{
	*s = (struct spool){ .fd = -1, .mem_max = mem_max, .dir = dir };
}

/* Moves what memory holds into a new temp file. */
static int to_file(struct spool *s)
{
	int fd = open(s->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	size_t done = 0;
	while (done < s->len) {
		ssize_t n = write(fd, s->mem + done, (size_t)s->len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int saved = n < 0 ? errno : ENOSPC;
			close(fd);
			errno = saved;
			return -1;
		}
		done += (size_t)n;
	}
	free(s->mem);
	s->mem = NULL;
	s->cap = 0;
	s->fd = fd;
	return 0;
}

int spool_append(struct spool *s, const void *data, size_t len)
{
	if (s->fd < 0 && s->len + len > s->mem_max && to_file(s) < 0)
		return -1;
	if (s->fd >= 0) {
		const char *p = data;
		size_t done = 0;
		while (done < len) {
			ssize_t n = pwrite(s->fd, p + done, len - done, (off_t)(s->len + done));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				if (n == 0)
					errno = ENOSPC;
				return -1;
			}
			done += (size_t)n;
		}
	} else {
		if (s->len + len > s->cap) {
			size_t cap = s->cap ? s->cap : 4096;
			while (cap < s->len + len)
				cap *= 2;
			s->mem = xrealloc(s->mem, cap);
			s->cap = cap;
		}
		memcpy(s->mem + s->len, data, len);
	}
	s->len += len;
	return 0;
}

ssize_t spool_read(const struct spool *s, uint64_t offset, void *buf, size_t len)
{
	if (offset >= s->len)
		return 0;
	if (len > s->len - offset)
		len = (size_t)(s->len - offset);
	if (s->fd < 0) {
		memcpy(buf, s->mem + offset, len);
		return (ssize_t)len;
	}
	ssize_t n;
	while ((n = pread(s->fd, buf, len, (off_t)offset)) < 0 && errno == EINTR)
		;
	if (n == 0) {
		errno = EIO; /* the file is shorter than what was written to it */
		return -1;
	}
	return n;
}

char *spool_take(struct spool *s, size_t *len)
{
	*len = 0;
	if (s->fd >= 0 || s->len == 0)
		return NULL;
	char *mem = s->mem;
	*len = (size_t)s->len;
	s->mem = NULL;
	s->cap = 0;
	s->len = 0;
	return mem;
}

void spool_fini(struct spool *s)
{
	if (s->fd >= 0)
		close(s->fd);
	free(s->mem);
	spool_init(s, s->dir, s->mem_max);
}
