/* Process plumbing for scripts and workers: start a program with pipes on
 * its stdin, stdout and stderr, in its own process group, signal the group,
 * learn how it ended and reap it, through a pidfd (no SIGCHLD, no one
 * else's children). Never blocks. No libmicrohttpd, no HTTP. */
#ifndef PLXD_SPAWN_CHILD_H
#define PLXD_SPAWN_CHILD_H

#include <spawn.h>
#include <stddef.h>
#include <sys/types.h>

/* Resource limits set before the script's first instruction; 0: not set. */
struct spawn_limits {
	unsigned long cpu_seconds;        /* RLIMIT_CPU */
	unsigned long long address_space; /* RLIMIT_AS, bytes */
	unsigned long processes;          /* RLIMIT_NPROC (counts all of the user's) */
};

struct spawn_spec {
	const char *path;                  /* the program to execute (interpreter or script) */
	char *const *argv;                 /* its arguments, argv[0] first */
	char *const *envp;                 /* its whole environment */
	const char *dir;                   /* its working directory */
	const struct spawn_limits *limits; /* NULL or all 0: none */
	const char *helper;                /* plxd-cgi-exec, which applies limits; needed
				     only when limits are set */
};

/* A running (or finished, not yet reaped) child. Descriptors are -1 when
 * closed; every one is O_CLOEXEC. */
struct spawn_child {
	pid_t pid;  /* also its process group; -1: none */
	int pidfd;  /* readable once the child has exited */
	int in;     /* write end of its stdin */
	int out;    /* read end of its stdout */
	int err;    /* read end of its stderr */
	int exited; /* pidfd was seen readable */
	int reaped; /* waited for: status is valid */
	int status; /* wait status, as waitpid gives it */
};

/* How a process ended, for a log line: "exited with status 3", "killed by
 * signal 9 (SIGKILL)", or "" for an exit with status 0. Shared with the
 * Perl handler, whose workers are processes too. */
void spawn_describe_status(int wstatus, char *out, size_t outlen);

/* Sets every field to "none". */
void spawn_child_init(struct spawn_child *c);

/* Starts spec with posix_spawn: the child gets the three pipes as 0, 1 and
 * 2 and no other descriptor, default signal dispositions, an empty signal
 * mask and a process group of its own. Returns 0, or -1 with errno (ENOENT,
 * EACCES, ENOEXEC when the program cannot be executed); nothing is left
 * open or running then. */
int spawn_start(const struct spawn_spec *spec, struct spawn_child *c);

/* Spawn attributes for a clean child: default signal dispositions, an
 * empty signal mask, a process group of its own (so that it and what it
 * starts can be signalled together). Returns 0, or an errno value. Shared
 * with the Perl handler, which spawns its workers the same way. */
int spawn_attr_init(posix_spawnattr_t *attr);

/* Sends sig to the child's process group, unless it has been reaped (its
 * group id could then name someone else's processes). */
void spawn_signal(struct spawn_child *c, int sig);

/* Whether the child has exited (1, with its status set) or still runs (0),
 * without reaping it: until it is reaped its pid, and so its process group
 * id, cannot be reused, so what it left running can still be signalled.
 * Never blocks. */
int spawn_peek_exit(struct spawn_child *c);

/* Reaps the child if it has exited; returns 1 when reaped, 0 when it still
 * runs. Never blocks. */
int spawn_reap_if_exited(struct spawn_child *c);

#endif
