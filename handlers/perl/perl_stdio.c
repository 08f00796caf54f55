/* The runtime's standard handles: STDIN, STDOUT and STDERR on the
 * request's body, response and log, checked after each request and put
 * back when a script closed, reopened, tied or replaced them, and the Perl
 * threads a script left holding them. */
#include "perl_interp.h"
#include "perl_interp_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

PerlIO *std_handle(pTHX_ struct perl_interp *pi, int fd)
{
	IO *io = GvIO(pi->stdio.std_gv[fd]);
	if (!io)
		return NULL;
	return fd == 0 ? IoIFP(io) : IoOFP(io);
}

void std_record(pTHX_ struct perl_interp *pi, int fd)
{
	PerlIO *f = std_handle(aTHX_ pi, fd);
	pi->stdio.std[fd].f = f;
	pi->stdio.std[fd].top = f ? *f : NULL;
	pi->stdio.std[fd].flags = f && *f ? PerlIOBase(f)->flags : 0;
	if (fd < 2 && f && *f && PerlIOBase(f)->tab == &PerlIO_perlio)
		pi->stdio.std_posn[fd] = PerlIOSelf(f, PerlIOBuf)->posn;
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
		if (!f || f != pi->stdio.std[fd].f || !*f || PerlIOBase(f)->tab != &PerlIO_perlio)
			continue;
		PerlIOBuf *b = PerlIOSelf(f, PerlIOBuf);
		U32 flags = PerlIOBase(f)->flags;
		if (((flags & PERLIO_F_WRBUF) && b->ptr != b->buf)
				|| ((flags & PERLIO_F_RDBUF) && b->ptr != b->end))
			continue;
		b->ptr = b->end = b->buf;
		PerlIOBase(f)->flags &= ~(PERLIO_F_RDBUF | PERLIO_F_WRBUF);
		b->posn = pi->stdio.std_posn[fd];
	}
}

/* Notes which file target is (fd gets a copy of it between requests). */
void std_record_target(struct perl_interp *pi, int fd, int target)
{
	struct stat st;
	if (fstat(target, &st) < 0)
		memset(&st, 0, sizeof st); /* matches nothing: fd is restored each time */
	pi->stdio.std[fd].dev = st.st_dev;
	pi->stdio.std[fd].ino = st.st_ino;
}

/* Whether the script gave a standard glob another GP (*STDOUT = *LOG,
 * undef *STDOUT), another IO (*STDOUT = *LOG{IO}), or tied it. Pointer and
 * flag tests only. local *STDOUT needs nothing: Perl undoes it when the
 * script's scope is left, by return, die or exit. */
static int std_glob_changed(pTHX_ struct perl_interp *pi, int fd)
{
	GV *gv = pi->stdio.std_gv[fd];
	IO *io = GvGP(gv) ? GvIOp(gv) : NULL;
	if (GvGP(gv) != GvGP(pi->stdio.std_keep[fd]) || io != pi->stdio.std_io[fd])
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
	GV *gv = a->pi->stdio.std_gv[a->fd];
	if (GvGP(gv) != GvGP(a->pi->stdio.std_keep[a->fd])
			|| GvIOp(gv) != a->pi->stdio.std_io[a->fd]) {
		dSP;
		PUSHMARK(SP);
		mXPUSHi(a->fd);
		PUTBACK;
		call_sv((SV *)a->pi->stdio.restore_std, G_VOID | G_DISCARD | G_EVAL);
	}
	/* The magic is unlinked before the tie object is freed, so the
	 * handle is untied even if its DESTROY dies or exits. UNTIE is not
	 * called, as when a tied variable is freed. */
	sv_unmagic((SV *)a->pi->stdio.std_io[a->fd], PERL_MAGIC_tiedscalar);
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
int std_fd_moved(struct perl_interp *pi, int fd)
{
	struct stat st;
	return fstat(pi->fd[fd], &st) < 0 || st.st_dev != pi->stdio.std[fd].dev
			|| st.st_ino != pi->stdio.std[fd].ino;
}

/* Whether a standard handle is as it was opened: the same PerlIO on the
 * same fd with the same top layer and no UTF-8 or CRLF flag flipped (the
 * common case, cheap to see); only EOF or an error flag (cleared in
 * place); or changed (reopened). What the fd refers to is std_fd_moved's. */
static enum std_check std_check(pTHX_ struct perl_interp *pi, int fd)
{
	const struct std_state *st = &pi->stdio.std[fd];
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
	GV *gv = pi->stdio.std_gv[fd];
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
void std_open(pTHX_ struct perl_interp *pi, int handle)
{
	dSP;
	ENTER;
	SAVETMPS;
	PUSHMARK(SP);
	mXPUSHi(handle);
	mXPUSHi(pi->fd[handle]);
	PUTBACK;
	call_sv((SV *)pi->stdio.open_std, G_SCALAR | G_EVAL | G_DISCARD);
	FREETMPS;
	LEAVE;
}

/* STDERR unbuffered, as perl makes it at start-up, so that a script's
 * message reaches the log with its own request: a handle opened afresh is
 * buffered, so its PerlIO is marked unbuffered as perl marks its first
 * stderr (stdio_end clears $| in a worker), and it gets $| too (kept on
 * between requests in a clone). */
void std_unbuffer(pTHX_ struct perl_interp *pi)
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
/* STDOUT's stock buffer, or NULL when the script's STDOUT is another
 * layer (or none). */
static PerlIOBuf *std_out_buffer(pTHX_ struct perl_interp *pi)
{
	PerlIO *out = std_handle(aTHX_ pi, 1);
	if (!out || PerlIOBase(out)->tab != &PerlIO_perlio)
		return NULL;
	return PerlIOSelf(out, PerlIOBuf);
}

void stdio_begin(pTHX_ struct perl_interp *pi, struct perl_run *run)
{
	std_rewind(aTHX_ pi);
	/* The buffer's position grows by what each flush writes: what the
	 * script sent before its end, for whether its output fits in memory
	 * (an inline run, perl_tpool.c). */
	PerlIOBuf *b = std_out_buffer(aTHX_ pi);
	pi->stdio.out_start = b ? b->posn : -1;
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
	if (!pi->stdio.threads_left)
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
void stdio_end(pTHX_ struct perl_interp *pi, struct perl_run *run, int in_script)
{
	/* Only open and sysopen put another file on a standard fd in place,
	 * or POSIX::dup2 and other C code: no fstat while neither could. */
	unsigned opens = __atomic_load_n(&script_opens, __ATOMIC_ACQUIRE);
	int fds_checked = opens != pi->stdio.opens_seen || c_code_loaded(aTHX_ pi);
	pi->stdio.opens_seen = opens;
	for (int fd = 0; fd < 3; fd++)
		if (std_glob_changed(aTHX_ pi, fd))
			std_glob_restore(aTHX_ pi, fd, in_script);

	GV *out_gv = pi->stdio.std_gv[1];
	PerlIO *out = std_handle(aTHX_ pi, 1);
	enum std_check c = fds_checked && std_fd_moved(pi, 1) ? STD_REOPEN : std_check(aTHX_ pi, 1);
	run->tail = NULL;
	run->tail_len = 0;
	PerlIOBuf *stock = c != STD_REOPEN ? std_out_buffer(aTHX_ pi) : NULL;
	run->flushed = stock && pi->stdio.out_start >= 0 && stock->posn >= pi->stdio.out_start
			? (uint64_t)(stock->posn - pi->stdio.out_start)
			: PERL_FLUSHED_UNKNOWN;
	if (stock && (PerlIOBase(out)->flags & PERLIO_F_WRBUF)) {
		PerlIOBuf *b = stock;
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

	c = fds_checked && std_fd_moved(pi, 2) ? STD_REOPEN : std_check(aTHX_ pi, 2);
	if (c == STD_REOPEN)
		std_reopen(aTHX_ pi, 2, pi->stderr_fd);
	else if (c == STD_CLEARERR)
		PerlIO_clearerr(std_handle(aTHX_ pi, 2));

	/* After a body fd 0 is its pipe: /dev/null goes back in any case,
	 * which also stops plxd feeding a script that did not read it all. */
	int in_moved = pi->stdin_body || (fds_checked && std_fd_moved(pi, 0));
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
		if (GvIO(pi->stdio.std_gv[i]))
			IoFLAGS(GvIO(pi->stdio.std_gv[i])) &= ~IOf_FLUSH;
	if (pi->cloned)
		std_unbuffer(aTHX_ pi);
	if (PL_defoutgv != out_gv)
		setdefout(out_gv);
}

/* PerlIO's counts of the handles on the standard descriptors, once the
 * interpreter is set up. */
void fd_refs_record(struct perl_interp *pi)
{
	for (int i = 0; i < 3; i++)
		pi->stdio.fd_refs[i] = PerlIOUnix_refcnt(pi->fd[i]);
}

/* A Perl thread (threads.pm) the script started and left running, detached
 * or not joined, has handles of its own on the interpreter's standard
 * descriptors, which the next request's response, body and log use: what
 * it printed would reach other requests, of any script. Once the request's
 * output is out of the descriptors (run->tail aside, which travels with
 * the answer), they point at /dev/null, and the interpreter serves no
 * other request. Costs nothing until a script loads threads.pm. */
void threads_check(pTHX_ struct perl_interp *pi)
{
	if (pi->stdio.threads_left || !hv_exists(GvHVn(PL_incgv), "threads.pm", 10))
		return;
	int held = 0;
	for (int i = 0; i < 3 && !held; i++)
		held = PerlIOUnix_refcnt(pi->fd[i]) > pi->stdio.fd_refs[i];
	if (!held)
		return;
	report(aTHX_ pi,
			sv_2mortal(newSVpvf(
					"Perl threads it started run on after its request: what they "
					"print from now on is discarded, and %s serves the next request",
					pi->cloned ? "a fresh interpreter" : "a new worker")));
	pi->stdio.threads_left = 1;
	pi->stop = 1;
	dup2(pi->devnull, pi->fd[0]);
	dup2(pi->devnull, pi->fd[1]);
	dup2(pi->devnull, pi->fd[2]);
}

int perl_interp_threads_left(const struct perl_interp *pi)
{
	return pi->stdio.threads_left;
}

int perl_interp_retire_next(const struct perl_interp *pi)
{
	return pi->retire_next;
}
