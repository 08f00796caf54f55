/* resolve_cache: a file found again is a hit, and every change that could
 * alter what a path names or what its file holds is a miss at the next
 * lookup. */
#include "resolve_cache.h"
#include "clock.h"
#include "tap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static char top[64];
static int root_fd;
static unsigned generation = 1;

static void path_of(char *out, size_t len, const char *rel)
{
	snprintf(out, len, "%s/%s", top, rel);
}

static void make(const char *rel, const char *content)
{
	char p[256];
	path_of(p, sizeof p, rel);
	if (!content) {
		mkdir(p, 0755);
		return;
	}
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, content, strlen(content)) < 0)
		abort();
	close(fd);
}

/* Resolves path as a request does: the cache first, then resolve_path and
 * a put. Returns the entry (released by the caller) or NULL; *status is
 * resolve_path's. */
static struct resolve_entry *lookup(const char *path, int *hit, int *status)
{
	struct resolved res;
	struct resolve_entry *e = resolve_cache_get(generation, path, &res);
	*hit = e != NULL;
	*status = 0;
	if (e)
		return e;
	*status = resolve_path(root_fd, path, 0, &res);
	if (*status)
		return NULL;
	e = resolve_cache_put(generation, root_fd, path, &res);
	if (!e)
		close(res.fd);
	return e;
}

/* Whether path is a hit now (and was kept after its miss). */
static int is_hit(const char *path)
{
	int hit, status;
	resolve_cache_release(lookup(path, &hit, &status));
	return hit;
}

/* Whether path is kept now, looking only (a miss keeps nothing). */
static int in_cache(const char *path)
{
	struct resolved res;
	struct resolve_entry *e = resolve_cache_get(generation, path, &res);
	resolve_cache_release(e);
	return e != NULL;
}

/* Looks path up once so that it is kept, and says whether it was. */
static int kept(const char *path)
{
	int hit, status;
	struct resolve_entry *e = lookup(path, &hit, &status);
	resolve_cache_release(e);
	return e != NULL;
}

static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		abort();
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

int main(void)
{
	strcpy(top, "/tmp/plxd-test-rcache-XXXXXX");
	if (!mkdtemp(top))
		abort();
	make("root", NULL);
	make("root/a.html", "a\n");
	make("root/dir", NULL);
	make("root/dir/b.html", "b\n");
	make("root/dir/index.html", "i\n");
	make("root/c.pl", "print 1;\n");
	make("elsewhere", NULL);
	make("secret.txt", "secret\n");
	char p[256], q[256];
	path_of(p, sizeof p, "root");
	root_fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);

	ok(kept("/a.html") && is_hit("/a.html"), "a file found again is a hit");
	{
		struct resolved res;
		struct resolve_entry *e = resolve_cache_get(generation, "/a.html", &res);
		char buf[8] = "";
		ok(e && res.fd >= 0 && pread(res.fd, buf, sizeof buf - 1, 0) == 2
						&& strcmp(buf, "a\n") == 0
						&& S_ISREG(res.st.st_mode) && res.st.st_size == 2
						&& res.name_len == 7 && !res.index
						&& res.real_name[0] == '\0',
				"a hit gives the open file, its stat and its name as resolve_path does");
		resolve_cache_release(e);
	}
	ok(kept("/dir/b.html") && is_hit("/dir/b.html"), "so is a file in a folder");
	ok(!is_hit("/A.html") && !is_hit("/a.htm"), "another name is a miss");

	/* What is not kept. */
	ok(!kept("/c.pl/x/y"), "a path with PATH_INFO is not kept");
	ok(!kept("/dir/"), "a folder's index is not kept");
	path_of(p, sizeof p, "root/link.html");
	symlink("a.html", p);
	ok(!kept("/link.html"), "a file reached through a symbolic link is not kept");
	ok(!kept("/dir"), "a folder is not kept");

	/* Every change is seen by the next lookup. */
	kept("/a.html");
	make("root/a.html", "A\n"); /* same size, rewritten in place */
	ok(!is_hit("/a.html"), "a file rewritten in place: miss");
	ok(is_hit("/a.html"), "... and kept again");
	path_of(p, sizeof p, "root/a.html");
	chmod(p, 0600);
	ok(!is_hit("/a.html"), "a change of mode: miss");
	kept("/a.html");
	make("root/new.html", "new\n");
	path_of(q, sizeof q, "root/new.html");
	rename(q, p);
	ok(!is_hit("/a.html"), "another file renamed over it: miss");
	kept("/a.html");
	unlink(p);
	symlink("../secret.txt", p);
	int hit, status;
	struct resolve_entry *e = lookup("/a.html", &hit, &status);
	ok(!hit && !e && status == 403,
			"replaced by a symbolic link out of the root: miss, and then 403");
	unlink(p);
	e = lookup("/a.html", &hit, &status);
	ok(!hit && !e && status == 404, "removed: miss, and then 404");
	make("root/a.html", "a\n");

	kept("/dir/b.html");
	path_of(p, sizeof p, "root/dir");
	path_of(q, sizeof q, "root/dir.old");
	rename(p, q);
	make("root/dir", NULL);
	make("root/dir/b.html", "B2\n");
	ok(!is_hit("/dir/b.html"), "its folder replaced by another: miss");
	kept("/dir/b.html");
	path_of(p, sizeof p, "root/dir");
	chmod(p, 0700);
	ok(!is_hit("/dir/b.html"), "a change of its folder's mode: miss");

	kept("/dir/b.html");
	path_of(p, sizeof p, "root/dir/b.html");
	path_of(q, sizeof q, "elsewhere/b-link");
	link(p, q); /* a second name, in a folder no watch covers */
	int fd = open(q, O_WRONLY | O_APPEND);
	ok(fd >= 0 && write(fd, "x", 1) == 1, "written through a hard link elsewhere");
	close(fd);
	ok(!is_hit("/dir/b.html"), "... miss");

	kept("/a.html");
	generation++;
	ok(!is_hit("/a.html"), "another site generation (a reload): miss");

	/* A request's descriptor outlives the cache's emptying. */
	{
		struct resolved res;
		kept("/a.html");
		e = resolve_cache_get(generation, "/a.html", &res);
		make("root/a.html", "a2\n");
		in_cache("/dir/b.html"); /* the lookup that empties the cache */
		ok(e && fcntl(res.fd, F_GETFD) >= 0,
				"an entry emptied from the cache keeps its descriptor while a "
				"request holds it");
		int held = res.fd;
		resolve_cache_release(e);
		errno = 0;
		ok(fcntl(held, F_GETFD) < 0 && errno == EBADF, "... and closes it at release");
	}

	/* What inotify does not report (a write through mmap) is seen once the
	 * entry is RESOLVE_CACHE_TTL_MS old; the tick lets go of a removed
	 * file's descriptor then, with no lookup. */
	{
		make("root/m.txt", "AAAA\n");
		in_cache("/a.html"); /* the creation's event, taken */
		kept("/m.txt");
		uint64_t kept_at = clock_ms();
		path_of(p, sizeof p, "root/m.txt");
		int mfd = open(p, O_RDWR);
		char *map = mfd < 0 ? MAP_FAILED
				    : mmap(NULL, 5, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
		ok(map != MAP_FAILED, "a file mapped for writing");
		if (map == MAP_FAILED)
			abort();
		memcpy(map, "BBBB", 4);
		msync(map, 5, MS_SYNC);
		munmap(map, 5);
		close(mfd);
		int young = in_cache("/m.txt");
		uint64_t age = clock_ms() - kept_at;
		ok(young || age >= RESOLVE_CACHE_TTL_MS,
				"written through mmap, which inotify does not report: still a hit "
				"while younger than %d ms (%llu ms)",
				RESOLVE_CACHE_TTL_MS, (unsigned long long)age);
		while (clock_ms() - kept_at < RESOLVE_CACHE_TTL_MS)
			usleep(10 * 1000);
		struct resolved res;
		e = resolve_cache_get(generation, "/m.txt", &res);
		ok(!e, "... a miss once %d ms old", RESOLVE_CACHE_TTL_MS);
		resolve_cache_release(e);
		struct stat st;
		ok(resolve_path(root_fd, "/m.txt", 0, &res) == 0 && fstat(res.fd, &st) == 0,
				"... so it is resolved again");
		close(res.fd);

		kept("/m.txt");
		e = resolve_cache_get(generation, "/m.txt", &res);
		int held_fd = res.fd;
		resolve_cache_release(e);
		kept_at = clock_ms();
		path_of(p, sizeof p, "root/m.txt");
		unlink(p);
		resolve_cache_tick(); /* takes the removal: the cache is emptied */
		errno = 0;
		ok(fcntl(held_fd, F_GETFD) < 0 && errno == EBADF,
				"a removed file's descriptor is let go at the next tick, with no lookup");
		make("root/m.txt", "CCCC\n");
		resolve_cache_tick();
		kept("/m.txt");
		kept_at = clock_ms();
		e = resolve_cache_get(generation, "/m.txt", &res);
		held_fd = res.fd;
		resolve_cache_release(e);
		resolve_cache_tick();
		ok(clock_ms() - kept_at >= RESOLVE_CACHE_TTL_MS || fcntl(held_fd, F_GETFD) >= 0,
				"a tick keeps an entry younger than %d ms", RESOLVE_CACHE_TTL_MS);
		while (clock_ms() - kept_at < RESOLVE_CACHE_TTL_MS)
			usleep(10 * 1000);
		resolve_cache_tick();
		errno = 0;
		ok(fcntl(held_fd, F_GETFD) < 0 && errno == EBADF,
				"... and lets go of one %d ms old, with no event and no lookup",
				RESOLVE_CACHE_TTL_MS);
	}

	/* At most RESOLVE_CACHE_FILES descriptors held, however many files. */
	for (int i = 0; i < RESOLVE_CACHE_FILES * 3; i++) {
		char rel[64];
		snprintf(rel, sizeof rel, "root/f%d.html", i);
		make(rel, "f\n");
	}
	in_cache("/a.html"); /* the creations above empty the cache here */
	int before = open_fds();
	for (int i = 0; i < RESOLVE_CACHE_FILES * 3; i++) {
		char path[64];
		snprintf(path, sizeof path, "/f%d.html", i);
		kept(path);
	}
	int held = open_fds() - before;
	ok(held > 0 && held <= RESOLVE_CACHE_FILES, "%d files held for %d kept (at most %d)", held,
			RESOLVE_CACHE_FILES * 3, RESOLVE_CACHE_FILES);

	/* The watch limit, at its value and one past. In a folder w of its
	 * own as the root: files put one after another until a put past the
	 * limit empties the cache and starts a fresh inotify instance. */
	make("root/w", NULL);
	path_of(p, sizeof p, "root/w");
	int w_fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int saved_root = root_fd;
	root_fd = w_fd;
	for (int i = 0; i < RESOLVE_CACHE_WATCHES + 1; i++) {
		char rel[64];
		snprintf(rel, sizeof rel, "root/w/%d", i);
		make(rel, "w\n");
	}
	int emptied_at = -1;
	for (int i = 0; i < RESOLVE_CACHE_WATCHES + 1 && emptied_at < 0; i++) {
		char path[64];
		snprintf(path, sizeof path, "/%d", i);
		kept(path);
		if (!in_cache(path))
			emptied_at = i;
	}
	ok(emptied_at >= 0, "a put past the watch limit empties the cache (file %d)", emptied_at);
	/* The fresh instance numbers its watches from 1: the root, then file
	 * k (from 0) gets k + 2. File RESOLVE_CACHE_WATCHES - 2 gets exactly
	 * the limit and stays; the next one's is past it. */
	for (int i = 0; i <= RESOLVE_CACHE_WATCHES - 2; i++) {
		char path[64];
		snprintf(path, sizeof path, "/%d", i);
		kept(path);
	}
	char at[64], past[64];
	snprintf(at, sizeof at, "/%d", RESOLVE_CACHE_WATCHES - 2);
	snprintf(past, sizeof past, "/%d", RESOLVE_CACHE_WATCHES - 1);
	ok(in_cache(at), "a put whose watch is numbered %d (the limit) keeps its file",
			RESOLVE_CACHE_WATCHES);
	kept(past);
	ok(!in_cache(past) && !in_cache(at), "the next put (watch %d) empties the cache",
			RESOLVE_CACHE_WATCHES + 1);
	ok(kept("/0") && in_cache("/0"), "... and the new instance keeps files again");
	root_fd = saved_root;
	close(w_fd);

	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", top);
	if (system(cmd) != 0)
		return 1;
	return done_testing();
}
