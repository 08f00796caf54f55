/* A byte store that starts in memory and moves to an unnamed temp file
 * (O_TMPFILE) when it grows past mem_max: a request body waiting for its
 * handler, a script's output waiting for its response. Pure C. */
#ifndef PLXD_SPOOL_H
#define PLXD_SPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct spool {
	char *mem; /* the bytes while they fit in memory */
	size_t cap;
	int fd;       /* the temp file once they outgrew memory; -1: none */
	uint64_t len; /* bytes kept */
	size_t mem_max;
	const char *dir; /* for the temp file; not owned */
};

void spool_init(struct spool *s, const char *dir, size_t mem_max);

/* Appends len bytes. Returns 0, or -1 with errno when the temp file cannot
 * be created or written (the spool is unchanged then). */
int spool_append(struct spool *s, const void *data, size_t len);

/* Copies up to len bytes from offset. Returns bytes copied, 0 at the end,
 * or -1 with errno. */
ssize_t spool_read(const struct spool *s, uint64_t offset, void *buf, size_t len);

/* Takes the memory of a spool that never went to a file (the caller frees
 * it; NULL when empty or on file) and empties the spool. */
char *spool_take(struct spool *s, size_t *len);

/* Frees everything; the spool is empty and can be used again. */
void spool_fini(struct spool *s);

#endif
