/* The master process: one job, supervising the serving process. It forks
 * it, passes signals on, reads what it reports over a pipe (and tells
 * systemd), and when it dies logs why, ends what it left behind and
 * starts another on the same listening socket, with a growing delay when
 * each dies soon after its start. See master.h for the contract. */
#include "master.h"
#include "clock.h"
#include "systemd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A serving process ready this long is taken as started well: its death
 * is restarted at once and the delay starts over. */
#define STABLE_MS 2000
/* The delay after the second quick death, doubled for each next one, up
 * to the cap: at most 8 starts in the first minute of a crash loop, 2 a
 * minute after that. */
#define FIRST_DELAY_MS 500
#define MAX_DELAY_MS   30000

static const char event_bytes[] = {
	[MASTER_READY] = 'R',
	[MASTER_FAILED] = 'F',
	[MASTER_RELOADING] = 'H',
	[MASTER_RELOADED] = 'h',
	[MASTER_STOPPING] = 'S',
	[MASTER_ALIVE] = 'W',
};

/* What the serving process inherits from the master at its fork. */
static int tell_fd = -1; /* the pipe's write end; -1: no master */
static unsigned restarts;
static char last_reason[160];
static unsigned long alive_ms;

/* The master's own state. */
struct master {
	const struct master_spec *spec;
	int sfd;            /* signalfd: SIGHUP, SIGTERM, SIGINT, SIGCHLD */
	int from_child;     /* the pipe's read end; -1 between serving processes */
	pid_t child;        /* -1 between serving processes */
	int ready;          /* the running one said MASTER_READY */
	int failed;         /* ... or MASTER_FAILED */
	int ever_ready;     /* some serving process has been ready */
	int announced;      /* "listening on" printed */
	int stopping;       /* SIGTERM or SIGINT came: no more restarts */
	int child_stopping; /* the running one said MASTER_STOPPING */
	int listen_closed;  /* the master's copy of the socket, at a stop */
	int told_stopping;  /* STOPPING=1 sent */
	unsigned quick;     /* deaths in a row, each soon after its start */
	uint64_t started_at, ready_at, restart_at; /* ms; restart_at 0: none due */
	uint64_t watchdog_us, next_watchdog, alive_at;
	int exit_status; /* the master's, once stopping */
};

static int start_child(struct master *m);
static void child_died(struct master *m, int status);
static void end_orphans(pid_t keep);

int master_supervised(void)
{
	return tell_fd >= 0;
}

unsigned master_restarts(void)
{
	return restarts;
}

const char *master_last_reason(void)
{
	return last_reason;
}

unsigned long master_alive_ms(void)
{
	if (tell_fd >= 0)
		return alive_ms;
	uint64_t us = systemd_watchdog_usec();
	return us ? (unsigned long)(us / 2000 ? us / 2000 : 1) : 0;
}

void master_tell(enum master_event ev)
{
	if (tell_fd >= 0) {
		/* One byte: a pipe write that small is atomic, and never
		 * blocks as long as the master reads (it does nothing else). */
		ssize_t n;
		do
			n = write(tell_fd, &event_bytes[ev], 1);
		while (n < 0 && errno == EINTR);
		return;
	}
	switch (ev) {
	case MASTER_READY:
	case MASTER_RELOADED:
		systemd_notify("READY=1");
		break;
	case MASTER_RELOADING:
		systemd_notify_reloading();
		break;
	case MASTER_STOPPING:
		systemd_notify("STOPPING=1");
		break;
	case MASTER_ALIVE:
		systemd_notify("WATCHDOG=1");
		break;
	case MASTER_FAILED:
		break;
	}
}

/* "killed by signal 11 (Segmentation fault), core dumped" or "exited with
 * status 3". */
static void describe(int status, char *out, size_t outlen)
{
	if (WIFSIGNALED(status))
		snprintf(out, outlen, "killed by signal %d (%s)%s", WTERMSIG(status),
				strsignal(WTERMSIG(status)),
				WCOREDUMP(status) ? ", core dumped" : ", no core dumped");
	else
		snprintf(out, outlen, "exited with status %d", WEXITSTATUS(status));
}

/* The serving process's children (Perl workers, CGI scripts, forks of
 * interpreter threads), each in a process group of its own, are
 * reparented to the master when it dies (the master is their subreaper):
 * every child the master has besides keep is such an orphan. Each is
 * ended with its process group, and reaped; the scan repeats for what
 * their ends orphan in turn, for a second at most (SIGKILL ends a process
 * within a few ms unless it is stuck in the kernel). */
static void end_orphans(pid_t keep)
{
	pid_t self = getpid();
	for (int round = 0; round < 200; round++) {
		int found = 0;
		DIR *d = opendir("/proc");
		if (!d)
			return;
		struct dirent *e;
		while ((e = readdir(d))) {
			char *end;
			long pid = strtol(e->d_name, &end, 10);
			if (*end || pid <= 0 || pid == keep)
				continue;
			char path[64], buf[512];
			snprintf(path, sizeof path, "/proc/%ld/stat", pid);
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				continue;
			ssize_t n = read(fd, buf, sizeof buf - 1);
			close(fd);
			if (n <= 0)
				continue;
			buf[n] = '\0';
			/* The command name may hold spaces and parentheses: the
			 * fields follow its last ')'. */
			char *p = strrchr(buf, ')');
			long ppid;
			char state;
			if (!p || sscanf(p + 1, " %c %ld", &state, &ppid) != 2 || ppid != self)
				continue;
			found = 1;
			if (state != 'Z') {
				plxd_log(PLXD_LOG_INFO,
						"ending process %ld, left by the serving process",
						pid);
				kill(-(pid_t)pid, SIGKILL);
				kill((pid_t)pid, SIGKILL);
			}
		}
		closedir(d);
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (!found)
			return;
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

/* In the new serving process, right after the fork. */
static void become_child(struct master *m, int pipe_w, const sigset_t *old_mask)
{
	close(m->sfd);
	close(m->from_child);
	tell_fd = pipe_w;
	systemd_forget();
	/* With the master gone nothing would supervise this process: it
	 * stops as on SIGTERM, ending its workers and scripts. */
	pid_t master = getppid();
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != master)
		_exit(1);
	prctl(PR_SET_CHILD_SUBREAPER, 0);
	sigprocmask(SIG_SETMASK, old_mask, NULL);
}

static int start_child(struct master *m)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		plxd_log(PLXD_LOG_ERROR, "cannot start the serving process: pipe: %s",
				strerror(errno));
		return -1;
	}
	/* The write end is the serving process's and never blocks it. */
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	m->from_child = p[0];
	sigset_t mask;
	sigprocmask(SIG_BLOCK, NULL, &mask);
	sigdelset(&mask, SIGCHLD);
	pid_t pid = fork();
	if (pid < 0) {
		plxd_log(PLXD_LOG_ERROR, "cannot start the serving process: fork: %s",
				strerror(errno));
		close(p[0]);
		close(p[1]);
		m->from_child = -1;
		return -1;
	}
	if (pid == 0) {
		become_child(m, p[1], &mask);
		return 0;
	}
	close(p[1]);
	m->child = pid;
	m->ready = m->failed = m->child_stopping = 0;
	m->started_at = clock_ms();
	m->alive_at = m->started_at;
	plxd_log(PLXD_LOG_INFO, "master: started serving process %d", (int)pid);
	return 1;
}

/* A stop has begun: the master's copy of the listening socket is closed,
 * so that with the serving process's own (closed as its stop begins) new
 * connections are refused at once rather than left in the backlog until
 * the stop ends, as without a master. Under socket activation systemd
 * keeps the socket. */
static void stop_listening(struct master *m)
{
	if (m->listen_closed)
		return;
	m->listen_closed = 1;
	close(m->spec->listen_fd);
}

static void stop_master(struct master *m) __attribute__((noreturn));
static void stop_master(struct master *m)
{
	end_orphans(-1);
	plxd_log(PLXD_LOG_INFO, "master: stopped (exit status %d)", m->exit_status);
	log_close();
	exit(m->exit_status);
}

static void child_died(struct master *m, int status)
{
	char why[128];
	describe(status, why, sizeof why);
	uint64_t now = clock_ms();
	uint64_t ran = now - m->started_at;
	int was_ready = m->ready;
	pid_t pid = m->child;
	m->child = -1;
	if (m->from_child >= 0) {
		close(m->from_child);
		m->from_child = -1;
	}
	if (m->stopping || m->child_stopping) {
		/* A stop sent to the master, or to the serving process (which
		 * announced it): the service stops as asked, however the stop
		 * ended. The listening socket is closed by now: a serving
		 * process started after it would have none. An exit 0 it did
		 * not announce (C code that called exit) is a death like any
		 * other. */
		m->exit_status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
		if (status != 0)
			plxd_log(PLXD_LOG_WARN, "master: serving process %d %s while stopping",
					(int)pid, why);
		else if (!m->stopping)
			plxd_log(PLXD_LOG_INFO,
					"master: the serving process stopped: stopping too");
		stop_master(m);
	}
	if (m->failed && !m->ever_ready) {
		plxd_log(PLXD_LOG_ERROR,
				"master: the serving process could not start: not starting");
		m->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
		stop_master(m);
	}
	plxd_log(PLXD_LOG_ERROR, "master: serving process %d %s, after %.1f s%s", (int)pid, why,
			(double)ran / 1000, was_ready ? "" : ", before it was ready");
	snprintf(last_reason, sizeof last_reason, "%s", why);
	end_orphans(-1);
	if (was_ready && now - m->ready_at >= STABLE_MS)
		m->quick = 0;
	m->quick++;
	uint64_t delay = 0;
	if (m->quick > 1) {
		delay = FIRST_DELAY_MS;
		for (unsigned i = 2; i < m->quick && delay < MAX_DELAY_MS; i++)
			delay *= 2;
		if (delay > MAX_DELAY_MS)
			delay = MAX_DELAY_MS;
	}
	if (delay)
		plxd_log(PLXD_LOG_WARN,
				"master: %u deaths in a row within %.0f s of their start: "
				"restarting in %.1f s",
				m->quick, STABLE_MS / 1000.0, (double)delay / 1000);
	else
		plxd_log(PLXD_LOG_INFO, "master: restarting the serving process at once");
	m->restart_at = now + delay;
	if (!m->restart_at)
		m->restart_at = 1;
}

static void read_child(struct master *m)
{
	char buf[512];
	ssize_t n = read(m->from_child, buf, sizeof buf);
	if (n <= 0) {
		if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
			/* Its end closed: it is dying; SIGCHLD says how. */
			close(m->from_child);
			m->from_child = -1;
		}
		return;
	}
	for (ssize_t i = 0; i < n; i++) {
		switch (buf[i]) {
		case 'R':
			if (m->stopping || m->child_stopping)
				break; /* ready too late: a stop has begun */
			m->ready = m->ever_ready = 1;
			m->ready_at = m->alive_at = clock_ms();
			plxd_log(PLXD_LOG_INFO, "master: serving process %d ready", (int)m->child);
			if (!m->announced) {
				m->announced = 1;
				printf("listening on %s\n", m->spec->url);
				fflush(stdout);
			}
			systemd_notify("READY=1");
			break;
		case 'F':
			m->failed = 1;
			break;
		case 'H':
			systemd_notify_reloading();
			break;
		case 'h':
			systemd_notify("READY=1");
			break;
		case 'S':
			/* Also when the stop was sent to the serving process. */
			if (!m->told_stopping)
				systemd_notify("STOPPING=1");
			m->told_stopping = m->child_stopping = 1;
			stop_listening(m);
			break;
		case 'W':
			m->alive_at = clock_ms();
			break;
		}
	}
}

static void on_signal(struct master *m, int sig)
{
	if (sig == SIGCHLD) {
		int status;
		pid_t pid;
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
			if (pid == m->child)
				child_died(m, status);
		return;
	}
	if (sig == SIGHUP) {
		/* The master's own log, for a rotation; the serving process
		 * reloads everything else. */
		char err[256];
		if (log_open(m->spec->error_log, NULL, m->spec->level, err, sizeof err) < 0)
			plxd_log(PLXD_LOG_ERROR, "master: %s", err);
		if (m->child > 0)
			kill(m->child, SIGHUP);
		return;
	}
	/* SIGTERM, SIGINT: a graceful stop, the serving process's to do. */
	if (!m->told_stopping)
		systemd_notify("STOPPING=1");
	m->stopping = m->told_stopping = 1;
	stop_listening(m);
	if (m->child > 0) {
		kill(m->child, sig);
		return;
	}
	plxd_log(PLXD_LOG_INFO, "master: %s between serving processes: stopping", strsignal(sig));
	m->exit_status = 0;
	stop_master(m);
}

/* The watchdog's ping goes to systemd while the master has nothing to
 * doubt: the serving process pinged within the interval, or none is
 * running yet (starting, or waiting to restart, is the master at work). */
static void watchdog(struct master *m, uint64_t now)
{
	if (!m->watchdog_us || now < m->next_watchdog)
		return;
	m->next_watchdog = now + m->watchdog_us / 2000;
	if (m->child < 0 || !m->ready || now - m->alive_at < m->watchdog_us / 1000)
		systemd_notify("WATCHDOG=1");
}

int master_run(const struct master_spec *spec)
{
	struct master m = {
		.spec = spec,
		.from_child = -1,
		.child = -1,
		.sfd = -1,
	};
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGCHLD);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	m.sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	if (m.sfd < 0) {
		plxd_log(PLXD_LOG_ERROR, "master: signalfd: %s", strerror(errno));
		exit(1);
	}
	/* Orphans of a serving process come to the master, which ends
	 * them: none outlives the process that started it. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	m.watchdog_us = systemd_watchdog_usec();
	/* The serving process pings four times an interval; the master
	 * passes a ping on twice. */
	alive_ms = m.watchdog_us ? (unsigned long)(m.watchdog_us / 4000 ? m.watchdog_us / 4000 : 1)
				 : 0;
	m.next_watchdog = clock_ms();
	plxd_log(PLXD_LOG_INFO, "master %d: supervising the serving process", (int)getpid());
	m.restart_at = 1;
	for (;;) {
		uint64_t now = clock_ms();
		if (m.restart_at && now >= m.restart_at) {
			m.restart_at = 0;
			if (m.quick)
				restarts++;
			int rc = start_child(&m);
			if (rc == 0)
				return 0;
			if (rc < 0)
				m.restart_at = now + 1000;
		}
		watchdog(&m, now);
		int timeout = -1;
		if (m.restart_at)
			timeout = (int)(m.restart_at > now ? m.restart_at - now : 0);
		if (m.watchdog_us) {
			int w = (int)(m.next_watchdog > now ? m.next_watchdog - now : 0);
			if (timeout < 0 || w < timeout)
				timeout = w;
		}
		struct pollfd pfd[2] = {
			{ .fd = m.sfd, .events = POLLIN },
			{ .fd = m.from_child, .events = POLLIN },
		};
		int n = poll(pfd, m.from_child >= 0 ? 2 : 1, timeout);
		if (n < 0 && errno != EINTR) {
			plxd_log(PLXD_LOG_ERROR, "master: poll: %s", strerror(errno));
			continue;
		}
		/* Its reports first: a READY sent just before it died counts. */
		if (m.from_child >= 0 && (pfd[1].revents & (POLLIN | POLLHUP)))
			read_child(&m);
		if (pfd[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(m.sfd, &si, sizeof si) == (ssize_t)sizeof si)
				on_signal(&m, (int)si.ssi_signo);
		}
	}
}
