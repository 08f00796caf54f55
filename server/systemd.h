/* What plxd asks of systemd, through libsystemd: the listening socket a
 * .socket unit passes (socket activation), the readiness messages of a
 * Type=notify service, and the watchdog's interval. Outside systemd each
 * call finds nothing set and does nothing. */
#ifndef PLXD_SYSTEMD_H
#define PLXD_SYSTEMD_H

#include <stddef.h>
#include <stdint.h>

/* The listening socket systemd passed (LISTEN_FDS, LISTEN_PID), made
 * non-blocking and close-on-exec, the variables then removed from the
 * environment. Returns the descriptor; -1 with err "" when none was
 * passed; -1 with err set when what was passed is not one listening
 * stream socket. */
int systemd_listen_fd(char *err, size_t errlen);

/* Sends state ("READY=1", ...) to the service manager when NOTIFY_SOCKET
 * is set; a failure is logged once at debug level, never fatal. */
void systemd_notify(const char *state);

/* The reloading message: RELOADING=1 with the monotonic time systemd asks
 * it to carry. */
void systemd_notify_reloading(void);

/* The watchdog's interval in microseconds (WATCHDOG_USEC, when
 * WATCHDOG_PID is unset or this process), or 0 when there is none. */
uint64_t systemd_watchdog_usec(void);

/* Removes NOTIFY_SOCKET and the watchdog's variables from the
 * environment: a serving process under a master talks to the master,
 * and no script is handed the service manager's socket. */
void systemd_forget(void);

#endif
