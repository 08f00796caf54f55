/* The runtime's FastCGI-style loop.
 *
 * A script written as a FastCGI accept loop (CGI::Fast, FCGI) runs one
 * turn of its loop per request: PLXD/Worker.pm points FCGI's accept at
 * fcgi_accept() below, which answers the request, waits for the next one
 * and, when it is for the same script, sets it up and lets the loop go on;
 * otherwise the loop ends and the script returns. */
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

static int fcgi_accept(pTHX_ struct perl_interp *pi);
static int fcgi_answer(pTHX_ struct perl_interp *pi);
static void fcgi_hold_stderr(pTHX_ struct perl_interp *pi);
static int fcgi_loop_end(pTHX_ struct perl_interp *pi);
static void fcgi_turn_begin(pTHX_ struct perl_interp *pi, struct perl_run *run);

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
		pi->run->accept_loop = 1;
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
	struct perl_file_facts facts = run_file_facts(next);
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

void fcgi_release_stderr(pTHX_ struct perl_interp *pi)
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

void fcgi_answer_early(pTHX_ struct perl_interp *pi)
{
	if (pi->fcgi.answered || forked_child)
		return;
	(void)fcgi_answer(aTHX_ pi);
	fcgi_hold_stderr(aTHX_ pi);
}

static void fcgi_turn_begin(pTHX_ struct perl_interp *pi, struct perl_run *run)
{
	struct fcgi_state *f = &pi->fcgi;
	run_clear_outcome(run);
	run->accept_loop = 1;
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
	change_dir(pi, run);
	umask_restore(pi);
	stdio_begin(aTHX_ pi, run);
	PL_basetime = time(NULL);
	pi->exit_called = 0;
	pi->exit_status = 0;
	/* The function interface's query (CGI::param) with plain FCGI:
	 * CGI::Fast resets it itself. */
	cgi_pm_reset(aTHX_ pi);
	f->turn_start = clock_us();
	f->turn_forks = pi->forks;
}
