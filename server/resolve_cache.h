/* Files found before, served again without resolve_path's three system
 * calls (open, stat, close), as lighttpd's stat cache does: each event
 * thread remembers the files it resolved, held open, until inotify reports
 * a change to one of them or to a folder on their way from the root; any
 * change empties the thread's whole cache. The thread's event loop watches
 * the inotify descriptor, as lighttpd's does, and takes its news at each
 * turn, before libmicrohttpd reads requests: a request that was sent after
 * the change sees it, unless the change and the request both came during
 * the turn before (while the thread was busy), when that one request may
 * still find the file as it was; the next turn sees the change. A thread
 * without a loop reads the descriptor at each lookup. Each thread has its
 * own: no lock.
 *
 * Only regular files reached by their own name are kept: no symbolic link
 * on the way, no PATH_INFO, no index. What inotify does not report (a
 * write through mmap, a mount over a file or folder of the root, a change
 * another machine makes on a network file system) is seen once the entry
 * is RESOLVE_CACHE_TTL_MS old, when it is found again; [server] stat_cache
 * = no is for roots where that is too late. */
#ifndef PLXD_RESOLVE_CACHE_H
#define PLXD_RESOLVE_CACHE_H

#include "resolve.h"

/* Files each event thread holds open at most. */
#define RESOLVE_CACHE_FILES 64
/* inotify numbers a thread's watches in order; once a put has made one
 * numbered past this, the thread empties its cache and starts a new inotify
 * instance, which drops the old watches (the kernel's max_user_watches is
 * shared by every process of the user). */
#define RESOLVE_CACHE_WATCHES 1024

/* How long an entry is kept at most: the bound on what inotify misses,
 * as lighttpd's "simple" stat cache and nginx's open_file_cache_valid
 * bound it, and on how long a removed file's descriptor is held. */
#define RESOLVE_CACHE_TTL_MS 1000

struct resolve_entry;

/* The entry for path, resolved under the site of this generation (a reload
 * installs another, whose lookups miss), or NULL. A hit fills *out as
 * resolve_path would, with out->fd the entry's: the caller releases the
 * entry with resolve_cache_release and never closes that descriptor. */
struct resolve_entry *resolve_cache_get(unsigned generation, const char *path,
		struct resolved *out);

/* Keeps res, which resolve_path just gave for path under root_fd, when it
 * can be kept. Returns the entry, which now owns res->fd and which the
 * caller releases as after a hit; or NULL, and res stays the caller's. */
struct resolve_entry *resolve_cache_put(unsigned generation, int root_fd, const char *path,
		const struct resolved *res);

/* Called by each event thread every tick: takes inotify's news and lets
 * go of entries past RESOLVE_CACHE_TTL_MS, so that a removed or replaced
 * file's descriptor (and its disk space) is not held while no request
 * comes, nor after a reload that turned the cache off. */
void resolve_cache_tick(void);

/* Takes the calling thread's inotify descriptor out of its event loop,
 * before the loop is waited idle at a stop; lookups read it from then on. */
void resolve_cache_unwatch(void);

/* Ends a request's use of e; its descriptor is closed once the cache has
 * let go of it too. */
void resolve_cache_release(struct resolve_entry *e);

#endif
