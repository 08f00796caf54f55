/* The runtime's %ENV and process environment, made the request's for each
 * request, and its working directory, the script's folder. */
#include "perl_interp.h"
#include "perl_interp_int.h"
#include "alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void env_prune(pTHX_ HV *hv, char *const *env, size_t n);
static void environ_set(struct perl_interp *pi, char *const *env, size_t n);
static int env_update(pTHX_ struct perl_interp *pi, char *const *env);
static void env_record(pTHX_ struct perl_interp *pi, HV *hv, size_t n);
static inline int env_same(pTHX_ SV *sv, const char *val, STRLEN vlen);

extern char **environ;

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
 * Finding each variable's element is most of the cost (a hash lookup
 * through %ENV's magic, 240 instructions): while no script wrote to %ENV
 * since the last request set it (env_watch) and the request has the same
 * names in the same order, the elements found then are compared in place
 * (env_update).
 *
 * The environment: environ is pointed at a copy of env the interpreter
 * owns, made again when a variable changed or something replaced one. */
void env_sync(pTHX_ struct perl_interp *pi, char *const *env)
{
	HV *hv = GvHVn(PL_envgv);
	struct perl_env_state *e = &pi->env;
	if (e->known && !e->touched && hv == e->hv && SvMAGIC(hv) == e->hv_magic
			&& HvUSEDKEYS(hv) == e->nvars && env_update(aTHX_ pi, env))
		return;
	STRLEN n = 0;
	while (env[n])
		n++;
	if (n > e->vars_cap) {
		free(e->vars);
		e->vars_cap = n * 2;
		e->vars = xmalloc(e->vars_cap * sizeof *e->vars);
	}
	for (size_t i = 0; i < n; i++) {
		const char *kv = env[i];
		const char *eq = strchr(kv, '=');
		struct perl_env_var *v = &e->vars[i];
		v->klen = 0;
		v->sv = NULL;
		if (!eq)
			continue;
		I32 klen = (I32)(eq - kv);
		const char *val = eq + 1;
		STRLEN vlen = strlen(val);
		SV **svp = hv_fetch(hv, kv, klen, 0);
		if (!svp || !env_same(aTHX_ * svp, val, vlen)) {
			svp = hv_fetch(hv, kv, klen, 1);
			if (svp) {
				sv_setpvn(*svp, val, vlen);
				/* With taint checks every value of %ENV is tainted,
				 * as perl -T makes the environment it starts with. */
				SvTAINTED_on(*svp);
			}
		}
		v->klen = (size_t)klen;
		v->sv = svp ? *svp : NULL;
	}
	if (HvUSEDKEYS(hv) > n) {
		IV live = (IV)PL_sv_count;
		env_prune(aTHX_ hv, env, n);
		pi->reset_freed += live - (IV)PL_sv_count;
	}
	environ_set(pi, env, n);
	env_record(aTHX_ pi, hv, n);
}

/* Whether %ENV's element sv holds val as env_sync sets it. */
static inline int env_same(pTHX_ SV *sv, const char *val, STRLEN vlen)
{
	return SvPOK(sv) && SvCUR(sv) == vlen && memcmp(SvPVX(sv), val, vlen) == 0
			&& (!TAINTING_get || SvTAINTED(sv));
}

/* Tells the interpreter that ran a script's write to %ENV: a value set,
 * an element deleted or freed, the hash cleared or assigned. */
static int env_touch(pTHX_ SV *sv, MAGIC *mg)
{
	PERL_UNUSED_CONTEXT;
	PERL_UNUSED_ARG(sv);
	PERL_UNUSED_ARG(mg);
	if (current)
		current->env.touched = 1;
	return 0;
}

static const MGVTBL env_watch = { NULL, env_touch, NULL, env_touch, env_touch, NULL, NULL, NULL };

static void env_watch_add(pTHX_ SV *sv)
{
	if (SvTYPE(sv) < SVt_PVMG || !mg_findext(sv, PERL_MAGIC_ext, &env_watch))
		sv_magicext(sv, NULL, PERL_MAGIC_ext, &env_watch, NULL, 0);
}

/* Watches the elements env_sync found, once %ENV is exactly env: when env
 * had a name twice or an entry without '=', or %ENV is tied, the next
 * request looks each one up again. */
static void env_record(pTHX_ struct perl_interp *pi, HV *hv, size_t n)
{
	struct perl_env_state *e = &pi->env;
	e->known = 0;
	if (HvUSEDKEYS(hv) != n || SvTIED_mg((SV *)hv, PERL_MAGIC_tied))
		return;
	for (size_t i = 0; i < n; i++)
		if (e->vars[i].klen == 0 || !e->vars[i].sv)
			return;
	for (size_t i = 0; i < n; i++)
		env_watch_add(aTHX_ e->vars[i].sv);
	env_watch_add(aTHX_(SV *) hv);
	e->hv = hv;
	e->hv_magic = SvMAGIC(hv);
	e->nvars = n;
	e->touched = 0;
	e->known = 1;
}

/* env_sync when %ENV is as the last request left it: the same names in
 * the same order, each element compared where it is. 0 when the names
 * differ (nothing is left half done: env_sync compares them all again). */
static int env_update(pTHX_ struct perl_interp *pi, char *const *env)
{
	struct perl_env_state *e = &pi->env;
	int same = 1; /* env is the last request's, string for string */
	size_t i = 0;
	for (; env[i]; i++) {
		if (i == e->nvars)
			return 0;
		const struct perl_env_var *v = &e->vars[i];
		const char *kv = env[i];
		size_t len = strlen(kv);
		if (len != v->len || memcmp(kv, v->kv, len) != 0) {
			if (len <= v->klen || memcmp(kv, v->kv, v->klen + 1) != 0)
				return 0; /* another name */
			same = 0;
		}
		const char *val = kv + v->klen + 1;
		STRLEN vlen = len - v->klen - 1;
		if (!env_same(aTHX_ v->sv, val, vlen)) {
			sv_setpvn(v->sv, val, vlen);
			SvTAINTED_on(v->sv);
		}
	}
	if (i != e->nvars)
		return 0;
	/* environ: still the copy, unless something replaced or removed a
	 * string of it (setenv and unsetenv from C write to it in place). */
	int intact = pi->cloned || environ == e->env_array;
	for (size_t j = 0; intact && j < i; j++)
		intact = e->env_array[j] == e->vars[j].kv;
	if (!same || !intact || e->env_array[i])
		environ_set(pi, env, i);
	return 1;
}

/* Our own environ array: the strings copied into one buffer. */
static void environ_set(struct perl_interp *pi, char *const *env, size_t n)
{
	size_t bytes = 0;
	for (size_t i = 0; i < n; i++)
		bytes += strlen(env[i]) + 1;
	if (bytes > pi->env.env_buf_cap) {
		free(pi->env.env_buf);
		pi->env.env_buf_cap = bytes * 2;
		pi->env.env_buf = xmalloc(pi->env.env_buf_cap);
	}
	if (n + 1 > pi->env.env_array_cap) {
		free(pi->env.env_array);
		pi->env.env_array_cap = (n + 1) * 2;
		pi->env.env_array = xmalloc(pi->env.env_array_cap * sizeof *pi->env.env_array);
	}
	/* Build into the buffers while environ may still point at them: the
	 * interpreter reads no environment in between. */
	char *p = pi->env.env_buf;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(env[i]);
		memcpy(p, env[i], len + 1);
		pi->env.env_array[i] = p;
		pi->env.vars[i].kv = p;
		pi->env.vars[i].len = len;
		p += len + 1;
	}
	pi->env.env_array[n] = NULL;
	/* A clone shares plxd's environ: its children get the array at the
	 * fork (on_fork_child), and perl itself leaves environ alone in any
	 * interpreter but the first (my_setenv). */
	if (!pi->cloned)
		environ = pi->env.env_array;
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

/* The interpreter whose cwd is this thread's working directory (the
 * folder it entered last, no chdir since), by its cwd_id: 0 when nothing
 * is known (a chdir of plxd's own, one that failed). In a worker process a
 * twin interpreter shares the working directory, hence one per thread; an
 * id, not a pointer, as another interpreter may get a freed one's
 * address. */
static _Thread_local unsigned long cwd_owner;
static _Thread_local unsigned cwd_chdirs; /* script_chdirs then */
static unsigned long cwd_ids;

void change_dir_forget(void)
{
	cwd_owner = 0;
}

/* The script's folder becomes the working directory, as under CGI: not
 * again when this thread entered it last, for the same script file (the
 * same dev and inode at the same path), and no chdir ran since. A folder
 * PATH_MAX bytes long or more, which chdir refuses, is opened in parts
 * and entered with fchdir. */
void change_dir(struct perl_interp *pi, const struct perl_run *run)
{
	const char *script = run->script;
	const char *slash = strrchr(script, '/');
	size_t len = slash ? (size_t)(slash - script) : 0;
	struct perl_env_state *e = &pi->env;
	unsigned chdirs = __atomic_load_n(&script_chdirs, __ATOMIC_ACQUIRE);
	if (cwd_owner && cwd_owner == e->cwd_id && chdirs == cwd_chdirs && e->cwd_dev == run->dev
			&& e->cwd_ino == run->ino && e->cwd_len == len
			&& memcmp(e->cwd, script, len) == 0)
		return;
	cwd_owner = 0;
	if (len + 2 > e->cwd_cap) {
		free(e->cwd);
		e->cwd_cap = len + 2 > 256 ? len + 2 : 256;
		e->cwd = xmalloc(e->cwd_cap);
	}
	memcpy(e->cwd, script, len);
	e->cwd_len = len;
	if (!len)
		e->cwd[len++] = '/';
	e->cwd[len] = '\0';
	const char *dir = e->cwd;
	int rc = chdir(dir);
	if (rc < 0 && errno == ENAMETOOLONG) {
		int fd = perl_source_open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		rc = fd < 0 ? -1 : fchdir(fd);
		int err = errno;
		if (fd >= 0)
			close(fd);
		errno = err;
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
		return;
	}
	e->cwd_dev = run->dev;
	e->cwd_ino = run->ino;
	if (!e->cwd_id)
		e->cwd_id = __atomic_add_fetch(&cwd_ids, 1, __ATOMIC_RELAXED);
	cwd_owner = e->cwd_id;
	cwd_chdirs = chdirs;
}

/* The umask plxd started with, as under CGI: set again once a script ran
 * umask, in any thread (it is the process's), since this interpreter
 * last set it. */
void umask_restore(struct perl_interp *pi)
{
	unsigned umasks = __atomic_load_n(&script_umasks, __ATOMIC_ACQUIRE);
	if (umasks == pi->env.umasks_seen)
		return;
	umask(pi->start_umask);
	pi->env.umasks_seen = umasks;
}
