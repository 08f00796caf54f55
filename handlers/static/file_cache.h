/* The 200 responses of small files, kept per event thread and queued again
 * for as long as the file stays the same (device, inode, size, times) and
 * is served the same way (content type): the read, the buffer and the
 * headers are made once, not per request. Each thread has its own, so no
 * lock is taken; a thread's entries go when it ends. */
#ifndef PLXD_FILE_CACHE_H
#define PLXD_FILE_CACHE_H

#include <sys/stat.h>

struct MHD_Response;

struct file_cache_key {
	const struct stat *st; /* of the file, as opened for this request */
	const void *owner;     /* the handler state the response was made for */
	const char *type;      /* its Content-Type, as that state names it */
};

/* The response kept for k, or NULL. It stays the cache's: queue it with
 * plxd_respond_shared, never release it. */
struct MHD_Response *file_cache_get(const struct file_cache_key *k);

/* Keeps resp for k (taking over the caller's reference), dropping what
 * its slot held. */
void file_cache_put(const struct file_cache_key *k, struct MHD_Response *resp);

#endif
