/* The worker's Perl runtime: interpreter set-up and the per-request glue.
 *
 * A request runs the way a CGI process would run the script: %ENV is the
 * request's variables (the real environment, so programs started with
 * system() see it), fds 0 and 1 are the request body and the response
 * (programs started by the script inherit them and write into the
 * response), the working directory is the script's folder. What a script
 * changes by accident is put back after each request: STDIN, STDOUT and
 * STDERR (closed, reopened elsewhere in Perl or under it on fds 0-2, layers
 * pushed, tied, their globs replaced), select, $|, $/, $\, $,, $", $;, $^W,
 * %SIG and alarm, @INC, @ARGV; $0 and $^T are set per request; children
 * it left are reaped. Checks are pointer and flag comparisons and one fstat
 * per standard fd: only what changed costs anything to restore.
 *
 * exit must end the request, not the process: CORE::GLOBAL::exit is
 * replaced (before any user code compiles) by an XS function that records
 * the call and unwinds with my_exit(), like perl's own exit; every call into
 * Perl runs under a JMPENV of ours that catches that unwinding. */
#include "perl_interp.h"
#include "perl_registry.h"
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
EXTERN_C void boot_DynaLoader(pTHX_ CV *cv);

/* What a standard handle looked like when it was (re)opened, and what the
 * worker put on its fd. */
struct std_state {
	PerlIO *f;
	PerlIOl *top;  /* the top layer: another means layers were pushed */
	U32 flags;
	dev_t dev;     /* the fd's file between requests: /dev/null, the */
	ino_t ino;     /* response pipe, the log pipe */
};

enum std_check { STD_CLEAN, STD_CLEARERR, STD_REOPEN };

/* A file a module was loaded from, as first seen. */
struct module_file {
	char *path;
	struct stat st;
};

struct perl_interp {
	PerlInterpreter *perl;
	struct perl_registry *registry;
	int devnull;
	int stdout_fd;          /* copy of the response channel, to restore fd 1 */
	int stderr_fd;          /* copy of the original fd 2, to restore it */
	int stdin_body;         /* fd 0 holds a request body */
	struct std_state std[3];
	GV *std_gv[3];          /* STDIN, STDOUT, STDERR */
	GV *std_keep[3];        /* aliases sharing their original GPs */
	IO *std_io[3];          /* their original IOs (kept by Worker.pm) */
	CV *open_std;           /* PLXD::Worker::open_std */
	CV *restore_std;        /* PLXD::Worker::restore_std */
	CV *open_data;          /* PLXD::Worker::open_data */
	CV *cgi_pm_reset;       /* PLXD::Worker::cgi_pm_reset */

	AV *base_inc;           /* @INC after set-up */
	AV *system_inc;         /* Perl's own folders: modules there are not watched */
	HV *sig;                /* %SIG */
	SV *base_sig[SIG_SIZE]; /* %SIG after set-up (NULL: default) */
	SV *base_warnhook, *base_diehook;
	bool base_dowarn;
	SV *sv_zero, *sv_rs, *sv_ors, *sv_ofs, *sv_listsep, *sv_subsep;

	struct module_file *modules;
	size_t nmodules, modules_cap;
	STRLEN inc_keys_seen;
	uint64_t next_module_check_ms;

	PerlIO *tail;           /* STDOUT, while its buffer is run->tail */
	char **env_array;       /* environ during requests */
	size_t env_array_cap;
	char *env_buf;          /* its strings */
	size_t env_buf_cap;
	unsigned long forks;    /* counted by the fork hook */
	unsigned long forks_reaped; /* forks whose children are all reaped */
	int exit_called;        /* the script called exit (our override) */
	int exit_status;
};

/* One interpreter per process: the XS exit and the fork hook find it here. */
static struct perl_interp *current;
static volatile sig_atomic_t forked_child;

typedef void protected_fn(pTHX_ void *arg);

static void xs_init(pTHX);
static int protect(pTHX_ protected_fn *fn, void *arg);
static void on_fork_child(void);
static void on_fork_parent(void);
static void on_sigpipe(int sig);
static void install_sigpipe(void);
static void children_reap(struct perl_interp *pi);
static uint64_t now_us(void);
static void env_sync(pTHX_ struct perl_interp *pi, char *const *env);
static void env_prune(pTHX_ HV *hv, char *const *env, size_t n);
static void environ_set(struct perl_interp *pi, char *const *env, size_t n);
static void change_dir(const char *script);
static PerlIO *std_handle(pTHX_ struct perl_interp *pi, int fd);
static void std_record(pTHX_ struct perl_interp *pi, int fd);
static void std_record_target(struct perl_interp *pi, int fd, int target);
static int std_glob_changed(pTHX_ struct perl_interp *pi, int fd);
static void std_glob_restore(pTHX_ struct perl_interp *pi, int fd);
static int std_fd_moved(struct perl_interp *pi, int fd);
static enum std_check std_check(pTHX_ struct perl_interp *pi, int fd);
static void std_reopen(pTHX_ struct perl_interp *pi, int fd, int target);
static void stdio_begin(struct perl_interp *pi, struct perl_run *run);
static void stdio_end(pTHX_ struct perl_interp *pi, struct perl_run *run);
static void globals_begin(pTHX_ struct perl_interp *pi, const struct perl_run *run);
static void globals_end(pTHX_ struct perl_interp *pi);
static void signals_reset(pTHX_ struct perl_interp *pi);
static AV *av_copy(pTHX_ AV *av);
static int av_same(pTHX_ AV *a, AV *b);
static void av_assign(pTHX_ AV *dst, AV *src);
static void report(pTHX_ struct perl_interp *pi, SV *err);
static void run_ends(pTHX_ struct perl_interp *pi, struct perl_script *s);
static void modules_record(pTHX_ struct perl_interp *pi);

XS(xs_exit);

/* ---- set-up ---- */

/* CORE::GLOBAL::exit. */
XS(xs_exit)
{
	dXSARGS;
	int status = items > 0 ? (int)SvIV(ST(0)) : 0;
	if (current) {
		current->exit_called = 1;
		current->exit_status = status;
	}
	my_exit((U32)status & 0xff);
}

static void xs_init(pTHX)
{
	static const char file[] = __FILE__;
	newXS("DynaLoader::boot_DynaLoader", boot_DynaLoader, file);
	newXS("PLXD::Worker::exit", xs_exit, file);
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
	struct sigaction sa;
	if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == on_sigpipe) {
		sa.sa_handler = SIG_DFL;
		sigaction(SIGPIPE, &sa, NULL);
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

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
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
		if (!SvPOK(*x) || !SvPOK(*y) || SvCUR(*x) != SvCUR(*y) ||
				memcmp(SvPVX(*x), SvPVX(*y), SvCUR(*x)) != 0)
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

struct perl_interp *perl_interp_create(const struct perl_interp_options *o, int argc,
		char **argv, char *err, size_t errlen)
{
	static char *args[] = { "", "-e", "0", NULL };
	char **env = environ;
	struct perl_interp *pi = xcalloc(1, sizeof *pi);
	pi->devnull = -1;
	pi->stdout_fd = -1;
	pi->stderr_fd = -1;

	PERL_SYS_INIT3(&argc, &argv, &env);
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
	if (perl_parse(my_perl, xs_init, 3, args, NULL) != 0 || perl_run(my_perl) != 0) {
		snprintf(err, errlen, "the Perl interpreter did not start");
		goto fail;
	}
	current = pi;

	pi->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	pi->stderr_fd = fcntl(2, F_DUPFD_CLOEXEC, 10);
	pi->stdout_fd = fcntl(1, F_DUPFD_CLOEXEC, 10);
	if (pi->devnull < 0 || pi->stderr_fd < 0 || pi->stdout_fd < 0) {
		snprintf(err, errlen, "cannot open /dev/null or copy fds 1 and 2: %s", strerror(errno));
		goto fail;
	}
	pthread_atfork(NULL, on_fork_parent, on_fork_child);
	install_sigpipe();

	struct eval_arg boot = { .code = worker_pm };
	if (protect(aTHX_ do_eval, &boot) != 0 || SvTRUE(ERRSV)) {
		snprintf(err, errlen, "worker bootstrap failed: %s", SvPV_nolen(ERRSV));
		goto fail;
	}
	pi->open_std = get_cv("PLXD::Worker::open_std", 0);
	pi->restore_std = get_cv("PLXD::Worker::restore_std", 0);
	pi->open_data = get_cv("PLXD::Worker::open_data", 0);
	pi->cgi_pm_reset = get_cv("PLXD::Worker::cgi_pm_reset", 0);

	AV *inc = GvAVn(PL_incgv);
	pi->system_inc = av_copy(aTHX_ inc);
	size_t ninc = 0;
	while (o->inc && o->inc[ninc])
		ninc++;
	for (size_t i = ninc; i-- > 0;) {
		av_unshift(inc, 1);
		av_store(inc, 0, newSVpv(o->inc[i], 0));
	}

	pi->registry = perl_registry_create(aTHX);
	if (o->preload && *o->preload) {
		struct eval_arg pre = { .require = o->preload };
		int ret = protect(aTHX_ do_eval, &pre);
		if (ret != 0 || SvTRUE(ERRSV)) {
			snprintf(err, errlen, "preload %s %s", o->preload,
					ret ? "called exit" : SvPV_nolen(ERRSV));
			goto fail;
		}
	}
	/* What the preload left is the state every request starts from. */
	pi->base_inc = av_copy(aTHX_ inc);
	/* %SIG's magic (and PL_psig_ptr) comes to life with the glob. */
	pi->sig = GvHVn(gv_fetchpvs("SIG", GV_ADD | GV_NOTQUAL, SVt_PVHV));
	for (int i = 1; i < SIG_SIZE; i++)
		pi->base_sig[i] = PL_psig_ptr && PL_psig_ptr[i] ? newSVsv(PL_psig_ptr[i]) : NULL;
	pi->base_warnhook = PL_warnhook ? newSVsv(PL_warnhook) : NULL;
	pi->base_diehook = PL_diehook ? newSVsv(PL_diehook) : NULL;
	pi->base_dowarn = PL_dowarn;
	pi->sv_zero = GvSV(gv_fetchpvs("0", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->sv_rs = GvSV(gv_fetchpvs("/", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->sv_ors = GvSV(gv_fetchpvs("\\", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->sv_ofs = GvSVn(PL_ofsgv);
	pi->sv_listsep = GvSV(gv_fetchpvs("\"", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->sv_subsep = GvSV(gv_fetchpvs(";", GV_ADD | GV_NOTQUAL, SVt_PV));
	pi->std_gv[0] = PL_stdingv;
	pi->std_gv[1] = gv_fetchpvs("STDOUT", GV_ADD | GV_NOTQUAL, SVt_PVIO);
	pi->std_gv[2] = PL_stderrgv;
	pi->std_keep[0] = gv_fetchpvs("PLXD::Worker::KEEP_STDIN", 0, SVt_PVIO);
	pi->std_keep[1] = gv_fetchpvs("PLXD::Worker::KEEP_STDOUT", 0, SVt_PVIO);
	pi->std_keep[2] = gv_fetchpvs("PLXD::Worker::KEEP_STDERR", 0, SVt_PVIO);
	for (int fd = 0; fd < 3; fd++) {
		if (!pi->std_gv[fd] || !pi->std_keep[fd] || !GvIOp(pi->std_gv[fd])) {
			snprintf(err, errlen, "worker bootstrap failed: no standard handle %d", fd);
			goto fail;
		}
		pi->std_io[fd] = GvIOp(pi->std_gv[fd]);
		std_record(aTHX_ pi, fd);
	}
	std_record_target(pi, 0, pi->devnull);
	std_record_target(pi, 1, pi->stdout_fd);
	std_record_target(pi, 2, pi->stderr_fd);
	modules_record(aTHX_ pi);
	return pi;

fail:
	perl_interp_destroy(pi);
	return NULL;
}

void perl_interp_destroy(struct perl_interp *pi)
{
	if (!pi)
		return;
	if (pi->perl) {
		dTHXa(pi->perl);
		PERL_SET_CONTEXT(pi->perl);
		perl_registry_destroy(aTHX_ pi->registry);
		SvREFCNT_dec(pi->base_inc);
		SvREFCNT_dec(pi->system_inc);
		for (int i = 1; i < SIG_SIZE; i++)
			SvREFCNT_dec(pi->base_sig[i]);
		SvREFCNT_dec(pi->base_warnhook);
		SvREFCNT_dec(pi->base_diehook);
		perl_destruct(pi->perl);
		perl_free(pi->perl);
		PERL_SYS_TERM();
	}
	if (environ == pi->env_array) {
		static char *empty[] = { NULL };
		environ = empty;
	}
	free(pi->env_array);
	free(pi->env_buf);
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
		if (svp && SvPOK(*svp) && SvCUR(*svp) == vlen && memcmp(SvPVX(*svp), val, vlen) == 0)
			continue;
		svp = hv_fetch(hv, kv, klen, 1);
		if (svp)
			sv_setpvn(*svp, val, vlen);
	}
	if (HvUSEDKEYS(hv) > n)
		env_prune(aTHX_ hv, env, n);
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

/* The script's folder becomes the working directory, as under CGI. */
static void change_dir(const char *script)
{
	const char *slash = strrchr(script, '/');
	char dir[PATH_MAX];
	size_t len = slash ? (size_t)(slash - script) : 0;
	if (len >= sizeof dir)
		return;
	memcpy(dir, script, len);
	dir[len] = '\0';
	if (chdir(len ? dir : "/") == 0)
		return;
	char msg[PATH_MAX + 64];
	int n = snprintf(msg, sizeof msg, "cannot change to %s: %s\n", dir, strerror(errno));
	ssize_t unused = write(2, msg, n > 0 && (size_t)n < sizeof msg ? (size_t)n : 0);
	(void)unused;
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
 * call exit. */
static void std_glob_restore(pTHX_ struct perl_interp *pi, int fd)
{
	struct restore_arg a = { pi, fd };
	ENTER;
	SAVETMPS;
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
	return fstat(fd, &st) < 0 || st.st_dev != pi->std[fd].dev || st.st_ino != pi->std[fd].ino;
}

/* Whether a standard handle is as it was opened: the same PerlIO on the
 * same fd with the same top layer and no UTF-8 or CRLF flag flipped (the
 * common case, cheap to see); only EOF or an error flag (cleared in
 * place); or changed (reopened). What the fd refers to is std_fd_moved's. */
static enum std_check std_check(pTHX_ struct perl_interp *pi, int fd)
{
	const struct std_state *st = &pi->std[fd];
	PerlIO *f = std_handle(aTHX_ pi, fd);
	if (!f || f != st->f || !*f || *f != st->top || PerlIO_fileno(f) != fd)
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
	dup2(target, fd);
	dSP;
	ENTER;
	SAVETMPS;
	PUSHMARK(SP);
	mXPUSHi(fd);
	PUTBACK;
	call_sv((SV *)pi->open_std, G_SCALAR | G_EVAL | G_DISCARD);
	FREETMPS;
	LEAVE;
	std_record(aTHX_ pi, fd);
}

/* The body, if any, goes on fd 0; the last stdio_end left STDIN clean on
 * /dev/null. */
static void stdio_begin(struct perl_interp *pi, struct perl_run *run)
{
	if (run->stdin_fd < 0)
		return;
	dup2(run->stdin_fd, 0);
	close(run->stdin_fd);
	run->stdin_fd = -1;
	pi->stdin_body = 1;
}

void perl_interp_set_stdout(struct perl_interp *pi, int fd)
{
	dup2(fd, 1);
	if (pi->stdout_fd >= 0)
		close(pi->stdout_fd);
	pi->stdout_fd = fd;
	std_record_target(pi, 1, fd);
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
 * it exits. */
static void stdio_end(pTHX_ struct perl_interp *pi, struct perl_run *run)
{
	for (int fd = 0; fd < 3; fd++)
		if (std_glob_changed(aTHX_ pi, fd))
			std_glob_restore(aTHX_ pi, fd);

	GV *out_gv = pi->std_gv[1];
	PerlIO *out = std_handle(aTHX_ pi, 1);
	enum std_check c = std_fd_moved(pi, 1) ? STD_REOPEN : std_check(aTHX_ pi, 1);
	run->tail = NULL;
	run->tail_len = 0;
	if (c != STD_REOPEN && PerlIOBase(out)->tab == &PerlIO_perlio &&
			(PerlIOBase(out)->flags & PERLIO_F_WRBUF)) {
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
			dup2(pi->devnull, 0);
		if (c == STD_CLEARERR)
			PerlIO_clearerr(std_handle(aTHX_ pi, 0));
	}

	/* $| and select. */
	for (int i = 0; i < 3; i++)
		if (GvIO(pi->std_gv[i]))
			IoFLAGS(GvIO(pi->std_gv[i])) &= ~IOf_FLUSH;
	if (PL_defoutgv != out_gv)
		setdefout(out_gv);
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
	AV *argv = GvAVn(PL_argvgv);
	if (av_count(argv) > 0)
		av_clear(argv);
	sv_setpvs(ERRSV, "");
	pi->exit_called = 0;
	pi->exit_status = 0;
}

/* Two handler values are the same: the same code, or equal strings. */
static int handler_same(pTHX_ SV *a, SV *b)
{
	if (!a || !b)
		return a == b;
	if (SvROK(a) || SvROK(b))
		return SvROK(a) && SvROK(b) && SvRV(a) == SvRV(b);
	return sv_eq(a, b);
}

/* $SIG{__WARN__} and $SIG{__DIE__}: the hook and the %SIG element both hold
 * the value, so both are put back, through the element's magic. */
static void hook_reset(pTHX_ struct perl_interp *pi, SV **hook, SV *base, const char *name)
{
	if (handler_same(aTHX_ *hook, base))
		return;
	I32 len = (I32)strlen(name);
	if (!base) {
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
		sv_setsv(*svp, base);
		SvSETMAGIC(*svp);
	}
}

static void signals_reset(pTHX_ struct perl_interp *pi)
{
	HV *sig = pi->sig;
	for (int i = 1; PL_psig_ptr && i < SIG_SIZE; i++) {
		SV *now = PL_psig_ptr[i];
		SV *base = pi->base_sig[i];
		if (!now && !base)
			continue;
		if (now && base && handler_same(aTHX_ now, base))
			continue;
		const char *name = PL_sig_name[i];
		I32 len = (I32)strlen(name);
		if (base) {
			SV **svp = hv_fetch(sig, name, len, 1);
			if (svp) {
				sv_setsv(*svp, base);
				SvSETMAGIC(*svp);
			}
		} else {
			/* Deleting the element clears the handler (SIG_DFL). If
			 * the element is gone (local %SIG), make one first. */
			(void)hv_delete(sig, name, len, G_DISCARD);
			if (PL_psig_ptr[i]) {
				SV **svp = hv_fetch(sig, name, len, 1);
				if (svp) {
					sv_setpvs(*svp, "DEFAULT");
					SvSETMAGIC(*svp);
				}
				(void)hv_delete(sig, name, len, G_DISCARD);
			}
		}
		if (i == SIGPIPE && !base)
			install_sigpipe();
	}
	hook_reset(aTHX_ pi, &PL_warnhook, pi->base_warnhook, "__WARN__");
	hook_reset(aTHX_ pi, &PL_diehook, pi->base_diehook, "__DIE__");
	/* A pending alarm would kill the idle worker (SIGALRM's default). */
	alarm(0);
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
		ssize_t n = write(2, msg, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		msg += n;
		len -= (size_t)n;
	}
	if (SvCUR(err) > 0 && SvPVX(err)[SvCUR(err) - 1] != '\n') {
		ssize_t unused = write(2, "\n", 1);
		(void)unused;
	}
}

struct fetch_arg {
	struct perl_interp *pi;
	const char *path;
	struct perl_file_facts facts;
	struct perl_script *script;
	enum perl_fetch result;
	int saved_errno;
};

static void do_fetch(pTHX_ void *p)
{
	struct fetch_arg *a = p;
	a->result = perl_registry_fetch(aTHX_ a->pi->registry, a->path, &a->facts, &a->script);
	a->saved_errno = errno;
}

static void do_call(pTHX_ void *p)
{
	CV *cv = p;
	dSP;
	PUSHMARK(SP);
	PUTBACK;
	call_sv((SV *)cv, G_VOID | G_DISCARD | G_EVAL);
}

/* The script's END blocks, after each request as under CGI (where they run
 * when the process exits). */
static void run_ends(pTHX_ struct perl_interp *pi, struct perl_script *s)
{
	if (!s->ends)
		return;
	for (Size_t i = 0; i < av_count(s->ends); i++) {
		CV *cv = (CV *)AvARRAY(s->ends)[i];
		int ret = protect(aTHX_ do_call, cv);
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

void perl_interp_run(struct perl_interp *pi, struct perl_run *run)
{
	dTHXa(pi->perl);
	run->outcome = PERL_OK;
	run->exit_status = 0;
	run->compiled = 0;
	run->compile_us = run->run_us = 0;
	unsigned long forks = pi->forks;

	ENTER;
	SAVETMPS;
	env_sync(aTHX_ pi, run->env);
	change_dir(run->script);
	stdio_begin(pi, run);
	globals_begin(aTHX_ pi, run);

	uint64_t t0 = now_us();
	struct fetch_arg fa = {
		.pi = pi, .path = run->script,
		.facts = { run->dev, run->ino, run->size, run->mtime_sec, run->mtime_nsec },
	};
	struct perl_script *script = NULL;
	int ret = protect(aTHX_ do_fetch, &fa);
	uint64_t t1 = now_us();
	if (ret != 0) {
		/* exit in a BEGIN block: the output so far is the response;
		 * the script is compiled again next time. */
		run->outcome = pi->exit_called ? PERL_EXIT : PERL_FATAL;
		run->compiled = 1;
	} else if (fa.result == PERL_FETCH_UNREADABLE) {
		SV *msg = sv_2mortal(newSVpvf("cannot read %s: %s", run->script,
					strerror(fa.saved_errno)));
		report(aTHX_ pi, msg);
		run->outcome = PERL_NOT_FOUND;
	} else if (fa.result == PERL_FETCH_ERROR) {
		report(aTHX_ pi, ERRSV);
		run->outcome = PERL_COMPILE_ERROR;
		run->compiled = 1;
	} else {
		script = fa.script;
		if (fa.result == PERL_FETCH_COMPILED) {
			run->compiled = 1;
			AV *inc = GvAVn(PL_incgv);
			if (!av_same(aTHX_ inc, pi->base_inc))
				script->inc = av_copy(aTHX_ inc);
		}
	}
	run->compile_us = run->compiled ? t1 - t0 : 0;

	if (script) {
		if (script->inc && fa.result == PERL_FETCH_CACHED)
			av_assign(aTHX_ GvAVn(PL_incgv), script->inc);
		if (script->data)
			open_data(aTHX_ pi, script);
		sv_setpvs(ERRSV, "");
		ret = protect(aTHX_ do_call, script->code);
		if (ret != 0) {
			run->outcome = pi->exit_called ? PERL_EXIT : PERL_FATAL;
		} else if (SvTRUE(ERRSV)) {
			run->outcome = PERL_DIED;
			report(aTHX_ pi, ERRSV);
		}
		if (run->outcome != PERL_FATAL)
			run_ends(aTHX_ pi, script);
		perl_registry_rebind(aTHX_ script);
	}
	run->exit_status = pi->exit_status;
	run->run_us = now_us() - t1;
	run->forked = pi->forks != forks;

	if (forked_child) {
		/* A child the script forked reached the end of the script or
		 * called exit: what a CGI child would do, then leave. */
		PerlIO_flush(NULL);
		_exit(run->exit_status);
	}
	stdio_end(aTHX_ pi, run);
	globals_end(aTHX_ pi);
	FREETMPS;
	LEAVE;
	children_reap(pi);
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

/* Empties the buffer as a flush would, without writing it. */
void perl_interp_tail_sent(struct perl_interp *pi)
{
	if (!pi->tail)
		return;
	PerlIOBuf *b = PerlIOSelf(pi->tail, PerlIOBuf);
	b->posn += b->ptr - b->buf;
	b->ptr = b->end = b->buf;
	PerlIOBase(pi->tail)->flags &= ~(PERLIO_F_RDBUF | PERLIO_F_WRBUF);
	pi->tail = NULL;
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

/* Notes files in %INC not seen yet (new modules), with their stat. */
static void modules_record(pTHX_ struct perl_interp *pi)
{
	HV *inc = GvHVn(PL_incgv);
	if (HvUSEDKEYS(inc) == pi->inc_keys_seen)
		return;
	pi->inc_keys_seen = HvUSEDKEYS(inc);
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
			len = snprintf(path, sizeof path, "%.*s/%s", (int)(sizeof cwd / 2), cwd, file);
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
		pi->nmodules++;
	}
}

int perl_interp_modules_changed(struct perl_interp *pi)
{
	dTHXa(pi->perl);
	modules_record(aTHX_ pi);
	uint64_t now = now_us() / 1000;
	if (now < pi->next_module_check_ms)
		return 0;
	pi->next_module_check_ms = now + 1000;
	for (size_t i = 0; i < pi->nmodules; i++) {
		const struct stat *was = &pi->modules[i].st;
		struct stat st;
		if (stat(pi->modules[i].path, &st) < 0 || st.st_ino != was->st_ino ||
				st.st_dev != was->st_dev || st.st_size != was->st_size ||
				st.st_mtim.tv_sec != was->st_mtim.tv_sec ||
				st.st_mtim.tv_nsec != was->st_mtim.tv_nsec)
			return 1;
	}
	return 0;
}
