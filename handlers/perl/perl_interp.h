/* The Perl runtime, of a worker process or of an interpreter thread inside
 * plxd: an embedded interpreter (with DynaLoader, so XS modules load), its
 * set-up (exit override, @INC, preload), and the request glue that runs one
 * script per request the way a CGI process would (%ENV, stdio on fds 0/1/2,
 * working directory, globals reset), as a top-level program. It knows
 * nothing of how requests reach it: the caller lends it a transport
 * (perl_worker.c, perl_thread.c). Callers do not need perl.h. Its files:
 * perl_interp.c, perl_run.c and one per concern (doc/hacking.md). */
#ifndef PLXD_PERL_INTERP_H
#define PLXD_PERL_INTERP_H

#include <stddef.h>
#include <sys/types.h>
#include <stdint.h>

#include "perl_source.h" /* enum perl_taint */

struct perl_interp;

struct perl_interp_options {
	const char *preload; /* file required once before serving; NULL: none */
	char *const *inc;    /* folders put in front of @INC, NULL-terminated; may be NULL */
	int threaded;        /* the parent of interpreter threads inside plxd */
	enum perl_taint taint;
};

/* How a request's script ended. */
enum perl_outcome {
	PERL_OK,            /* the script returned */
	PERL_EXIT,          /* the script called exit */
	PERL_DIED,          /* it died (perl wrote the message to stderr) */
	PERL_COMPILE_ERROR, /* it did not compile (message written to stderr) */
	PERL_NOT_FOUND,     /* the script file could not be read */
	PERL_FATAL,         /* Perl itself gave up (out of memory): the
			       interpreter must not serve again */
	PERL_CANCELED       /* perl_interp_cancel ended it: its interpreter
			       is discarded */
};

/* One request, as the worker hands it over. */
struct perl_run {
	/* In. */
	const char *script;      /* absolute file name */
	uint64_t dev, ino, size; /* of the file, as plxd opened it */
	int64_t mtime_sec, mtime_nsec;
	char *const *env; /* "NAME=value" strings, NULL-terminated */
	int stdin_fd;     /* the request body; -1: none (reads see EOF).
				     Taken over: closed by the runtime */
	int want_running; /* call the transport's running() */

	/* Out. */
	enum perl_outcome outcome;
	int exit_status;     /* with PERL_EXIT */
	int compiled;        /* the script was compiled for this request */
	int forked;          /* the script started processes: one may still
				     hold fd 1 (see perl_interp_set_stdout) */
	int accept_loop;     /* the script took its request with a
				     FastCGI-style accept (perl_fcgi.c) */
	int ran_on;          /* it went on after its answer: a PSGI app's
				     psgix.cleanup handlers */
	int harakiri;        /* a PSGI app set psgix.harakiri.commit: the
				     interpreter retires after the answer */
	uint64_t compile_us; /* time spent compiling */
	uint64_t run_us;     /* time spent running */
	/* What STDOUT passed to fd 1 before the script returned, the tail
	 * aside; PERL_FLUSHED_UNKNOWN when STDOUT was not its stock buffer
	 * (a layer pushed, reopened) or output went around it. */
	uint64_t flushed;
	const char *tail; /* output still in STDOUT's buffer when the
				     script returned, or NULL: the transport's
				     answer sends it on */
	size_t tail_len;
};

#define PERL_FLUSHED_UNKNOWN UINT64_MAX

/* Whether pi serves no more: its script ended the interpreter, or asked
 * for a request when its transport had none. */
int perl_interp_stopped(const struct perl_interp *pi);

/* Builds the interpreter; argv is the process's own (Perl keeps it for $0).
 * Returns NULL with a message in err when it cannot, e.g. the preload file
 * died. A worker calls it once; plxd once per instance in thread mode, for
 * its parent. The first call sets perl up for the process. */
struct perl_interp *perl_interp_create(const struct perl_interp_options *o, int argc, char **argv,
		char *err, size_t errlen);

/* An interpreter for a thread of plxd ([perl] isolation = thread): a
 * clone of parent (made by perl_interp_create in plxd, which did the
 * set-up and the preload once and never serves). Its STDIN, STDOUT and
 * STDERR live on descriptors of its own, made from fds (taken over):
 * /dev/null, the response channel, the log pipe. Call it on the thread that
 * will serve with it: that thread gets a working directory of its own
 * (unshare(CLONE_FS)). Returns NULL with a message in err. */
struct perl_interp *perl_interp_clone(struct perl_interp *parent, const int fds[3], char *err,
		size_t errlen);

/* Readies the runtime for interpreter threads (perl_clone.c, which only
 * what runs them has): call once before perl_interp_create with threaded
 * set. */
void perl_interp_threads_init(void);

/* Ends the script a clone runs, from any thread: at its next Perl op
 * it unwinds as exit does, which its own eval cannot catch, and its END
 * blocks do not run; the request's outcome is PERL_CANCELED. Called again
 * before the script got there, it interrupts the system call the script
 * waits in (sleep, a read); C code that makes none runs on. A caller that
 * waits for the end calls this every so often. For a runaway script
 * ([perl] timeout). */
void perl_interp_cancel(struct perl_interp *pi);

/* Kills (SIGKILL), from any thread, the processes the script clone pi runs
 * started in its request (system, a pipe open, fork) that are still
 * running: a script waiting for one is in C code, which no cancel
 * reaches until it returns. Returns how many. For a stop. */
unsigned perl_interp_kill_children(struct perl_interp *pi);

/* Takes back the descriptor a clone was given for STDOUT (handle 1) or
 * STDERR (2), before perl_interp_destroy, for the clone that replaces it. */
int perl_interp_take_channel(struct perl_interp *pi, int handle);

/* Takes the processes a clone's scripts (its twin's too) forked that it
 * has not reaped yet (those a timeout killed, background jobs), n of them, before
 * perl_interp_destroy; perl_interp_give_children hands them, and the
 * array, to the clone that replaces it, which reaps them once they end,
 * so that none is left a zombie. */
pid_t *perl_interp_take_children(struct perl_interp *pi, size_t *n);
void perl_interp_give_children(struct perl_interp *pi, pid_t *pids, size_t n);

/* How requests reach the runtime and their answers leave it. A script
 * written as a FastCGI accept loop (see PLXD/Worker.pm) answers requests
 * and takes the next ones from inside the loop, so the runtime calls both
 * while a script runs. */
struct perl_transport {
	/* The next request, waiting for it; NULL when there will be none
	 * (plxd closed the connection, or sent what is not a request). The
	 * run stays valid until the next call. */
	struct perl_run *(*next)(void *ctx);
	/* Sends run's outcome, with run->tail, as the end of its response.
	 * Returns 0, or -1 when the worker must take no other request
	 * (it retires, or plxd is gone). */
	int (*answer)(void *ctx, struct perl_run *run);
	/* Optional: run's script is compiled (compiled, compile_us are set)
	 * and about to run; called when run->want_running. */
	void (*running)(void *ctx, const struct perl_run *run);
	/* Optional: whether the current request's response is wanted no
	 * more (its client left); a PSGI writer's write then dies. Never
	 * blocks. */
	int (*gone)(void *ctx);
	void *ctx;
};

/* Serves requests until there is none or answer returns -1. Each runs
 * its script: fd 0 is the request body while it runs (/dev/null
 * otherwise); fd 1 is the response channel, which the caller owns (see
 * perl_interp_set_stdout); what the script wrote is in fd 1 when the
 * request is answered, except the last buffered bytes, which are in
 * run->tail (so that they travel with the answer instead of costing a
 * write of their own). */
void perl_interp_serve(struct perl_interp *pi, const struct perl_transport *t);

/* Makes fd (taken over) the response channel: fd 1, restored from it
 * whenever a script closes or moves STDOUT; the tainted twin (see
 * enum perl_taint) gets a copy. At start-up fd 1 as inherited is the
 * channel. */
void perl_interp_set_stdout(struct perl_interp *pi, int fd);

/* Whether a file the interpreter loaded from outside Perl's own
 * installation (a module under an `inc` folder, the preload file, ...)
 * changed since it was loaded. Looks at most once per second; returns 1 on a
 * change (the worker should then be replaced), else 0. A clone does not
 * count what it had from its parent (the preload), which a fresh clone
 * would have again as it was. */
int perl_interp_modules_changed(struct perl_interp *pi);

/* Whether running run's script (run->script and its file facts) in pi would
 * load code (its compile, or its application's build, not done in pi yet)
 * while another interpreter of the process loads some: loads are one at a
 * time (perl_clone.c), and an event thread does not wait for one under
 * way, holding its connections; it sends the request to the interpreter
 * threads. Call it on pi's own thread, between its runs. */
int perl_interp_load_would_wait(struct perl_interp *pi, const struct perl_run *run);

/* Whether a script left Perl threads (threads.pm) running, still holding
 * the interpreter's standard descriptors: those now point at /dev/null,
 * so that nothing the threads print reaches a later response or the log,
 * and the interpreter must serve no other request (a worker retires, an
 * interpreter thread gets a fresh clone on descriptors of its own). */
int perl_interp_threads_left(const struct perl_interp *pi);

/* A worker's PSGI application asked for its end (psgix.harakiri.commit)
 * after its request was answered: it retires with its next answer. */
int perl_interp_retire_next(const struct perl_interp *pi);

/* A worker process's tainted twin (see enum perl_taint), made now rather
 * than when the first script asking for taint checks comes: its set-up,
 * the preload, then makes no request wait. Returns 0, or -1 with a
 * message in err. */
int perl_interp_twin_start(struct perl_interp *pi, char *err, size_t errlen);

/* Whether pi has its tainted twin (made at start, or for a script). */
int perl_interp_has_twin(const struct perl_interp *pi);

/* Runs END blocks of loaded modules and frees the interpreter. An exit
 * (exit, CORE::exit) in code that runs meanwhile (a DESTROY) is ignored,
 * with a line in the log naming its file and line: it would end the
 * process, which in thread mode is plxd. */
void perl_interp_destroy(struct perl_interp *pi);

/* Thread mode: destroys the interpreters that perl_interp_destroy kept
 * for the Perl threads their scripts left running, once those have ended
 * (perl_linger.c). Cheap when there are none. */
void perl_linger_reap(void);

#endif
