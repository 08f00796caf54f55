/* The recv() libmicrohttpd calls: glibc's (recvfrom), then a look at what
 * came. Symbol interposition: the executable's definition comes first in
 * every library's lookup, and plxd exports its symbols (ENABLE_EXPORTS). A
 * build where it did not (plxd linked statically, say) never fills the
 * table, and request.c refuses every chunked body rather than take one
 * unchecked. */
#undef _FORTIFY_SOURCE /* glibc's fortified recv() is an inline of its own */
#include "recv_tap.h"

#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>

struct tap {
	uint64_t bytes;
	const char *first;
	recv_tap_fn *fn;
	void *cls;
	int open;
};

/* One per descriptor, each used by the thread that serves its connection:
 * written before the event threads start, and never moved. */
static struct tap *taps;
static size_t ntaps;

ssize_t recv(int fd, void *buf, size_t len, int flags);

int recv_tap_init(void)
{
	if (taps)
		return 0;
	struct rlimit rl;
	size_t n = 1024;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		n = (size_t)rl.rlim_cur;
	if (n > (size_t)1 << 22)
		n = (size_t)1 << 22;
	/* calloc maps pages untouched until a descriptor that high is used. */
	taps = calloc(n, sizeof *taps);
	if (!taps)
		return -1;
	ntaps = n;
	return 0;
}

void recv_tap_open(int fd)
{
	if (fd >= 0 && (size_t)fd < ntaps)
		taps[fd] = (struct tap){ .open = 1 };
}

void recv_tap_close(int fd)
{
	if (fd >= 0 && (size_t)fd < ntaps)
		taps[fd] = (struct tap){ 0 };
}

int recv_tap_state(int fd, uint64_t *bytes, const char **first)
{
	if (fd < 0 || (size_t)fd >= ntaps || !taps[fd].open || !taps[fd].first)
		return -1;
	*bytes = taps[fd].bytes;
	*first = taps[fd].first;
	return 0;
}

void recv_tap_watch(int fd, recv_tap_fn *fn, void *cls)
{
	if (fd >= 0 && (size_t)fd < ntaps) {
		taps[fd].fn = fn;
		taps[fd].cls = cls;
	}
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	ssize_t n = recvfrom(fd, buf, len, flags, NULL, NULL);
	/* A peek takes nothing from the stream. */
	if ((size_t)fd >= ntaps || !taps[fd].open || (flags & MSG_PEEK))
		return n;
	struct tap *t = &taps[fd];
	if (!t->first)
		t->first = buf;
	if (n > 0) {
		t->bytes += (uint64_t)n;
		if (t->fn)
			t->fn(t->cls, buf, (size_t)n);
	}
	return n;
}
