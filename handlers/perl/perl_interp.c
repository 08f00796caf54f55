/* The worker's Perl runtime: interpreter set-up and the per-request glue.
 *
 * A request runs the way a CGI process would run the script: %ENV is the
 * request's variables (the real environment, so programs started with
 * system() see it), fds 0 and 1 are the request body and the response
 * (programs started by the script inherit them and write into the
 * response), the working directory is the script's folder, the umask
 * plxd's at start-up, $^X the perl
 * matching the embedded libperl. What a script changes by accident is put
 * back after each request: STDIN, STDOUT and STDERR (closed, reopened
 * elsewhere in Perl or under it on fds 0-2, layers pushed, tied, their
 * globs replaced, their tell), select, $|, $/, $\, $,, $", $;, $^W, $^I,
 * $?, %SIG and alarm, @INC, @ARGV; $0 and $^T are set per request; %SIG
 * is set to what the script's own compile left; children it left are
 * reaped. Checks are pointer and flag comparisons and one fstat per
 * standard fd: only what changed costs anything to restore.
 *
 * The script runs as a top-level program: its sub is called without
 * G_EVAL, so $^S is 0 at its top level and a die there is perl's own
 * top-level die, which prints the message to STDERR and unwinds with
 * my_failure_exit(). exit must end the request, not the process:
 * CORE::GLOBAL::exit is replaced (before any user code compiles) by an XS
 * function that records the call and unwinds with my_exit(), like perl's
 * own exit. Every call into Perl runs under a JMPENV of ours that catches
 * both unwindings; ended_by() tells them apart.
 *
 * A script written as a FastCGI accept loop (CGI::Fast, FCGI) runs one
 * turn of its loop per request: PLXD/Worker.pm points FCGI's accept at
 * fcgi_accept() below, which answers the request, waits for the next one
 * and, when it is for the same script, sets it up and lets the loop go on;
 * otherwise the loop ends and the script returns.
 *
 * A script whose #! line asks for taint checks (-T, -t) runs in a twin
 * interpreter started with them (perl -T), made beside the first when the
 * first such script comes ([perl] taint = honour; interp_for). */
#include "perl_interp.h"
#include "clock.h"
#include "perl_registry.h"
#include "perl_source.h"
#include "alloc.h"
#include "perl_worker_pm.h" /* worker_pm: PLXD/Worker.pm */

#include <EXTERN.h>
#include <perl.h>
#include <XSUB.h>
#include <perliol.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
EXTERN_C void boot_DynaLoader(pTHX_ CV *cv);

/* What a standard handle looked like when it was (re)opened, and what the
 * worker put on its fd. */
struct std_state {
	PerlIO *f;
	PerlIOl *top; /* the top layer: another means layers were pushed */
	U32 flags;
	dev_t dev; /* the fd's file between requests: /dev/null, the */
	ino_t ino; /* response pipe, the log pipe */
};

enum std_check { STD_CLEAN, STD_CLEARERR, STD_REOPEN };

/* A file a module was loaded from, as first seen. */
struct module_file {
	char *path;
	struct stat st;
	int inherited; /* a clone's copy of its parent's: only a restart loads it again */
};

/* Where a FastCGI-style script stands in its accept loop. */
struct fcgi_state {
	int accepted;                  /* its first accept took the request that
				   started the run */
	int answered;                  /* the current request has been answered: its
				   output goes nowhere (fd 1 is /dev/null) */
	int last_call;                 /* FCGI's LastCall: the next accept ends the loop */
	struct perl_run *pending;      /* a request for another script, which ended
				     the loop: served once the script returns */
	struct perl_stderr_hold after; /* fd 2 while the script runs on after
					  its request was answered */
	uint64_t turn_start;           /* clock_us() when the current request began */
	unsigned long turn_forks;
};

struct perl_interp {
	PerlInterpreter *perl;
	struct perl_registry *registry;
	int devnull;
	int stdout_fd;  /* copy of the response channel, to restore fd 1 */
	int stderr_fd;  /* copy of the original fd 2, to restore it */
	int stdin_body; /* fd 0 holds a request body */
	/* The descriptors STDIN, STDOUT and STDERR live on: 0, 1 and 2 in a
	 * worker process; an interpreter thread inside plxd has its own, as
	 * 0-2 are plxd's. The std_* functions index by handle (0-2) and act on
	 * these. */
	int fd[3];
	/* A clone holds one count of perl's own on each fd[i] (PerlIOUnix_refcnt):
	 * perl never closes them, so no other thread of plxd (an accept) can be
	 * given the number between perl's close and the dup2 that puts a file
	 * back there, or a second close at the clone's end. */
	int fd_held;
	int cloned;      /* an interpreter thread's, cloned from plxd's parent */
	int cancel;      /* perl_interp_cancel asked for the script's end (atomic) */
	int canceled;    /* ... and it was ended */
	pid_t *children; /* a clone's: what its scripts forked, not yet reaped */
	size_t nchildren, children_cap;
	pthread_t thread; /* a clone's: the thread it serves on */
	/* A clone's alarm: a timer whose SIGALRM goes to its thread only. */
	timer_t alarm_timer;
	int alarm_timer_ok;
	volatile sig_atomic_t alarm_armed; /* a SIGALRM now is this alarm's */
	volatile sig_atomic_t alarm_fired; /* ... and it came: run $SIG{ALRM} */
	int births[2];                     /* a clone's: each process its scripts start writes its
			  pid into [1] (clone_child), for a stop to find */
	struct std_state std[3];
	Off_t std_posn[2];     /* tell(STDIN), tell(STDOUT) when opened */
	GV *std_gv[3];         /* STDIN, STDOUT, STDERR */
	GV *std_keep[3];       /* aliases sharing their original GPs */
	IO *std_io[3];         /* their original IOs (kept by Worker.pm) */
	CV *open_std;          /* PLXD::Worker::open_std */
	CV *restore_std;       /* PLXD::Worker::restore_std */
	CV *open_data;         /* PLXD::Worker::open_data */
	CV *cgi_pm_reset;      /* PLXD::Worker::cgi_pm_reset */
	CV *settings_apply;    /* PLXD::Worker::settings_apply */
	CV *settings_snapshot; /* PLXD::Worker::settings_snapshot */
	AV *settings_modules;  /* @PLXD::Worker::SETTINGS_MODULES */
	CV *fcgi_install;      /* PLXD::Worker::fcgi_install */
	int fcgi_installed;
	/* -T and -t on a #! line ([perl] taint = honour): taint checks are
	 * perl's from its start, so such a script runs in a second
	 * interpreter started with them, made when the first one comes, and
	 * kept: the twin of a worker's interpreter, in the same process, or
	 * of an interpreter thread's clone, cloned from a tainted parent that
	 * plxd's parent makes when a first thread needs it. The twin runs only
	 * what asks for taint checks, this one only what does not. */
	struct perl_interp *twin;
	struct perl_interp *on;           /* the one serving the request now (atomic) */
	struct perl_interp *parent;       /* a clone's */
	struct perl_interp *taint_parent; /* a parent's tainted one */
	struct perl_interp_options opts;  /* as created, for making the twin */
	int sys_init;                     /* it ran PERL_SYS_INIT3 */
	SV *sv_execname;                  /* $^X */

	AV *base_inc;           /* @INC after set-up */
	AV *system_inc;         /* Perl's own folders: modules there are not watched */
	HV *sig;                /* %SIG */
	SV *base_sig[SIG_SIZE]; /* %SIG after set-up (NULL: default) */
	SV *base_warnhook, *base_diehook;
	HV *base_overrides; /* CORE::GLOBAL:: subs after set-up: name -> CV address */
	U8 base_dowarn;     /* PL_dowarn: its flags (G_WARN_ONCE too), not a boolean */
	SV *sv_zero, *sv_rs, *sv_ors, *sv_ofs, *sv_listsep, *sv_subsep;
	SV *sv_line; /* $. */

	struct module_file *modules;
	size_t nmodules, modules_cap;
	STRLEN inc_keys_seen;
	uint64_t next_module_check_ms;

	PerlIO *tail;     /* STDOUT, while its buffer is run->tail */
	char **env_array; /* environ during requests */
	size_t env_array_cap;
	char *env_buf;    /* its strings */
	char **child_env; /* a clone's %ENV as its children get it (fork) */
	size_t child_env_cap;
	char *child_env_buf;
	size_t child_env_buf_cap;
	sigset_t child_ignore; /* ... and the signals %SIG has as 'IGNORE' */
	size_t env_buf_cap;
	unsigned long forks;        /* counted by the fork hook */
	unsigned long forks_reaped; /* forks whose children are all reaped */
	unsigned long births_read;  /* a clone's: forks whose births were read */
	int exit_called;            /* the script called exit (our override) */
	int exit_status;
	/* Perl values the set-up of the request being served freed (what the
	 * request before left in %ENV, $@, @ARGV): its growth measure counts
	 * them as there at its start (growth_check). */
	IV reset_freed;

	const struct perl_transport *transport;
	struct perl_run *run;            /* the request being served */
	struct perl_script *script;      /* its script, once compiled */
	struct perl_script *last_script; /* the script of the request before */
	struct fcgi_state fcgi;
	int stop;           /* serve no other request */
	mode_t start_umask; /* plxd's at start-up: each request's, as under CGI */
	/* PerlIO's count of handles on each of fd[0-2] after set-up: a Perl
	 * thread the script started holds one more on each (its clone of
	 * STDIN, STDOUT and STDERR). */
	int fd_refs[3];
	int threads_left; /* ... and some ran on after a request: fd[1] and
			     fd[2] are theirs, on /dev/null */
	int destroying;   /* perl_interp_destroy runs: exit is refused */
};

/* The calling thread's interpreter: the XS exit and the fork hook find it
 * here (one per worker process; one per interpreter thread in plxd). */
static _Thread_local struct perl_interp *current;
static _Thread_local volatile sig_atomic_t forked_child;

typedef void protected_fn(pTHX_ void *arg);

static void xs_init(pTHX);
static struct perl_interp *interp_create(const struct perl_interp_options *o, int tainted,
		char *err, size_t errlen);
static void options_copy(struct perl_interp_options *to, const struct perl_interp_options *o);
static void options_free(struct perl_interp_options *o);
static void interp_enter(struct perl_interp *pi);
static struct perl_interp *interp_for(struct perl_interp *pi, struct perl_run *run);
static struct perl_interp *twin_make(struct perl_interp *pi, char *err, size_t errlen);
static int protect(pTHX_ protected_fn *fn, void *arg);
static void on_fork_child(void);
static void clone_child(struct perl_interp *pi);
static void on_fork_parent(void);
static void on_fork_prepare(void);
static void on_sigpipe(int sig);
static void install_sigpipe(void);
static void children_reap(struct perl_interp *pi);
static void clone_children_reap(struct perl_interp *pi);
static void env_sync(pTHX_ struct perl_interp *pi, char *const *env);
static void env_prune(pTHX_ HV *hv, char *const *env, size_t n);
static void environ_set(struct perl_interp *pi, char *const *env, size_t n);
static void change_dir(const char *script);
static PerlIO *std_handle(pTHX_ struct perl_interp *pi, int fd);
static void std_unbuffer(pTHX_ struct perl_interp *pi);
static void std_open(pTHX_ struct perl_interp *pi, int handle);
static void std_record(pTHX_ struct perl_interp *pi, int fd);
static void std_record_target(struct perl_interp *pi, int fd, int target);
static int std_glob_changed(pTHX_ struct perl_interp *pi, int fd);
static void std_glob_restore(pTHX_ struct perl_interp *pi, int fd, int in_script);
static int std_fd_moved(struct perl_interp *pi, int fd);
static int clone_child_std_fd(struct perl_interp *pi, int i);
static void clone_child_std(pTHX_ struct perl_interp *pi);
static enum std_check std_check(pTHX_ struct perl_interp *pi, int fd);
static void std_reopen(pTHX_ struct perl_interp *pi, int fd, int target);
static void std_rewind(pTHX_ struct perl_interp *pi);
static void stdio_begin(pTHX_ struct perl_interp *pi, struct perl_run *run);
static void stdio_end(pTHX_ struct perl_interp *pi, struct perl_run *run, int in_script);
static void globals_begin(pTHX_ struct perl_interp *pi, const struct perl_run *run);
static void globals_end(pTHX_ struct perl_interp *pi);
static void switches_apply(pTHX_ struct perl_interp *pi, const struct perl_script_switches *sw);
static void signals_reset(pTHX_ struct perl_interp *pi);
static AV *signals_snapshot(pTHX_ struct perl_interp *pi);
static void signals_apply(pTHX_ struct perl_interp *pi, AV *sig);
static AV *av_copy(pTHX_ AV *av);
static int av_same(pTHX_ AV *a, AV *b);
static void av_assign(pTHX_ AV *dst, AV *src);
static int settings_loaded(pTHX_ struct perl_interp *pi);
static void settings_apply(pTHX_ struct perl_interp *pi, SV *snapshot);
static SV *settings_snapshot(pTHX_ struct perl_interp *pi);
static void report(pTHX_ struct perl_interp *pi, SV *err);
static void fd_refs_record(struct perl_interp *pi);
static void threads_check(pTHX_ struct perl_interp *pi);
static void exit_refused(pTHX_ struct perl_interp *pi, int status);
static enum perl_outcome ended_by(pTHX_ struct perl_interp *pi, int ret, int saved_errno);
static AV *overrides_hide(pTHX_ struct perl_interp *pi);
static void overrides_restore(pTHX_ AV *hidden);
static void run_request(struct perl_interp *pi, struct perl_run *run);
static void growth_check(pTHX_ struct perl_interp *pi, struct perl_script *s, IV live_before,
		IV reset_freed);
static struct perl_script *script_fetch(pTHX_ struct perl_interp *pi, struct perl_run *run);
static void run_ends(pTHX_ struct perl_interp *pi, struct perl_script *s);
static void open_data(pTHX_ struct perl_interp *pi, struct perl_script *s);
static void tail_sent(struct perl_interp *pi);
static void modules_record(pTHX_ struct perl_interp *pi);
static int modules_changed(struct perl_interp *pi);
static int interp_bind(pTHX_ struct perl_interp *pi, char *err, size_t errlen);
static int fcgi_accept(pTHX_ struct perl_interp *pi);
static int fcgi_answer(pTHX_ struct perl_interp *pi);
static void fcgi_turn_begin(pTHX_ struct perl_interp *pi, struct perl_run *run);
static int fcgi_loop_end(pTHX_ struct perl_interp *pi);
static void fcgi_hold_stderr(pTHX_ struct perl_interp *pi);
static void fcgi_release_stderr(pTHX_ struct perl_interp *pi);

XS(xs_exit);
XS(xs_fcgi_accept);
XS(xs_fcgi_finish);
XS(xs_fcgi_flush);
XS(xs_fcgi_last_call);
XS(xs_in_child);
XS(xs_note_child);
XS(xs_alarm_set);
XS(xs_wait_own);
static void alarm_deliver(pTHX_ struct perl_interp *pi);
static void alarm_disarm(struct perl_interp *pi);

/* ---- set-up ---- */

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

/* PLXD::Worker::fcgi_accept(): FCGI's Accept for a script plxd runs;
 * 0 with a request, -1 when its loop must end. */
XS(xs_fcgi_accept)
{
	dXSARGS;
	PERL_UNUSED_VAR(items);
	int rc = current ? fcgi_accept(aTHX_ current) : -1;
	XSRETURN_IV(rc);
}

/* PLXD::Worker::fcgi_finish(): FCGI's Finish, the request answered now. */
XS(xs_fcgi_finish)
{
	dXSARGS;
	PERL_UNUSED_VAR(items);
	struct perl_interp *pi = current;
	if (pi && pi->script && pi->fcgi.accepted && !pi->fcgi.answered && !forked_child) {
		(void)fcgi_answer(aTHX_ pi);
		fcgi_hold_stderr(aTHX_ pi);
	}
	XSRETURN_EMPTY;
}

/* PLXD::Worker::fcgi_flush(): FCGI's Flush, what STDOUT holds sent now. */
XS(xs_fcgi_flush)
{
	dXSARGS;
	PERL_UNUSED_VAR(items);
	if (current) {
		PerlIO *out = std_handle(aTHX_ current, 1);
		if (out)
			PerlIO_flush(out);
	}
	XSRETURN_EMPTY;
}

/* Notes pid, a process a clone's script forked, for it to reap. */
static void child_note(struct perl_interp *pi, pid_t pid)
{
	if (pi->nchildren == pi->children_cap) {
		pi->children_cap = pi->children_cap ? pi->children_cap * 2 : 8;
		pi->children = xrealloc(pi->children, pi->children_cap * sizeof *pi->children);
	}
	pi->children[pi->nchildren++] = pid;
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

/* PLXD::Worker::in_child(): whether this is a process the script forked. */
XS(xs_in_child)
{
	dXSARGS;
	PERL_UNUSED_VAR(items);
	XSRETURN_IV(forked_child ? 1 : 0);
}

/* PLXD::Worker::fcgi_last_call(): FCGI's LastCall, the loop ends at its
 * next accept. */
XS(xs_fcgi_last_call)
{
	dXSARGS;
	PERL_UNUSED_VAR(items);
	if (current)
		current->fcgi.last_call = 1;
	XSRETURN_EMPTY;
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
	newXS("PLXD::Worker::note_child", xs_note_child, file);
	newXS("PLXD::Worker::alarm_set", xs_alarm_set, file);
	newXS("PLXD::Worker::wait_own", xs_wait_own, file);
}

/* ---- process-wide state, per interpreter thread ---- */

/* SIGALRM in plxd: a clone's timer sends it to the clone's thread only
 * (SIGEV_THREAD_ID). Without SA_RESTART, so that sleep, select and a read
 * of that thread return early; perl then runs $SIG{ALRM} at its next op
 * (cancel_check). A SIGALRM from anywhere else is ignored: it no longer
 * ends plxd. */
static void on_thread_alarm(int sig)
{
	(void)sig;
	struct perl_interp *pi = current;
	if (pi && pi->alarm_armed) {
		pi->alarm_armed = 0;
		pi->alarm_fired = 1;
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
	pi->alarm_timer_ok = timer_create(CLOCK_MONOTONIC, &ev, &pi->alarm_timer) == 0;
}

/* Arms the alarm for secs seconds (0: disarms it). Returns the seconds
 * the previous one had left, rounded as alarm(2) does. */
static unsigned alarm_arm(struct perl_interp *pi, unsigned secs)
{
	struct itimerspec to, old;
	memset(&to, 0, sizeof to);
	memset(&old, 0, sizeof old);
	to.it_value.tv_sec = secs;
	pi->alarm_armed = 0; /* a SIGALRM from the old one is late now */
	if (pi->alarm_timer_ok)
		timer_settime(pi->alarm_timer, 0, &to, &old);
	pi->alarm_fired = 0;
	pi->alarm_armed = secs > 0;
	unsigned left = (unsigned)old.it_value.tv_sec;
	if ((left == 0 && old.it_value.tv_nsec > 0) || old.it_value.tv_nsec >= 500000000)
		left++;
	return left;
}

static void alarm_disarm(struct perl_interp *pi)
{
	if (pi->cloned && (pi->alarm_armed || pi->alarm_fired))
		(void)alarm_arm(pi, 0);
}

/* The thread's alarm went off: the script's $SIG{ALRM} runs now, and may
 * die (into the script's eval), as perl's own handler would. */
static void alarm_deliver(pTHX_ struct perl_interp *pi)
{
	pi->alarm_fired = 0;
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
	if (pi->alarm_fired) /* it went off before this op could run it */
		alarm_deliver(aTHX_ pi);
	XSRETURN_IV((IV)alarm_arm(pi, secs > UINT_MAX ? UINT_MAX : (unsigned)secs));
}

/* Forgets pid, a child of the clone's reaped. */
static void child_forget(struct perl_interp *pi, pid_t pid)
{
	for (size_t i = 0; i < pi->nchildren; i++)
		if (pi->children[i] == pid) {
			pi->children[i] = pi->children[--pi->nchildren];
			return;
		}
}

/* The clone's own children: what its scripts forked, and the programs of
 * its pipe opens not yet closed (PL_fdpid). n at most cap. */
static size_t children_own(pTHX_ struct perl_interp *pi, pid_t *pids, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < pi->nchildren && n < cap; i++)
		pids[n++] = pi->children[i];
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
	for (size_t i = 0; i < pi->nchildren; i++)
		if (pi->children[i] == pid)
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
		clone_child(current);
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
	if (pi->child_env)
		environ = pi->child_env;
	else if (pi->env_array)
		environ = pi->env_array;
	/* A group of its own, as plxd gives a CGI script, so that a timeout
	 * or a stop ends what it starts too (perl_interp_kill_children). */
	setpgid(0, 0);
	pid_t me = getpid();
	if (write(pi->births[1], &me, sizeof me) < 0) {
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
		if (sigismember(&pi->child_ignore, sig) == 1) {
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
	for (int i = 0; pi->open_std && i < 3; i++) {
		PerlIO *f = std_handle(aTHX_ pi, i);
		if (!f || PerlIO_fileno(f) <= 2)
			continue;
		IO *io = GvIO(pi->std_gv[i]);
		U8 flush = io ? IoFLAGS(io) & IOf_FLUSH : 0; /* $| */
		pi->fd[i] = i;
		std_open(aTHX_ pi, i);
		if ((io = GvIO(pi->std_gv[i])))
			IoFLAGS(io) |= flush;
	}
	for (int k = 0; k < 5; k++) {
		if (copies[k] <= 2)
			continue;
		if (k < 3 && pi->fd_held && PerlIOUnix_refcnt(copies[k]) > 0)
			PerlIOUnix_refcnt_dec(copies[k]);
		close(copies[k]);
	}
	pi->fd_held = 0;
	pi->stdout_fd = pi->stderr_fd = -1;
}

/* Before a clone's script forks: the environment its child gets is %ENV
 * as the script left it, which perl writes to no environ in a clone (and
 * C code there, getenv() included, sees plxd's). Read without moving
 * %ENV's iterator, which the script may be using (each). */
static void on_fork_prepare(void)
{
	struct perl_interp *pi = current;
	if (!pi || !pi->cloned || forked_child)
		return;
	dTHXa(pi->perl);
	HV *hv = GvHVn(PL_envgv);
	size_t n = 0, bytes = 0;
	for (int pass = 0; pass < 2; pass++) {
		char *p = pi->child_env_buf;
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
				pi->child_env[n++] = p;
				memcpy(p, HeKEY(he), klen);
				p[klen] = '=';
				memcpy(p + klen + 1, v, vlen);
				p[klen + 1 + vlen] = '\0';
				p += klen + vlen + 2;
			}
		if (pass == 0) {
			if (bytes > pi->child_env_buf_cap) {
				free(pi->child_env_buf);
				pi->child_env_buf_cap = bytes * 2;
				pi->child_env_buf = xmalloc(pi->child_env_buf_cap);
			}
			if (n + 1 > pi->child_env_cap) {
				free(pi->child_env);
				pi->child_env_cap = (n + 1) * 2;
				pi->child_env = xmalloc(pi->child_env_cap * sizeof *pi->child_env);
			}
		}
	}
	pi->child_env[n] = NULL;
	sigemptyset(&pi->child_ignore);
	for (int sig = 1; PL_psig_ptr && sig < SIG_SIZE && sig < NSIG; sig++) {
		SV *h = PL_psig_ptr[sig];
		if (h && !SvROK(h) && SvPOK(h) && strEQ(SvPVX(h), "IGNORE") && sig != SIGKILL
				&& sig != SIGSTOP)
			sigaddset(&pi->child_ignore, sig);
	}
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

static void install_sigpipe(void)
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
static int protect(pTHX_ protected_fn *fn, void *arg)
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

static AV *av_copy(pTHX_ AV *av)
{
	AV *copy = newAV();
	for (Size_t i = 0; i < av_count(av); i++) {
		SV **svp = av_fetch(av, i, 0);
		av_push(copy, svp ? newSVsv(*svp) : newSV(0));
	}
	return copy;
}

/* Same elements: the same SVs (code refs in @INC) or equal strings. */
static int av_same(pTHX_ AV *a, AV *b)
{
	if (av_count(a) != av_count(b))
		return 0;
	for (Size_t i = 0; i < av_count(a); i++) {
		SV **x = av_fetch(a, i, 0), **y = av_fetch(b, i, 0);
		if (!x || !y)
			return 0;
		if (*x == *y)
			continue;
		if (SvROK(*x) || SvROK(*y)) {
			if (!SvROK(*x) || !SvROK(*y) || SvRV(*x) != SvRV(*y))
				return 0;
			continue;
		}
		if (!SvPOK(*x) || !SvPOK(*y) || SvCUR(*x) != SvCUR(*y)
				|| memcmp(SvPVX(*x), SvPVX(*y), SvCUR(*x)) != 0)
			return 0;
	}
	return 1;
}

static void av_assign(pTHX_ AV *dst, AV *src)
{
	av_clear(dst);
	for (Size_t i = 0; i < av_count(src); i++) {
		SV **svp = av_fetch(src, i, 0);
		av_push(dst, svp ? newSVsv(*svp) : newSV(0));
	}
}

struct perl_interp *perl_interp_create(const struct perl_interp_options *o, int argc, char **argv,
		char *err, size_t errlen)
{
	char **env = environ;
	PERL_SYS_INIT3(&argc, &argv, &env);
	struct perl_interp *pi = interp_create(o, 0, err, errlen);
	if (pi)
		pi->sys_init = 1;
	else
		PERL_SYS_TERM();
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
	pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child);
}

/* An interpreter, started with taint checks (perl -T) when tainted; the
 * process's perl is set up (PERL_SYS_INIT3). */
static struct perl_interp *interp_create(const struct perl_interp_options *o, int tainted,
		char *err, size_t errlen)
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
	if (perl_parse(my_perl, xs_init, tainted ? 4 : 3, tainted ? tainted_args : args, NULL) != 0
			|| perl_run(my_perl) != 0) {
		snprintf(err, errlen, "the Perl interpreter did not start");
		goto fail;
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
	struct eval_arg threaded = { .code = "PLXD::Worker::thread_overrides()" };
	if (o->threaded && (protect(aTHX_ do_eval, &threaded) != 0 || SvTRUE(ERRSV))) {
		snprintf(err, errlen, "thread set-up failed: %s", SvPV_nolen(ERRSV));
		goto fail;
	}
	AV *inc = GvAVn(PL_incgv);
	pi->system_inc = av_copy(aTHX_ inc);
	size_t ninc = 0;
	while (o->inc && o->inc[ninc])
		ninc++;
	for (size_t i = ninc; i-- > 0;) {
		av_unshift(inc, 1);
		av_store(inc, 0, newSVpv(o->inc[i], 0));
	}

	/* In thread mode this is plxd's own process and perl's first
	 * interpreter, the one whose %SIG sets process dispositions: what the
	 * preload sets there stays in %SIG, for the clones, and plxd keeps
	 * its own (SIGHUP, SIGTERM, SIGINT, SIGPIPE). */
	static struct sigaction saved[NSIG];
	for (int sig = 1; o->threaded && sig < NSIG; sig++)
		sigaction(sig, NULL, &saved[sig]);
	if (o->preload && *o->preload) {
		struct eval_arg pre = { .require = o->preload };
		int ret = protect(aTHX_ do_eval, &pre);
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
static int interp_bind(pTHX_ struct perl_interp *pi, char *err, size_t errlen)
{
	pi->sv_execname = GvSV(gv_fetchpvs("\030", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->open_std = get_cv("PLXD::Worker::open_std", 0);
	pi->restore_std = get_cv("PLXD::Worker::restore_std", 0);
	pi->open_data = get_cv("PLXD::Worker::open_data", 0);
	pi->cgi_pm_reset = get_cv("PLXD::Worker::cgi_pm_reset", 0);
	pi->fcgi_install = get_cv("PLXD::Worker::fcgi_install", 0);
	pi->settings_apply = get_cv("PLXD::Worker::settings_apply", 0);
	pi->settings_snapshot = get_cv("PLXD::Worker::settings_snapshot", 0);
	pi->settings_modules = get_av("PLXD::Worker::SETTINGS_MODULES", 0);
	CV *settings_base = get_cv("PLXD::Worker::settings_base", 0);
	if (!pi->settings_apply || !pi->settings_snapshot || !pi->settings_modules
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
	pi->base_inc = av_copy(aTHX_ inc);
	/* %SIG's magic (and PL_psig_ptr) comes to life with the glob. */
	pi->sig = GvHVn(gv_fetchpvs("SIG", GV_ADD | GV_NOTQUAL, SVt_PVHV));
	for (int i = 1; i < SIG_SIZE; i++)
		pi->base_sig[i] = PL_psig_ptr && PL_psig_ptr[i] ? newSVsv(PL_psig_ptr[i]) : NULL;
	pi->base_warnhook = PL_warnhook ? newSVsv(PL_warnhook) : NULL;
	pi->base_diehook = PL_diehook ? newSVsv(PL_diehook) : NULL;
	pi->base_dowarn = PL_dowarn;
	pi->base_overrides = newHV();
	HV *global = gv_stashpvs("CORE::GLOBAL", 0); /* Worker.pm made it */
	if (global) {
		HE *he;
		hv_iterinit(global);
		while ((he = hv_iternext(global))) {
			GV *gv = (GV *)HeVAL(he);
			if (isGV_with_GP(gv) && GvCV(gv))
				(void)hv_store(pi->base_overrides, HeKEY(he), HeKLEN(he),
						newSViv(PTR2IV(GvCV(gv))), 0);
		}
	}
	pi->sv_zero = GvSV(gv_fetchpvs("0", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->sv_rs = GvSV(gv_fetchpvs("/", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->sv_ors = GvSV(gv_fetchpvs("\\", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->sv_ofs = GvSVn(PL_ofsgv);
	pi->sv_listsep = GvSV(gv_fetchpvs("\"", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->sv_subsep = GvSV(gv_fetchpvs(";", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->sv_line = GvSV(gv_fetchpvs(".", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->std_gv[0] = PL_stdingv;
	pi->std_gv[1] = gv_fetchpvs("STDOUT", GV_ADD | GV_NOTQUAL, SVt_PVIO);
	pi->std_gv[2] = PL_stderrgv;
	pi->std_keep[0] = gv_fetchpvs("PLXD::Worker::KEEP_STDIN", 0, SVt_PVIO);
	pi->std_keep[1] = gv_fetchpvs("PLXD::Worker::KEEP_STDOUT", 0, SVt_PVIO);
	pi->std_keep[2] = gv_fetchpvs("PLXD::Worker::KEEP_STDERR", 0, SVt_PVIO);
	for (int fd = 0; fd < 3; fd++) {
		if (!pi->std_gv[fd] || !pi->std_keep[fd] || !GvIOp(pi->std_gv[fd])) {
			snprintf(err, errlen, "worker bootstrap failed: no standard handle %d", fd);
			return -1;
		}
		pi->std_io[fd] = GvIOp(pi->std_gv[fd]);
		std_record(aTHX_ pi, fd);
	}
	std_record_target(pi, 0, pi->devnull);
	std_record_target(pi, 1, pi->stdout_fd);
	std_record_target(pi, 2, pi->stderr_fd);
	return 0;
}

/* perl's signal check (PERL_ASYNC_CHECK, between ops) in a clone: ends
 * the script when perl_interp_cancel asked, with the unwinding of exit,
 * which no eval catches; otherwise dispatches signals as perl does. */
static void cancel_check(pTHX)
{
	struct perl_interp *pi = current;
	if (pi && pi->run && __atomic_exchange_n(&pi->cancel, 0, __ATOMIC_ACQ_REL)) {
		pi->canceled = 1;
		my_exit(255);
	}
	Perl_despatch_signals(aTHX);
	if (pi && pi->alarm_fired)
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
	for (size_t i = 0; pi->twin && i < pi->twin->nchildren; i++)
		child_note(pi, pi->twin->children[i]);
	if (pi->twin)
		pi->twin->nchildren = 0;
	pid_t *pids = pi->children;
	*n = pi->nchildren;
	pi->children = NULL;
	pi->nchildren = pi->children_cap = 0;
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
	int asked_before = __atomic_exchange_n(&pi->cancel, 1, __ATOMIC_ACQ_REL);
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
		pthread_kill(pi->thread, SIGALRM);
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
	while (pi->cloned && (len = read(pi->births[0], born, sizeof born)) > 0)
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
	pi->births[0] = pi->births[1] = -1;
	pi->stdout_fd = fds[1];
	pi->stderr_fd = fds[2];
	pi->devnull = fds[0];
	pi->fd[0] = fcntl(fds[0], F_DUPFD_CLOEXEC, 3);
	pi->fd[1] = fcntl(fds[1], F_DUPFD_CLOEXEC, 3);
	pi->fd[2] = fcntl(fds[2], F_DUPFD_CLOEXEC, 3);
	if (pi->fd[0] < 0 || pi->fd[1] < 0 || pi->fd[2] < 0
			|| pipe2(pi->births, O_CLOEXEC | O_NONBLOCK) < 0) {
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
	/* Perl's own folders, which no variable holds (so the clone has no
	 * copy): plain strings, read from the parent while it stays still. */
	pi->system_inc = newAV();
	for (SSize_t i = 0; i <= AvFILLp(parent->system_inc); i++) {
		SV *dir = AvARRAY(parent->system_inc)[i];
		if (dir && SvPOK(dir))
			av_push(pi->system_inc, newSVpvn(SvPVX(dir), SvCUR(dir)));
	}
	pthread_mutex_unlock(&clone_lock);
	PL_perl_destruct_level = 2;
	PL_signalhook = cancel_check;
	current = pi;
	for (int i = 0; i < 3; i++)
		PerlIOUnix_refcnt_inc(pi->fd[i]);
	pi->fd_held = 1;
	pi->thread = pthread_self();
	alarm_create(pi);
	/* Its standard handles are clones of plxd's fds 0-2: onto its own.
	 * Closed first, or perl would reopen them in place, with a dup2 onto
	 * plxd's own fd 0, 1 or 2 (closing the clone's copy leaves plxd's
	 * descriptor open: perl counts who holds it). */
	pi->open_std = get_cv("PLXD::Worker::open_std", 0);
	GV *std_gv[3] = { PL_stdingv, gv_fetchpvs("STDOUT", GV_ADD | GV_NOTQUAL, SVt_PVIO),
		PL_stderrgv };
	for (int i = 0; pi->open_std && i < 3; i++) {
		if (std_gv[i] && GvIO(std_gv[i]) && IoIFP(GvIO(std_gv[i])))
			do_close(std_gv[i], FALSE);
		std_open(aTHX_ pi, i);
	}
	if (!pi->open_std || SvTRUE(ERRSV)) {
		snprintf(err, errlen, "cannot open the standard handles of a cloned interpreter");
		goto fail;
	}
	std_unbuffer(aTHX_ pi);
	if (interp_bind(aTHX_ pi, err, errlen) < 0)
		goto fail;
	/* What the parent loaded (the preload) every fresh clone gets again
	 * as it was: a change there is not a reason to replace this one. */
	modules_record(aTHX_ pi);
	for (size_t i = 0; i < pi->nmodules; i++)
		pi->modules[i].inherited = 1;
	fd_refs_record(pi);
	return pi;

fail:
	perl_interp_destroy(pi);
	return NULL;
}

void perl_interp_destroy(struct perl_interp *pi)
{
	if (!pi)
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
		SvREFCNT_dec(pi->base_inc);
		SvREFCNT_dec(pi->system_inc);
		for (int i = 1; i < SIG_SIZE; i++)
			SvREFCNT_dec(pi->base_sig[i]);
		SvREFCNT_dec(pi->base_warnhook);
		SvREFCNT_dec(pi->base_diehook);
		SvREFCNT_dec(pi->base_overrides);
		perl_destruct(pi->perl);
		perl_free(pi->perl);
		if (pi->sys_init)
			PERL_SYS_TERM();
	}
	for (int i = 0; pi->cloned && i < 3; i++) {
		if (pi->fd[i] < 0)
			continue;
		/* A Perl thread that runs on holds the number: /dev/null, and
		 * perl closes it with the thread's last handle on it. Closed
		 * here, the number could be a client's connection next. */
		if (pi->threads_left)
			dup2(pi->devnull, pi->fd[i]);
		int held = 0;
		if (pi->fd_held && PerlIOUnix_refcnt(pi->fd[i]) > 0)
			held = PerlIOUnix_refcnt_dec(pi->fd[i]);
		if (!pi->threads_left || held <= 0)
			close(pi->fd[i]);
	}
	if (pi->alarm_timer_ok) {
		pi->alarm_armed = 0;
		timer_delete(pi->alarm_timer);
	}
	for (int i = 0; pi->cloned && i < 2; i++)
		if (pi->births[i] >= 0)
			close(pi->births[i]);
	if (environ == pi->env_array) {
		static char *empty[] = { NULL };
		environ = empty;
	}
	free(pi->env_array);
	free(pi->env_buf);
	free(pi->child_env);
	free(pi->child_env_buf);
	free(pi->children);
	for (size_t i = 0; i < pi->nmodules; i++)
		free(pi->modules[i].path);
	free(pi->modules);
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

/* ---- %ENV ---- */

/* Makes %ENV and the process environment exactly env.
 *
 * %ENV: only keys whose value differs from what it holds are written
 * (consecutive requests mostly differ in a variable or two), and comparing
 * against %ENV itself, not the previous request, also undoes what the
 * script did to it. The values are stored without %ENV's set magic, which
 * would call putenv() with a fresh string each time: this perl (built with
 * PERL_USE_SAFE_PUTENV) never frees those, a leak per changed variable per
 * request. Elements keep their magic, so what a script sets still reaches
 * the environment.
 *
 * The environment: environ is pointed at a copy of env the interpreter
 * owns, replaced whole each request. */
static void env_sync(pTHX_ struct perl_interp *pi, char *const *env)
{
	HV *hv = GvHVn(PL_envgv);
	STRLEN n = 0;
	for (; env[n]; n++) {
		const char *kv = env[n];
		const char *eq = strchr(kv, '=');
		if (!eq)
			continue;
		I32 klen = (I32)(eq - kv);
		const char *val = eq + 1;
		STRLEN vlen = strlen(val);
		SV **svp = hv_fetch(hv, kv, klen, 0);
		if (svp && SvPOK(*svp) && SvCUR(*svp) == vlen && memcmp(SvPVX(*svp), val, vlen) == 0
				&& (!TAINTING_get || SvTAINTED(*svp)))
			continue;
		svp = hv_fetch(hv, kv, klen, 1);
		if (svp) {
			sv_setpvn(*svp, val, vlen);
			/* With taint checks every value of %ENV is tainted, as
			 * perl -T makes the environment it starts with. */
			SvTAINTED_on(*svp);
		}
	}
	if (HvUSEDKEYS(hv) > n) {
		IV live = (IV)PL_sv_count;
		env_prune(aTHX_ hv, env, n);
		pi->reset_freed += live - (IV)PL_sv_count;
	}
	environ_set(pi, env, n);
}

/* Our own environ array: the strings copied into one buffer. */
static void environ_set(struct perl_interp *pi, char *const *env, size_t n)
{
	size_t bytes = 0;
	for (size_t i = 0; i < n; i++)
		bytes += strlen(env[i]) + 1;
	if (bytes > pi->env_buf_cap) {
		free(pi->env_buf);
		pi->env_buf_cap = bytes * 2;
		pi->env_buf = xmalloc(pi->env_buf_cap);
	}
	if (n + 1 > pi->env_array_cap) {
		free(pi->env_array);
		pi->env_array_cap = (n + 1) * 2;
		pi->env_array = xmalloc(pi->env_array_cap * sizeof *pi->env_array);
	}
	/* Build into the buffers while environ may still point at them: the
	 * interpreter reads no environment in between. */
	char *p = pi->env_buf;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(env[i]) + 1;
		memcpy(p, env[i], len);
		pi->env_array[i] = p;
		p += len;
	}
	pi->env_array[n] = NULL;
	/* A clone shares plxd's environ: its children get the array at the
	 * fork (on_fork_child), and perl itself leaves environ alone in any
	 * interpreter but the first (my_setenv). */
	if (!pi->cloned)
		environ = pi->env_array;
}

/* Deletes the keys of %ENV that env does not have. */
static void env_prune(pTHX_ HV *hv, char *const *env, size_t n)
{
	/* The previous request's headers, or what the script set. Rare, so a
	 * plain search is fine. Deleting goes through %ENV's magic (unsetenv
	 * on the old environ array: harmless, it is replaced next). */
	AV *gone = newAV();
	HE *he;
	hv_iterinit(hv);
	while ((he = hv_iternext(hv))) {
		I32 klen;
		const char *key = hv_iterkey(he, &klen);
		int found = 0;
		for (size_t i = 0; i < n && !found; i++)
			found = strncmp(env[i], key, (size_t)klen) == 0 && env[i][klen] == '=';
		if (!found)
			av_push(gone, newSVpvn(key, (STRLEN)klen));
	}
	for (Size_t i = 0; i < av_count(gone); i++) {
		STRLEN klen;
		const char *key = SvPV(AvARRAY(gone)[i], klen);
		(void)hv_delete(hv, key, (I32)klen, G_DISCARD); /* unsetenv() */
	}
	SvREFCNT_dec(gone);
}

/* The script's folder becomes the working directory, as under CGI. A
 * folder PATH_MAX bytes long or more, which chdir refuses, is opened in
 * parts and entered with fchdir. */
static void change_dir(const char *script)
{
	const char *slash = strrchr(script, '/');
	size_t len = slash ? (size_t)(slash - script) : 0;
	char *dir = len ? xstrndup(script, len) : xstrdup("/");
	int rc = chdir(dir);
	if (rc < 0 && errno == ENAMETOOLONG) {
		int fd = perl_source_open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		rc = fd < 0 ? -1 : fchdir(fd);
		int e = errno;
		if (fd >= 0)
			close(fd);
		errno = e;
	}
	if (rc < 0) {
		const char *why = strerror(errno);
		size_t cap = strlen(dir) + strlen(why) + 32;
		char *msg = xmalloc(cap);
		int n = snprintf(msg, cap, "cannot change to %s: %s\n", dir, why);
		ssize_t unused = write(current ? current->fd[2] : 2, msg,
				n > 0 && (size_t)n < cap ? (size_t)n : 0);
		(void)unused;
		free(msg);
	}
	free(dir);
}

/* ---- standard handles ---- */

static PerlIO *std_handle(pTHX_ struct perl_interp *pi, int fd)
{
	IO *io = GvIO(pi->std_gv[fd]);
	if (!io)
		return NULL;
	return fd == 0 ? IoIFP(io) : IoOFP(io);
}

static void std_record(pTHX_ struct perl_interp *pi, int fd)
{
	PerlIO *f = std_handle(aTHX_ pi, fd);
	pi->std[fd].f = f;
	pi->std[fd].top = f ? *f : NULL;
	pi->std[fd].flags = f && *f ? PerlIOBase(f)->flags : 0;
	if (fd < 2 && f && *f && PerlIOBase(f)->tab == &PerlIO_perlio)
		pi->std_posn[fd] = PerlIOSelf(f, PerlIOBuf)->posn;
}

/* tell(STDIN) and tell(STDOUT) as a fresh process would have them: the
 * buffer layer counts every byte that went through it, so by the second
 * request tell(STDOUT) would say the script printed already (CGI::Carp's
 * fatalsToBrowser then leaves out its header block). Only an empty
 * buffer, the stock layer, the worker's own PerlIO. */
static void std_rewind(pTHX_ struct perl_interp *pi)
{
	for (int fd = 0; fd < 2; fd++) {
		PerlIO *f = std_handle(aTHX_ pi, fd);
		if (!f || f != pi->std[fd].f || !*f || PerlIOBase(f)->tab != &PerlIO_perlio)
			continue;
		PerlIOBuf *b = PerlIOSelf(f, PerlIOBuf);
		U32 flags = PerlIOBase(f)->flags;
		if (((flags & PERLIO_F_WRBUF) && b->ptr != b->buf)
				|| ((flags & PERLIO_F_RDBUF) && b->ptr != b->end))
			continue;
		b->ptr = b->end = b->buf;
		PerlIOBase(f)->flags &= ~(PERLIO_F_RDBUF | PERLIO_F_WRBUF);
		b->posn = pi->std_posn[fd];
	}
}

/* Notes which file target is (fd gets a copy of it between requests). */
static void std_record_target(struct perl_interp *pi, int fd, int target)
{
	struct stat st;
	if (fstat(target, &st) < 0)
		memset(&st, 0, sizeof st); /* matches nothing: fd is restored each time */
	pi->std[fd].dev = st.st_dev;
	pi->std[fd].ino = st.st_ino;
}

/* Whether the script gave a standard glob another GP (*STDOUT = *LOG,
 * undef *STDOUT), another IO (*STDOUT = *LOG{IO}), or tied it. Pointer and
 * flag tests only. local *STDOUT needs nothing: Perl undoes it when the
 * script's scope is left, by return, die or exit. */
static int std_glob_changed(pTHX_ struct perl_interp *pi, int fd)
{
	GV *gv = pi->std_gv[fd];
	IO *io = GvGP(gv) ? GvIOp(gv) : NULL;
	if (GvGP(gv) != GvGP(pi->std_keep[fd]) || io != pi->std_io[fd])
		return 1;
	return SvRMAGICAL((SV *)io) && mg_find((SV *)io, PERL_MAGIC_tiedscalar);
}

struct restore_arg {
	struct perl_interp *pi;
	int fd;
};

static void do_restore_std(pTHX_ void *p)
{
	const struct restore_arg *a = p;
	GV *gv = a->pi->std_gv[a->fd];
	if (GvGP(gv) != GvGP(a->pi->std_keep[a->fd]) || GvIOp(gv) != a->pi->std_io[a->fd]) {
		dSP;
		PUSHMARK(SP);
		mXPUSHi(a->fd);
		PUTBACK;
		call_sv((SV *)a->pi->restore_std, G_VOID | G_DISCARD | G_EVAL);
	}
	/* The magic is unlinked before the tie object is freed, so the
	 * handle is untied even if its DESTROY dies or exits. UNTIE is not
	 * called, as when a tied variable is freed. */
	sv_unmagic((SV *)a->pi->std_io[a->fd], PERL_MAGIC_tiedscalar);
}

/* Puts back the glob and IO (through PLXD::Worker::restore_std) and unties
 * the handle, under protect: a tie object's DESTROY is user code, which may
 * call exit. Inside a running script (a FastCGI accept) the script's own
 * protection catches that: an exit there ends the script's run, and a
 * JMPENV of ours would return into a C frame whose Perl caller is gone. */
static void std_glob_restore(pTHX_ struct perl_interp *pi, int fd, int in_script)
{
	struct restore_arg a = { pi, fd };
	ENTER;
	SAVETMPS;
	if (in_script)
		do_restore_std(aTHX_ & a);
	else
		(void)protect(aTHX_ do_restore_std, &a);
	FREETMPS;
	LEAVE;
}

/* Whether fd no longer refers to the file the worker put there. Perl
 * reopens a standard handle in place: open STDOUT, '>', FILE (or '>&' a
 * dup) puts the new file on fd 1 with dup2 and keeps the PerlIO, its layers
 * and flags, so only the fd shows it; POSIX::dup2 and POSIX::close too. */
static int std_fd_moved(struct perl_interp *pi, int fd)
{
	struct stat st;
	return fstat(pi->fd[fd], &st) < 0 || st.st_dev != pi->std[fd].dev
			|| st.st_ino != pi->std[fd].ino;
}

/* Whether a standard handle is as it was opened: the same PerlIO on the
 * same fd with the same top layer and no UTF-8 or CRLF flag flipped (the
 * common case, cheap to see); only EOF or an error flag (cleared in
 * place); or changed (reopened). What the fd refers to is std_fd_moved's. */
static enum std_check std_check(pTHX_ struct perl_interp *pi, int fd)
{
	const struct std_state *st = &pi->std[fd];
	PerlIO *f = std_handle(aTHX_ pi, fd);
	if (!f || f != st->f || !*f || *f != st->top || PerlIO_fileno(f) != pi->fd[fd])
		return STD_REOPEN;
	U32 flags = PerlIOBase(f)->flags;
	if ((flags ^ st->flags) & (PERLIO_F_UTF8 | PERLIO_F_CRLF))
		return STD_REOPEN;
	if (fd == 0 && PerlIO_get_cnt(f) > 0)
		return STD_REOPEN; /* unread bytes buffered */
	if (flags & (PERLIO_F_EOF | PERLIO_F_ERROR))
		return STD_CLEARERR;
	return STD_CLEAN;
}

/* Closes the handle (flushing it to wherever the script pointed it, and
 * closing fd), puts target on fd, and opens the handle afresh on it. */
static void std_reopen(pTHX_ struct perl_interp *pi, int fd, int target)
{
	GV *gv = pi->std_gv[fd];
	if (GvIO(gv) && IoIFP(GvIO(gv)))
		do_close(gv, FALSE);
	dup2(target, pi->fd[fd]);
	std_open(aTHX_ pi, fd);
	if (fd == 2)
		std_unbuffer(aTHX_ pi);
	std_record(aTHX_ pi, fd);
}

/* Opens standard handle 0, 1 or 2 on its descriptor, with default layers
 * (PLXD::Worker::open_std). */
static void std_open(pTHX_ struct perl_interp *pi, int handle)
{
	dSP;
	ENTER;
	SAVETMPS;
	PUSHMARK(SP);
	mXPUSHi(handle);
	mXPUSHi(pi->fd[handle]);
	PUTBACK;
	call_sv((SV *)pi->open_std, G_SCALAR | G_EVAL | G_DISCARD);
	FREETMPS;
	LEAVE;
}

/* STDERR unbuffered, as perl makes it at start-up, so that a script's
 * message reaches the log with its own request: a handle opened afresh is
 * buffered, so its PerlIO is marked unbuffered as perl marks its first
 * stderr (stdio_end clears $| in a worker), and it gets $| too (kept on
 * between requests in a clone). */
static void std_unbuffer(pTHX_ struct perl_interp *pi)
{
	PerlIO *f = std_handle(aTHX_ pi, 2);
	if (f && *f)
		PerlIOBase(f)->flags |= PERLIO_F_UNBUF;
	IO *io = GvIO(PL_stderrgv);
	if (io)
		IoFLAGS(io) |= IOf_FLUSH;
}

/* The body, if any, goes on fd 0; the last stdio_end left STDIN clean on
 * /dev/null. */
static void stdio_begin(pTHX_ struct perl_interp *pi, struct perl_run *run)
{
	std_rewind(aTHX_ pi);
	if (run->stdin_fd < 0)
		return;
	dup2(run->stdin_fd, pi->fd[0]);
	close(run->stdin_fd);
	run->stdin_fd = -1;
	pi->stdin_body = 1;
}

void perl_interp_set_stdout(struct perl_interp *pi, int fd)
{
	/* fd[1] of an interpreter whose Perl threads run on stays theirs,
	 * on /dev/null: the next interpreter gets the channel. */
	if (!pi->threads_left)
		dup2(fd, pi->fd[1]);
	if (pi->stdout_fd >= 0)
		close(pi->stdout_fd);
	pi->stdout_fd = fd;
	std_record_target(pi, 1, fd);
	/* The twin answers on the same channel. */
	int copy = pi->twin ? fcntl(fd, F_DUPFD_CLOEXEC, 10) : -1;
	if (copy >= 0)
		perl_interp_set_stdout(pi->twin, copy);
}

/* Gives the next request its standard handles as the first one had them,
 * whatever the script did: each its own glob and IO, untied, its own
 * PerlIO with default layers and no EOF or error flag, on its own fd (fd 1
 * the response channel, fd 2 the log pipe, fd 0 /dev/null); STDOUT
 * selected, $| off. Common case: one fstat per handle (none for fd 0 after
 * a body) and pointer tests.
 *
 * What STDOUT still buffers is left there for the caller (run->tail) when
 * STDOUT is the stock buffer layer on the response channel; otherwise it
 * is flushed to where the script sent it, as a CGI process's would be when
 * it exits. in_script: called by a script still running (a FastCGI
 * accept; see std_glob_restore). */
static void stdio_end(pTHX_ struct perl_interp *pi, struct perl_run *run, int in_script)
{
	for (int fd = 0; fd < 3; fd++)
		if (std_glob_changed(aTHX_ pi, fd))
			std_glob_restore(aTHX_ pi, fd, in_script);

	GV *out_gv = pi->std_gv[1];
	PerlIO *out = std_handle(aTHX_ pi, 1);
	enum std_check c = std_fd_moved(pi, 1) ? STD_REOPEN : std_check(aTHX_ pi, 1);
	run->tail = NULL;
	run->tail_len = 0;
	if (c != STD_REOPEN && PerlIOBase(out)->tab == &PerlIO_perlio
			&& (PerlIOBase(out)->flags & PERLIO_F_WRBUF)) {
		PerlIOBuf *b = PerlIOSelf(out, PerlIOBuf);
		run->tail = (const char *)b->buf;
		run->tail_len = (size_t)(b->ptr - b->buf);
		pi->tail = out;
	} else if (c != STD_REOPEN) {
		PerlIO_flush(out);
		c = std_check(aTHX_ pi, 1);
	}
	if (c == STD_REOPEN)
		std_reopen(aTHX_ pi, 1, pi->stdout_fd);
	else if (c == STD_CLEARERR)
		PerlIO_clearerr(out);

	c = std_fd_moved(pi, 2) ? STD_REOPEN : std_check(aTHX_ pi, 2);
	if (c == STD_REOPEN)
		std_reopen(aTHX_ pi, 2, pi->stderr_fd);
	else if (c == STD_CLEARERR)
		PerlIO_clearerr(std_handle(aTHX_ pi, 2));

	/* After a body fd 0 is its pipe: /dev/null goes back in any case,
	 * which also stops plxd feeding a script that did not read it all. */
	int in_moved = pi->stdin_body || std_fd_moved(pi, 0);
	pi->stdin_body = 0;
	c = std_check(aTHX_ pi, 0);
	if (c == STD_REOPEN) {
		std_reopen(aTHX_ pi, 0, pi->devnull);
	} else {
		if (in_moved)
			dup2(pi->devnull, pi->fd[0]);
		if (c == STD_CLEARERR)
			PerlIO_clearerr(std_handle(aTHX_ pi, 0));
	}

	/* $| and select. */
	for (int i = 0; i < 3; i++)
		if (GvIO(pi->std_gv[i]))
			IoFLAGS(GvIO(pi->std_gv[i])) &= ~IOf_FLUSH;
	if (pi->cloned)
		std_unbuffer(aTHX_ pi);
	if (PL_defoutgv != out_gv)
		setdefout(out_gv);
}

/* PerlIO's counts of the handles on the standard descriptors, once the
 * interpreter is set up. */
static void fd_refs_record(struct perl_interp *pi)
{
	for (int i = 0; i < 3; i++)
		pi->fd_refs[i] = PerlIOUnix_refcnt(pi->fd[i]);
}

/* A Perl thread (threads.pm) the script started and left running, detached
 * or not joined, has handles of its own on the interpreter's standard
 * descriptors, which the next request's response, body and log use: what
 * it printed would reach other requests, of any script. Once the request's
 * output is out of the descriptors (run->tail aside, which travels with
 * the answer), they point at /dev/null, and the interpreter serves no
 * other request. Costs nothing until a script loads threads.pm. */
static void threads_check(pTHX_ struct perl_interp *pi)
{
	if (pi->threads_left || !hv_exists(GvHVn(PL_incgv), "threads.pm", 10))
		return;
	int held = 0;
	for (int i = 0; i < 3 && !held; i++)
		held = PerlIOUnix_refcnt(pi->fd[i]) > pi->fd_refs[i];
	if (!held)
		return;
	report(aTHX_ pi,
			sv_2mortal(newSVpvf(
					"Perl threads it started run on after its request: what they "
					"print from now on is discarded, and %s serves the next request",
					pi->cloned ? "a fresh interpreter" : "a new worker")));
	pi->threads_left = 1;
	pi->stop = 1;
	dup2(pi->devnull, pi->fd[0]);
	dup2(pi->devnull, pi->fd[1]);
	dup2(pi->devnull, pi->fd[2]);
}

int perl_interp_threads_left(const struct perl_interp *pi)
{
	return pi->threads_left;
}

/* ---- globals ---- */

static void globals_begin(pTHX_ struct perl_interp *pi, const struct perl_run *run)
{
	PL_basetime = time(NULL);
	/* $0 is the script, as under CGI; setting it renames the process, so
	 * only when it differs. */
	if (!SvPOK(pi->sv_zero) || strcmp(SvPVX(pi->sv_zero), run->script) != 0) {
		sv_setpv(pi->sv_zero, run->script);
		SvSETMAGIC(pi->sv_zero);
	}
	SV *x = pi->sv_execname;
	if (!SvPOK(x) || SvCUR(x) != sizeof PLXD_PERL_PATH - 1
			|| memcmp(SvPVX(x), PLXD_PERL_PATH, sizeof PLXD_PERL_PATH - 1) != 0)
		sv_setpvs(x, PLXD_PERL_PATH);
	/* What the request before left in @ARGV and $@ (an exception
	 * object) is freed here: counted as there at this request's start. */
	IV live = (IV)PL_sv_count;
	AV *argv = GvAVn(PL_argvgv);
	if (av_count(argv) > 0)
		av_clear(argv);
	sv_setpvs(ERRSV, "");
	pi->reset_freed += live - (IV)PL_sv_count;
	STATUS_ALL_SUCCESS; /* $? */
	/* No handle read yet: no $., no ", <STDIN> line 3" in messages. $.
	 * keeps its last value when no handle was read: undef, as in a new
	 * process. Nor a slurp at EOF (IOf_NOLINE): its first read of an
	 * empty body is '', not undef. */
	PL_last_in_gv = NULL;
	IoLINES(pi->std_io[0]) = 0;
	IoFLAGS(pi->std_io[0]) &= ~IOf_NOLINE;
	SvOK_off(pi->sv_line);
	pi->exit_called = 0;
	pi->exit_status = 0;
	__atomic_store_n(&pi->cancel, 0, __ATOMIC_RELAXED); /* one meant for the request before */
}

/* Two handler values are the same: the same code, or equal strings. */
static int handler_same(pTHX_ SV *a, SV *b)
{
	if (a == b)
		return 1;
	if (!a || !b || a == PERL_WARNHOOK_FATAL || b == PERL_WARNHOOK_FATAL)
		return 0;
	if (SvROK(a) || SvROK(b))
		return SvROK(a) && SvROK(b) && SvRV(a) == SvRV(b);
	return sv_eq(a, b);
}

/* $SIG{__WARN__} and $SIG{__DIE__}: the hook and the %SIG element both hold
 * the value, so both are set, through the element's magic. */
static void hook_set(pTHX_ struct perl_interp *pi, SV **hook, SV *to, const char *name)
{
	if (handler_same(aTHX_ * hook, to))
		return;
	I32 len = (I32)strlen(name);
	if (!to) {
		(void)hv_delete(pi->sig, name, len, G_DISCARD);
		if (*hook && *hook != PERL_WARNHOOK_FATAL) {
			SV *old = *hook;
			*hook = NULL;
			SvREFCNT_dec(old);
		}
		return;
	}
	SV **svp = hv_fetch(pi->sig, name, len, 1);
	if (svp) {
		sv_setsv(*svp, to);
		SvSETMAGIC(*svp);
	}
}

/* Signal i's handler becomes to (NULL: the default). */
static void signal_set(pTHX_ struct perl_interp *pi, int i, SV *to)
{
	if (handler_same(aTHX_ PL_psig_ptr[i], to))
		return;
	const char *name = PL_sig_name[i];
	I32 len = (I32)strlen(name);
	if (to) {
		SV **svp = hv_fetch(pi->sig, name, len, 1);
		if (svp) {
			sv_setsv(*svp, to);
			SvSETMAGIC(*svp);
		}
	} else {
		/* Deleting the element clears the handler (SIG_DFL). If the
		 * element is gone (local %SIG), make one first. */
		(void)hv_delete(pi->sig, name, len, G_DISCARD);
		if (PL_psig_ptr[i]) {
			SV **svp = hv_fetch(pi->sig, name, len, 1);
			if (svp) {
				sv_setpvs(*svp, "DEFAULT");
				SvSETMAGIC(*svp);
			}
			(void)hv_delete(pi->sig, name, len, G_DISCARD);
		}
	}
	if (i == SIGPIPE && !to && !pi->cloned)
		install_sigpipe();
}

/* %SIG as the interpreter's set-up (the preload) left it. */
static void signals_reset(pTHX_ struct perl_interp *pi)
{
	for (int i = 1; PL_psig_ptr && i < SIG_SIZE; i++)
		if (PL_psig_ptr[i] != pi->base_sig[i])
			signal_set(aTHX_ pi, i, pi->base_sig[i]);
	hook_set(aTHX_ pi, &PL_warnhook, pi->base_warnhook, "__WARN__");
	hook_set(aTHX_ pi, &PL_diehook, pi->base_diehook, "__DIE__");
	/* A pending alarm would kill the idle worker (SIGALRM's default); a
	 * thread's would go off in its next request. */
	if (pi->cloned)
		alarm_disarm(pi);
	else
		alarm(0);
	/* What the script blocked (POSIX::sigprocmask) stays blocked in the
	 * worker or the thread; there a blocked SIGALRM would keep the next
	 * script's alarm, and its end at timeout, from waking it. A worker and
	 * an interpreter thread block nothing while they serve. */
	sigset_t mask;
	if (pthread_sigmask(SIG_SETMASK, NULL, &mask) == 0 && !sigisemptyset(&mask)) {
		sigemptyset(&mask);
		pthread_sigmask(SIG_SETMASK, &mask, NULL);
	}
}

/* Where %SIG differs from the interpreter's set-up right after a script
 * compiled: the hooks its modules installed as they loaded (CGI::Carp's
 * __DIE__ and __WARN__), its own BEGIN blocks' handlers. Pairs of signal
 * number (0: __WARN__, -1: __DIE__) and handler (undef: none); NULL when
 * nothing differs, the common case. */
static AV *signals_snapshot(pTHX_ struct perl_interp *pi)
{
	AV *diff = NULL;
	for (int i = -1; i < SIG_SIZE; i++) {
		SV *now, *base;
		if (i == -1) {
			now = PL_diehook;
			base = pi->base_diehook;
		} else if (i == 0) {
			now = PL_warnhook == PERL_WARNHOOK_FATAL ? NULL : PL_warnhook;
			base = pi->base_warnhook;
		} else {
			now = PL_psig_ptr ? PL_psig_ptr[i] : NULL;
			base = pi->base_sig[i];
		}
		if (handler_same(aTHX_ now, base))
			continue;
		if (!diff)
			diff = newAV();
		av_push(diff, newSViv(i));
		av_push(diff, now ? newSVsv(now) : newSV(0));
	}
	return diff;
}

/* Makes %SIG what signals_snapshot saw, from the interpreter's set-up
 * (where each request ends). */
static void signals_apply(pTHX_ struct perl_interp *pi, AV *sig)
{
	SV **pair = AvARRAY(sig);
	for (Size_t n = av_count(sig); n >= 2; n -= 2, pair += 2) {
		IV i = SvIVX(pair[0]);
		SV *to = SvOK(pair[1]) ? pair[1] : NULL;
		if (i == -1)
			hook_set(aTHX_ pi, &PL_diehook, to, "__DIE__");
		else if (i == 0)
			hook_set(aTHX_ pi, &PL_warnhook, to, "__WARN__");
		else if (PL_psig_ptr)
			signal_set(aTHX_ pi, (int)i, to);
	}
}

/* What the script's #! line asks for, each run (globals_end undoes it). */
static void switches_apply(pTHX_ struct perl_interp *pi, const struct perl_script_switches *sw)
{
	PL_dowarn = sw->dowarn;
	PL_unsafe = sw->unsafe;
	if (sw->rs) {
		sv_setsv(pi->sv_rs, sw->rs);
		SvSETMAGIC(pi->sv_rs);
	}
	if (sw->ors) {
		sv_setsv(pi->sv_ors, sw->ors);
		SvSETMAGIC(pi->sv_ors);
	}
	if (sw->inplace) {
		Safefree(PL_inplace);
		PL_inplace = savesvpv(sw->inplace);
	}
	PL_taint_warn = sw->taint_warn;
}

static void globals_end(pTHX_ struct perl_interp *pi)
{
	signals_reset(aTHX_ pi);
	SV *rs = pi->sv_rs;
	if (!(SvPOK(rs) && SvCUR(rs) == 1 && SvPVX(rs)[0] == '\n')) {
		sv_setpvs(rs, "\n");
		SvSETMAGIC(rs);
	}
	if (PL_ors_sv) {
		sv_setsv(pi->sv_ors, &PL_sv_undef);
		SvSETMAGIC(pi->sv_ors);
	}
	if (SvOK(pi->sv_ofs))
		sv_setsv(pi->sv_ofs, &PL_sv_undef);
	SV *ls = pi->sv_listsep;
	if (!(SvPOK(ls) && SvCUR(ls) == 1 && SvPVX(ls)[0] == ' '))
		sv_setpvs(ls, " ");
	SV *ss = pi->sv_subsep;
	if (!(SvPOK(ss) && SvCUR(ss) == 1 && SvPVX(ss)[0] == '\034'))
		sv_setpvs(ss, "\034");
	PL_dowarn = pi->base_dowarn;
	PL_unsafe = FALSE;
	PL_taint_warn = FALSE;
	if (PL_inplace) {
		Safefree(PL_inplace);
		PL_inplace = NULL;
	}
	if (hv_exists(GvHVn(PL_incgv), "CGI.pm", 6)) {
		dSP;
		PUSHMARK(SP);
		PUTBACK;
		call_sv((SV *)pi->cgi_pm_reset, G_VOID | G_DISCARD | G_EVAL);
	}
	AV *inc = GvAVn(PL_incgv);
	if (!av_same(aTHX_ inc, pi->base_inc))
		av_assign(aTHX_ inc, pi->base_inc);
}

/* ---- modules' settings, per script (see PLXD/Worker.pm) ---- */

/* Whether a module whose settings are kept per script is loaded: two
 * hash lookups, so that nothing else runs in an interpreter without it. */
static int settings_loaded(pTHX_ struct perl_interp *pi)
{
	HV *inc = GvHVn(PL_incgv);
	for (SSize_t i = 0; i <= AvFILLp(pi->settings_modules); i++) {
		SV *name = AvARRAY(pi->settings_modules)[i];
		if (name && SvPOK(name) && hv_exists(inc, SvPVX(name), (I32)SvCUR(name)))
			return 1;
	}
	return 0;
}

/* The loaded modules' settings become snapshot's (NULL: the set-up's). */
static void settings_apply(pTHX_ struct perl_interp *pi, SV *snapshot)
{
	dSP;
	ENTER;
	SAVETMPS;
	PUSHMARK(SP);
	XPUSHs(snapshot ? snapshot : &PL_sv_undef);
	PUTBACK;
	call_sv((SV *)pi->settings_apply, G_VOID | G_DISCARD | G_EVAL);
	FREETMPS;
	LEAVE;
}

/* The loaded modules' settings now, as a new reference; NULL: none. */
static SV *settings_snapshot(pTHX_ struct perl_interp *pi)
{
	if (!settings_loaded(aTHX_ pi))
		return NULL;
	dSP;
	ENTER;
	SAVETMPS;
	PUSHMARK(SP);
	PUTBACK;
	SV *snap = NULL;
	if (call_sv((SV *)pi->settings_snapshot, G_SCALAR | G_EVAL) == 1) {
		SPAGAIN;
		SV *got = POPs;
		if (SvROK(got))
			snap = newSVsv(got);
		PUTBACK;
	}
	FREETMPS;
	LEAVE;
	return snap;
}

/* ---- running ---- */

/* A die message, or any error text, goes to the log through fd 2. */
static void report(pTHX_ struct perl_interp *pi, SV *err)
{
	STRLEN len;
	const char *msg = SvPV(err, len);
	if (len == 0)
		return;
	PerlIO *e = std_handle(aTHX_ pi, 2);
	if (e)
		PerlIO_flush(e);
	while (len > 0) {
		ssize_t n = write(pi->fd[2], msg, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		msg += n;
		len -= (size_t)n;
	}
	if (SvCUR(err) > 0 && SvPVX(err)[SvCUR(err) - 1] != '\n') {
		ssize_t unused = write(pi->fd[2], "\n", 1);
		(void)unused;
	}
}

struct compile_arg {
	struct perl_interp *pi;
	const char *path;
	struct perl_script *script;
	enum perl_fetch result;
	int saved_errno;
};

static void do_compile(pTHX_ void *p)
{
	struct compile_arg *a = p;
	a->result = perl_registry_compile(aTHX_ a->pi->registry, a->path, &a->script);
	a->saved_errno = errno;
}

/* The script as a top-level program. Its sub is entered the way
 * List::Util's MULTICALL enters a block (PUSH_MULTICALL in cop.h), on a
 * stack of its own, without G_EVAL: $^S is 0 at its top level (1 inside
 * its own evals), and a die no eval of its own catches is perl's
 * top-level die. The sub's frame is marked as perl marks the frame it
 * fakes for a regex code block (CXp_SUB_RE_FAKE), which caller() and
 * return skip, and is not the stack's current sub: caller() at the top
 * level is empty (`main() unless caller`), Carp's traces and CGI::Carp's
 * "[date] script:" name the script, wantarray is undef, as in a program
 * perl runs. String evals still see its file lexicals (find_runcv does
 * not skip the frame), and a top-level return ends it, as the return of a
 * regex code block does. */
static void do_call_top(pTHX_ void *p)
{
	/* cx_pushsub reads the calling op's flags; there is none. */
	static OP no_caller;
	CV *cv = p;
	OP *oldop = PL_op;
	dSP; /* PUSHSTACKi switches it */
	bool oldcatch = CATCH_GET;
	PL_op = &no_caller;
	CATCH_SET(TRUE); /* its evals catch with a JMPENV of their own */
	PUSHSTACKi(PERLSI_MULTICALL);
	PUTBACK;
	PERL_CONTEXT *cx = cx_pushblock(CXt_SUB | CXp_MULTICALL | CXp_SUB_RE_FAKE, G_VOID,
			PL_stack_sp, PL_savestack_ix);
	cx_pushsub(cx, cv, NULL, 0);
	PL_curstackinfo->si_cxsubix = cx->blk_sub.old_cxsubix;
	CvDEPTH(cv)++;
	if (CvDEPTH(cv) >= 2)
		Perl_pad_push(aTHX_ CvPADLIST(cv), CvDEPTH(cv));
	PAD_SET_CUR_NOSAVE(CvPADLIST(cv), CvDEPTH(cv));
	PL_op = CvSTART(cv);
	CALLRUNOPS(aTHX);
	/* leavesub leaves a MULTICALL frame to its caller. */
	cx = CX_CUR();
	CX_LEAVE_SCOPE(cx);
	cx_popsub_common(cx);
	cx_popblock(cx);
	CX_POP(cx);
	POPSTACK;
	CATCH_SET(oldcatch);
	PL_op = oldop;
}

/* An END block, as perl calls them (call_list): inside an eval. */
static void do_call_end(pTHX_ void *p)
{
	dSP;
	PUSHMARK(SP);
	PUTBACK;
	call_sv((SV *)p, G_VOID | G_DISCARD | G_EVAL);
}

/* What unwound the stacks to protect()'s JMPENV. Perl takes the same jump
 * (2, my_exit_jump) for each of these; each leaves its own trace:
 * - our exit records itself;
 * - CORE::exit (pp_exit) sets PERL_EXIT_EXPECTED;
 * - a top-level die prints its message and calls my_failure_exit(), whose
 *   status is errno, $? >> 8 or 255;
 * - out of memory (croak_no_mem) prints "Out of memory!" and calls
 *   my_exit(1), malloc's ENOMEM still in errno: status 1 with ENOMEM,
 *   which a die cannot give (its status would be ENOMEM itself). */
static enum perl_outcome ended_by(pTHX_ struct perl_interp *pi, int ret, int saved_errno)
{
	int core_exit = (PL_exit_flags & PERL_EXIT_EXPECTED) != 0;
	PL_exit_flags &= ~PERL_EXIT_EXPECTED;
	if (ret != 2)
		return PERL_FATAL;
	if (pi->canceled)
		return PERL_CANCELED;
	if (pi->exit_called)
		return PERL_EXIT;
	if (core_exit) {
		pi->exit_status = (int)(PL_statusvalue & 0xff);
		return PERL_EXIT;
	}
	if (PL_statusvalue == 1 && saved_errno == ENOMEM)
		return PERL_FATAL;
	/* The status a CGI process would exit with, so that both handlers
	 * log the same "exited with status N" for it. */
	pi->exit_status = (int)(PL_statusvalue & 0xff);
	return PERL_DIED;
}

/* The script's END blocks, after each request as under CGI (where they run
 * when the process exits). */
static void run_ends(pTHX_ struct perl_interp *pi, struct perl_script *s)
{
	if (!s->ends)
		return;
	for (Size_t i = 0; i < av_count(s->ends); i++) {
		CV *cv = (CV *)AvARRAY(s->ends)[i];
		int ret = protect(aTHX_ do_call_end, cv);
		if (ret == 0 && SvTRUE(ERRSV)) {
			SV *msg = sv_2mortal(newSVpvf("%" SVf "END failed--call queue aborted",
					SVfARG(ERRSV)));
			report(aTHX_ pi, msg);
			break;
		}
		if (ret != 0)
			break;
	}
}

static void open_data(pTHX_ struct perl_interp *pi, struct perl_script *s)
{
	dSP;
	ENTER;
	SAVETMPS;
	PUSHMARK(SP);
	mXPUSHs(newRV_inc((SV *)s->data_gv));
	mXPUSHs(newRV_inc(s->data));
	PUTBACK;
	call_sv((SV *)pi->open_data, G_SCALAR | G_EVAL | G_DISCARD);
	FREETMPS;
	LEAVE;
}

/* The compiled script for run, compiling it when it is new or its file
 * changed; NULL with run->outcome set when it cannot run. */
static struct perl_script *script_fetch(pTHX_ struct perl_interp *pi, struct perl_run *run)
{
	struct perl_file_facts facts = {
		run->dev,
		run->ino,
		run->size,
		run->mtime_sec,
		run->mtime_nsec,
	};
	struct perl_script *script = perl_registry_lookup(aTHX_ pi->registry, run->script, &facts);
	if (script)
		return script;

	uint64_t t0 = clock_us();
	struct compile_arg a = { .pi = pi, .path = run->script };
	struct perl_stderr_hold hold = { .fd = pi->fd[2] };
	AV *hidden = overrides_hide(aTHX_ pi);
	if (settings_loaded(aTHX_ pi))
		settings_apply(aTHX_ pi, NULL);
	perl_registry_hold_stderr(aTHX_ & hold);
	int ret = protect(aTHX_ do_compile, &a);
	int saved_errno = errno;
	perl_registry_release_stderr(aTHX_ & hold, run->script, NULL);
	overrides_restore(aTHX_ hidden);
	run->compiled = 1;
	run->compile_us = clock_us() - t0;
	if (ret != 0) {
		/* exit in a BEGIN block: the output so far is the response;
		 * the script is compiled again next time. (A die there is the
		 * compile's error, caught by its eval.) */
		run->outcome = ended_by(aTHX_ pi, ret, saved_errno);
		return NULL;
	}
	if (a.result == PERL_FETCH_UNREADABLE) {
		SV *msg = sv_2mortal(newSVpvf("cannot read %s: %s", run->script,
				strerror(a.saved_errno)));
		report(aTHX_ pi, msg);
		run->outcome = PERL_NOT_FOUND;
		run->compiled = 0;
		run->compile_us = 0;
		return NULL;
	}
	if (a.result == PERL_FETCH_ERROR) {
		report(aTHX_ pi, ERRSV);
		run->outcome = PERL_COMPILE_ERROR;
		return NULL;
	}
	script = a.script;
	AV *inc = GvAVn(PL_incgv);
	if (!av_same(aTHX_ inc, pi->base_inc))
		script->inc = av_copy(aTHX_ inc);
	script->sig = signals_snapshot(aTHX_ pi);
	script->settings = settings_snapshot(aTHX_ pi);
	/* FCGI is plxd's before the script that loaded it first runs. */
	modules_record(aTHX_ pi);
	return script;
}

/* Overrides of builtins (CORE::GLOBAL::die, ...) that a module installed
 * when another script loaded it (CGI::Carp installs CORE::GLOBAL::die as
 * it loads) are hidden while a script compiles: perl binds a call to the
 * override when it compiles it, so each script gets the set-up's
 * overrides and its own modules', as under CGI. Code compiled earlier
 * finds its overrides through their globs when it runs: they are put back
 * after the compile. Returns glob, sub pairs (NULL: none hidden). */
static AV *overrides_hide(pTHX_ struct perl_interp *pi)
{
	HV *global = gv_stashpvs("CORE::GLOBAL", 0);
	if (!global)
		return NULL;
	AV *hidden = NULL;
	HE *he;
	hv_iterinit(global);
	while ((he = hv_iternext(global))) {
		GV *gv = (GV *)HeVAL(he);
		if (!isGV_with_GP(gv) || !GvCV(gv))
			continue;
		SV **base = hv_fetch(pi->base_overrides, HeKEY(he), HeKLEN(he), 0);
		if (base && INT2PTR(CV *, SvIV(*base)) == GvCV(gv))
			continue;
		if (!hidden)
			hidden = newAV();
		av_push(hidden, SvREFCNT_inc_simple_NN((SV *)gv));
		av_push(hidden, (SV *)GvCV(gv)); /* the glob's reference */
		GvCV_set(gv, NULL);
	}
	return hidden;
}

static void overrides_restore(pTHX_ AV *hidden)
{
	if (!hidden)
		return;
	while (av_count(hidden) >= 2) {
		GV *gv = (GV *)av_shift(hidden);
		CV *cv = (CV *)av_shift(hidden);
		if (!GvCV(gv))
			GvCV_set(gv, cv);
		else
			SvREFCNT_dec(cv); /* the script's modules installed another */
		SvREFCNT_dec(gv);
	}
	SvREFCNT_dec(hidden);
}

/* Runs one request's script (and, for a FastCGI-style script, the later
 * requests its accept loop takes: pi->run is the last of them). */
static void run_request(struct perl_interp *pi, struct perl_run *run)
{
	dTHXa(pi->perl);
	struct fcgi_state *f = &pi->fcgi;
	struct perl_run after_loop = { .script = run->script };
	*run = (struct perl_run){ .script = run->script,
		.dev = run->dev,
		.ino = run->ino,
		.size = run->size,
		.mtime_sec = run->mtime_sec,
		.mtime_nsec = run->mtime_nsec,
		.env = run->env,
		.stdin_fd = run->stdin_fd,
		.want_running = run->want_running };
	pi->run = run;
	pi->script = NULL;
	memset(f, 0, sizeof *f);
	f->after.held = f->after.log = -1;

	ENTER;
	SAVETMPS;
	pi->reset_freed = 0;
	env_sync(aTHX_ pi, run->env);
	change_dir(run->script);
	/* A script's umask would outlive its request. In thread mode it is
	 * the process's, so a script running meanwhile gets it back too. */
	umask(pi->start_umask);
	stdio_begin(aTHX_ pi, run);
	globals_begin(aTHX_ pi, run);
	f->turn_forks = pi->forks;
	/* Live SVs from here (the request's %ENV in place) to the end of the
	 * request, for growth_check, and what the set-up above freed of what
	 * the request before left. */
	IV live_before = (IV)PL_sv_count;
	IV reset_freed = pi->reset_freed;

	struct perl_script *script = script_fetch(aTHX_ pi, run);
	if (script && run->want_running && pi->transport->running)
		pi->transport->running(pi->transport->ctx, run);
	f->turn_start = clock_us();
	if (script) {
		pi->script = script;
		if (script->switches)
			switches_apply(aTHX_ pi, script->switches);
		if (!run->compiled) {
			/* A compile left these as the script sees them. */
			if (script->inc)
				av_assign(aTHX_ GvAVn(PL_incgv), script->inc);
			if (script->sig)
				signals_apply(aTHX_ pi, script->sig);
			if (settings_loaded(aTHX_ pi))
				settings_apply(aTHX_ pi, script->settings);
		}
		if (script->switches && script->switches->check_only) {
			/* perl -c: compiled (BEGIN blocks ran), not run, no END
			 * block, and no output: 500 "no output", as for a .pl. */
			report(aTHX_ pi, sv_2mortal(newSVpvf("%s syntax OK\n", run->script)));
		} else {
			if (script->data)
				open_data(aTHX_ pi, script);
			sv_setpvs(ERRSV, "");
			/* A die's status is errno's when it is set (perlfunc
			 * die): the script starts with none, as a new process
			 * does, not with what the worker's own calls left. */
			errno = 0;
			int ret = protect(aTHX_ do_call_top, script->code);
			int saved_errno = errno;
			/* An accept loop may have served later requests; once its
			 * last one is answered, pi->run may already hold the next
			 * request, for another script: nothing is left to report. */
			run = f->answered ? &after_loop : pi->run;
			if (ret != 0)
				run->outcome = ended_by(aTHX_ pi, ret, saved_errno);
			else
				STATUS_ALL_SUCCESS; /* $? in END blocks, as after perl_run */
			if (run->outcome != PERL_FATAL && run->outcome != PERL_CANCELED)
				run_ends(aTHX_ pi, script);
		}
		perl_registry_rebind(aTHX_ script);
	}
	run->exit_status = pi->exit_status;
	run->run_us = clock_us() - f->turn_start;
	run->forked = pi->forks != f->turn_forks;

	if (forked_child) {
		/* A child the script forked reached the end of the script or
		 * called exit: what a CGI child would do, then leave. */
		PerlIO_flush(NULL);
		_exit(run->exit_status);
	}
	if (f->answered) {
		/* The script ran on after its last request was answered (its
		 * loop ended, or it called Finish): what it printed since went
		 * nowhere, as under a FastCGI server. */
		fcgi_release_stderr(aTHX_ pi);
		PerlIO *out = std_handle(aTHX_ pi, 1);
		if (out)
			PerlIO_flush(out);
		dup2(pi->stdout_fd, pi->fd[1]);
		if (run->outcome == PERL_FATAL)
			pi->stop = 1; /* no answer left to say so */
	}
	stdio_end(aTHX_ pi, run, 0);
	if (f->answered)
		tail_sent(pi);
	threads_check(aTHX_ pi);
	globals_end(aTHX_ pi);
	FREETMPS;
	LEAVE;
	if (script && !run->compiled && !f->answered)
		growth_check(aTHX_ pi, script, live_before, reset_freed);
	pi->last_script = script;
	children_reap(pi);
}

/* A script whose runs keep leaving more Perl values alive (see
 * perl_registry_note_run) is told once, in the log, under its own name:
 * its request is not answered yet. An accept loop that outlived its
 * request is not measured: its runs span many requests. What a request's
 * set-up freed (reset_freed: a variable the script added to %ENV, an
 * exception object in $@) is counted as alive at its start when the
 * request before was the same script's: that run left nothing the set-up
 * does not free, and this one leaves the same for the next. */
static void growth_check(pTHX_ struct perl_interp *pi, struct perl_script *s, IV live_before,
		IV reset_freed)
{
	int again = pi->last_script == s;
	if (again)
		live_before += reset_freed;
	unsigned n = perl_registry_note_run(s, (IV)PL_sv_count > live_before, again);
	if (!n)
		return;
	ENTER;
	SAVETMPS;
	report(aTHX_ pi,
			sv_2mortal(newSVpvf(
					"it keeps growing: %u of its last %u runs "
					"in this worker left more Perl values alive than they found. Setup at "
					"a script's top level runs on every request, and a framework's routes "
					"and hooks pile up in its application: build the application once per "
					"worker, our $app ||= do { ... }; (README: \"Porting to .plx\")",
					n, (unsigned)PERL_GROWTH_WINDOW)));
	FREETMPS;
	LEAVE;
}

void perl_interp_serve(struct perl_interp *pi, const struct perl_transport *t)
{
	struct perl_run *run = t->next(t->ctx);
	while (run) {
		struct perl_interp *on = interp_for(pi, run);
		if (!on) {
			if (t->answer(t->ctx, run) < 0)
				break;
			run = t->next(t->ctx);
			continue;
		}
		on->transport = t;
		__atomic_store_n(&pi->on, on, __ATOMIC_RELEASE);
		interp_enter(on);
		run_request(on, run);
		int stop = on->stop;
		if (!on->fcgi.answered) {
			stop |= t->answer(t->ctx, on->run) < 0;
			tail_sent(on);
		}
		if (stop)
			break;
		run = on->fcgi.pending ? on->fcgi.pending : t->next(t->ctx);
	}
	for (struct perl_interp *x = pi; x; x = x == pi ? pi->twin : NULL) {
		x->transport = NULL;
		x->run = NULL;
	}
	__atomic_store_n(&pi->on, NULL, __ATOMIC_RELEASE);
	interp_enter(pi);
}

/* Makes pi the calling thread's interpreter. In a worker process with a
 * twin, perl's own signal handling follows it too: perl sets process
 * dispositions (%SIG) only for PL_curinterp. An interpreter thread's
 * never does, so that plxd's stay. */
static void interp_enter(struct perl_interp *pi)
{
	PERL_SET_CONTEXT(pi->perl);
	if (!pi->cloned && !pi->opts.threaded)
		PL_curinterp = pi->perl;
	current = pi;
}

/* The interpreter that runs run's script: pi, or its twin when the script's
 * #! line asks for taint checks ([perl] taint = honour), made now if it is
 * the first such script. A script compiled in either runs there while its
 * file is unchanged; otherwise its first line tells. NULL when the twin
 * cannot be made: run is answered as a script that did not compile, with
 * the reason in the log. */
static struct perl_interp *interp_for(struct perl_interp *pi, struct perl_run *run)
{
	if (pi->opts.taint != PERL_TAINT_HONOUR)
		return pi;
	struct perl_file_facts facts = {
		run->dev,
		run->ino,
		run->size,
		run->mtime_sec,
		run->mtime_nsec,
	};
	if (perl_registry_lookup(pi->perl, pi->registry, run->script, &facts))
		return pi;
	if (pi->twin
			&& perl_registry_lookup(pi->twin->perl, pi->twin->registry, run->script,
					&facts))
		return pi->twin;
	if (!perl_registry_taint_wanted(run->script))
		return pi;
	if (pi->twin)
		return pi->twin;
	char err[1024];
	pi->twin = twin_make(pi, err, sizeof err);
	interp_enter(pi);
	if (pi->twin)
		return pi->twin;
	char msg[PATH_MAX + 1200];
	int n = snprintf(msg, sizeof msg,
			"%s: its #! line asks for taint checks (-T), "
			"and no interpreter with them could be started: %s\n",
			run->script, err);
	ssize_t unused = write(pi->fd[2], msg, n > 0 && (size_t)n < sizeof msg ? (size_t)n : 0);
	(void)unused;
	if (run->stdin_fd >= 0)
		close(run->stdin_fd);
	*run = (struct perl_run){ .script = run->script,
		.dev = run->dev,
		.ino = run->ino,
		.size = run->size,
		.mtime_sec = run->mtime_sec,
		.mtime_nsec = run->mtime_nsec,
		.env = run->env,
		.stdin_fd = -1,
		.outcome = PERL_COMPILE_ERROR };
	return NULL;
}

int perl_interp_twin_start(struct perl_interp *pi, char *err, size_t errlen)
{
	if (!pi->twin)
		pi->twin = twin_make(pi, err, errlen);
	interp_enter(pi);
	return pi->twin ? 0 : -1;
}

int perl_interp_has_twin(const struct perl_interp *pi)
{
	return pi->twin != NULL;
}

/* An interpreter started with taint checks, for the scripts that ask for
 * them: in a worker process a second one, set up as the first was (the
 * preload too); in an interpreter thread a clone of plxd's tainted parent,
 * which the first thread that needs it makes. */
static struct perl_interp *twin_make(struct perl_interp *pi, char *err, size_t errlen)
{
	/* Set-up code (the preload) runs in /, as a worker's first does. */
	if (chdir("/") < 0) {
		snprintf(err, errlen, "chdir /: %s", strerror(errno));
		return NULL;
	}
	if (!pi->cloned) {
		/* perl sets process dispositions (%SIG) only for PL_curinterp:
		 * the twin's preload sets none, and needs none, as the first
		 * interpreter's ran the same preload (interp_enter makes the twin
		 * PL_curinterp while it serves). */
		return interp_create(&pi->opts, 1, err, errlen);
	}
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

/* Reaps the children scripts left (forked and did not wait for): under
 * CGI they would go to init when the script's process ended; here they
 * would stay zombies of the worker. Only once the script has returned, so
 * that its own waitpid finds what it started. Nothing to do, and no system
 * call, until a fork (the fork hook counts them; a child made without
 * fork(), by posix_spawn in XS code, waits for the next fork); children
 * still running are looked for again after each request until none is
 * left. */
static void children_reap(struct perl_interp *pi)
{
	if (pi->cloned) {
		clone_children_reap(pi);
		return;
	}
	if (pi->forks == pi->forks_reaped)
		return;
	for (;;) {
		pid_t pid = waitpid(-1, NULL, WNOHANG);
		if (pid > 0 || (pid < 0 && errno == EINTR))
			continue;
		if (pid < 0)
			pi->forks_reaped = pi->forks; /* ECHILD: none left */
		return;
	}
}

/* In a clone, waitpid(-1) would reap plxd's own children (CGI scripts,
 * other threads' programs): only the processes its scripts forked and left
 * are reaped (the fork override notes them; system, backticks and pipe
 * opens wait for their own). */
static void clone_children_reap(struct perl_interp *pi)
{
	pid_t born[64];
	/* Only a fork writes there (clone_child). */
	while (pi->forks != pi->births_read && read(pi->births[0], born, sizeof born) > 0)
		; /* the request is over: its processes are no stop's to end */
	pi->births_read = pi->forks;
	size_t kept = 0;
	for (size_t i = 0; i < pi->nchildren; i++) {
		pid_t pid;
		while ((pid = waitpid(pi->children[i], NULL, WNOHANG)) < 0 && errno == EINTR)
			;
		if (pid == 0)
			pi->children[kept++] = pi->children[i]; /* still running */
	}
	pi->nchildren = kept;
}

/* Empties STDOUT's buffer as a flush would, once its bytes (run->tail)
 * went with the answer. */
static void tail_sent(struct perl_interp *pi)
{
	if (!pi->tail)
		return;
	PerlIOBuf *b = PerlIOSelf(pi->tail, PerlIOBuf);
	b->posn += b->ptr - b->buf;
	b->ptr = b->end = b->buf;
	PerlIOBase(pi->tail)->flags &= ~(PERLIO_F_RDBUF | PERLIO_F_WRBUF);
	pi->tail = NULL;
}

/* ---- FastCGI-style scripts ---- */

/* FCGI's Accept for a script plxd runs (PLXD/Worker.pm points it here).
 * The first accept of a run takes the request that started it. Each later
 * one answers the current request and waits for the next: when that is
 * for the same script, unchanged, it becomes the current request (%ENV,
 * STDIN, working directory, $^T as at the start of any) and the loop goes
 * on; when it is for another script, or there is none (plxd stops, the
 * worker retires), the loop ends: -1, the script returns, and the other
 * request is served after it, from the top. */
static int fcgi_accept(pTHX_ struct perl_interp *pi)
{
	struct fcgi_state *f = &pi->fcgi;
	if (!pi->run || forked_child)
		return -1;
	if (!f->accepted) {
		f->accepted = 1;
		return 0;
	}
	if (!pi->script || f->pending || pi->stop)
		return fcgi_loop_end(aTHX_ pi);
	if (!f->answered && fcgi_answer(aTHX_ pi) < 0)
		return fcgi_loop_end(aTHX_ pi);
	if (f->last_call)
		return fcgi_loop_end(aTHX_ pi);
	struct perl_run *next = pi->transport->next(pi->transport->ctx);
	if (!next) {
		pi->stop = 1;
		return fcgi_loop_end(aTHX_ pi);
	}
	struct perl_file_facts facts = {
		next->dev,
		next->ino,
		next->size,
		next->mtime_sec,
		next->mtime_nsec,
	};
	if (strcmp(next->script, pi->script->path) != 0
			|| !perl_registry_current(pi->script, &facts)) {
		f->pending = next;
		return fcgi_loop_end(aTHX_ pi);
	}
	fcgi_turn_begin(aTHX_ pi, next);
	return 0;
}

/* The loop ends: -1 for the script's accept. */
static int fcgi_loop_end(pTHX_ struct perl_interp *pi)
{
	if (pi->fcgi.answered)
		fcgi_hold_stderr(aTHX_ pi);
	return -1;
}

/* The script runs on after its request was answered (its loop ended, or
 * it called Finish): what it writes to STDERR is held until it returns or
 * takes its next request, then logged as its own. plxd logs a worker's
 * stderr under the request it serves, by then maybe the next one, for
 * another script. */
static void fcgi_hold_stderr(pTHX_ struct perl_interp *pi)
{
	if (pi->fcgi.after.held < 0) {
		pi->fcgi.after.fd = pi->fd[2];
		perl_registry_hold_stderr(aTHX_ & pi->fcgi.after);
	}
}

static void fcgi_release_stderr(pTHX_ struct perl_interp *pi)
{
	if (pi->fcgi.after.held < 0)
		return;
	char prefix[PATH_MAX + 48];
	snprintf(prefix, sizeof prefix, "%s, after its request was answered: ", pi->script->path);
	perl_registry_release_stderr(aTHX_ & pi->fcgi.after, pi->script->path, prefix);
}

/* Answers the current request from inside the script, as the end of a
 * request would: the standard handles put back, the output sent, the
 * alarm cancelled. The script's globals, %SIG and children are its
 * program's, which goes on. Then fd 1 is /dev/null until the next request:
 * what the script prints after its loop ends belongs to no response. */
static int fcgi_answer(pTHX_ struct perl_interp *pi)
{
	struct fcgi_state *f = &pi->fcgi;
	struct perl_run *run = pi->run;
	run->outcome = PERL_OK;
	run->exit_status = 0;
	run->run_us = clock_us() - f->turn_start;
	run->forked = pi->forks != f->turn_forks;
	stdio_end(aTHX_ pi, run, 1);
	alarm(0);
	int rc = pi->transport->answer(pi->transport->ctx, run);
	tail_sent(pi);
	f->answered = 1;
	dup2(pi->devnull, pi->fd[1]);
	if (rc < 0)
		pi->stop = 1;
	return rc;
}

static void fcgi_turn_begin(pTHX_ struct perl_interp *pi, struct perl_run *run)
{
	struct fcgi_state *f = &pi->fcgi;
	*run = (struct perl_run){ .script = run->script,
		.dev = run->dev,
		.ino = run->ino,
		.size = run->size,
		.mtime_sec = run->mtime_sec,
		.mtime_nsec = run->mtime_nsec,
		.env = run->env,
		.stdin_fd = run->stdin_fd,
		.want_running = run->want_running };
	pi->run = run;
	/* What the script printed after the last request was answered (after
	 * Finish) goes nowhere, not into this one. */
	fcgi_release_stderr(aTHX_ pi);
	PerlIO *out = std_handle(aTHX_ pi, 1);
	if (out)
		PerlIO_flush(out);
	f->answered = 0;
	dup2(pi->stdout_fd, pi->fd[1]);
	env_sync(aTHX_ pi, run->env);
	change_dir(run->script);
	umask(pi->start_umask);
	stdio_begin(aTHX_ pi, run);
	PL_basetime = time(NULL);
	pi->exit_called = 0;
	pi->exit_status = 0;
	if (hv_exists(GvHVn(PL_incgv), "CGI.pm", 6)) {
		/* The function interface's query (CGI::param) with plain FCGI:
		 * CGI::Fast resets it itself. */
		dSP;
		PUSHMARK(SP);
		PUTBACK;
		call_sv((SV *)pi->cgi_pm_reset, G_VOID | G_DISCARD | G_EVAL);
	}
	f->turn_start = clock_us();
	f->turn_forks = pi->forks;
}

/* ---- modules loaded from outside Perl's installation ---- */

static int under_system_inc(pTHX_ struct perl_interp *pi, const char *path)
{
	for (Size_t i = 0; i < av_count(pi->system_inc); i++) {
		SV **svp = av_fetch(pi->system_inc, i, 0);
		if (!svp || !SvPOK(*svp) || SvCUR(*svp) == 0)
			continue;
		STRLEN len = SvCUR(*svp);
		if (strncmp(path, SvPVX(*svp), len) == 0 && path[len] == '/')
			return 1;
	}
	return 0;
}

/* Notes files in %INC not seen yet (new modules), with their stat. Once
 * FCGI is among them, its accept is made plxd's (PLXD::Worker). */
static void modules_record(pTHX_ struct perl_interp *pi)
{
	HV *inc = GvHVn(PL_incgv);
	if (HvUSEDKEYS(inc) == pi->inc_keys_seen)
		return;
	pi->inc_keys_seen = HvUSEDKEYS(inc);
	if (!pi->fcgi_installed && hv_exists(inc, "FCGI.pm", 7)) {
		dSP;
		ENTER;
		SAVETMPS;
		PUSHMARK(SP);
		PUTBACK;
		call_sv((SV *)pi->fcgi_install, G_VOID | G_DISCARD | G_EVAL);
		FREETMPS;
		LEAVE;
		pi->fcgi_installed = get_cv("FCGI::RequestX", 0) != NULL;
	}
	HE *he;
	hv_iterinit(inc);
	while ((he = hv_iternext(inc))) {
		SV *val = HeVAL(he);
		if (!val || !SvPOK(val))
			continue;
		const char *file = SvPVX(val);
		char path[PATH_MAX];
		int len;
		if (file[0] == '/') {
			len = snprintf(path, sizeof path, "%s", file);
		} else {
			/* Loaded through a relative @INC entry ("use lib
			 * 'lib'"): relative to the folder of the script that
			 * just ran. */
			char cwd[PATH_MAX];
			if (!getcwd(cwd, sizeof cwd))
				continue;
			len = snprintf(path, sizeof path, "%.*s/%s", (int)(sizeof cwd / 2), cwd,
					file);
		}
		if (len < 0 || (size_t)len >= sizeof path)
			continue;
		if (under_system_inc(aTHX_ pi, path))
			continue;
		int known = 0;
		for (size_t i = 0; i < pi->nmodules && !known; i++)
			known = strcmp(pi->modules[i].path, path) == 0;
		struct stat st;
		if (known || stat(path, &st) < 0)
			continue;
		if (pi->nmodules == pi->modules_cap) {
			pi->modules_cap = pi->modules_cap ? pi->modules_cap * 2 : 16;
			pi->modules = xrealloc(pi->modules, pi->modules_cap * sizeof *pi->modules);
		}
		pi->modules[pi->nmodules].path = xstrdup(path);
		pi->modules[pi->nmodules].st = st;
		pi->modules[pi->nmodules].inherited = 0;
		pi->nmodules++;
	}
}

int perl_interp_modules_changed(struct perl_interp *pi)
{
	if (!pi->twin)
		return modules_changed(pi);
	/* Each looks at its own %INC, and may run Perl there (FCGI's
	 * set-up): as the calling thread's interpreter. */
	struct perl_interp *was = current;
	interp_enter(pi->twin);
	int changed = modules_changed(pi->twin);
	interp_enter(pi);
	changed |= modules_changed(pi);
	interp_enter(was ? was : pi);
	return changed;
}

static int modules_changed(struct perl_interp *pi)
{
	dTHXa(pi->perl);
	modules_record(aTHX_ pi);
	uint64_t now = clock_us() / 1000;
	if (now < pi->next_module_check_ms)
		return 0;
	pi->next_module_check_ms = now + 1000;
	for (size_t i = 0; i < pi->nmodules; i++) {
		const struct stat *was = &pi->modules[i].st;
		struct stat st;
		if (pi->modules[i].inherited)
			continue;
		if (stat(pi->modules[i].path, &st) < 0 || st.st_ino != was->st_ino
				|| st.st_dev != was->st_dev || st.st_size != was->st_size
				|| st.st_mtim.tv_sec != was->st_mtim.tv_sec
				|| st.st_mtim.tv_nsec != was->st_mtim.tv_nsec)
			return 1;
	}
	return 0;
}
