/* The Perl runtime's insides, shared by its files (perl.h needed; include
 * perl_interp.h first): the interpreter's state, struct perl_interp, and
 * the calls one concern makes into another. */
#ifndef PLXD_PERL_INTERP_INT_H
#define PLXD_PERL_INTERP_INT_H

#include "perl_registry.h"

#include <EXTERN.h>
#include <perl.h>
#include <XSUB.h>
#include <perliol.h>

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

/* Internal to the runtime: never bound to a like-named symbol of plxd's
 * when the runtime is a plugin (plxd-perl-threads.so). */
#pragma GCC visibility push(hidden)

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

/* Where a FastCGI-style script stands in its accept loop (perl_fcgi.c):
 * cleared as each run begins. */
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

/* The standard handles (perl_stdio.c). */
struct perl_stdio_state {
	struct std_state std[3];
	Off_t std_posn[2]; /* tell(STDIN), tell(STDOUT) when opened */
	Off_t out_start;   /* STDOUT's buffer position as the request began;
			      -1: not its stock buffer */
	GV *std_gv[3];     /* STDIN, STDOUT, STDERR */
	GV *std_keep[3];   /* aliases sharing their original GPs */
	IO *std_io[3];     /* their original IOs (kept by Worker.pm) */
	CV *open_std;      /* PLXD::Worker::open_std */
	CV *restore_std;   /* PLXD::Worker::restore_std */
	/* PerlIO's count of handles on each of fd[0-2] after set-up: a Perl
	 * thread the script started holds one more on each (its clone of
	 * STDIN, STDOUT and STDERR). */
	int fd_refs[3];
	int threads_left;    /* ... and some ran on after a request: fd[1] and
			     fd[2] are theirs, on /dev/null */
	unsigned opens_seen; /* script_opens when the fds were last checked */
};

/* CGI.pm's globs that hold the query it parsed last (its function
 * interface's), which PLXD::Worker::cgi_pm_reset drops. */
struct cgi_pm_query {
	GV *q, *query_param, *query_charset, *query_fieldnames, *query_tmpfiles, *been_there;
};

/* The globals every request starts from (perl_globals.c). */
struct perl_globals_state {
	AV *base_inc;           /* @INC after set-up */
	HV *sig;                /* %SIG */
	SV *base_sig[SIG_SIZE]; /* %SIG after set-up (NULL: default) */
	SV *base_warnhook, *base_diehook;
	HV *base_overrides; /* CORE::GLOBAL:: subs after set-up: name -> CV address */
	U8 base_dowarn;     /* PL_dowarn: its flags (G_WARN_ONCE too), not a boolean */
	SV *sv_zero, *sv_rs, *sv_ors, *sv_ofs, *sv_listsep, *sv_subsep;
	SV *sv_line;           /* $. */
	CV *cgi_pm_reset;      /* PLXD::Worker::cgi_pm_reset */
	CV *settings_apply;    /* PLXD::Worker::settings_apply */
	CV *settings_snapshot; /* PLXD::Worker::settings_snapshot */
	CV *settings_plan;     /* PLXD::Worker::settings_plan */
	CV *settings_assign;   /* PLXD::Worker::settings_assign */
	AV *settings_modules;  /* @PLXD::Worker::SETTINGS_MODULES */
	GV *dl_modules;        /* *DynaLoader::dl_modules, once looked up */
	/* What plxd's own set-up loaded of them: PerlIO::scalar; in thread
	 * mode POSIX and Fcntl, with the POSIX functions that matter watched
	 * (watch_posix). */
	Size_t plxd_c_modules;
	unsigned masks_seen;  /* script_masks when the signal mask was last read */
	unsigned alarms_seen; /* script_alarms when alarm(0) last ran */
	struct cgi_pm_query cgi_pm;
};

/* One of the last request's variables (perl_env.c). */
struct perl_env_var {
	const char *kv; /* its "NAME=value" in env_buf */
	size_t len;     /* strlen(kv) */
	size_t klen;    /* where its '=' is */
	SV *sv;         /* %ENV's element for it */
};

/* The process environment during requests, and what the next request's
 * %ENV is compared with (perl_env.c). */
struct perl_env_state {
	char **env_array; /* environ during requests */
	size_t env_array_cap;
	char *env_buf; /* its strings */
	size_t env_buf_cap;
	struct perl_env_var *vars; /* the last request's, in its order */
	size_t nvars, vars_cap;
	HV *hv;          /* %ENV when vars were recorded */
	MAGIC *hv_magic; /* ... and its first magic (a tie adds one) */
	int known;       /* vars are %ENV's elements, one each, and nothing else */
	int touched;     /* a script wrote to %ENV since (env_watch magic) */
	/* The working directory: the folder this interpreter last entered for
	 * a script (NUL-terminated copy), and that script's file. */
	char *cwd;
	size_t cwd_len, cwd_cap; /* cwd_len: the script path's, up to its last '/' */
	uint64_t cwd_dev, cwd_ino;
	unsigned long cwd_id; /* change_dir's name for this interpreter */
	unsigned umasks_seen; /* script_umasks when the umask was last set */
};

/* An interpreter thread's clone only (perl_clone.c). */
struct perl_clone_state {
	/* A clone holds one count of perl's own on each fd[i] (PerlIOUnix_refcnt):
	 * perl never closes them, so no other thread of plxd (an accept) can be
	 * given the number between perl's close and the dup2 that puts a file
	 * back there, or a second close at the clone's end. */
	int fd_held;
	int cancel;      /* perl_interp_cancel asked for the script's end (atomic) */
	int canceled;    /* ... and it was ended */
	pid_t *children; /* what its scripts forked, not yet reaped */
	size_t nchildren, children_cap;
	pthread_t thread; /* the thread it serves on */
	/* Its alarm: a timer whose SIGALRM goes to its thread only. */
	timer_t alarm_timer;
	int alarm_timer_ok;
	volatile sig_atomic_t alarm_armed; /* a SIGALRM now is this alarm's */
	volatile sig_atomic_t alarm_fired; /* ... and it came: run $SIG{ALRM} */
	int births[2];                     /* each process its scripts start writes its
			  pid into [1] (clone_child), for a stop to find */
	unsigned long births_read;         /* forks whose births were read */
	char **child_env;                  /* %ENV as its children get it (fork) */
	size_t child_env_cap;
	char *child_env_buf;
	size_t child_env_buf_cap;
	sigset_t child_ignore; /* ... and the signals %SIG has as 'IGNORE' */
	/* Kept past its end for the Perl threads its scripts left
	 * (perl_linger.c). */
	struct perl_interp *linger_next;
	int objects_cleaned;
};

/* The files its modules were loaded from (perl_modwatch.c). */
struct perl_modwatch_state {
	struct module_file *modules;
	size_t nmodules, modules_cap;
	STRLEN inc_keys_seen;
	uint64_t next_module_check_ms;
	AV *system_inc; /* Perl's own folders: modules there are not watched */
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
	int cloned;       /* an interpreter thread's, cloned from plxd's parent */
	CV *open_data;    /* PLXD::Worker::open_data */
	CV *fcgi_install; /* PLXD::Worker::fcgi_install */
	/* What perl_psgi.c's request works with, in PLXD/PSGI.pm. */
	struct {
		CV *answer;  /* PLXD::PSGI::answer */
		CV *input;   /* PLXD::PSGI::input */
		CV *call;    /* PLXD::PSGI::call */
		CV *logger;  /* PLXD::PSGI::logger, psgix.logger */
		SV *served;  /* $PLXD::PSGI::served */
		SV *none;    /* $PLXD::PSGI::none, the empty psgi.input */
		HV *io_file; /* IO::File's stash, which perl blesses a handle into */
		GV *out;     /* *PLXD::PSGI::OUT, the response channel */
		GV *stdout_gv, *stderr_gv;
		/* The environment hash the last request left, to be filled
		 * again (perl_psgi.c, env_fill), its psgi.version, and the
		 * values a fill wrote. */
		HV *env;
		AV *version;
		SV **written;
		size_t nwritten, written_cap;
	} psgi;
	int fcgi_installed; /* FCGI's accept is plxd's (perl_modwatch.c) */
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
	int sys_init;                     /* perl's set-up ends with it */
	SV *sv_execname;                  /* $^X */

	PerlIO *tail;               /* STDOUT, while its buffer is run->tail */
	unsigned long forks;        /* counted by the fork hook */
	unsigned long forks_reaped; /* forks whose children are all reaped */
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
	int stop;                        /* serve no other request */
	int retire_next;                 /* a worker retires with its next answer (perl_psgi.c) */
	mode_t start_umask;              /* plxd's at start-up: each request's, as under CGI */
	int destroying;                  /* perl_interp_destroy runs: exit is refused */

	/* One group per concern, each used by its file. */
	struct perl_stdio_state stdio;
	struct perl_globals_state globals;
	struct perl_env_state env;
	struct fcgi_state fcgi;
	struct perl_modwatch_state modwatch;
	struct perl_clone_state clone; /* zero in a worker */
};

/* The calling thread's interpreter: the XS exit and the fork hook find it
 * here (one per worker process; one per interpreter thread in plxd). */
extern _Thread_local struct perl_interp *current;
/* This is a process a script forked. */
extern _Thread_local volatile sig_atomic_t forked_child;

/* The facts of run's file, as the registry compares them. */
static inline struct perl_file_facts run_file_facts(const struct perl_run *run)
{
	return (struct perl_file_facts){ run->dev, run->ino, run->size, run->mtime_sec,
		run->mtime_nsec };
}

typedef void protected_fn(pTHX_ void *arg);

/* The thread-only code (perl_clone.c), which only what runs interpreter
 * threads has: the runtime's common code calls it through this table,
 * for a clone (pi->cloned) or a thread's parent (opts.threaded) only.
 * NULL in a worker process. */
struct perl_clone_hooks {
	void (*xs_init)(pTHX); /* PLXD::Worker's thread-mode XS functions */
	void (*fork_prepare)(struct perl_interp *pi);
	void (*fork_child)(struct perl_interp *pi);
	void (*alarm_disarm)(struct perl_interp *pi);
	void (*children_reap)(struct perl_interp *pi);
	/* The tainted twin of clone pi ([perl] taint = honour). */
	struct perl_interp *(*twin_make)(struct perl_interp *pi, char *err, size_t errlen);
	/* Frees what a clone holds beyond its interpreter, as it is destroyed. */
	void (*end)(struct perl_interp *pi);
	/* Keeps pi, whose scripts left Perl threads running, to be destroyed
	 * once they end (perl_linger.c): returns 1 when kept. */
	int (*linger)(struct perl_interp *pi);
	/* load_begin and load_end, for interpreter threads, and whether a
	 * load is under way or waited for in the process. */
	int (*load_begin)(struct perl_interp *pi);
	void (*load_end)(void);
	int (*loading)(void);
};
extern const struct perl_clone_hooks *perl_clone_hooks;

/* perl_env.c */
void change_dir(struct perl_interp *pi, const struct perl_run *run);
void change_dir_forget(void);
void env_sync(pTHX_ struct perl_interp *pi, char *const *env);
void umask_restore(struct perl_interp *pi);

/* How many times scripts ran the ops through which Perl code changes the
 * process state a request sets up (chdir, umask, alarm, open and sysopen;
 * syscall counts for all), or, in thread mode, the POSIX functions that
 * do (dup2, close: opens; sigprocmask: masks), in any thread, a script's
 * Perl threads' too (perl_interp.c, watch): a step that puts one back is
 * skipped while its count is what it was when the step last ran. Atomic. */
extern unsigned script_chdirs, script_umasks, script_alarms, script_opens, script_masks;
int watch_posix(pTHX);

/* perl_fcgi.c */
void fcgi_release_stderr(pTHX_ struct perl_interp *pi);
XS(xs_fcgi_accept);
XS(xs_fcgi_finish);
XS(xs_fcgi_flush);
XS(xs_fcgi_last_call);

/* perl_fcgi.c: answers the request now, from inside its run (a PSGI
 * app's cleanup handlers run after). */
void fcgi_answer_early(pTHX_ struct perl_interp *pi);

/* perl_psgi.c */
int psgi_is_app(const char *path);
XS(xs_psgi_client_gone);
/* An app's %ENV: PATH and PERL5LIB of env and PLACK_ENV=deployment, in
 * out (4 slots). */
char *const *psgi_process_env(char *const *env, char *out[4]);
/* perl_psgi_response.c */
/* Writes res, an array response, to io's output and returns 1 when every
 * part of it is plain bytes that PSGI allows; otherwise writes nothing and
 * returns 0 (PLXD/PSGI.pm writes it, or words the error). */
int psgi_respond_plain(pTHX_ SV *res, IO *io);
XS(xs_psgi_respond_plain);
/* Serves run with the app of s (loading it first): protect()'s result, 0
 * when nothing unwound it; run->outcome set when it failed. */
int psgi_run(pTHX_ struct perl_interp *pi, struct perl_script *s, struct perl_run *run);
void psgi_unbind(pTHX_ struct perl_interp *pi);

/* perl_globals.c */
void av_assign(pTHX_ AV *dst, AV *src);
AV *av_copy(pTHX_ AV *av);
int av_same(pTHX_ AV *a, AV *b);
int c_code_loaded(pTHX_ struct perl_interp *pi);
void globals_begin(pTHX_ struct perl_interp *pi, const struct perl_run *run);
void globals_end(pTHX_ struct perl_interp *pi);
void settings_apply(pTHX_ struct perl_interp *pi, SV *snapshot);
unsigned settings_loaded(pTHX_ struct perl_interp *pi);
void settings_restore(pTHX_ struct perl_interp *pi, struct perl_script *script);
void cgi_pm_reset(pTHX_ struct perl_interp *pi);
SV *settings_snapshot(pTHX_ struct perl_interp *pi);
void signals_apply(pTHX_ struct perl_interp *pi, AV *sig);
AV *signals_snapshot(pTHX_ struct perl_interp *pi);
void switches_apply(pTHX_ struct perl_interp *pi, const struct perl_script_switches *sw);

/* perl_linger.c (thread-only, as perl_clone.c) */
int perl_linger(struct perl_interp *pi);

/* perl_interp.c */
void install_sigpipe(void);
int interp_bind(pTHX_ struct perl_interp *pi, char *err, size_t errlen);
struct perl_interp *interp_create(const struct perl_interp_options *o, int tainted, char *err,
		size_t errlen);
int protect(pTHX_ protected_fn *fn, void *arg);
/* Code is loaded (a preload, a script's compile, a PSGI application's
 * build) by one interpreter at a time in the process (perl_clone.c says
 * why): load_begin waits for the others' loads, and returns 1 holding the
 * load lock, 0 where there is none (a worker process), or -1 when the
 * run's cancel came as it waited, taken as cancel_check takes it: the load
 * is not to begin, and the run ends as canceled. load_end takes what
 * load_begin returned. */
int load_begin(struct perl_interp *pi);
void load_end(int held);

/* perl_modwatch.c */
void modules_record(pTHX_ struct perl_interp *pi);

/* perl_run.c */
void interp_enter(struct perl_interp *pi);
void run_clear_outcome(struct perl_run *run);
/* Tells the transport that run's script is compiled (an application
 * built) and about to run, when it asked (run->want_running). */
void run_running(struct perl_interp *pi, const struct perl_run *run);
void report(pTHX_ struct perl_interp *pi, SV *err);
void tail_sent(struct perl_interp *pi);

/* perl_stdio.c */
void fd_refs_record(struct perl_interp *pi);
int std_fd_moved(struct perl_interp *pi, int fd);
PerlIO *std_handle(pTHX_ struct perl_interp *pi, int fd);
void std_open(pTHX_ struct perl_interp *pi, int handle);
void std_record(pTHX_ struct perl_interp *pi, int fd);
void std_record_target(struct perl_interp *pi, int fd, int target);
void std_unbuffer(pTHX_ struct perl_interp *pi);
void stdio_begin(pTHX_ struct perl_interp *pi, struct perl_run *run);
void stdio_end(pTHX_ struct perl_interp *pi, struct perl_run *run, int in_script);
void threads_check(pTHX_ struct perl_interp *pi);

#pragma GCC visibility pop

#endif
