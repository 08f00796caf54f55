/* The small-file response cache: see file_cache.h. A direct-mapped table
 * per thread, indexed by inode: a collision replaces the entry, and a
 * response another connection is still sending lives on through the
 * reference libmicrohttpd holds. */
#include "file_cache.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdlib.h>

#define SLOTS 64

struct entry {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	const void *owner;
	const char *type;
	struct MHD_Response *resp; /* NULL: empty */
};

static _Thread_local struct entry *table;
static pthread_key_t table_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void table_free(void *arg)
{
	struct entry *t = arg;
	for (size_t i = 0; i < SLOTS; i++)
		if (t[i].resp)
			MHD_destroy_response(t[i].resp);
	free(t);
}

static void key_create(void)
{
	pthread_key_create(&table_key, table_free);
}

static struct entry *slot_of(const struct stat *st)
{
	return &table[((size_t)st->st_ino ^ (size_t)st->st_dev) % SLOTS];
}

static int same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

struct MHD_Response *file_cache_get(const struct file_cache_key *k)
{
	if (!table)
		return NULL;
	const struct entry *e = slot_of(k->st);
	if (!e->resp || e->ino != k->st->st_ino || e->dev != k->st->st_dev
			|| e->size != k->st->st_size || !same_time(&e->mtime, &k->st->st_mtim)
			|| !same_time(&e->ctime, &k->st->st_ctim) || e->owner != k->owner
			|| e->type != k->type)
		return NULL;
	return e->resp;
}

void file_cache_put(const struct file_cache_key *k, struct MHD_Response *resp)
{
	if (!table) {
		pthread_once(&key_once, key_create);
		table = calloc(SLOTS, sizeof *table);
		if (!table || pthread_setspecific(table_key, table) != 0) {
			free(table);
			table = NULL;
			MHD_destroy_response(resp);
			return;
		}
	}
	struct entry *e = slot_of(k->st);
	if (e->resp)
		MHD_destroy_response(e->resp);
	*e = (struct entry){
		.dev = k->st->st_dev,
		.ino = k->st->st_ino,
		.size = k->st->st_size,
		.mtime = k->st->st_mtim,
		.ctime = k->st->st_ctim,
		.owner = k->owner,
		.type = k->type,
		.resp = resp,
	};
}
