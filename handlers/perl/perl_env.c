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
 * The environment: environ is pointed at a copy of env the interpreter
 * owns, replaced whole each request. */
void env_sync(pTHX_ struct perl_interp *pi, char *const *env)
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
		size_t len = strlen(env[i]) + 1;
		memcpy(p, env[i], len);
		pi->env.env_array[i] = p;
		p += len;
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

/* The script's folder becomes the working directory, as under CGI. A
 * folder PATH_MAX bytes long or more, which chdir refuses, is opened in
 * parts and entered with fchdir. */
void change_dir(const char *script)
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
