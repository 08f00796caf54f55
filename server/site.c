/* The current site, swapped under a mutex; requests hold references. */
#include "site.h"
#include "alloc.h"
#include "req_limits.h"
#include "resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct site *current;

struct site *site_create(struct config *config, char *err, size_t errlen)
{
	int fd = open(config->server.root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s: [server] root %s: %s", config->file, config->server.root,
				strerror(errno));
		config_free(config);
		return NULL;
	}
	/* Every request's path is opened beneath the root with openat2
	 * (resolve.h). Where the kernel lacks it (before Linux 5.6) or a
	 * sandbox filters it out (an older container seccomp profile,
	 * valgrind), each request would get a 500: say so once, here. Any
	 * other error (a root plxd's user may not search) is each request's
	 * to answer, 403, as before. */
	int probe = resolve_open_plain(fd, ".", O_PATH | O_DIRECTORY);
	if (probe < 0 && (errno == ENOSYS || errno == EPERM)) {
		snprintf(err, errlen,
				"%s: [server] root %s: cannot open files beneath it: openat2: %s "
				"(plxd needs Linux 5.6 or later, with openat2 allowed)",
				config->file, config->server.root, strerror(errno));
		close(fd);
		config_free(config);
		return NULL;
	}
	if (probe >= 0)
		close(probe);
	struct site *s = xcalloc(1, sizeof *s);
	s->config = config;
	s->root_fd = fd;
	s->limits_env = req_limits_env(&config->request, config->server.tmp_dir);
	atomic_init(&s->refs, 1);
	return s;
}

struct site *site_acquire(void)
{
	pthread_mutex_lock(&lock);
	struct site *s = current;
	if (s)
		atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
	pthread_mutex_unlock(&lock);
	return s;
}

void site_release(struct site *s)
{
	if (!s || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
		return;
	close(s->root_fd);
	free(s->limits_env);
	config_free(s->config);
	free(s);
}

void site_install(struct site *s)
{
	static unsigned installed;
	pthread_mutex_lock(&lock);
	if (s)
		s->generation = ++installed;
	struct site *old = current;
	current = s;
	pthread_mutex_unlock(&lock);
	site_release(old);
}
