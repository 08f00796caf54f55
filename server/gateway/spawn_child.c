/* Starting and ending children (scripts, workers). posix_spawn (glibc: clone(CLONE_VM |
 * CLONE_VFORK)), never fork, so a spawn costs the same however large plxd
 * grows; the exit is watched through a pidfd, so no SIGCHLD handler and no
 * sleeping poll loop is needed, and no one else's children are waited for. */
#include "spawn_child.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void close_fd(int *fd);
static int limits_set(const struct spawn_limits *l);
static char **helper_argv(const struct spawn_spec *spec, char numbers[3][24]);

void spawn_describe_status(int wstatus, char *out, size_t outlen)
{
	out[0] = '\0';
	if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0) {
		snprintf(out, outlen, "exited with status %d", WEXITSTATUS(wstatus));
	} else if (WIFSIGNALED(wstatus)) {
		const char *name = sigabbrev_np(WTERMSIG(wstatus));
		snprintf(out, outlen, "killed by signal %d (SIG%s)", WTERMSIG(wstatus),
				name ? name : "?");
	}
}

void spawn_child_init(struct spawn_child *c)
{
	memset(c, 0, sizeof *c);
	c->pid = -1;
	c->pidfd = c->in = c->out = c->err = -1;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int limits_set(const struct spawn_limits *l)
{
	return l && (l->cpu_seconds || l->address_space || l->processes);
}

/* posix_spawn cannot set resource limits, so with limits the child runs
 * plxd-cgi-exec, which sets them and executes the script in the same
 * process: "helper CPU AS NPROC PATH ARGV...". */
static char **helper_argv(const struct spawn_spec *spec, char numbers[3][24])
{
	size_t n = 0;
	while (spec->argv[n])
		n++;
	char **argv = calloc(n + 6, sizeof *argv);
	if (!argv)
		return NULL;
	snprintf(numbers[0], 24, "%lu", spec->limits->cpu_seconds);
	snprintf(numbers[1], 24, "%llu", spec->limits->address_space);
	snprintf(numbers[2], 24, "%lu", spec->limits->processes);
	argv[0] = (char *)spec->helper;
	argv[1] = numbers[0];
	argv[2] = numbers[1];
	argv[3] = numbers[2];
	argv[4] = (char *)spec->path;
	for (size_t i = 0; i < n; i++)
		argv[5 + i] = spec->argv[i];
	return argv;
}

int spawn_attr_init(posix_spawnattr_t *attr)
{
	int rc = posix_spawnattr_init(attr);
	if (rc != 0)
		return rc;
	/* plxd blocks SIGHUP/TERM/INT in every thread and ignores SIGPIPE; a
	 * child must start with the defaults, which exec alone would not
	 * restore (a mask and ignored signals survive execve). */
	sigset_t all, none;
	sigfillset(&all);
	sigemptyset(&none);
	if ((rc = posix_spawnattr_setsigdefault(attr, &all)) != 0
			|| (rc = posix_spawnattr_setsigmask(attr, &none)) != 0
			|| (rc = posix_spawnattr_setpgroup(attr, 0)) != 0
			|| (rc = posix_spawnattr_setflags(attr,
					    POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK
							    | POSIX_SPAWN_SETPGROUP))
					!= 0) {
		posix_spawnattr_destroy(attr);
		return rc;
	}
	return 0;
}

int spawn_start(const struct spawn_spec *spec, struct spawn_child *c)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	int fa_ready = 0, attr_ready = 0;
	char **argv = NULL;
	char numbers[3][24];
	int rc;

	spawn_child_init(c);
	/* O_CLOEXEC: a child another thread spawns at the same moment must not
	 * inherit these ends (it would hold our stdin open forever). */
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		rc = errno;
		goto fail;
	}
	if ((rc = posix_spawn_file_actions_init(&fa)) != 0)
		goto fail;
	fa_ready = 1;
	/* dup2 clears FD_CLOEXEC on 0, 1, 2; closefrom drops anything a
	 * library may have opened without O_CLOEXEC. */
	if ((rc = posix_spawn_file_actions_adddup2(&fa, in[0], 0)) != 0
			|| (rc = posix_spawn_file_actions_adddup2(&fa, out[1], 1)) != 0
			|| (rc = posix_spawn_file_actions_adddup2(&fa, err[1], 2)) != 0
			|| (rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3)) != 0
			|| (spec->dir
					&& (rc = posix_spawn_file_actions_addchdir_np(&fa,
							    spec->dir))
							!= 0))
		goto fail;
	if ((rc = spawn_attr_init(&attr)) != 0)
		goto fail;
	attr_ready = 1;

	const char *path = spec->path;
	char *const *args = spec->argv;
	if (limits_set(spec->limits)) {
		if (!spec->helper) {
			rc = ENOENT;
			goto fail;
		}
		if (!(argv = helper_argv(spec, numbers))) {
			rc = ENOMEM;
			goto fail;
		}
		path = spec->helper;
		args = argv;
	}
	pid_t pid;
	rc = posix_spawn(&pid, path, &fa, &attr, args, spec->envp ? spec->envp : environ);
	if (rc != 0)
		goto fail;
	c->pid = pid;
	/* The child cannot be reaped by anyone but us before this (we hold no
	 * SIGCHLD handler), so the pid still names it. */
	c->pidfd = pidfd_open(pid, 0);
	if (c->pidfd < 0) {
		rc = errno;
		kill(-pid, SIGKILL);
		waitpid(pid, NULL, 0);
		c->pid = -1;
		goto fail;
	}
	c->in = in[1];
	c->out = out[0];
	c->err = err[0];
	close(in[0]);
	close(out[1]);
	close(err[1]);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	free(argv);
	/* Writes to stdin go through poll; never block on a full pipe. */
	fcntl(c->in, F_SETFL, O_NONBLOCK);
	fcntl(c->out, F_SETFL, O_NONBLOCK);
	fcntl(c->err, F_SETFL, O_NONBLOCK);
	return 0;

fail:
	for (int i = 0; i < 2; i++) {
		close_fd(&in[i]);
		close_fd(&out[i]);
		close_fd(&err[i]);
	}
	if (fa_ready)
		posix_spawn_file_actions_destroy(&fa);
	if (attr_ready)
		posix_spawnattr_destroy(&attr);
	free(argv);
	errno = rc;
	return -1;
}

void spawn_signal(struct spawn_child *c, int sig)
{
	/* Until the leader is reaped its pid, and so the group id, cannot be
	 * reused: signalling the group is safe exactly that long. */
	if (c->pid > 0 && !c->reaped)
		kill(-c->pid, sig);
}

/* waitid's answer as a wait status. */
static int wait_status(const siginfo_t *info)
{
	if (info->si_code == CLD_EXITED)
		return (info->si_status & 0xff) << 8;
	return info->si_status & 0x7f; /* killed (or dumped) by a signal */
}

int spawn_peek_exit(struct spawn_child *c)
{
	if (c->pid <= 0 || c->reaped)
		return 1;
	siginfo_t info;
	memset(&info, 0, sizeof info);
	if (waitid(P_PIDFD, (id_t)c->pidfd, &info, WEXITED | WNOHANG | WNOWAIT) < 0)
		return errno != EINTR; /* ECHILD: gone; spawn_reap_if_exited says so */
	if (info.si_pid == 0)
		return 0;
	c->exited = 1;
	c->status = wait_status(&info);
	return 1;
}

int spawn_reap_if_exited(struct spawn_child *c)
{
	if (c->pid <= 0 || c->reaped)
		return 1;
	siginfo_t info;
	memset(&info, 0, sizeof info);
	if (waitid(P_PIDFD, (id_t)c->pidfd, &info, WEXITED | WNOHANG) < 0) {
		if (errno == EINTR)
			return 0;
		/* ECHILD: someone reaped it (SIGCHLD ignored); it is gone. */
		c->reaped = 1;
		c->exited = 1;
		c->status = 0;
		return 1;
	}
	if (info.si_pid == 0)
		return 0;
	c->exited = c->reaped = 1;
	c->status = wait_status(&info);
	return 1;
}
