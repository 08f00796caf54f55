/* The runtime's request run, a list of calls (run_request: env_sync,
 * change_dir, stdio_begin, globals_begin, the script, globals_end,
 * stdio_end ...), and the serve loop around it.
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
 * my_failure_exit(). exit ends the request, not the process (see
 * perl_interp.c): every call into Perl runs under a JMPENV of ours
 * (protect) that catches both unwindings; ended_by() tells them apart.
 *
 * A script whose #! line asks for taint checks (-T, -t) runs in a twin
 * interpreter started with them (perl -T), made beside the first when the
 * first such script comes ([perl] taint = honour; interp_for). */
#include "perl_interp.h"
#include "perl_interp_int.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

static AV *overrides_hide(pTHX_ struct perl_interp *pi);
static void overrides_restore(pTHX_ AV *hidden);
static void growth_check(pTHX_ struct perl_interp *pi, struct perl_script *s, IV live_before,
		IV reset_freed);
static void children_reap(struct perl_interp *pi);
static struct perl_interp *interp_for(struct perl_interp *pi, struct perl_run *run);
static struct perl_interp *twin_make(struct perl_interp *pi, char *err, size_t errlen);

/* A die message, or any error text, goes to the log through fd 2. */
void report(pTHX_ struct perl_interp *pi, SV *err)
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
	a->result = perl_registry_compile(aTHX_ a->pi->registry, a->path, psgi_is_app(a->path),
			&a->script);
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
	if (pi->clone.canceled)
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

int perl_interp_load_would_wait(struct perl_interp *pi, const struct perl_run *run)
{
	if (!perl_clone_hooks || !pi->perl || !perl_clone_hooks->loading())
		return 0;
	dTHXa(pi->perl);
	struct perl_file_facts facts = run_file_facts(run);
	struct perl_script *s = perl_registry_lookup(aTHX_ pi->registry, run->script, &facts);
	return !s || (s->psgi && !s->app);
}

/* The compiled script for run, compiling it when it is new or its file
 * changed; NULL with run->outcome set when it cannot run. */
static struct perl_script *script_fetch(pTHX_ struct perl_interp *pi, struct perl_run *run)
{
	struct perl_file_facts facts = run_file_facts(run);
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
	int held = load_begin(pi);
	/* Canceled as it waited: as a cancel at its first op would end it,
	 * with protect()'s 2. */
	int ret = held < 0 ? 2 : protect(aTHX_ do_compile, &a);
	int saved_errno = errno;
	load_end(held);
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
	script->psgi = psgi_is_app(run->script);
	AV *inc = GvAVn(PL_incgv);
	if (!av_same(aTHX_ inc, pi->globals.base_inc))
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
		SV **base = hv_fetch(pi->globals.base_overrides, HeKEY(he), HeKLEN(he), 0);
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

/* Clears what a previous turn set in run's outcome, keeping what came in
 * with the request: for the first run and each FastCGI-style accept. */
void run_clear_outcome(struct perl_run *run)
{
	*run = (struct perl_run){ .script = run->script,
		.dev = run->dev,
		.ino = run->ino,
		.size = run->size,
		.mtime_sec = run->mtime_sec,
		.mtime_nsec = run->mtime_nsec,
		.env = run->env,
		.stdin_fd = run->stdin_fd,
		.want_running = run->want_running };
}

void run_running(struct perl_interp *pi, const struct perl_run *run)
{
	if (run->want_running && pi->transport->running)
		pi->transport->running(pi->transport->ctx, run);
}

/* Runs one request's script (and, for a FastCGI-style script, the later
 * requests its accept loop takes: pi->run is the last of them). */
static void run_request(struct perl_interp *pi, struct perl_run *run)
{
	dTHXa(pi->perl);
	struct fcgi_state *f = &pi->fcgi;
	struct perl_run after_loop = { .script = run->script };
	run_clear_outcome(run);
	pi->run = run;
	pi->script = NULL;
	memset(f, 0, sizeof *f);
	f->after.held = f->after.log = -1;

	ENTER;
	SAVETMPS;
	pi->reset_freed = 0;
	/* An app gets the request in its environment hash: %ENV is the
	 * process's own, the same for every request (no other request's
	 * variables left in it). */
	char *proc_env[4];
	env_sync(aTHX_ pi,
			psgi_is_app(run->script) ? psgi_process_env(run->env, proc_env) : run->env);
	change_dir(pi, run);
	/* A script's umask would outlive its request. In thread mode it is
	 * the process's, so a script running meanwhile gets it back too. */
	umask_restore(pi);
	stdio_begin(aTHX_ pi, run);
	globals_begin(aTHX_ pi, run);
	f->turn_forks = pi->forks;
	/* Live SVs from here (the request's %ENV in place) to the end of the
	 * request, for growth_check, and what the set-up above freed of what
	 * the request before left. */
	IV live_before = (IV)PL_sv_count;
	IV reset_freed = pi->reset_freed;

	struct perl_script *script = script_fetch(aTHX_ pi, run);
	/* An application is about to run once it is built (psgi_run). */
	if (script && !script->psgi)
		run_running(pi, run);
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
		}
		settings_restore(aTHX_ pi, script);
		if (script->psgi) {
			/* Its DATA is read while the app runs (the templates a
			 * Mojolicious::Lite app finds at its first render), not
			 * while the file runs: opened once, before it loads. */
			if (script->data && !script->app)
				open_data(aTHX_ pi, script);
			sv_setpvs(ERRSV, "");
			errno = 0;
			int ret = psgi_run(aTHX_ pi, script, run);
			int saved_errno = errno;
			run = f->answered ? &after_loop : pi->run;
			if (ret != 0)
				run->outcome = ended_by(aTHX_ pi, ret, saved_errno);
		} else if (script->switches && script->switches->check_only) {
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
		/* An app's named subs keep the lexicals of the run that
		 * made it: it runs once per compile. */
		if (!script->psgi)
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
	if (script && !script->psgi && !run->compiled && !f->answered)
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

int perl_interp_stopped(const struct perl_interp *pi)
{
	return pi->stop;
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
void interp_enter(struct perl_interp *pi)
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
	struct perl_file_facts facts = run_file_facts(run);
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
	change_dir_forget();
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
	return perl_clone_hooks->twin_make(pi, err, errlen);
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
		perl_clone_hooks->children_reap(pi);
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

/* Empties STDOUT's buffer as a flush would, once its bytes (run->tail)
 * went with the answer. */
void tail_sent(struct perl_interp *pi)
{
	if (!pi->tail)
		return;
	PerlIOBuf *b = PerlIOSelf(pi->tail, PerlIOBuf);
	b->posn += b->ptr - b->buf;
	b->ptr = b->end = b->buf;
	PerlIOBase(pi->tail)->flags &= ~(PERLIO_F_RDBUF | PERLIO_F_WRBUF);
	pi->tail = NULL;
}
