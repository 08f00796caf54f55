/* The per-thread cache of resolved files: see resolve_cache.h. A
 * direct-mapped table indexed by a hash of the path; a collision replaces
 * the entry. Entries are counted references: the table holds one while the
 * entry is in it, and each request served from it one more, so emptying the
 * table never closes a descriptor a request still reads. */
#include "resolve_cache.h"
#include "alloc.h"
#include "clock.h"
#include "loop.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#define SLOTS RESOLVE_CACHE_FILES

/* Whatever would change what a path resolves to or what its file holds.
 * A folder's watch also reports these for the entries in it. */
#define FOLDER_EVENTS                                                                  \
	(IN_ATTRIB | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MODIFY | IN_MOVE_SELF \
			| IN_MOVED_FROM | IN_MOVED_TO)
/* The file's own watch, for a write through another hard link. */
#define FILE_EVENTS (IN_ATTRIB | IN_MODIFY | IN_DELETE_SELF | IN_MOVE_SELF)

struct resolve_entry {
	char *path;
	uint64_t kept_ms; /* when it was found: it goes RESOLVE_CACHE_TTL_MS later */
	unsigned generation;
	int fd;
	struct stat st;
	unsigned refs;
};

struct cache {
	int inotify_fd; /* -1: inotify could not be had; nothing is kept */
	/* inotify_fd in the thread's event loop, which takes its news before
	 * it reads requests: a lookup then needs no read of its own. */
	struct loop *loop;
	struct loop_watch news;
	struct resolve_entry *slot[SLOTS];
};

static _Thread_local struct cache *cache;
static pthread_key_t cache_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void entry_unref(struct resolve_entry *e)
{
	if (--e->refs > 0)
		return;
	close(e->fd);
	free(e->path);
	free(e);
}

static void empty(struct cache *c)
{
	for (size_t i = 0; i < SLOTS; i++)
		if (c->slot[i]) {
			entry_unref(c->slot[i]);
			c->slot[i] = NULL;
		}
}

static void unwatch_news(struct cache *c)
{
	if (c->loop)
		loop_watch_del(c->loop, &c->news);
	c->loop = NULL;
}

static void close_inotify(struct cache *c)
{
	unwatch_news(c);
	if (c->inotify_fd >= 0)
		close(c->inotify_fd);
	c->inotify_fd = -1;
}

static void cache_free(void *arg)
{
	struct cache *c = arg;
	empty(c);
	close_inotify(c);
	free(c);
}

static void key_create(void)
{
	pthread_key_create(&cache_key, cache_free);
}

static void take_events(struct cache *c);

static void on_news(struct loop_watch *w, unsigned events)
{
	(void)events;
	take_events((struct cache *)(void *)((char *)w - offsetof(struct cache, news)));
}

/* A new inotify instance, in the thread's loop when it runs one. */
static void open_inotify(struct cache *c)
{
	c->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	struct loop *l = loop_current();
	loop_watch_init(&c->news);
	if (c->inotify_fd >= 0 && l
			&& loop_watch_add(l, &c->news, c->inotify_fd, LOOP_IN, on_news) == 0)
		c->loop = l;
}

static struct cache *cache_of_thread(void)
{
	if (cache)
		return cache;
	pthread_once(&key_once, key_create);
	struct cache *c = xcalloc(1, sizeof *c);
	open_inotify(c);
	if (pthread_setspecific(cache_key, c) != 0) {
		cache_free(c);
		return NULL;
	}
	cache = c;
	return c;
}

/* Any event at all empties the cache: changes to a document root are rare,
 * and telling which entries an event concerns is not worth its risk. */
static void take_events(struct cache *c)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	int changed = 0;
	ssize_t n;
	while ((n = read(c->inotify_fd, buf, sizeof buf)) > 0)
		changed = 1;
	if (n < 0 && errno != EAGAIN && errno != EINTR) {
		close_inotify(c); /* it cannot be trusted to report any more */
		changed = 1;
	}
	if (changed)
		empty(c);
}

static size_t slot_of(const char *path)
{
	size_t h = 5381;
	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		h = h * 33 + *p;
	return h % SLOTS;
}

struct resolve_entry *resolve_cache_get(unsigned generation, const char *path, struct resolved *out)
{
	struct cache *c = cache;
	if (!c || c->inotify_fd < 0)
		return NULL;
	if (!c->loop)
		take_events(c);
	struct resolve_entry **slot = &c->slot[slot_of(path)];
	struct resolve_entry *e = *slot;
	if (e && (e->generation != generation || clock_ms() - e->kept_ms >= RESOLVE_CACHE_TTL_MS)) {
		entry_unref(e); /* a site no longer served, or found too long ago */
		*slot = e = NULL;
	}
	if (!e || strcmp(e->path, path) != 0)
		return NULL;
	out->fd = e->fd;
	out->st = e->st;
	out->name_len = strlen(path);
	out->index = NULL;
	out->real_name[0] = '\0';
	e->refs++;
	return e;
}

/* Watches what fd is open on. Returns the watch's number, or -1. */
static int watch(struct cache *c, int fd, uint32_t events)
{
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	return inotify_add_watch(c->inotify_fd, proc, events);
}

/* Watches every folder from the root down to the one that holds rel's
 * file. Returns the highest watch number, or -1. */
static int watch_folders(struct cache *c, int root_fd, char *rel)
{
	int top = watch(c, root_fd, FOLDER_EVENTS);
	for (char *slash = strchr(rel, '/'); top >= 0 && slash; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		int fd = resolve_open_plain(root_fd, rel, O_PATH | O_DIRECTORY);
		*slash = '/';
		int wd = fd < 0 ? -1 : watch(c, fd, FOLDER_EVENTS);
		if (fd >= 0)
			close(fd);
		top = wd > top || wd < 0 ? wd : top;
	}
	return top;
}

static int same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_mode == b->st_mode
			&& a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec
			&& a->st_mtim.tv_nsec == b->st_mtim.tv_nsec
			&& a->st_ctim.tv_sec == b->st_ctim.tv_sec
			&& a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Whether rel still names the file res is open on, now that the watches
 * are set: a change between resolve_path and the watches goes unreported,
 * so it is looked for once here. */
static int still_there(int root_fd, const char *rel, const struct resolved *res)
{
	int fd = resolve_open_plain(root_fd, rel, O_RDONLY | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return 0;
	struct stat st;
	int same = fstat(fd, &st) == 0 && same_file(&st, &res->st);
	close(fd);
	return same;
}

struct resolve_entry *resolve_cache_put(unsigned generation, int root_fd, const char *path,
		const struct resolved *res)
{
	size_t len = strlen(path);
	if (!S_ISREG(res->st.st_mode) || res->index || res->real_name[0] || res->name_len != len
			|| len < 2)
		return NULL;
	struct cache *c = cache_of_thread();
	if (!c || c->inotify_fd < 0)
		return NULL;
	char *rel = xstrdup(path + 1);
	struct resolve_entry *e = NULL;
	int top = watch_folders(c, root_fd, rel);
	int file_wd = top < 0 ? -1 : watch(c, res->fd, FILE_EVENTS);
	if (file_wd < 0 || !still_there(root_fd, rel, res))
		goto out;
	e = xmalloc(sizeof *e);
	*e = (struct resolve_entry){
		.path = xstrdup(path),
		.kept_ms = clock_ms(),
		.generation = generation,
		.fd = res->fd,
		.st = res->st,
		.refs = 2, /* the table's and the caller's */
	};
	struct resolve_entry **slot = &c->slot[slot_of(path)];
	if (*slot)
		entry_unref(*slot);
	*slot = e;
out:
	/* Past RESOLVE_CACHE_WATCHES: a new instance for the next put. The entries
	 * made so far go, as their watches do. */
	if ((top > RESOLVE_CACHE_WATCHES || file_wd > RESOLVE_CACHE_WATCHES)
			&& c->inotify_fd >= 0) {
		empty(c);
		close_inotify(c);
		open_inotify(c);
	}
	free(rel);
	return e;
}

void resolve_cache_tick(void)
{
	struct cache *c = cache;
	if (!c)
		return;
	if (c->inotify_fd >= 0 && !c->loop)
		take_events(c);
	uint64_t now = clock_ms();
	for (size_t i = 0; i < SLOTS; i++) {
		struct resolve_entry *e = c->slot[i];
		if (e && now - e->kept_ms >= RESOLVE_CACHE_TTL_MS) {
			entry_unref(e);
			c->slot[i] = NULL;
		}
	}
}

void resolve_cache_unwatch(void)
{
	if (cache)
		unwatch_news(cache);
}

void resolve_cache_release(struct resolve_entry *e)
{
	if (e)
		entry_unref(e);
}
