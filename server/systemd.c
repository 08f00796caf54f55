/* Socket activation, readiness and the watchdog, through libsystemd's
 * sd-daemon calls: the only file that includes systemd's headers. */
#include "systemd.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <time.h>

int systemd_listen_fd(char *err, size_t errlen)
{
	err[0] = '\0';
	int n = sd_listen_fds(1);
	if (n < 0) {
		snprintf(err, errlen, "LISTEN_FDS: %s", strerror(-n));
		return -1;
	}
	if (n == 0)
		return -1;
	if (n > 1) {
		/* Each further socket would be served by nobody: a unit with
		 * two ListenStream= lines is a mistake to say, not to guess. */
		snprintf(err, errlen, "systemd passed %d sockets: plxd listens on one", n);
		return -1;
	}
	int fd = SD_LISTEN_FDS_START;
	if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
		snprintf(err, errlen, "the socket systemd passed is not a listening stream socket");
		return -1;
	}
	/* The engine's accept loop needs a non-blocking socket, and no
	 * script may inherit it. */
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0
			|| fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		snprintf(err, errlen, "the socket systemd passed: %s", strerror(errno));
		return -1;
	}
	return fd;
}

void systemd_notify(const char *state)
{
	static int warned;
	int rc = sd_notify(0, state);
	if (rc < 0 && !warned) {
		warned = 1;
		plxd_log(PLXD_LOG_DEBUG, "cannot tell the service manager %s: %s", state,
				strerror(-rc));
	}
}

void systemd_notify_reloading(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	char msg[64];
	snprintf(msg, sizeof msg, "RELOADING=1\nMONOTONIC_USEC=%llu",
			(unsigned long long)ts.tv_sec * 1000000ULL
					+ (unsigned long long)ts.tv_nsec / 1000);
	systemd_notify(msg);
}

uint64_t systemd_watchdog_usec(void)
{
	uint64_t usec = 0;
	return sd_watchdog_enabled(0, &usec) > 0 ? usec : 0;
}

void systemd_forget(void)
{
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}
