/* bench/mhd_floor: bare libmicrohttpd answering a fixed 12-byte body, the
 * floor plxd's engine is measured against. The access handler queues its
 * response on the second call, as plxd does. Modes:
 *   pool      libmicrohttpd's internal epoll thread pool, one thread per core
 *   perconn   a thread per connection (plxd's engine until 0.2)
 *   external  one thread per core, each running its own daemon in external
 *             epoll mode and accepting from the shared listening socket
 *             (EPOLLEXCLUSIVE), handing sockets over with MHD_add_connection
 * It prints "listening on http://127.0.0.1:PORT/" once it accepts.
 *   mhd_floor MODE [THREADS]
 * bench/run builds it (the CMake target mhd_floor) with plxd's Release flags. */
#ifndef _GNU_SOURCE /* CMake defines it for the whole tree */
#define _GNU_SOURCE
#endif
#include <microhttpd.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static const char BODY[] = "hello world\n";
static struct MHD_Response *response;

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
		const char *method, const char *version, const char *upload, size_t *upload_size,
		void **ctx)
{
	(void)cls, (void)url, (void)method, (void)version, (void)upload;
	if (!*ctx) {
		*ctx = (void *)1;
		return MHD_YES;
	}
	*upload_size = 0;
	return MHD_queue_response(c, MHD_HTTP_OK, response);
}

static int listen_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int on = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
	struct sockaddr_in sin = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof sin) < 0 || listen(fd, 511) < 0) {
		perror("listen");
		exit(1);
	}
	return fd;
}

struct loop {
	pthread_t thread;
	struct MHD_Daemon *daemon;
	int listen_fd;
};

static void *run_loop(void *arg)
{
	struct loop *l = arg;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(l->daemon, MHD_DAEMON_INFO_EPOLL_FD);
	int mhd_fd = info->epoll_fd;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLEXCLUSIVE, .data.fd = l->listen_fd };
	epoll_ctl(ep, EPOLL_CTL_ADD, l->listen_fd, &ev);
	ev = (struct epoll_event){ .events = EPOLLIN, .data.fd = mhd_fd };
	epoll_ctl(ep, EPOLL_CTL_ADD, mhd_fd, &ev);
	for (;;) {
		MHD_UNSIGNED_LONG_LONG t;
		int timeout = MHD_get_timeout(l->daemon, &t) == MHD_YES ? (int)t : -1;
		struct epoll_event events[16];
		int n = epoll_wait(ep, events, 16, timeout);
		for (int i = 0; i < n; i++) {
			if (events[i].data.fd != l->listen_fd)
				continue;
			for (;;) {
				struct sockaddr_storage ss;
				socklen_t len = sizeof ss;
				int c = accept4(l->listen_fd, (struct sockaddr *)&ss, &len,
						SOCK_NONBLOCK | SOCK_CLOEXEC);
				if (c < 0)
					break;
				MHD_add_connection(l->daemon, c, (struct sockaddr *)&ss, len);
			}
		}
		MHD_run(l->daemon);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "pool";
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned threads = argc > 2 ? (unsigned)atoi(argv[2]) : (unsigned)(cores > 0 ? cores : 1);
	signal(SIGPIPE, SIG_IGN);
	response = MHD_create_response_from_buffer(sizeof BODY - 1, (void *)BODY,
			MHD_RESPMEM_PERSISTENT);
	int fd = listen_socket();
	if (strcmp(mode, "pool") == 0) {
		/* clang-format off */
		if (!MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TURBO,
				0, NULL, NULL, answer, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
				MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_END))
			return 1;
	} else if (strcmp(mode, "perconn") == 0) {
		if (!MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION
				| MHD_USE_POLL, 0, NULL, NULL, answer, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
				MHD_OPTION_END))
			return 1;
	} else if (strcmp(mode, "external") == 0) {
		for (unsigned i = 0; i < threads; i++) {
			struct loop *l = calloc(1, sizeof *l);
			l->listen_fd = fd;
			l->daemon = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_TURBO
					| MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL, answer, NULL,
					MHD_OPTION_END);
			/* clang-format on */
			if (!l->daemon)
				return 1;
			pthread_create(&l->thread, NULL, run_loop, l);
		}
	} else {
		fprintf(stderr, "usage: mhd_floor pool|perconn|external [THREADS]\n");
		return 2;
	}
	struct sockaddr_in sin;
	socklen_t len = sizeof sin;
	getsockname(fd, (struct sockaddr *)&sin, &len);
	printf("listening on http://127.0.0.1:%u/\n", ntohs(sin.sin_port));
	fflush(stdout);
	for (;;)
		pause();
}
