/* The runtime's thread-only code, compiled only into what runs
 * interpreter threads (plxd-perl-threads.so): an interpreter cloned from
 * plxd's parent, its alarm, its children (forks noted, waited for among
 * its own, reaped, killed by a stop), its forked child set up as a CGI
 * script's, its cancel. The common code reaches it through
 * perl_clone_hooks, set by perl_interp_threads_init. */
#include "perl_interp.h"
#include "perl_interp_int.h"
#include "alloc.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <poll.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>

extern char **environ;

XS(xs_alarm_set);
XS(xs_note_child);
XS(xs_wait_own);
static void clone_child_std(pTHX_ struct perl_interp *pi);

/* SIGALRM in plxd: a clone's timer sends it to the clone's thread only
 * (SIGEV_THREAD_ID). Without SA_RESTART, so that sleep, select and a read
 * of that thread return early; perl then runs $SIG{ALRM} at its next op
 * (cancel_check). A SIGALRM from anywhere else is ignored: it no longer
 * ends plxd. */
static void on_thread_alarm(int sig)
{
	(void)sig;
	struct perl_interp *pi = current;
	if (pi && pi->clone.alarm_armed) {
		pi->clone.alarm_armed = 0;
		pi->clone.alarm_fired = 1;
		pi->perl->Isig_pending = 1;
	}
}

static void install_thread_alarm(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_thread_alarm;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
}

/* The calling thread's alarm timer, for clone pi. */
static void alarm_create(struct perl_interp *pi)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, install_thread_alarm);
	struct sigevent ev;
	memset(&ev, 0, sizeof ev);
	ev.sigev_notify = SIGEV_THREAD_ID;
	ev.sigev_signo = SIGALRM;
	ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	pi->clone.alarm_timer_ok = timer_create(CLOCK_MONOTONIC, &ev, &pi->clone.alarm_timer) == 0;
}

/* Arms the alarm for secs seconds (0: disarms it). Returns the seconds
 * the previous one had left, rounded as alarm(2) does. */
static unsigned alarm_arm(struct perl_interp *pi, unsigned secs)
{
	struct itimerspec to, old;
	memset(&to, 0, sizeof to);
	memset(&old, 0, sizeof old);
	to.it_value.tv_sec = secs;
	pi->clone.alarm_armed = 0; /* a SIGALRM from the old one is late now */
	if (pi->clone.alarm_timer_ok)
		timer_settime(pi->clone.alarm_timer, 0, &to, &old);
	pi->clone.alarm_fired = 0;
	pi->clone.alarm_armed = secs > 0;
	unsigned left = (unsigned)old.it_value.tv_sec;
	if ((left == 0 && old.it_value.tv_nsec > 0) || old.it_value.tv_nsec >= 500000000)
		left++;
	return left;
}

static void alarm_disarm(struct perl_interp *pi)
{
	if (pi->cloned && (pi->clone.alarm_armed || pi->clone.alarm_fired))
		(void)alarm_arm(pi, 0);
}

/* The thread's alarm went off: the script's $SIG{ALRM} runs now, and may
 * die (into the script's eval), as perl's own handler would. */
static void alarm_deliver(pTHX_ struct perl_interp *pi)
{
	pi->clone.alarm_fired = 0;
	if (!pi->run || forked_child)
		return;
	/* As perl's own handler runs: on a stack of its own (this may be the
	 * middle of an op), its die thrown again once that is popped, and $@
	 * left alone when it returns. */
	SV *saved_err = newSVsv(ERRSV);
	dSP;
	PUSHSTACKi(PERLSI_SIGNAL);
	PUSHMARK(SP);
	PUTBACK;
	call_pv("PLXD::Worker::alarm_fire", G_DISCARD | G_EVAL | G_NOARGS);
	POPSTACK;
	if (SvTRUE(ERRSV)) {
		SvREFCNT_dec(saved_err);
		croak_sv(ERRSV);
	}
	sv_setsv(ERRSV, saved_err);
	SvREFCNT_dec(saved_err);
}

/* PLXD::Worker::alarm_set(SECONDS): CORE::GLOBAL::alarm in a clone. */
XS(xs_alarm_set)
{
	dXSARGS;
	struct perl_interp *pi = current;
	IV secs = items > 0 ? SvIV(ST(0)) : 0;
	if (secs < 0) {
		Perl_ck_warner(aTHX_ packWARN(WARN_MISC), "alarm() with negative argument");
		XSRETURN_UNDEF;
	}
	if (!pi || !pi->cloned)
		XSRETURN_IV(0);
	if (pi->clone.alarm_fired) /* it went off before this op could run it */
		alarm_deliver(aTHX_ pi);
	XSRETURN_IV((IV)alarm_arm(pi, secs > UINT_MAX ? UINT_MAX : (unsigned)secs));
}

/* Notes pid, a process a clone's script forked, for it to reap. */
static void child_note(struct perl_interp *pi, pid_t pid)
{
	if (pi->clone.nchildren == pi->clone.children_cap) {
		pi->clone.children_cap = pi->clone.children_cap ? pi->clone.children_cap * 2 : 8;
		pi->clone.children = xrealloc(pi->clone.children,
				pi->clone.children_cap * sizeof *pi->clone.children);
	}
	pi->clone.children[pi->clone.nchildren++] = pid;
}

/* PLXD::Worker::note_child(PID): a clone's script forked PID. */
XS(xs_note_child)
{
	dXSARGS;
	struct perl_interp *pi = current;
	if (items == 1 && pi && pi->cloned && !forked_child)
		child_note(pi, (pid_t)SvIV(ST(0)));
	XSRETURN_EMPTY;
}

/* Forgets pid, a child of the clone's reaped. */
static void child_forget(struct perl_interp *pi, pid_t pid)
{
	for (size_t i = 0; i < pi->clone.nchildren; i++)
		if (pi->clone.children[i] == pid) {
			pi->clone.children[i] = pi->clone.children[--pi->clone.nchildren];
			return;
		}
}

/* The clone's own children: what its scripts forked, and the programs of
 * its pipe opens not yet closed (PL_fdpid). n at most cap. */
static size_t children_own(pTHX_ struct perl_interp *pi, pid_t *pids, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < pi->clone.nchildren && n < cap; i++)
		pids[n++] = pi->clone.children[i];
	for (SSize_t fd = 0; PL_fdpid && fd <= AvFILLp(PL_fdpid) && n < cap; fd++) {
		SV *sv = AvARRAY(PL_fdpid)[fd];
		if (sv && SvTYPE(sv) >= SVt_IV && SvIVX(sv) > 0) /* my_popen's */
			pids[n++] = (pid_t)SvIVX(sv);
	}
	return n;
}

/* Whether pid is among them, however many there are. */
static int child_is_own(pTHX_ struct perl_interp *pi, pid_t pid)
{
	for (size_t i = 0; i < pi->clone.nchildren; i++)
		if (pi->clone.children[i] == pid)
			return 1;
	for (SSize_t fd = 0; PL_fdpid && fd <= AvFILLp(PL_fdpid); fd++) {
		SV *sv = AvARRAY(PL_fdpid)[fd];
		if (sv && SvTYPE(sv) >= SVt_IV && SvIVX(sv) == pid)
			return 1;
	}
	return 0;
}

/* waitpid(-1) among the clone's own children: the first that ended, 0 when
 * none has yet and flags has WNOHANG, -1 with ECHILD when it has none, or
 * EINTR. Blocks on their pidfds. */
static pid_t wait_among(pTHX_ struct perl_interp *pi, int flags, int *status)
{
	enum { MAX_WAITED = 64 };
	pid_t pids[MAX_WAITED];
	size_t n = children_own(aTHX_ pi, pids, MAX_WAITED);
	size_t alive = 0;
	for (size_t i = 0; i < n; i++) {
		pid_t got = waitpid(pids[i], status, flags | WNOHANG);
		if (got > 0) {
			child_forget(pi, got);
			return got;
		}
		if (got == 0)
			pids[alive++] = pids[i];
		else if (errno == ECHILD)
			child_forget(pi, pids[i]); /* reaped elsewhere */
		else if (errno == EINTR)
			return -1;
	}
	if (alive == 0) {
		errno = ECHILD;
		return -1;
	}
	if (flags & WNOHANG)
		return 0;
	struct pollfd pfd[MAX_WAITED];
	size_t npfd = 0;
	for (size_t i = 0; i < alive; i++) {
		int fd = (int)syscall(SYS_pidfd_open, pids[i], 0);
		if (fd >= 0)
			pfd[npfd++] = (struct pollfd){ .fd = fd, .events = POLLIN };
	}
	/* With no pidfd (a child gone meanwhile), look again soon. */
	int rc = poll(pfd, npfd, npfd == alive ? -1 : 10);
	int e = errno;
	for (size_t i = 0; i < npfd; i++)
		close(pfd[i].fd);
	if (rc < 0 && e == EINTR) {
		errno = EINTR;
		return -1;
	}
	return wait_among(aTHX_ pi, flags, status);
}

/* PLXD::Worker::wait_own(PID, FLAGS): wait and waitpid in a clone. PID
 * -1, 0 or a group (< -1) waits among the script's own children only; a
 * PID of its own is waited for as the builtin does, and any other (plxd's
 * CGI scripts, another thread's programs) is no child of the script's:
 * -1 with ECHILD. $? as the builtin sets it. */
XS(xs_wait_own)
{
	dXSARGS;
	struct perl_interp *pi = current;
	pid_t want = items > 0 ? (pid_t)SvIV(ST(0)) : -1;
	int flags = items > 1 ? (int)SvIV(ST(1)) : 0;
	int status = 0;
	pid_t got;
	for (;;) {
		if (want > 0 && pi && !child_is_own(aTHX_ pi, want)) {
			got = -1;
			errno = ECHILD;
		} else if (want > 0) {
			got = waitpid(want, &status, flags);
			if (got > 0 && pi)
				child_forget(pi, got);
		} else if (pi) {
			got = wait_among(aTHX_ pi, flags, &status);
		} else {
			got = -1;
			errno = ECHILD;
		}
		if (got >= 0 || errno != EINTR)
			break;
		PERL_ASYNC_CHECK(); /* an alarm, or the end of the script */
	}
	STATUS_NATIVE_CHILD_SET(got > 0 ? status : -1);
	XSRETURN_IV(got);
}

/* What a forked child gets as standard descriptor i when the script's
 * handle has none: the handle's own descriptor if it still holds what the
 * worker put there, else the request's (the response channel, the log,
 * /dev/null). A handle is without one while perl reopens it on a pipe
 * (open STDERR, '|-', ...): on a descriptor above 2 perl closes it before
 * the pipe is made, and the pipe may take its number; the command would
 * then hold its own pipe's write end and never see its end. A fresh
 * process keeps fd 2 open there, so its command gets the log. System calls
 * only (fstat). */
static int clone_child_std_fd(struct perl_interp *pi, int i)
{
	if ((i == 0 && pi->stdin_body) || !std_fd_moved(pi, i))
		return pi->fd[i];
	return i == 0 ? pi->devnull : i == 1 ? pi->stdout_fd : pi->stderr_fd;
}

/* A child forked by a script running inside plxd (system, backticks, a
 * pipe open, fork) is a copy of plxd, and starts as a CGI script's child
 * would: its standard descriptors are the request's, its environment the
 * request's %ENV as the script left it (on_fork_prepare), and every
 * descriptor of plxd's (the listening socket, other clients' connections,
 * the logs) is closed at its exec; signal dispositions are the defaults,
 * but for what the script set to 'IGNORE' in %SIG, and no signal is
 * blocked. System calls only, no allocation: another
 * thread of plxd may have held the allocator's lock at the fork. */
static void clone_child(struct perl_interp *pi)
{
	dTHXa(pi->perl);
	for (int i = 0; i < 3; i++) {
		/* Where the script has its handle now (open STDOUT, '>', FILE
		 * leaves it elsewhere: its children write there, as a CGI
		 * script's would). */
		PerlIO *f = std_handle(aTHX_ pi, i);
		int fd = f ? PerlIO_fileno(f) : -1;
		if (fd < 0)
			fd = clone_child_std_fd(pi, i);
		if (fd != i)
			dup2(fd, i);
	}
	if (pi->clone.child_env)
		environ = pi->clone.child_env;
	else if (pi->env.env_array)
		environ = pi->env.env_array;
	/* A group of its own, as plxd gives a CGI script, so that a timeout
	 * or a stop ends what it starts too (perl_interp_kill_children). */
	setpgid(0, 0);
	pid_t me = getpid();
	if (write(pi->clone.births[1], &me, sizeof me) < 0) {
		/* full (a script that starts thousands): a stop misses it */
	}
	close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) < 0)
			continue;
		void *h = (sa.sa_flags & SA_SIGINFO) ? (void *)sa.sa_sigaction
						     : (void *)sa.sa_handler;
		if (sa.sa_handler == SIG_DFL || h == (void *)PL_csighandlerp
				|| h == (void *)PL_csighandler1p || h == (void *)PL_csighandler3p)
			continue;
		sa.sa_handler = SIG_DFL;
		sa.sa_flags = 0;
		sigemptyset(&sa.sa_mask);
		sigaction(sig, &sa, NULL);
	}
	/* What the script set to 'IGNORE' in %SIG (on_fork_prepare): perl
	 * ignored nothing in the process for it, as %SIG installs no handler
	 * outside perl's first interpreter. */
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(&pi->clone.child_ignore, sig) == 1) {
			struct sigaction sa;
			memset(&sa, 0, sizeof sa);
			sa.sa_handler = SIG_IGN;
			sigaction(sig, &sa, NULL);
		}
	sigset_t none;
	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, NULL);
	clone_child_std(aTHX_ pi);
}

/* A child that runs on in Perl (fork, a pipe open of "-|") has its
 * standard handles on fds 0, 1 and 2, as in a process of its own: its
 * prints reach what perl puts there (a pipe open's pipe), a reopen
 * (open STDOUT, '>', FILE) lands where a program it then execs writes,
 * and closing them leaves it no copy of the response. */
static void clone_child_std(pTHX_ struct perl_interp *pi)
{
	int copies[5] = { pi->fd[0], pi->fd[1], pi->fd[2], pi->stdout_fd, pi->stderr_fd };
	for (int i = 0; pi->stdio.open_std && i < 3; i++) {
		PerlIO *f = std_handle(aTHX_ pi, i);
		if (!f || PerlIO_fileno(f) <= 2)
			continue;
		IO *io = GvIO(pi->stdio.std_gv[i]);
		U8 flush = io ? IoFLAGS(io) & IOf_FLUSH : 0; /* $| */
		pi->fd[i] = i;
		std_open(aTHX_ pi, i);
		if ((io = GvIO(pi->stdio.std_gv[i])))
			IoFLAGS(io) |= flush;
	}
	for (int k = 0; k < 5; k++) {
		if (copies[k] <= 2)
			continue;
		if (k < 3 && pi->clone.fd_held && PerlIOUnix_refcnt(copies[k]) > 0)
			PerlIOUnix_refcnt_dec(copies[k]);
		close(copies[k]);
	}
	pi->clone.fd_held = 0;
	pi->stdout_fd = pi->stderr_fd = -1;
}

/* Before a clone's script forks: the environment its child gets is %ENV
 * as the script left it, which perl writes to no environ in a clone (and
 * C code there, getenv() included, sees plxd's). Read without moving
 * %ENV's iterator, which the script may be using (each). */
static void clone_fork_prepare(struct perl_interp *pi)
{
	dTHXa(pi->perl);
	HV *hv = GvHVn(PL_envgv);
	size_t n = 0, bytes = 0;
	for (int pass = 0; pass < 2; pass++) {
		char *p = pi->clone.child_env_buf;
		n = 0;
		for (STRLEN b = 0; HvARRAY(hv) && b <= HvMAX(hv); b++)
			for (HE *he = HvARRAY(hv)[b]; he; he = HeNEXT(he)) {
				SV *val = HeVAL(he);
				STRLEN klen = (STRLEN)HeKLEN(he), vlen = 0;
				const char *v = SvOK(val) ? SvPV_const(val, vlen) : "";
				if (pass == 0) {
					bytes += klen + vlen + 2;
					n++;
					continue;
				}
				pi->clone.child_env[n++] = p;
				memcpy(p, HeKEY(he), klen);
				p[klen] = '=';
				memcpy(p + klen + 1, v, vlen);
				p[klen + 1 + vlen] = '\0';
				p += klen + vlen + 2;
			}
		if (pass == 0) {
			if (bytes > pi->clone.child_env_buf_cap) {
				free(pi->clone.child_env_buf);
				pi->clone.child_env_buf_cap = bytes * 2;
				pi->clone.child_env_buf = xmalloc(pi->clone.child_env_buf_cap);
			}
			if (n + 1 > pi->clone.child_env_cap) {
				free(pi->clone.child_env);
				pi->clone.child_env_cap = (n + 1) * 2;
				pi->clone.child_env = xmalloc(pi->clone.child_env_cap
						* sizeof *pi->clone.child_env);
			}
		}
	}
	pi->clone.child_env[n] = NULL;
	sigemptyset(&pi->clone.child_ignore);
	for (int sig = 1; PL_psig_ptr && sig < SIG_SIZE && sig < NSIG; sig++) {
		SV *h = PL_psig_ptr[sig];
		if (h && !SvROK(h) && SvPOK(h) && strEQ(SvPVX(h), "IGNORE") && sig != SIGKILL
				&& sig != SIGSTOP)
			sigaddset(&pi->clone.child_ignore, sig);
	}
}

/* Whether perl_interp_cancel asked for the end of pi's script: the ask is
 * taken, and the run noted as canceled. */
static int cancel_take(struct perl_interp *pi)
{
	if (!pi || !pi->run || !__atomic_exchange_n(&pi->clone.cancel, 0, __ATOMIC_ACQ_REL))
		return 0;
	pi->clone.canceled = 1;
	return 1;
}

/* XS modules keep what their BOOT makes in C statics, which every
 * interpreter of the process shares, and perl fills some of it lazily:
 * Package::Stash::XS (which Moose, and so Catalyst, loads) compiles one
 * regex for all, and perl writes that regex's UTF-8 strings into it at
 * its first match. Four threads first loading Catalyst at once, one
 * matched while another wrote them, read a NULL, and SIGSEGV ended the
 * serving process. uWSGI's psgi plugin loads an application into its
 * interpreters one after another; plxd loads code where it is first asked
 * for, one load at a time in the process. A thread that waits looks for
 * its cancel every LOAD_WAIT_SLICE_MS: a load its cancel cannot end (in C
 * code, SIGALRM blocked) holds up another's until that one's timeout or a
 * stop, not for ever. */
#define LOAD_WAIT_SLICE_MS 20
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned loads; /* under way or waited for (atomic) */

static int clone_load_begin(struct perl_interp *pi)
{
	int held = 0;
	__atomic_add_fetch(&loads, 1, __ATOMIC_ACQ_REL);
	for (;;) {
		struct timespec until = clock_deadline(CLOCK_MONOTONIC, LOAD_WAIT_SLICE_MS);
		int rc = pthread_mutex_clocklock(&load_lock, CLOCK_MONOTONIC, &until);
		if (rc == 0)
			return 1; /* counted until clone_load_end */
		if (rc != ETIMEDOUT)
			break; /* none other for this mutex: the load goes on */
		if (cancel_take(current ? current : pi)) {
			held = -1;
			break;
		}
	}
	__atomic_sub_fetch(&loads, 1, __ATOMIC_ACQ_REL);
	return held;
}

static void clone_load_end(void)
{
	pthread_mutex_unlock(&load_lock);
	__atomic_sub_fetch(&loads, 1, __ATOMIC_ACQ_REL);
}

static int clone_loading(void)
{
	return __atomic_load_n(&loads, __ATOMIC_ACQUIRE) != 0;
}

/* perl's signal check (PERL_ASYNC_CHECK, between ops) in a clone: ends
 * the script when perl_interp_cancel asked, with the unwinding of exit,
 * which no eval catches; otherwise dispatches signals as perl does. */
static void cancel_check(pTHX)
{
	struct perl_interp *pi = current;
	if (cancel_take(pi))
		my_exit(255);
	Perl_despatch_signals(aTHX);
	if (pi && pi->clone.alarm_fired)
		alarm_deliver(aTHX_ pi);
}

int perl_interp_take_channel(struct perl_interp *pi, int handle)
{
	int *fd = handle == 1 ? &pi->stdout_fd : &pi->stderr_fd;
	int taken = *fd;
	*fd = -1;
	return taken;
}

pid_t *perl_interp_take_children(struct perl_interp *pi, size_t *n)
{
	for (size_t i = 0; pi->twin && i < pi->twin->clone.nchildren; i++)
		child_note(pi, pi->twin->clone.children[i]);
	if (pi->twin)
		pi->twin->clone.nchildren = 0;
	pid_t *pids = pi->clone.children;
	*n = pi->clone.nchildren;
	pi->clone.children = NULL;
	pi->clone.nchildren = pi->clone.children_cap = 0;
	return pids;
}

void perl_interp_give_children(struct perl_interp *pi, pid_t *pids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		child_note(pi, pids[i]);
	free(pids);
}

void perl_interp_cancel(struct perl_interp *pi)
{
	struct perl_interp *on = __atomic_load_n(&pi->on, __ATOMIC_ACQUIRE);
	if (on)
		pi = on;
	int asked_before = __atomic_exchange_n(&pi->clone.cancel, 1, __ATOMIC_ACQ_REL);
	/* Makes perl look, at its next op. */
	__atomic_store_n(&pi->perl->Isig_pending, 1, __ATOMIC_RELEASE);
	/* A clone that has reached no op since it was last asked waits in a
	 * system call: SIGALRM's handler has no SA_RESTART
	 * (on_thread_alarm), so sleep, select, a read or a wait returns
	 * early. Not at the first ask: the programs its script started,
	 * killed just before, end first, and a wait for one (system,
	 * backticks, waitpid) returns as it would, reaping it and closing
	 * what perl opened for it, rather than unwinding from inside. */
	if (pi->cloned && asked_before)
		pthread_kill(pi->clone.thread, SIGALRM);
}

/* Whether pid is a live child of this process (not reaped, not a zombie),
 * from /proc: a pid the script's own wait reaped may be another's now. */
static int live_child(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t len = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (len <= 0)
		return 0;
	buf[len] = '\0';
	/* "pid (comm) state ppid ...": comm may hold spaces and ')'. */
	const char *end = strrchr(buf, ')');
	char state;
	int ppid;
	return end && sscanf(end + 1, " %c %d", &state, &ppid) == 2 && ppid == (int)getpid()
			&& state != 'Z';
}

unsigned perl_interp_kill_children(struct perl_interp *pi)
{
	unsigned n = pi->twin ? perl_interp_kill_children(pi->twin) : 0;
	pid_t born[64];
	ssize_t len;
	/* Each is a process group of its own (clone_child): what it started
	 * goes with it, as a worker's whole group does. Only while it lives,
	 * or its pid could be another's group by now. */
	while (pi->cloned && (len = read(pi->clone.births[0], born, sizeof born)) > 0)
		for (size_t i = 0; i < (size_t)len / sizeof *born; i++)
			if (live_child(born[i])
					&& (kill(-born[i], SIGKILL) == 0
							|| kill(born[i], SIGKILL) == 0))
				n++;
	return n;
}

/* perl_clone reads the parent: one clone at a time, and the parent runs
 * nothing else. */
static pthread_mutex_t clone_lock = PTHREAD_MUTEX_INITIALIZER;

struct perl_interp *perl_interp_clone(struct perl_interp *parent, const int fds[3], char *err,
		size_t errlen)
{
	struct perl_interp *pi = xcalloc(1, sizeof *pi);
	pi->cloned = 1;
	pi->parent = parent;
	pi->opts.taint = parent->opts.taint;
	pi->start_umask = parent->start_umask;
	pi->globals.plxd_c_modules = parent->globals.plxd_c_modules;
	pi->clone.births[0] = pi->clone.births[1] = -1;
	pi->stdout_fd = fds[1];
	pi->stderr_fd = fds[2];
	pi->devnull = fds[0];
	pi->fd[0] = fcntl(fds[0], F_DUPFD_CLOEXEC, 3);
	pi->fd[1] = fcntl(fds[1], F_DUPFD_CLOEXEC, 3);
	pi->fd[2] = fcntl(fds[2], F_DUPFD_CLOEXEC, 3);
	if (pi->fd[0] < 0 || pi->fd[1] < 0 || pi->fd[2] < 0
			|| pipe2(pi->clone.births, O_CLOEXEC | O_NONBLOCK) < 0) {
		snprintf(err, errlen, "cannot copy an interpreter's descriptors: %s",
				strerror(errno));
		goto fail;
	}
	/* The script's folder becomes this thread's working directory, not
	 * plxd's. */
	if (unshare(CLONE_FS) < 0) {
		snprintf(err, errlen, "unshare(CLONE_FS): %s", strerror(errno));
		goto fail;
	}
	pthread_mutex_lock(&clone_lock);
	PERL_SET_CONTEXT(parent->perl);
	PerlInterpreter *my_perl = perl_clone(parent->perl, CLONEf_KEEP_PTR_TABLE);
	pi->perl = my_perl; /* the context is the clone's now */
	ptr_table_free(PL_ptr_table);
	PL_ptr_table = NULL;
	/* perl_clone leaves ${^UTF8CACHE} at 0 (perl's own threads get the
	 * same): without its cache of character offsets, each substr, index
	 * or length on a UTF-8 string counts from the string's start (20,000
	 * substr calls along one took 6 times as long). */
	PL_utf8cache = parent->perl->Iutf8cache;
	/* Perl's own folders, which no variable holds (so the clone has no
	 * copy): plain strings, read from the parent while it stays still. */
	pi->modwatch.system_inc = newAV();
	for (SSize_t i = 0; i <= AvFILLp(parent->modwatch.system_inc); i++) {
		SV *dir = AvARRAY(parent->modwatch.system_inc)[i];
		if (dir && SvPOK(dir))
			av_push(pi->modwatch.system_inc, newSVpvn(SvPVX(dir), SvCUR(dir)));
	}
	pthread_mutex_unlock(&clone_lock);
	PL_perl_destruct_level = 2;
	PL_signalhook = cancel_check;
	current = pi;
	for (int i = 0; i < 3; i++)
		PerlIOUnix_refcnt_inc(pi->fd[i]);
	pi->clone.fd_held = 1;
	pi->clone.thread = pthread_self();
	alarm_create(pi);
	/* Its standard handles are clones of plxd's fds 0-2: onto its own.
	 * Closed first, or perl would reopen them in place, with a dup2 onto
	 * plxd's own fd 0, 1 or 2 (closing the clone's copy leaves plxd's
	 * descriptor open: perl counts who holds it). */
	pi->stdio.open_std = get_cv("PLXD::Worker::open_std", 0);
	GV *std_gv[3] = { PL_stdingv, gv_fetchpvs("STDOUT", GV_ADD | GV_NOTQUAL, SVt_PVIO),
		PL_stderrgv };
	for (int i = 0; pi->stdio.open_std && i < 3; i++) {
		if (std_gv[i] && GvIO(std_gv[i]) && IoIFP(GvIO(std_gv[i])))
			do_close(std_gv[i], FALSE);
		std_open(aTHX_ pi, i);
	}
	if (!pi->stdio.open_std || SvTRUE(ERRSV)) {
		snprintf(err, errlen, "cannot open the standard handles of a cloned interpreter");
		goto fail;
	}
	std_unbuffer(aTHX_ pi);
	if (interp_bind(aTHX_ pi, err, errlen) < 0)
		goto fail;
	/* What the parent loaded (the preload) every fresh clone gets again
	 * as it was: a change there is not a reason to replace this one. */
	modules_record(aTHX_ pi);
	for (size_t i = 0; i < pi->modwatch.nmodules; i++)
		pi->modwatch.modules[i].inherited = 1;
	fd_refs_record(pi);
	return pi;

fail:
	perl_interp_destroy(pi);
	return NULL;
}

/* In a clone, waitpid(-1) would reap plxd's own children (CGI scripts,
 * other threads' programs): only the processes its scripts forked and left
 * are reaped (the fork override notes them; system, backticks and pipe
 * opens wait for their own). */
static void clone_children_reap(struct perl_interp *pi)
{
	pid_t born[64];
	/* Only a fork writes there (clone_child). */
	while (pi->forks != pi->clone.births_read
			&& read(pi->clone.births[0], born, sizeof born) > 0)
		; /* the request is over: its processes are no stop's to end */
	pi->clone.births_read = pi->forks;
	size_t kept = 0;
	for (size_t i = 0; i < pi->clone.nchildren; i++) {
		pid_t pid;
		while ((pid = waitpid(pi->clone.children[i], NULL, WNOHANG)) < 0 && errno == EINTR)
			;
		if (pid == 0)
			pi->clone.children[kept++] = pi->clone.children[i]; /* still running */
	}
	pi->clone.nchildren = kept;
}

/* A clone's twin: a clone of plxd's tainted parent, which the first
 * thread that needs it makes. */
static struct perl_interp *clone_twin_make(struct perl_interp *pi, char *err, size_t errlen)
{
	struct perl_interp *parent = pi->parent;
	pthread_mutex_lock(&clone_lock);
	if (!parent->taint_parent)
		parent->taint_parent = interp_create(&parent->opts, 1, err, errlen);
	pthread_mutex_unlock(&clone_lock);
	if (!parent->taint_parent)
		return NULL;
	int fds[3] = { open("/dev/null", O_RDWR | O_CLOEXEC),
		fcntl(pi->stdout_fd, F_DUPFD_CLOEXEC, 3),
		fcntl(pi->stderr_fd, F_DUPFD_CLOEXEC, 3) };
	if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0) {
		snprintf(err, errlen, "cannot copy an interpreter's descriptors: %s",
				strerror(errno));
		for (int i = 0; i < 3; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		return NULL;
	}
	return perl_interp_clone(parent->taint_parent, fds, err, errlen);
}

/* After its interpreter is freed: the clone's own descriptors, its alarm
 * timer and its births pipe. */
static void clone_end(struct perl_interp *pi)
{
	for (int i = 0; i < 3; i++) {
		if (pi->fd[i] < 0)
			continue;
		/* A Perl thread that runs on holds the number: /dev/null, and
		 * perl closes it with the thread's last handle on it. Closed
		 * here, the number could be a client's connection next. */
		if (pi->stdio.threads_left)
			dup2(pi->devnull, pi->fd[i]);
		int held = 0;
		if (pi->clone.fd_held && PerlIOUnix_refcnt(pi->fd[i]) > 0)
			held = PerlIOUnix_refcnt_dec(pi->fd[i]);
		if (!pi->stdio.threads_left || held <= 0)
			close(pi->fd[i]);
	}
	if (pi->clone.alarm_timer_ok) {
		pi->clone.alarm_armed = 0;
		timer_delete(pi->clone.alarm_timer);
	}
	for (int i = 0; i < 2; i++)
		if (pi->clone.births[i] >= 0)
			close(pi->clone.births[i]);
}

static void clone_xs_init(pTHX)
{
	static const char file[] = __FILE__;
	newXS("PLXD::Worker::note_child", xs_note_child, file);
	newXS("PLXD::Worker::alarm_set", xs_alarm_set, file);
	newXS("PLXD::Worker::wait_own", xs_wait_own, file);
}

static const struct perl_clone_hooks clone_hooks = {
	.xs_init = clone_xs_init,
	.fork_prepare = clone_fork_prepare,
	.fork_child = clone_child,
	.alarm_disarm = alarm_disarm,
	.children_reap = clone_children_reap,
	.twin_make = clone_twin_make,
	.end = clone_end,
	.linger = perl_linger,
	.load_begin = clone_load_begin,
	.load_end = clone_load_end,
	.loading = clone_loading,
};

void perl_interp_threads_init(void)
{
	perl_clone_hooks = &clone_hooks;
}
