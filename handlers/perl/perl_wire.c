/* Sending and receiving worker messages; see perl_wire.h. */
#include "perl_wire.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int perl_wire_send(int sock, const struct iovec *iov, int iovcnt, const int *fds, int nfds)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(2 * sizeof(int))];
	} control;
	struct msghdr msg = {
		.msg_iov = (struct iovec *)iov,
		.msg_iovlen = (size_t)iovcnt,
	};
	if (nfds > 0) {
		memset(&control, 0, sizeof control);
		msg.msg_control = control.buf;
		msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
	}
	for (;;) {
		ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
		if (n >= 0)
			return 0;
		if (errno != EINTR)
			return -1;
	}
}

ssize_t perl_wire_recv(int sock, void *buf, size_t cap, int *fds, int *nfds, int flags)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} control;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control.buf,
		.msg_controllen = sizeof control.buf,
	};
	*nfds = 0;
	ssize_t n;
	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	int got[4];
	int ngot = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < count && ngot < 4; i++)
			memcpy(&got[ngot++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	}
	if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || ngot > 2) {
		for (int i = 0; i < ngot; i++)
			close(got[i]);
		errno = EMSGSIZE;
		return -1;
	}
	for (int i = 0; i < ngot; i++)
		fds[i] = got[i];
	*nfds = ngot;
	return n;
}

const char *perl_wire_retire_text(uint32_t retire)
{
	switch (retire) {
	case PERL_RETIRE_MAX_REQUESTS:
		return "it served max_requests requests";
	case PERL_RETIRE_MAX_RSS:
		return "it grew past max_rss";
	case PERL_RETIRE_MODULES:
		return "a module it loaded changed";
	case PERL_RETIRE_FATAL:
		return "its interpreter could not go on";
	case PERL_RETIRE_THREADS:
		return "Perl threads its script started run on";
	case PERL_RETIRE_HARAKIRI:
		return "its PSGI application asked for it (psgix.harakiri.commit)";
	default:
		return "it was asked to";
	}
}

enum perl_wire_outcome perl_wire_outcome(enum perl_outcome o)
{
	switch (o) {
	case PERL_OK:
		return PERL_WIRE_OK;
	case PERL_EXIT:
		return PERL_WIRE_EXIT;
	case PERL_DIED:
		return PERL_WIRE_DIED;
	case PERL_COMPILE_ERROR:
		return PERL_WIRE_COMPILE_ERROR;
	case PERL_NOT_FOUND:
		return PERL_WIRE_NOT_FOUND;
	default:
		return PERL_WIRE_FATAL;
	}
}
