/* The runtime's module watch: the files it loaded from outside Perl's own
 * installation (an inc folder's modules, the preload), and whether one
 * changed since, so that the worker or interpreter thread is replaced. */
#include "perl_interp.h"
#include "perl_interp_int.h"
#include "alloc.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int modules_changed(struct perl_interp *pi);

static int under_system_inc(pTHX_ struct perl_interp *pi, const char *path)
{
	for (Size_t i = 0; i < av_count(pi->modwatch.system_inc); i++) {
		SV **svp = av_fetch(pi->modwatch.system_inc, i, 0);
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
void modules_record(pTHX_ struct perl_interp *pi)
{
	HV *inc = GvHVn(PL_incgv);
	if (HvUSEDKEYS(inc) == pi->modwatch.inc_keys_seen)
		return;
	pi->modwatch.inc_keys_seen = HvUSEDKEYS(inc);
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
		for (size_t i = 0; i < pi->modwatch.nmodules && !known; i++)
			known = strcmp(pi->modwatch.modules[i].path, path) == 0;
		struct stat st;
		if (known || stat(path, &st) < 0)
			continue;
		if (pi->modwatch.nmodules == pi->modwatch.modules_cap) {
			pi->modwatch.modules_cap = pi->modwatch.modules_cap
					? pi->modwatch.modules_cap * 2
					: 16;
			pi->modwatch.modules = xrealloc(pi->modwatch.modules,
					pi->modwatch.modules_cap * sizeof *pi->modwatch.modules);
		}
		pi->modwatch.modules[pi->modwatch.nmodules].path = xstrdup(path);
		pi->modwatch.modules[pi->modwatch.nmodules].st = st;
		pi->modwatch.modules[pi->modwatch.nmodules].inherited = 0;
		pi->modwatch.nmodules++;
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
	if (now < pi->modwatch.next_module_check_ms)
		return 0;
	pi->modwatch.next_module_check_ms = now + 1000;
	for (size_t i = 0; i < pi->modwatch.nmodules; i++) {
		const struct stat *was = &pi->modwatch.modules[i].st;
		struct stat st;
		if (pi->modwatch.modules[i].inherited)
			continue;
		if (stat(pi->modwatch.modules[i].path, &st) < 0 || st.st_ino != was->st_ino
				|| st.st_dev != was->st_dev || st.st_size != was->st_size
				|| st.st_mtim.tv_sec != was->st_mtim.tv_sec
				|| st.st_mtim.tv_nsec != was->st_mtim.tv_nsec)
			return 1;
	}
	return 0;
}
