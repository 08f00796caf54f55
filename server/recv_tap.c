/* The recv() libmicrohttpd calls: glibc's (recvfrom), then a look at what
 * came. Symbol interposition: the executable's definition comes first in
 * every library's lookup, and plxd exports its symbols (ENABLE_EXPORTS). A
 * build where it did not (plxd linked statically, say) never fills the
 * table, and request.c refuses every chunked body rather than take one
 * unchecked. */
#undef _FORTIFY_SOURCE /* glibc's fortified recv() is an inline of its own */
#include "recv_tap.h"
#include "framing.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>

#define NO_HEAD UINT64_MAX

struct tap {
	uint64_t bytes;
	const char *first;
	recv_tap_fn *fn;
	void *cls;
	int open;
	int busy;           /* a request of the connection is being answered */
	int closing;        /* a head behind it had too many entries: no more is read */
	uint64_t head_from; /* where the head being counted starts: NO_HEAD, none */
	struct head_count head;
};

/* One per descriptor, each used by the thread that serves its connection:
 * written before the event threads start, and never moved. */
static struct tap *taps;
static size_t ntaps;
static unsigned long entries_max;

ssize_t recv(int fd, void *buf, size_t len, int flags);

int recv_tap_init(unsigned long max_entries)
{
	entries_max = max_entries;
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
		taps[fd] = (struct tap){ .open = 1 }; /* its first head from byte 0 */
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

/* Counts p's n bytes into the head t counts. Returns head_count's answer;
 * *used: for -1, the bytes before the entry past the limit. */
static int head_take(struct tap *t, const char *p, size_t n, size_t *used)
{
	int how = head_count(&t->head, p, n, entries_max, used);
	if (how > 0)
		t->head_from = NO_HEAD;
	return how;
}

int recv_tap_closing(int fd)
{
	return fd >= 0 && (size_t)fd < ntaps && taps[fd].closing;
}

void recv_tap_idle(int fd)
{
	if (fd >= 0 && (size_t)fd < ntaps)
		taps[fd].busy = 0;
}

int recv_tap_next_head(int fd, uint64_t at, const char *held, size_t held_len)
{
	if (fd < 0 || (size_t)fd >= ntaps || !taps[fd].open)
		return 0;
	struct tap *t = &taps[fd];
	t->busy = 1;
	t->head_from = at;
	head_count_begin(&t->head);
	size_t used;
	return held_len && head_take(t, held, held_len, &used) < 0 ? -1 : 0;
}

/* Reads (a little of) what the client sent, and drops it: so that a close
 * does not reset the connection before the client has its answer. */
void recv_tap_drain(int fd)
{
	char sink[4096];
	for (int i = 0; i < 16; i++)
		if (recvfrom(fd, sink, sizeof sink, MSG_DONTWAIT, NULL, NULL) <= 0)
			break;
}

/* A head with more entries than libmicrohttpd's memory holds, refused
 * before libmicrohttpd parses it, with no answer in progress on the
 * connection: answered 431 here, and the connection closed. */
static ssize_t refuse_head(int fd)
{
#define TOO_MANY "Too many header fields, cookies or query parameters\n"
	_Static_assert(sizeof TOO_MANY - 1 == 52, "the Content-Length below");
	static const char answer[] = "HTTP/1.1 431 Request Header Fields Too Large\r\n"
				     "Connection: close\r\n"
				     "Content-Type: text/plain\r\n"
				     "Content-Length: 52\r\n"
				     "\r\n" TOO_MANY;
#undef TOO_MANY
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof ss;
	char addr[64] = "?";
	if (getpeername(fd, (struct sockaddr *)&ss, &sslen) == 0)
		log_format_addr((struct sockaddr *)&ss, addr, sizeof addr);
	plxd_log(PLXD_LOG_INFO,
			"refused a request from %s: 431, its head has more than "
			"max_header_fields (%lu) header lines, cookies and query parameters",
			addr, entries_max);
	if (send(fd, answer, sizeof answer - 1, MSG_NOSIGNAL | MSG_DONTWAIT) > 0) {
		shutdown(fd, SHUT_WR);
		recv_tap_drain(fd);
	}
	errno = ECONNRESET;
	return -1;
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
	if (n > 0 && t->closing) {
		/* Nothing more is taken: the answer in progress is the
		 * connection's last (request.c). */
		recv_tap_drain(fd);
		errno = EAGAIN;
		return -1;
	}
	if (n <= 0)
		return n;
	uint64_t at = t->bytes;
	t->bytes += (uint64_t)n;
	if (t->fn)
		t->fn(t->cls, buf, (size_t)n);
	/* (fn may have found where the next head starts.) */
	if (t->head_from == NO_HEAD || at + (uint64_t)n <= t->head_from)
		return n;
	size_t skip = t->head_from > at ? (size_t)(t->head_from - at) : 0;
	size_t used;
	if (head_take(t, (const char *)buf + skip, (size_t)n - skip, &used) >= 0)
		return n;
	if (!t->busy)
		return refuse_head(fd);
	/* Pipelined behind a request still being answered: that request
	 * keeps what is its own (its body), libmicrohttpd never has the entry
	 * past the limit, and the answer closes the connection. */
	plxd_log(PLXD_LOG_INFO,
			"a request pipelined behind one being answered has more than "
			"max_header_fields (%lu) header lines, cookies and query parameters: "
			"the connection closes after that answer",
			entries_max);
	t->closing = 1;
	if (!skip && !used) {
		errno = EAGAIN; /* 0 would say the client closed */
		return -1;
	}
	return (ssize_t)(skip + used);
}
