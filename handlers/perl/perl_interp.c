/* The Perl runtime's core: an interpreter made and destroyed, its set-up
 * (the exit override, @INC, the preload, the fork hooks) and what the
 * request glue works on, found in it (interp_bind). The request run is
 * perl_run.c; each concern it calls has a file: perl_env.c, perl_stdio.c,
 * perl_globals.c, perl_fcgi.c, perl_modwatch.c; the thread-only code is
 * perl_clone.c.
 *
 * exit must end the request, not the process: CORE::GLOBAL::exit is
 * replaced (before any user code compiles) by an XS function that records
 * the call and unwinds with my_exit(), like perl's own exit. Every call
 * into Perl runs under a JMPENV of ours (protect) that catches both
 * unwindings, exit's and a top-level die's; ended_by() (perl_run.c) tells them
 * apart. */
#include "perl_interp.h"
#include "perl_interp_int.h"
#include "alloc.h"
#include "perl_psgi_pm.h"   /* psgi_pm: PLXD/PSGI.pm */
#include "perl_worker_pm.h" /* worker_pm: PLXD/Worker.pm */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

extern char **environ;
EXTERN_C void boot_DynaLoader(pTHX_ CV *cv);

_Thread_local struct perl_interp *current;
_Thread_local volatile sig_atomic_t forked_child;
const struct perl_clone_hooks *perl_clone_hooks;

XS(xs_exit);
XS(xs_in_child);

static void on_sigpipe(int sig);

/* While an interpreter is destroyed (a DESTROY calling exit as plxd stops,
 * as a fresh clone replaces the interpreter, as a worker ends) no JMPENV of
 * ours is there to catch my_exit, and perl would call exit(), ending plxd
 * or the worker without a word: there exit dies instead, which the
 * DESTROY's caller catches, and destruction goes on. The log names the
 * file and line, as the die's "(in cleanup)" warning is shown only under
 * warnings; in thread mode as plxd's own line, since the interpreter's log
 * pipe is read under whichever request its thread serves next. */
static void exit_refused(pTHX_ struct perl_interp *pi, int status)
{
	char msg[PATH_MAX + 160];
	const COP *cop = PL_curcop;
	const char *file = cop ? CopFILE(cop) : NULL;
	int n = snprintf(msg, sizeof msg,
			"%s%s line %u: exit(%d) ignored: its interpreter is being destroyed, "
			"and exit would end %s\n",
			pi->cloned ? "perl: " : "", file ? file : "perl",
			cop ? (unsigned)CopLINE(cop) : 0, status,
			pi->cloned ? "plxd" : "the worker");
	ssize_t unused = write(2, msg, n > 0 && (size_t)n < sizeof msg ? (size_t)n : 0);
	(void)unused;
	croak("exit %d ignored: the interpreter is being destroyed", status);
}

/* CORE::exit (the exit op) checks the same: perl_interp_create points
 * every exit op compiled from then on here (ck_exit). */
static OP *pp_exit_guarded(pTHX)
{
	struct perl_interp *pi = current;
	if (pi && pi->destroying && !forked_child) {
		dSP;
		exit_refused(aTHX_ pi, MAXARG >= 1 && TOPs ? (int)SvIV(TOPs) : 0);
	}
	return PL_ppaddr[OP_EXIT](aTHX);
}

static Perl_check_t ck_exit_next;

static OP *ck_exit(pTHX_ OP *o)
{
	o = ck_exit_next(aTHX_ o);
	if (o->op_type == OP_EXIT)
		o->op_ppaddr = pp_exit_guarded;
	return o;
}

/* The ops through which a script changes the process state a request
 * sets up again: each counts that it ran (perl_interp_int.h), so that the
 * next request skips what nothing changed. Counted once the op is done:
 * a request that begins in another thread meanwhile sees the change (the
 * umask, process-wide) and puts it back, as it did before. A die inside
 * the op (a tainted argument) changed nothing. */
unsigned script_chdirs = 1, script_umasks = 1, script_alarms = 1, script_opens = 1,
	 script_masks = 1;

static void count(unsigned *n)
{
	__atomic_add_fetch(n, 1, __ATOMIC_RELEASE);
}

static OP *pp_chdir_watched(pTHX)
{
	OP *next = PL_ppaddr[OP_CHDIR](aTHX);
	count(&script_chdirs);
	return next;
}

static OP *pp_umask_watched(pTHX)
{
	OP *next = PL_ppaddr[OP_UMASK](aTHX);
	count(&script_umasks);
	return next;
}

static OP *pp_alarm_watched(pTHX)
{
	OP *next = PL_ppaddr[OP_ALARM](aTHX);
	count(&script_alarms);
	return next;
}

static OP *pp_open_watched(pTHX)
{
	OP *next = PL_ppaddr[PL_op->op_type](aTHX);
	count(&script_opens);
	return next;
}

static OP *pp_syscall_watched(pTHX)
{
	OP *next = PL_ppaddr[OP_SYSCALL](aTHX);
	count(&script_chdirs);
	count(&script_umasks);
	count(&script_alarms);
	count(&script_opens);
	count(&script_masks);
	return next;
}

/* POSIX's dup2 and close (a file put on, or taken off, a standard
 * descriptor under its handle) and sigprocmask, counted before they run:
 * in thread mode plxd loads POSIX itself, so that its being loaded says
 * nothing of what a script did. The CVs stay the same (imports, \&, the
 * prototype): only the C function they call is this one, which calls
 * POSIX's. */
static XSUBADDR_t posix_dup2, posix_close, posix_sigprocmask;

static XS(watched_dup2)
{
	count(&script_opens);
	posix_dup2(aTHX_ cv);
}

static XS(watched_close)
{
	count(&script_opens);
	posix_close(aTHX_ cv);
}

static XS(watched_sigprocmask)
{
	count(&script_masks);
	posix_sigprocmask(aTHX_ cv);
}

static int watch_xsub(pTHX_ const char *name, XSUBADDR_t *real, XSUBADDR_t watched)
{
	CV *cv = get_cv(name, 0);
	if (!cv || !CvISXSUB(cv))
		return -1;
	if (CvXSUB(cv) != watched) {
		*real = CvXSUB(cv); /* the same in every interpreter: one POSIX.so */
		CvXSUB(cv) = watched;
	}
	return 0;
}

/* Once plxd's thread set-up loaded POSIX: its functions that could move
 * a standard descriptor or block a signal are watched. -1: they are not
 * there to watch. */
int watch_posix(pTHX)
{
	if (watch_xsub(aTHX_ "POSIX::dup2", &posix_dup2, watched_dup2) < 0
			|| watch_xsub(aTHX_ "POSIX::close", &posix_close, watched_close) < 0
			|| watch_xsub(aTHX_ "POSIX::sigprocmask", &posix_sigprocmask,
					   watched_sigprocmask)
					< 0)
		return -1;
	return 0;
}

static Perl_check_t ck_chdir_next, ck_umask_next, ck_alarm_next, ck_syscall_next, ck_open_next,
		ck_sysopen_next;

static OP *watch(OP *o, OPCODE type, Perl_ppaddr_t pp)
{
	if (o->op_type == type)
		o->op_ppaddr = pp;
	return o;
}

static OP *ck_chdir(pTHX_ OP *o)
{
	return watch(ck_chdir_next(aTHX_ o), OP_CHDIR, pp_chdir_watched);
}

static OP *ck_umask(pTHX_ OP *o)
{
	return watch(ck_umask_next(aTHX_ o), OP_UMASK, pp_umask_watched);
}

static OP *ck_alarm(pTHX_ OP *o)
{
	return watch(ck_alarm_next(aTHX_ o), OP_ALARM, pp_alarm_watched);
}

static OP *ck_open(pTHX_ OP *o)
{
	return watch(ck_open_next(aTHX_ o), OP_OPEN, pp_open_watched);
}

static OP *ck_sysopen(pTHX_ OP *o)
{
	return watch(ck_sysopen_next(aTHX_ o), OP_SYSOPEN, pp_open_watched);
}

static OP *ck_syscall(pTHX_ OP *o)
{
	return watch(ck_syscall_next(aTHX_ o), OP_SYSCALL, pp_syscall_watched);
}

/* CORE::GLOBAL::exit: the request ends, not the process (see above while
 * the interpreter is destroyed). */
XS(xs_exit)
{
	dXSARGS;
	int status = items > 0 ? (int)SvIV(ST(0)) : 0;
	if (current && current->destroying && !forked_child)
		exit_refused(aTHX_ current, status);
	if (current) {
		current->exit_called = 1;
		current->exit_status = status;
	}
	my_exit((U32)status & 0xff);
}

/* PLXD::Worker::in_child(): whether this is a process the script forked. */
XS(xs_in_child)
{
	dXSARGS;
	PERL_UNUSED_VAR(items);
	XSRETURN_IV(forked_child ? 1 : 0);
}

static void xs_init(pTHX)
{
	static const char file[] = __FILE__;
	newXS("DynaLoader::boot_DynaLoader", boot_DynaLoader, file);
	newXS("PLXD::Worker::exit", xs_exit, file);
	newXS("PLXD::Worker::fcgi_accept", xs_fcgi_accept, file);
	newXS("PLXD::Worker::fcgi_finish", xs_fcgi_finish, file);
	newXS("PLXD::Worker::fcgi_flush", xs_fcgi_flush, file);
	newXS("PLXD::Worker::fcgi_last_call", xs_fcgi_last_call, file);
	newXS("PLXD::Worker::in_child", xs_in_child, file);
	newXS("PLXD::PSGI::client_gone", xs_psgi_client_gone, file);
	newXS("PLXD::PSGI::respond_plain", xs_psgi_respond_plain, file);
}

/* A child the script forked (fork, or open with "-|") runs the worker's
 * code on return from the script; it must leave instead of serving. It
 * gets SIGPIPE's default back, as it would have under CGI: with the
 * worker's no-op handler, a child writing to a closed pipe would get EPIPE
 * instead of dying, and one that ignores write errors would spin. A
 * disposition the script chose ($SIG{PIPE}) is kept. */
static void on_fork_child(void)
{
	forked_child = 1;
	if (current && current->cloned) {
		perl_clone_hooks->fork_child(current);
		return;
	}
	/* The worker's own copies of its response and log channels: a child
	 * holding them would hold the response open after closing its
	 * STDOUT, as a CGI script's child does not. */
	for (int i = 0; current && i < 2; i++) {
		int *fd = i == 0 ? &current->stdout_fd : &current->stderr_fd;
		if (*fd > 2) {
			close(*fd);
			*fd = -1;
		}
	}
	struct sigaction sa;
	if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == on_sigpipe) {
		sa.sa_handler = SIG_DFL;
		sigaction(SIGPIPE, &sa, NULL);
	}
}

/* Before a clone's script forks (perl_clone.c). */
static void on_fork_prepare(void)
{
	struct perl_interp *pi = current;
	if (pi && pi->cloned && !forked_child)
		perl_clone_hooks->fork_prepare(pi);
}

/* Counts forks (system, backticks, fork, pipe opens): a child may outlive
 * the request holding fd 1. */
static void on_fork_parent(void)
{
	if (current)
		current->forks++;
}

/* A write to a closed response (the client left) fails with EPIPE instead
 * of killing the worker. A handler rather than SIG_IGN, because an ignored
 * signal stays ignored in the programs scripts start. */
static void on_sigpipe(int sig)
{
	(void)sig;
}

void install_sigpipe(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigpipe;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGPIPE, &sa, NULL);
}

/* Runs fn under a JMPENV of ours. Returns 0 when fn returned, 2 when exit
 * (the script's or perl's own my_exit) unwound the stacks, 3 on a die with
 * no eval to catch it. The scopes fn entered are left either way. */
int protect(pTHX_ protected_fn *fn, void *arg)
{
	int ret;
	const I32 oldscope = PL_scopestack_ix;
	dJMPENV;
	JMPENV_PUSH(ret);
	if (ret == 0)
		fn(aTHX_ arg);
	JMPENV_POP;
	if (ret != 0) {
		/* As perl_run does after my_exit: my_exit_jump unwound the
		 * context and save stacks; the scope stack is ours to pop. */
		while (PL_scopestack_ix > oldscope)
			LEAVE;
		FREETMPS;
		PL_curstash = PL_defstash;
		PL_curcop = &PL_compiling;
	}
	return ret;
}

struct eval_arg {
	const char *code;
	const char *require;
};

static void do_eval(pTHX_ void *p)
{
	struct eval_arg *a = p;
	if (a->require)
		require_pv(a->require);
	else
		eval_pv(a->code, FALSE);
}

/* perl's process-wide set-up (PERL_SYS_INIT3) is done once per process,
 * before its first interpreter, and undone (PERL_SYS_TERM: it destroys the
 * locks every interpreter takes, the op tree's, the environment's, ...)
 * once, after its last, as perlembed says. A worker has one interpreter,
 * and undoes it as that one ends. In plxd each handler instance in thread
 * mode has a parent of its own, whose clones may outlive another's (a
 * stop ends the instances one by one), and a reload may start one after
 * another has ended: the set-up stays until plxd ends. */
static pthread_mutex_t sys_lock = PTHREAD_MUTEX_INITIALIZER;
static int sys_done;

struct perl_interp *perl_interp_create(const struct perl_interp_options *o, int argc, char **argv,
		char *err, size_t errlen)
{
	char **env = environ;
	pthread_mutex_lock(&sys_lock);
	if (!sys_done) {
		PERL_SYS_INIT3(&argc, &argv, &env);
		sys_done = 1;
	}
	pthread_mutex_unlock(&sys_lock);
	struct perl_interp *pi = interp_create(o, 0, err, errlen);
	if (pi && !o->threaded)
		pi->sys_init = 1;
	return pi;
}

static void options_copy(struct perl_interp_options *to, const struct perl_interp_options *o)
{
	*to = *o;
	to->preload = o->preload ? xstrdup(o->preload) : NULL;
	size_t n = 0;
	while (o->inc && o->inc[n])
		n++;
	char **inc = xcalloc(n + 1, sizeof *inc);
	for (size_t i = 0; i < n; i++)
		inc[i] = xstrdup(o->inc[i]);
	to->inc = inc;
}

static void options_free(struct perl_interp_options *o)
{
	free((char *)o->preload);
	for (size_t i = 0; o->inc && o->inc[i]; i++)
		free(o->inc[i]);
	free((char **)o->inc);
	memset(o, 0, sizeof *o);
}

#ifdef USE_ITHREADS
/* perl's process-wide locks that its own fork guard (Perl_atfork_lock:
 * PerlIO's and the op tree's) leaves out, held across each fork so that
 * none is held by another interpreter thread in the child. A child that
 * runs on in Perl (fork, a pipe open of "-|") takes them: setlocale("")
 * and localtime take the environment's, POSIX::localeconv the locale's,
 * compiling code the hints', an XS module's boot my_cxt's; one held at the
 * fork, the child waited forever (tests/integration/perl_thread_fork.t).
 * perl calls localtime_r under the environment's, so no other interpreter
 * thread holds glibc's time-zone lock at the fork either.
 * Taken in the order perl nests them: code holding the locale lock reads
 * the environment, and libperl calls newlocale under either, whose own
 * fork guard (server/locale_fork.c) is taken after these. The others are
 * held by perl only around a count or a pointer. The user-defined
 * property lock is left out: perl runs Perl code under it. */
static void perl_locks_prepare(void)
{
	MUTEX_LOCK(&PL_locale_mutex);
	/* For writing: it waits until no thread reads (the readers hold only
	 * a count, which the child would keep). */
	ENV_LOCK;
	MUTEX_LOCK(&PL_hints_mutex);
	MUTEX_LOCK(&PL_my_ctx_mutex);
	MUTEX_LOCK(&PL_check_mutex);
	MUTEX_LOCK(&PL_keyword_plugin_mutex);
	MUTEX_LOCK(&PL_dollarzero_mutex);
}

static void perl_locks_parent(void)
{
	MUTEX_UNLOCK(&PL_dollarzero_mutex);
	MUTEX_UNLOCK(&PL_keyword_plugin_mutex);
	MUTEX_UNLOCK(&PL_check_mutex);
	MUTEX_UNLOCK(&PL_my_ctx_mutex);
	MUTEX_UNLOCK(&PL_hints_mutex);
	ENV_UNLOCK;
	MUTEX_UNLOCK(&PL_locale_mutex);
}

/* The environment's lock is made anew rather than unlocked: its condition
 * variable may count waiters that are threads of the parent only. */
static void perl_locks_child(void)
{
	MUTEX_UNLOCK(&PL_dollarzero_mutex);
	MUTEX_UNLOCK(&PL_keyword_plugin_mutex);
	MUTEX_UNLOCK(&PL_check_mutex);
	MUTEX_UNLOCK(&PL_my_ctx_mutex);
	MUTEX_UNLOCK(&PL_hints_mutex);
	ENV_INIT;
	MUTEX_UNLOCK(&PL_locale_mutex);
}
#endif

/* The fork hooks, once per process however many interpreters it has. */
static void atfork_register(void)
{
	/* perl's own fork guard first: only perlmain.c registers it, so an
	 * embedder must. Its prepare runs after plxd's (prepare handlers run
	 * in reverse order) and its child handler before plxd's, which reopens
	 * the standard handles through PerlIO: without it, a fork while
	 * another interpreter thread held PerlIO's process-wide lock left the
	 * child waiting for it forever. */
	pthread_atfork(Perl_atfork_lock, Perl_atfork_unlock, Perl_atfork_unlock);
#ifdef USE_ITHREADS
	pthread_atfork(perl_locks_prepare, perl_locks_parent, perl_locks_child);
#endif
	pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child);
}

/* An interpreter, started with taint checks (perl -T) when tainted; the
 * process's perl is set up (PERL_SYS_INIT3). */
struct perl_interp *interp_create(const struct perl_interp_options *o, int tainted, char *err,
		size_t errlen)
{
	static char *args[] = { "", "-e", "0", NULL };
	static char *tainted_args[] = { "", "-T", "-e", "0", NULL };
	static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
	struct perl_interp *pi = xcalloc(1, sizeof *pi);
	pi->devnull = -1;
	pi->stdout_fd = -1;
	pi->stderr_fd = -1;
	for (int i = 0; i < 3; i++)
		pi->fd[i] = i;
	options_copy(&pi->opts, o);

	PerlInterpreter *my_perl = perl_alloc();
	if (!my_perl) {
		snprintf(err, errlen, "perl_alloc failed");
		goto fail;
	}
	pi->perl = my_perl;
	PERL_SET_CONTEXT(my_perl);
	perl_construct(my_perl);
	/* perl_destruct runs the END blocks of loaded modules. */
	PL_exit_flags |= PERL_EXIT_DESTRUCT_END;
	/* Before any code compiles (once per process: it checks). */
	wrap_op_checker(OP_EXIT, ck_exit, &ck_exit_next);
	wrap_op_checker(OP_CHDIR, ck_chdir, &ck_chdir_next);
	wrap_op_checker(OP_UMASK, ck_umask, &ck_umask_next);
	wrap_op_checker(OP_ALARM, ck_alarm, &ck_alarm_next);
	wrap_op_checker(OP_SYSCALL, ck_syscall, &ck_syscall_next);
	wrap_op_checker(OP_OPEN, ck_open, &ck_open_next);
	wrap_op_checker(OP_SYSOPEN, ck_sysopen, &ck_sysopen_next);
	if (perl_parse(my_perl, xs_init, tainted ? 4 : 3, tainted ? tainted_args : args, NULL) != 0
			|| perl_run(my_perl) != 0) {
		snprintf(err, errlen, "the Perl interpreter did not start");
		goto fail;
	}
	/* A thread's parent: the XS functions of PLXD::Worker's thread mode
	 * (thread_overrides), which what runs no threads does not have. */
	if (o->threaded) {
		if (!perl_clone_hooks) {
			snprintf(err, errlen, "interpreter threads need perl_interp_threads_init");
			goto fail;
		}
		perl_clone_hooks->xs_init(aTHX);
	}
	current = pi;

	pi->start_umask = umask(0);
	umask(pi->start_umask);
	pi->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	pi->stderr_fd = fcntl(2, F_DUPFD_CLOEXEC, 10);
	pi->stdout_fd = fcntl(1, F_DUPFD_CLOEXEC, 10);
	if (pi->devnull < 0 || pi->stderr_fd < 0 || pi->stdout_fd < 0) {
		snprintf(err, errlen, "cannot open /dev/null or copy fds 1 and 2: %s",
				strerror(errno));
		goto fail;
	}
	pthread_once(&atfork_once, atfork_register);
	install_sigpipe();

	/* $^X: under CGI the perl running the script, which programs the
	 * script starts with it ($^X -e ..., system $^X, ...) expect; the
	 * worker binary would refuse to run them. PLXD_PERL_PATH is
	 * $Config{perlpath} of the perl whose libperl the worker is built
	 * against. */
	sv_setpvs(GvSV(gv_fetchpvs("\030", GV_ADD | GV_NOTQUAL, SVt_PV)), PLXD_PERL_PATH);

	struct eval_arg boot = { .code = worker_pm };
	if (protect(aTHX_ do_eval, &boot) != 0 || SvTRUE(ERRSV)) {
		snprintf(err, errlen, "worker bootstrap failed: %s", SvPV_nolen(ERRSV));
		goto fail;
	}
	struct eval_arg psgi = { .code = psgi_pm };
	if (protect(aTHX_ do_eval, &psgi) != 0 || SvTRUE(ERRSV)) {
		snprintf(err, errlen, "worker bootstrap failed (PLXD::PSGI): %s",
				SvPV_nolen(ERRSV));
		goto fail;
	}
	struct eval_arg threaded = { .code = "PLXD::Worker::thread_overrides()" };
	if (o->threaded && (protect(aTHX_ do_eval, &threaded) != 0 || SvTRUE(ERRSV))) {
		snprintf(err, errlen, "thread set-up failed: %s", SvPV_nolen(ERRSV));
		goto fail;
	}
	/* What plxd's own set-up loaded with C code (PerlIO::scalar, for
	 * psgi.input; POSIX in thread mode, once its functions that matter
	 * are watched) is not counted as the scripts' (c_code_loaded). */
	if (!o->threaded || watch_posix(aTHX) == 0) {
		AV *loaded = get_av("DynaLoader::dl_modules", 0);
		pi->globals.plxd_c_modules = loaded ? av_count(loaded) : 0;
	}
	AV *inc = GvAVn(PL_incgv);
	pi->modwatch.system_inc = av_copy(aTHX_ inc);
	size_t ninc = 0;
	while (o->inc && o->inc[ninc])
		ninc++;
	for (size_t i = ninc; i-- > 0;) {
		av_unshift(inc, 1);
		av_store(inc, 0, newSVpv(o->inc[i], 0));
	}

	/* In thread mode this is plxd's own process, and the first
	 * instance's parent is perl's first interpreter, the one whose %SIG
	 * sets process dispositions: what the preload sets there stays in
	 * %SIG, for the clones, and plxd keeps its own (SIGHUP, SIGTERM,
	 * SIGINT, SIGPIPE). */
	static struct sigaction saved[NSIG];
	for (int sig = 1; o->threaded && sig < NSIG; sig++)
		sigaction(sig, NULL, &saved[sig]);
	if (o->preload && *o->preload) {
		struct eval_arg pre = { .require = o->preload };
		/* A tainted parent's preload runs on the thread whose run first
		 * needed it: its cancel may end the wait (script_fetch). */
		int held = load_begin(pi);
		int ret = held < 0 ? 2 : protect(aTHX_ do_eval, &pre);
		load_end(held);
		if (ret != 0 || SvTRUE(ERRSV)) {
			snprintf(err, errlen, "preload %s %s", o->preload,
					ret ? "called exit" : SvPV_nolen(ERRSV));
			goto fail;
		}
	}
	for (int sig = 1; o->threaded && sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &saved[sig], NULL);
	if (interp_bind(aTHX_ pi, err, errlen) < 0)
		goto fail;
	modules_record(aTHX_ pi);
	fd_refs_record(pi);
	return pi;

fail:
	perl_interp_destroy(pi);
	return NULL;
}

/* Finds in the interpreter what the request glue works on, and records the
 * state every request starts from: what the set-up (and the preload) left. */
int interp_bind(pTHX_ struct perl_interp *pi, char *err, size_t errlen)
{
	pi->sv_execname = GvSV(gv_fetchpvs("\030", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->stdio.open_std = get_cv("PLXD::Worker::open_std", 0);
	pi->stdio.restore_std = get_cv("PLXD::Worker::restore_std", 0);
	pi->open_data = get_cv("PLXD::Worker::open_data", 0);
	pi->globals.cgi_pm_reset = get_cv("PLXD::Worker::cgi_pm_reset", 0);
	/* cgi_pm_reset's own code holds these globs for as long as plxd can
	 * call it. */
	pi->globals.cgi_pm = (struct cgi_pm_query){
		.q = gv_fetchpvs("CGI::Q", GV_ADD, SVt_PV),
		.query_param = gv_fetchpvs("CGI::QUERY_PARAM", GV_ADD, SVt_PVHV),
		.query_charset = gv_fetchpvs("CGI::QUERY_CHARSET", GV_ADD, SVt_PV),
		.query_fieldnames = gv_fetchpvs("CGI::QUERY_FIELDNAMES", GV_ADD, SVt_PVHV),
		.query_tmpfiles = gv_fetchpvs("CGI::QUERY_TMPFILES", GV_ADD, SVt_PVHV),
		.been_there = gv_fetchpvs("CGI::BEEN_THERE", GV_ADD, SVt_PV),
	};
	pi->fcgi_install = get_cv("PLXD::Worker::fcgi_install", 0);
	pi->psgi.answer = get_cv("PLXD::PSGI::answer", 0);
	pi->psgi.input = get_cv("PLXD::PSGI::input", 0);
	pi->psgi.call = get_cv("PLXD::PSGI::call", 0);
	pi->psgi.logger = get_cv("PLXD::PSGI::logger", 0);
	pi->psgi.served = get_sv("PLXD::PSGI::served", 0);
	pi->psgi.none = get_sv("PLXD::PSGI::none", 0);
	pi->psgi.io_file = gv_stashpvs("IO::File", GV_ADD);
	pi->psgi.out = gv_fetchpvs("PLXD::PSGI::OUT", 0, SVt_PVIO);
	pi->psgi.stdout_gv = gv_fetchpvs("STDOUT", GV_NOTQUAL, SVt_PVIO);
	pi->psgi.stderr_gv = gv_fetchpvs("STDERR", GV_NOTQUAL, SVt_PVIO);
	pi->globals.settings_apply = get_cv("PLXD::Worker::settings_apply", 0);
	pi->globals.settings_snapshot = get_cv("PLXD::Worker::settings_snapshot", 0);
	pi->globals.settings_plan = get_cv("PLXD::Worker::settings_plan", 0);
	pi->globals.settings_assign = get_cv("PLXD::Worker::settings_assign", 0);
	pi->globals.settings_modules = get_av("PLXD::Worker::SETTINGS_MODULES", 0);
	CV *settings_base = get_cv("PLXD::Worker::settings_base", 0);
	if (!pi->psgi.answer || !pi->psgi.input || !pi->psgi.call || !pi->psgi.logger
			|| !pi->psgi.served || !pi->psgi.none || !pi->psgi.out
			|| !pi->psgi.stdout_gv || !pi->psgi.stderr_gv || !pi->globals.settings_apply
			|| !pi->globals.settings_snapshot || !pi->globals.settings_plan
			|| !pi->globals.settings_assign || !pi->globals.settings_modules
			|| !settings_base) {
		snprintf(err, errlen, "worker bootstrap failed: no PLXD::Worker::settings_*");
		return -1;
	}
	{
		dSP;
		PUSHMARK(SP);
		PUTBACK;
		call_sv((SV *)settings_base, G_VOID | G_DISCARD | G_EVAL);
	}
	pi->registry = perl_registry_create(aTHX_ pi->opts.taint);
	AV *inc = GvAVn(PL_incgv);
	pi->globals.base_inc = av_copy(aTHX_ inc);
	/* %SIG's magic (and PL_psig_ptr) comes to life with the glob. */
	pi->globals.sig = GvHVn(gv_fetchpvs("SIG", GV_ADD | GV_NOTQUAL, SVt_PVHV));
	for (int i = 1; i < SIG_SIZE; i++)
		pi->globals.base_sig[i] =
				PL_psig_ptr && PL_psig_ptr[i] ? newSVsv(PL_psig_ptr[i]) : NULL;
	pi->globals.base_warnhook = PL_warnhook ? newSVsv(PL_warnhook) : NULL;
	pi->globals.base_diehook = PL_diehook ? newSVsv(PL_diehook) : NULL;
	pi->globals.base_dowarn = PL_dowarn;
	pi->globals.base_overrides = newHV();
	HV *global = gv_stashpvs("CORE::GLOBAL", 0); /* Worker.pm made it */
	if (global) {
		HE *he;
		hv_iterinit(global);
		while ((he = hv_iternext(global))) {
			GV *gv = (GV *)HeVAL(he);
			if (isGV_with_GP(gv) && GvCV(gv))
				(void)hv_store(pi->globals.base_overrides, HeKEY(he), HeKLEN(he),
						newSViv(PTR2IV(GvCV(gv))), 0);
		}
	}
	pi->globals.sv_zero = GvSV(gv_fetchpvs("0", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->globals.sv_rs = GvSV(gv_fetchpvs("/", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->globals.sv_ors = GvSV(gv_fetchpvs("\\", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->globals.sv_ofs = GvSVn(PL_ofsgv);
	pi->globals.sv_listsep = GvSV(gv_fetchpvs("\"", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->globals.sv_subsep = GvSV(gv_fetchpvs(";", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->globals.sv_line = GvSV(gv_fetchpvs(".", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->stdio.std_gv[0] = PL_stdingv;
	pi->stdio.std_gv[1] = gv_fetchpvs("STDOUT", GV_ADD | GV_NOTQUAL, SVt_PVIO);
	pi->stdio.std_gv[2] = PL_stderrgv;
	pi->stdio.std_keep[0] = gv_fetchpvs("PLXD::Worker::KEEP_STDIN", 0, SVt_PVIO);
	pi->stdio.std_keep[1] = gv_fetchpvs("PLXD::Worker::KEEP_STDOUT", 0, SVt_PVIO);
	pi->stdio.std_keep[2] = gv_fetchpvs("PLXD::Worker::KEEP_STDERR", 0, SVt_PVIO);
	for (int fd = 0; fd < 3; fd++) {
		if (!pi->stdio.std_gv[fd] || !pi->stdio.std_keep[fd]
				|| !GvIOp(pi->stdio.std_gv[fd])) {
			snprintf(err, errlen, "worker bootstrap failed: no standard handle %d", fd);
			return -1;
		}
		pi->stdio.std_io[fd] = GvIOp(pi->stdio.std_gv[fd]);
		std_record(aTHX_ pi, fd);
	}
	std_record_target(pi, 0, pi->devnull);
	std_record_target(pi, 1, pi->stdout_fd);
	std_record_target(pi, 2, pi->stderr_fd);
	return 0;
}

int load_begin(struct perl_interp *pi)
{
	return perl_clone_hooks ? perl_clone_hooks->load_begin(pi) : 0;
}

void load_end(int held)
{
	if (held > 0)
		perl_clone_hooks->load_end();
}

/* One interpreter torn down at a time in the process: XS modules' global
 * teardown is not thread-safe. Variable::Magic (which namespace::autoclean
 * loads) counts the interpreters that loaded it and the last to unload it
 * destroys its process-wide mutex, while another, which already counted
 * itself out, may still free its objects in perl_destruct and lock it:
 * "panic: MUTEX_LOCK (22)", where nothing catches it, and perl exits the
 * process. mod_perl and uWSGI's psgi plugin destroy their interpreters one
 * at a time too. Only thread mode has more than one interpreter. */
static pthread_mutex_t destroy_lock = PTHREAD_MUTEX_INITIALIZER;

void perl_interp_destroy(struct perl_interp *pi)
{
	if (!pi || (pi->cloned && perl_clone_hooks->linger(pi)))
		return;
	perl_interp_destroy(pi->twin);
	perl_interp_destroy(pi->taint_parent);
	options_free(&pi->opts);
	pi->destroying = 1;
	current = pi; /* for exit, which DESTROY methods may call */
	if (pi->perl) {
		dTHXa(pi->perl);
		PERL_SET_CONTEXT(pi->perl);
		/* A worker's twin: perl's own signal handling is the current
		 * interpreter's (interp_enter); never a thread's parent's. */
		if (!pi->cloned && !pi->opts.threaded)
			PL_curinterp = pi->perl;
		if (pi->registry)
			perl_registry_destroy(aTHX_ pi->registry);
		SvREFCNT_dec(pi->globals.base_inc);
		SvREFCNT_dec(pi->modwatch.system_inc);
		for (int i = 1; i < SIG_SIZE; i++)
			SvREFCNT_dec(pi->globals.base_sig[i]);
		SvREFCNT_dec(pi->globals.base_warnhook);
		SvREFCNT_dec(pi->globals.base_diehook);
		SvREFCNT_dec(pi->globals.base_overrides);
		psgi_unbind(aTHX_ pi);
		pthread_mutex_lock(&destroy_lock);
		perl_destruct(pi->perl);
		perl_free(pi->perl);
		pthread_mutex_unlock(&destroy_lock);
		if (pi->sys_init)
			PERL_SYS_TERM();
	}
	if (pi->cloned)
		perl_clone_hooks->end(pi);
	if (environ == pi->env.env_array) {
		static char *empty[] = { NULL };
		environ = empty;
	}
	free(pi->env.env_array);
	free(pi->env.env_buf);
	free(pi->env.vars);
	free(pi->env.cwd);
	free(pi->clone.child_env);
	free(pi->clone.child_env_buf);
	free(pi->clone.children);
	for (size_t i = 0; i < pi->modwatch.nmodules; i++)
		free(pi->modwatch.modules[i].path);
	free(pi->modwatch.modules);
	if (pi->devnull >= 0)
		close(pi->devnull);
	if (pi->stdout_fd >= 0)
		close(pi->stdout_fd);
	if (pi->stderr_fd >= 0)
		close(pi->stderr_fd);
	if (current == pi)
		current = NULL;
	free(pi);
}
