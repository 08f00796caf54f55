/* The worker pool's keeper thread and the processes it starts and ends:
 * spawning a worker, waiting for it to be ready, relaying its stderr,
 * ending and reaping it, and replacing workers (the spare of a reload).
 *
 * Workers are spawned with posix_spawn (glibc: clone(CLONE_VM|CLONE_VFORK)
 * and exec), never fork(): plxd is threaded, and a forked copy of a
 * threaded process inherits locks other threads held. Each
 * worker gets a process group of its own (a timeout kills it with every
 * program its script started), default signal dispositions, an empty
 * signal mask, and a minimal environment (none of plxd's: no PERL5LIB,
 * PERL5OPT...). Its exit is watched through a pidfd, so no SIGCHLD handler
 * is involved and no one else's child is ever reaped. */
#include "spawn_child.h"
#include "perl_pool.h"
#include "perl_pool_slot.h"
#include "perl_wire.h"
#include "alloc.h"
#include "clock.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The longest stderr line logged as one entry. */
#define LINE_MAX_BYTES 2048
/* A request's relay reads at most this much stderr per call, so a script
 * flooding stderr cannot starve its output. */
#define RELAY_CHUNK (64 * 1024)

static int pidfd_wait(int pidfd, unsigned long timeout_ms);
static void log_exit(struct slot *s, int status, enum slot_end how);
static void relay(struct slot *s, const char *label, int flush, size_t limit);
static struct slot *slot_old(struct perl_pool *p, enum slot_state state);
static int keeper_spare(struct perl_pool *p, uint64_t now, uint64_t *next);

/* ---- one worker process ---- */

/* The INIT message: settings, then the preload file, then the inc folders,
 * each NUL-terminated. */
static int send_init(int ctl, const struct settings *st)
{
	size_t preload_len = st->preload[0] ? strlen(st->preload) + 1 : 0;
	char *inc = xmalloc(strlen(st->inc) + 2);
	size_t inc_len = 0;
	const char *p = st->inc;
	while (*p) {
		p += strspn(p, " \t\n");
		size_t len = strcspn(p, " \t\n");
		if (len == 0)
			break;
		memcpy(inc + inc_len, p, len);
		inc_len += len;
		inc[inc_len++] = '\0';
		p += len;
	}
	struct perl_wire_init init = {
		.type = PERL_WIRE_INIT,
		.version = PERL_WIRE_VERSION,
		.max_requests = st->max_requests,
		.max_rss_kb = st->max_rss_kb,
		.max_memory = st->max_memory,
		.preload_len = (uint32_t)preload_len,
		.inc_len = (uint32_t)inc_len,
		.taint = st->taint,
		.twin_at_start = (uint32_t)st->twin_at_start,
	};
	/* clang-format off */
	struct iovec iov[3] = {
		{ &init, sizeof init },
		{ st->preload, preload_len },
		{ inc, inc_len },
	};
	/* clang-format on */
	int rc = perl_wire_send(ctl, iov, 3, NULL, 0);
	free(inc);
	return rc;
}

/* Starts a worker process for slot s. Returns 0, or -1 with err. */
int pool_spawn(struct slot *s, const struct settings *st, char *err, size_t errlen)
{
	int sv[2] = { -1, -1 }, ep[2] = { -1, -1 }, op[2] = { -1, -1 };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	int fa_ready = 0, attr_ready = 0, rc;
	pid_t pid = -1;
	char *argv[] = { "plxd-perl-worker", "--plxd-worker", NULL };
	/* clang-format off */
	char *envp[] = {
#ifdef PLXD_PERL_LSAN_SUPPRESSIONS
		"LSAN_OPTIONS=print_suppressions=0:suppressions=" PLXD_PERL_LSAN_SUPPRESSIONS,
#endif
		NULL
	};
	/* clang-format on */

	/* CLOEXEC: a child another thread spawns at the same moment must not
	 * inherit these ends. */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0
			|| pipe2(ep, O_CLOEXEC) < 0 || pipe2(op, O_CLOEXEC) < 0) {
		rc = errno;
		goto fail;
	}
	if ((rc = posix_spawn_file_actions_init(&fa)) != 0)
		goto fail;
	fa_ready = 1;
	if ((rc = posix_spawn_file_actions_adddup2(&fa, sv[1], 3)) != 0
			|| (rc = posix_spawn_file_actions_adddup2(&fa, ep[1], 2)) != 0
			|| (rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0))
					!= 0
			|| (rc = posix_spawn_file_actions_adddup2(&fa, op[1], 1)) != 0
			|| (rc = posix_spawn_file_actions_addclosefrom_np(&fa, 4)) != 0)
		goto fail;
	if ((rc = spawn_attr_init(&attr)) != 0)
		goto fail;
	attr_ready = 1;
	if ((rc = posix_spawn(&pid, st->worker_path, &fa, &attr, argv, envp)) != 0)
		goto fail;
	/* Nobody else reaps our children, so pid still names it here. */
	s->w.pidfd = pidfd_open(pid, 0);
	if (s->w.pidfd < 0) {
		rc = errno;
		kill(-pid, SIGKILL);
		waitpid(pid, NULL, 0);
		pid = -1;
		goto fail;
	}
	close(sv[1]);
	close(ep[1]);
	close(op[1]);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	fcntl(ep[0], F_SETFL, O_NONBLOCK);
	fcntl(op[0], F_SETFL, O_NONBLOCK);
	s->w.pid = pid;
	s->w.ctl = sv[0];
	s->w.r.err = ep[0];
	s->w.r.out = op[0];
	s->lines.len = 0;
	if (send_init(s->w.ctl, st) < 0) {
		snprintf(err, errlen, "cannot send settings to perl worker %d: %s", (int)pid,
				strerror(errno));
		return -1; /* the caller ends the process */
	}
	return 0;

fail:
	snprintf(err, errlen, "cannot start %s: %s", st->worker_path, strerror(rc));
	for (int i = 0; i < 2; i++) {
		if (sv[i] >= 0)
			close(sv[i]);
		if (ep[i] >= 0)
			close(ep[i]);
		if (op[i] >= 0)
			close(op[i]);
	}
	if (fa_ready)
		posix_spawn_file_actions_destroy(&fa);
	if (attr_ready)
		posix_spawnattr_destroy(&attr);
	return -1;
}

/* Waits for READY, logging what the worker prints meanwhile. Returns 0,
 * or -1 with err. */
int pool_await_ready(struct slot *s, unsigned long timeout_ms, char *err, size_t errlen)
{
	char label[64];
	snprintf(label, sizeof label, "perl worker %d", (int)s->w.pid);
	uint64_t deadline = clock_ms() + timeout_ms;
	char buf[4096];
	for (;;) {
		uint64_t now = clock_ms();
		if (now >= deadline) {
			snprintf(err, errlen, "%s did not start within %lu ms", label, timeout_ms);
			return -1;
		}
		/* clang-format off */
		struct pollfd p[2] = {
			{ .fd = s->w.ctl, .events = POLLIN },
			{ .fd = s->w.r.err, .events = POLLIN },
		};
		/* clang-format on */
		int rc = poll(p, 2, (int)(deadline - now));
		if (rc < 0 && errno != EINTR) {
			snprintf(err, errlen, "%s: poll: %s", label, strerror(errno));
			return -1;
		}
		if (p[1].revents)
			relay(s, label, 0, RELAY_CHUNK);
		if (!p[0].revents)
			continue;
		int fds[2], nfds;
		ssize_t n = perl_wire_recv(s->w.ctl, buf, sizeof buf - 1, fds, &nfds, MSG_DONTWAIT);
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (n < 0 && errno == EAGAIN)
			continue;
		struct perl_wire_ready ready;
		if (n < (ssize_t)sizeof ready) {
			relay(s, label, 1, SIZE_MAX);
			snprintf(err, errlen, "%s exited while starting", label);
			return -1;
		}
		memcpy(&ready, buf, sizeof ready);
		if (ready.type != PERL_WIRE_READY) {
			snprintf(err, errlen, "%s: unexpected message while starting", label);
			return -1;
		}
		if (!ready.ok) {
			relay(s, label, 1, SIZE_MAX);
			buf[n] = '\0';
			snprintf(err, errlen, "%s could not start: %s", label, buf + sizeof ready);
			return -1;
		}
		return 0;
	}
}

/* Waits up to timeout_ms for the process behind pidfd to exit. Returns 1
 * when it has. */
static int pidfd_wait(int pidfd, unsigned long timeout_ms)
{
	uint64_t deadline = clock_ms() + timeout_ms;
	for (;;) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		uint64_t now = clock_ms();
		int left = now >= deadline ? 0 : (int)(deadline - now);
		int rc = poll(&p, 1, left);
		if (rc > 0)
			return 1;
		if (rc == 0 || errno != EINTR)
			return 0;
	}
}

static void log_exit(struct slot *s, int status, enum slot_end how)
{
	if (WIFSIGNALED(status) && !(how == END_KILL && WTERMSIG(status) == SIGKILL))
		plxd_log(PLXD_LOG_ERROR, "perl worker %d died of signal %d (%s)", (int)s->w.pid,
				WTERMSIG(status), strsignal(WTERMSIG(status)));
	else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
		plxd_log(PLXD_LOG_WARN, "perl worker %d exited with status %d", (int)s->w.pid,
				WEXITSTATUS(status));
}

/* Ends the slot's process however it stands, kills what is left of its
 * process group (programs its scripts started in the background), reaps
 * it, and closes its descriptors. */
void pool_end_process(struct slot *s, enum slot_end how, unsigned long grace_ms)
{
	if (s->w.pid <= 0)
		return;
	if (s->w.ctl >= 0)
		close(s->w.ctl); /* a worker reading its next request sees the end */
	s->w.ctl = -1;
	if (how == END_KILL || !pidfd_wait(s->w.pidfd, grace_ms)) {
		if (how != END_KILL)
			plxd_log(PLXD_LOG_WARN, "perl worker %d did not exit within %lu ms: killed",
					(int)s->w.pid, grace_ms);
		kill(-s->w.pid, SIGKILL);
		kill(s->w.pid, SIGKILL); /* in case it left its group */
		pidfd_wait(s->w.pidfd, 10000);
	}
	/* Until the worker is reaped its pid, and so its group id, cannot be
	 * reused: the group may be signalled safely until then. */
	kill(-s->w.pid, SIGKILL);
	char label[64];
	snprintf(label, sizeof label, "perl worker %d", (int)s->w.pid);
	relay(s, label, 1, SIZE_MAX);
	siginfo_t info;
	memset(&info, 0, sizeof info);
	int status = 0;
	if (waitid(P_PIDFD, (id_t)s->w.pidfd, &info, WEXITED) == 0) {
		status = info.si_code == CLD_EXITED ? W_EXITCODE(info.si_status, 0)
						    : W_EXITCODE(0, info.si_status);
		log_exit(s, status, how);
	}
	close(s->w.pidfd);
	close(s->w.r.err);
	if (s->w.r.out >= 0)
		close(s->w.r.out);
	s->w.pidfd = -1;
	s->w.r.err = -1;
	s->w.r.out = -1;
	s->w.pid = -1;
}

/* ---- stderr ---- */

static void relay(struct slot *s, const char *label, int flush, size_t limit)
{
	char buf[8192];
	size_t total = 0;
	while (s->w.r.err >= 0 && total < limit) {
		ssize_t n = read(s->w.r.err, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		total += (size_t)n;
		log_lines_feed(&s->lines, label, buf, (size_t)n);
	}
	if (flush)
		log_lines_flush(&s->lines, label);
}

void perl_pool_describe_exit(struct perl_worker *w, char *out, size_t outlen)
{
	struct slot *s = (struct slot *)w;
	out[0] = '\0';
	/* WNOWAIT: the keeper still reaps it, and logs its end. */
	siginfo_t info;
	memset(&info, 0, sizeof info);
	if (s->w.pidfd < 0
			|| waitid(P_PIDFD, (id_t)s->w.pidfd, &info, WEXITED | WNOHANG | WNOWAIT) < 0
			|| info.si_pid == 0)
		return;
	spawn_describe_status(info.si_code == CLD_EXITED ? W_EXITCODE(info.si_status, 0)
							 : W_EXITCODE(0, info.si_status),
			out, outlen);
}

/* ---- the keeper ---- */

/* With the lock held: idle workers that died (killed from outside, an
 * out-of-memory kill) are marked for replacing now, not found dead by the
 * next request; a ready spare that died is ended. */
static void idle_dead_down(struct perl_pool *p)
{
	for (unsigned i = 0; i < p->n; i++) {
		struct slot *s = &p->slots[i];
		struct pollfd pf = { .fd = s->w.pidfd, .events = POLLIN };
		if (s->state != SLOT_IDLE || s->w.pidfd < 0 || poll(&pf, 1, 0) <= 0)
			continue;
		plxd_log(PLXD_LOG_WARN, "perl worker %d died while idle: replacing it",
				(int)s->w.pid);
		s->state = SLOT_DOWN;
		s->end = END_NONE;
		s->retry_at_ms = 0;
		p->idle--;
	}
	struct pollfd pf = { .fd = p->spare.w.pidfd, .events = POLLIN };
	if (p->spare_state == SPARE_READY && poll(&pf, 1, 0) > 0) {
		plxd_log(PLXD_LOG_WARN, "perl worker %d died before it served: replacing it",
				(int)p->spare.w.pid);
		p->spare.end = END_NONE;
		p->spare_state = SPARE_ENDING;
	}
}

/* With the lock held: a slot in state whose worker runs the settings of an
 * older generation, or NULL. */
static struct slot *slot_old(struct perl_pool *p, enum slot_state state)
{
	for (unsigned i = 0; i < p->n; i++)
		if (p->slots[i].state == state && p->slots[i].generation != p->generation)
			return &p->slots[i];
	return NULL;
}

/* With the lock held: the ready spare's process goes into s (IDLE and
 * taken out of the idle count, DOWN, or given back by its request: lent to
 * no one), whose own process goes into the spare for the keeper to end as
 * end says. The caller then makes s idle (slot_mark_idle). */
void pool_spare_take(struct perl_pool *p, struct slot *s, enum slot_end end)
{
	struct slot *sp = &p->spare;
	struct perl_worker w = s->w;
	s->w.pid = sp->w.pid;
	s->w.pidfd = sp->w.pidfd;
	s->w.ctl = sp->w.ctl;
	s->w.r.out = sp->w.r.out;
	s->w.r.err = sp->w.r.err;
	sp->w.pid = w.pid;
	sp->w.pidfd = w.pidfd;
	sp->w.ctl = w.ctl;
	sp->w.r.out = w.r.out;
	sp->w.r.err = w.r.err;
	struct log_lines lines = s->lines;
	s->lines = sp->lines;
	sp->lines = lines;
	/* The slot's figures are its new worker's. */
	s->generation = sp->generation;
	s->failures = 0;
	s->end = END_NONE;
	s->served = s->compiled = 0;
	s->w.r.served = 0;
	s->w.r.compiled = 0;
	s->script[0] = '\0';
	sp->end = end;
	p->spare_state = SPARE_ENDING;
	pthread_cond_signal(&p->keeper_cond);
}

/* With the lock held: a copy of the settings a worker starts with, for the
 * keeper to use once it lets go of the lock. */
static struct settings *settings_now(struct perl_pool *p)
{
	struct settings *st = pool_settings_copy(&(struct perl_backend_settings){
			.worker_path = p->settings->worker_path,
			.start_timeout_ms = p->settings->start_timeout_ms,
			.max_requests = p->settings->max_requests,
			.max_rss_kb = p->settings->max_rss_kb,
			.max_memory = p->settings->max_memory,
			.preload = p->settings->preload,
			.inc = p->settings->inc,
			.taint = p->settings->taint,
	});
	st->twin_at_start = p->twin_wanted;
	return st;
}

/* Without the lock: starts s's worker with st (freed here) and waits until
 * it is ready. Returns 1 when it is, 0 when it failed (logged, and what
 * started killed). */
static int start_worker(struct slot *s, struct settings *st)
{
	char err[1024];
	int ok = pool_spawn(s, st, err, sizeof err) == 0
			&& pool_await_ready(s, st->start_timeout_ms, err, sizeof err) == 0;
	if (!ok) {
		plxd_log(PLXD_LOG_ERROR, "perl: %s", err);
		pool_end_process(s, END_KILL, 0);
	}
	pool_settings_free(st);
	return ok;
}

/* With the lock held (released while it waits on a process): the keeper's
 * work on the spare. Returns 1 when it did some, 0 when there is none to do
 * now (*next: when a start may be retried, if sooner). */
static int keeper_spare(struct perl_pool *p, uint64_t now, uint64_t *next)
{
	struct slot *sp = &p->spare;
	if (p->spare_state == SPARE_READY) {
		struct slot *s = NULL;
		for (unsigned i = 0; i < p->n && !s; i++)
			if (p->slots[i].state == SLOT_DOWN)
				s = &p->slots[i];
		if (sp->generation != p->generation) {
			/* A reload while it started: it runs old settings. */
			sp->end = END_STOP;
			p->spare_state = SPARE_ENDING;
		} else if (s || (s = slot_old(p, SLOT_IDLE))) {
			enum slot_end end = s->state == SLOT_DOWN ? s->end : END_STOP;
			if (s->state == SLOT_IDLE)
				p->idle--;
			pool_spare_take(p, s, end);
			struct perl_waiter *wt = pool_slot_idle(p, s);
			if (wt) {
				pthread_mutex_unlock(&p->lock);
				perl_queue_serve(wt);
				pthread_mutex_lock(&p->lock);
			}
		} else if (!slot_old(p, SLOT_BUSY)) {
			sp->end = END_STOP; /* nothing left to replace */
			p->spare_state = SPARE_ENDING;
		} else {
			return 0; /* an old worker comes back: perl_pool_release */
		}
		return 1;
	}
	if (p->spare_state == SPARE_ENDING) {
		enum slot_end end = sp->end;
		pthread_mutex_unlock(&p->lock);
		pool_end_process(sp, end, STOP_GRACE_MS);
		pthread_mutex_lock(&p->lock);
		p->spare_state = SPARE_EMPTY;
		return 1;
	}
	if (p->spare_state != SPARE_EMPTY || (!slot_old(p, SLOT_IDLE) && !slot_old(p, SLOT_BUSY)))
		return 0;
	if (sp->retry_at_ms > now) {
		if (!*next || sp->retry_at_ms < *next)
			*next = sp->retry_at_ms;
		return 0;
	}
	p->spare_state = SPARE_STARTING;
	unsigned generation = p->generation;
	struct settings *st = settings_now(p);
	pthread_mutex_unlock(&p->lock);
	int ok = start_worker(sp, st);
	pthread_mutex_lock(&p->lock);
	if (ok) {
		sp->generation = generation;
		sp->failures = 0;
		sp->end = END_NONE; /* stopped, should plxd stop first */
		p->spare_state = SPARE_READY;
	} else {
		/* The old workers serve on meanwhile. */
		sp->failures++;
		unsigned shift = sp->failures < 5 ? sp->failures : 5;
		sp->retry_at_ms = clock_ms() + (1000u << shift) / 2;
		p->spare_state = SPARE_EMPTY;
	}
	return 1;
}

void *pool_keeper_main(void *arg)
{
	struct perl_pool *p = arg;
	pthread_mutex_lock(&p->lock);
	while (!p->stopping) {
		idle_dead_down(p);
		struct slot *s = NULL;
		uint64_t now = clock_ms(), next = 0;
		/* A ready spare first: it may fill a DOWN slot at once. */
		if (p->spare_state == SPARE_READY && keeper_spare(p, now, &next))
			continue;
		for (unsigned i = 0; i < p->n; i++) {
			struct slot *c = &p->slots[i];
			if (c->state != SLOT_DOWN)
				continue;
			if (c->retry_at_ms <= now) {
				s = c;
				break;
			}
			if (!next || c->retry_at_ms < next)
				next = c->retry_at_ms;
		}
		if (!s && keeper_spare(p, now, &next))
			continue;
		if (!s) {
			/* A second at most: idle workers are looked at then. */
			uint64_t wait = next && next - now < 1000 ? next - now : 1000;
			struct timespec ts = clock_deadline(CLOCK_MONOTONIC, wait);
			pthread_cond_timedwait(&p->keeper_cond, &p->lock, &ts);
			continue;
		}
		s->state = SLOT_STARTING;
		enum slot_end end = s->end;
		s->end = END_NONE;
		s->served = s->compiled = 0; /* its process is gone */
		unsigned generation = p->generation;
		struct settings *st = settings_now(p);
		pthread_mutex_unlock(&p->lock);

		pool_end_process(s, end, STOP_GRACE_MS);
		int ok = start_worker(s, st);

		pthread_mutex_lock(&p->lock);
		if (ok) {
			s->generation = generation;
			s->failures = 0;
			s->served = s->compiled = 0;
			s->w.r.served = 0;
			s->w.r.compiled = 0;
			if (p->stopping) {
				s->state = SLOT_DOWN;
				s->end = END_STOP;
			} else {
				/* Of an older generation if a reload came meanwhile:
				 * it serves until a spare replaces it. */
				struct perl_waiter *wt = pool_slot_idle(p, s);
				if (wt) {
					pthread_mutex_unlock(&p->lock);
					perl_queue_serve(wt);
					pthread_mutex_lock(&p->lock);
				}
			}
		} else {
			/* Back off: a broken preload file should not make plxd
			 * spawn workers in a tight loop. */
			s->failures++;
			unsigned shift = s->failures < 5 ? s->failures : 5;
			s->retry_at_ms = clock_ms() + (1000u << shift) / 2;
			s->state = SLOT_DOWN;
			s->end = END_NONE;
		}
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}
