/* The master process: it holds the listening socket, starts the serving
 * process (the engine, the handlers, the Perl workers and threads: all
 * the rest of plxd), and starts a new one when that one dies. It runs no
 * Perl, parses no HTTP and allocates nothing per request, so no request
 * can end it. Signals from outside reach it: SIGHUP and SIGTERM/SIGINT are
 * passed on, and a stop ends it with the serving process's status. */
#ifndef PLXD_MASTER_H
#define PLXD_MASTER_H

#include "log.h"

struct master_spec {
	int listen_fd;
	const char *url;        /* printed as "listening on URL" once ready */
	const char *error_log;  /* reopened on SIGHUP, as the serving process */
	const char *access_log; /* reopens its own */
	enum log_level level;
};

/* Forks the first serving process and supervises it. Returns 0 in each
 * serving process it starts (master_restarts() says which); in the
 * master it never returns: it exits with the status of the serving
 * process a stop ended, or 1 when the first could not start. Called
 * before any thread exists: the fork copies one thread. */
int master_run(const struct master_spec *spec);

/* What a serving process tells whoever supervises it: its master over a
 * pipe, or, run without one, the service manager directly. */
enum master_event {
	MASTER_READY,     /* listening, handlers started */
	MASTER_FAILED,    /* could not start: about to exit 1 */
	MASTER_RELOADING, /* a SIGHUP's reload begins */
	MASTER_RELOADED,  /* ... and is done, whatever its outcome */
	MASTER_STOPPING,  /* a graceful stop begins */
	MASTER_ALIVE,     /* the watchdog's ping */
};
void master_tell(enum master_event ev);

/* How often the serving process should send MASTER_ALIVE, in ms; 0: never
 * (no watchdog is asked for). */
unsigned long master_alive_ms(void);

/* Whether this process is a serving process under a master. */
int master_supervised(void);

/* For the status page: serving processes started after the first, and
 * why the last one before this one ended ("" when none did). */
unsigned master_restarts(void);
const char *master_last_reason(void);

#endif
