/* The runtime's per-request globals: what a script changes by accident
 * (select, $|, $/, %SIG, alarm, @INC, @ARGV, warnings ...) put back after
 * each request, its #! switches applied, and modules' settings kept per
 * script (see PLXD/Worker.pm). */
#include "perl_interp.h"
#include "perl_interp_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

AV *av_copy(pTHX_ AV *av)
{
	AV *copy = newAV();
	for (Size_t i = 0; i < av_count(av); i++) {
		SV **svp = av_fetch(av, i, 0);
		av_push(copy, svp ? newSVsv(*svp) : newSV(0));
	}
	return copy;
}

/* Same elements: the same SVs (code refs in @INC) or equal strings. */
int av_same(pTHX_ AV *a, AV *b)
{
	if (av_count(a) != av_count(b))
		return 0;
	/* Plain arrays (@INC is, unless a script tied it) are read in
	 * place: av_fetch was most of the cost of comparing @INC. */
	int plain = !SvMAGICAL(a) && !SvMAGICAL(b);
	for (Size_t i = 0; i < av_count(a); i++) {
		SV **x = plain ? &AvARRAY(a)[i] : av_fetch(a, i, 0);
		SV **y = plain ? &AvARRAY(b)[i] : av_fetch(b, i, 0);
		if (!x || !y || !*x || !*y)
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

void av_assign(pTHX_ AV *dst, AV *src)
{
	av_clear(dst);
	for (Size_t i = 0; i < av_count(src); i++) {
		SV **svp = av_fetch(src, i, 0);
		av_push(dst, svp ? newSVsv(*svp) : newSV(0));
	}
}

void globals_begin(pTHX_ struct perl_interp *pi, const struct perl_run *run)
{
	PL_basetime = time(NULL);
	/* $0 is the script, as under CGI; setting it renames the process, so
	 * only when it differs. */
	if (!SvPOK(pi->globals.sv_zero) || strcmp(SvPVX(pi->globals.sv_zero), run->script) != 0) {
		sv_setpv(pi->globals.sv_zero, run->script);
		SvSETMAGIC(pi->globals.sv_zero);
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
	IoLINES(pi->stdio.std_io[0]) = 0;
	IoFLAGS(pi->stdio.std_io[0]) &= ~IOf_NOLINE;
	SvOK_off(pi->globals.sv_line);
	pi->exit_called = 0;
	pi->exit_status = 0;
	__atomic_store_n(&pi->clone.cancel, 0,
			__ATOMIC_RELAXED); /* one meant for the request before */
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
		(void)hv_delete(pi->globals.sig, name, len, G_DISCARD);
		if (*hook && *hook != PERL_WARNHOOK_FATAL) {
			SV *old = *hook;
			*hook = NULL;
			SvREFCNT_dec(old);
		}
		return;
	}
	SV **svp = hv_fetch(pi->globals.sig, name, len, 1);
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
		SV **svp = hv_fetch(pi->globals.sig, name, len, 1);
		if (svp) {
			sv_setsv(*svp, to);
			SvSETMAGIC(*svp);
		}
	} else {
		/* Deleting the element clears the handler (SIG_DFL). If the
		 * element is gone (local %SIG), make one first. */
		(void)hv_delete(pi->globals.sig, name, len, G_DISCARD);
		if (PL_psig_ptr[i]) {
			SV **svp = hv_fetch(pi->globals.sig, name, len, 1);
			if (svp) {
				sv_setpvs(*svp, "DEFAULT");
				SvSETMAGIC(*svp);
			}
			(void)hv_delete(pi->globals.sig, name, len, G_DISCARD);
		}
	}
	if (i == SIGPIPE && !to && !pi->cloned)
		install_sigpipe();
}

/* %SIG as the interpreter's set-up (the preload) left it. */
static void signals_reset(pTHX_ struct perl_interp *pi)
{
	for (int i = 1; PL_psig_ptr && i < SIG_SIZE; i++)
		if (PL_psig_ptr[i] != pi->globals.base_sig[i])
			signal_set(aTHX_ pi, i, pi->globals.base_sig[i]);
	hook_set(aTHX_ pi, &PL_warnhook, pi->globals.base_warnhook, "__WARN__");
	hook_set(aTHX_ pi, &PL_diehook, pi->globals.base_diehook, "__DIE__");
	/* A pending alarm would kill the idle worker (SIGALRM's default); a
	 * thread's would go off in its next request. Only a script's alarm
	 * sets one, or C code (Time::HiRes's alarm and setitimer): once a
	 * module with C code is loaded, after every request. */
	int c_code = c_code_loaded(aTHX_ pi);
	if (pi->cloned) {
		perl_clone_hooks->alarm_disarm(pi);
	} else {
		unsigned alarms = __atomic_load_n(&script_alarms, __ATOMIC_ACQUIRE);
		if (alarms != pi->globals.alarms_seen || c_code) {
			alarm(0);
			pi->globals.alarms_seen = alarms;
		}
	}
	/* What the script blocked (POSIX::sigprocmask) stays blocked in the
	 * worker or the thread; there a blocked SIGALRM would keep the next
	 * script's alarm, and its end at timeout, from waking it. A worker and
	 * an interpreter thread block nothing while they serve. Perl's own
	 * ops leave the mask as they found it: only C code (POSIX's, another
	 * module's) can leave a signal blocked, so the mask is read only
	 * after POSIX::sigprocmask ran (in thread mode, where plxd loads
	 * POSIX), or while a module with C code is loaded. */
	sigset_t mask;
	unsigned masks = __atomic_load_n(&script_masks, __ATOMIC_ACQUIRE);
	int mask_read = c_code || masks != pi->globals.masks_seen;
	pi->globals.masks_seen = masks;
	if (mask_read && pthread_sigmask(SIG_SETMASK, NULL, &mask) == 0 && !sigisemptyset(&mask)) {
		sigemptyset(&mask);
		pthread_sigmask(SIG_SETMASK, &mask, NULL);
	}
}

/* Whether a module with C code of its own is loaded (XSLoader and
 * DynaLoader note each in @DynaLoader::dl_modules; POSIX and Time::HiRes
 * are such modules), besides those plxd's thread set-up loaded and
 * watches: C code can change what watch (perl_interp.c) counts without
 * running the ops it watches. */
int c_code_loaded(pTHX_ struct perl_interp *pi)
{
	if (!pi->globals.dl_modules)
		pi->globals.dl_modules = gv_fetchpvs("DynaLoader::dl_modules", GV_ADD | GV_ADDMULTI,
				SVt_PVAV);
	AV *av = GvAV(pi->globals.dl_modules);
	return av && av_count(av) > pi->globals.plxd_c_modules;
}

/* Where %SIG differs from the interpreter's set-up right after a script
 * compiled: the hooks its modules installed as they loaded (CGI::Carp's
 * __DIE__ and __WARN__), its own BEGIN blocks' handlers. Pairs of signal
 * number (0: __WARN__, -1: __DIE__) and handler (undef: none); NULL when
 * nothing differs, the common case. */
AV *signals_snapshot(pTHX_ struct perl_interp *pi)
{
	AV *diff = NULL;
	for (int i = -1; i < SIG_SIZE; i++) {
		SV *now, *base;
		if (i == -1) {
			now = PL_diehook;
			base = pi->globals.base_diehook;
		} else if (i == 0) {
			now = PL_warnhook == PERL_WARNHOOK_FATAL ? NULL : PL_warnhook;
			base = pi->globals.base_warnhook;
		} else {
			now = PL_psig_ptr ? PL_psig_ptr[i] : NULL;
			base = pi->globals.base_sig[i];
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
void signals_apply(pTHX_ struct perl_interp *pi, AV *sig)
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
void switches_apply(pTHX_ struct perl_interp *pi, const struct perl_script_switches *sw)
{
	PL_dowarn = sw->dowarn;
	PL_unsafe = sw->unsafe;
	if (sw->rs) {
		sv_setsv(pi->globals.sv_rs, sw->rs);
		SvSETMAGIC(pi->globals.sv_rs);
	}
	if (sw->ors) {
		sv_setsv(pi->globals.sv_ors, sw->ors);
		SvSETMAGIC(pi->globals.sv_ors);
	}
	if (sw->inplace) {
		Safefree(PL_inplace);
		PL_inplace = savesvpv(sw->inplace);
	}
	PL_taint_warn = sw->taint_warn;
}

void globals_end(pTHX_ struct perl_interp *pi)
{
	signals_reset(aTHX_ pi);
	SV *rs = pi->globals.sv_rs;
	if (!(SvPOK(rs) && SvCUR(rs) == 1 && SvPVX(rs)[0] == '\n')) {
		sv_setpvs(rs, "\n");
		SvSETMAGIC(rs);
	}
	if (PL_ors_sv) {
		sv_setsv(pi->globals.sv_ors, &PL_sv_undef);
		SvSETMAGIC(pi->globals.sv_ors);
	}
	if (SvOK(pi->globals.sv_ofs))
		sv_setsv(pi->globals.sv_ofs, &PL_sv_undef);
	SV *ls = pi->globals.sv_listsep;
	if (!(SvPOK(ls) && SvCUR(ls) == 1 && SvPVX(ls)[0] == ' '))
		sv_setpvs(ls, " ");
	SV *ss = pi->globals.sv_subsep;
	if (!(SvPOK(ss) && SvCUR(ss) == 1 && SvPVX(ss)[0] == '\034'))
		sv_setpvs(ss, "\034");
	PL_dowarn = pi->globals.base_dowarn;
	PL_unsafe = FALSE;
	PL_taint_warn = FALSE;
	if (PL_inplace) {
		Safefree(PL_inplace);
		PL_inplace = NULL;
	}
	cgi_pm_reset(aTHX_ pi);
	AV *inc = GvAVn(PL_incgv);
	if (!av_same(aTHX_ inc, pi->globals.base_inc))
		av_assign(aTHX_ inc, pi->globals.base_inc);
}

/* Whether a variable of CGI.pm's query is set (a flag: true), or might be:
 * magic is not run here. */
static int scalar_holds(SV *sv, int is_flag)
{
	return sv && (SvGMAGICAL(sv) || (is_flag ? SvTRUE_nomg(sv) : SvOK(sv)));
}

static int aggregate_holds(SV *agg)
{
	if (!agg)
		return 0;
	if (SvMAGICAL(agg))
		return 1;
	return SvTYPE(agg) == SVt_PVAV ? AvFILLp((AV *)agg) >= 0 : HvUSEDKEYS((HV *)agg) > 0;
}

/* Once CGI.pm is loaded: the query it kept is dropped after each request
 * (PLXD::Worker::cgi_pm_reset). Its variables are looked at in C first, so
 * that a request that left none of them set (any script not using CGI.pm's
 * function interface) calls no Perl. */
void cgi_pm_reset(pTHX_ struct perl_interp *pi)
{
	const struct cgi_pm_query *c = &pi->globals.cgi_pm;
	if (!hv_exists(GvHVn(PL_incgv), "CGI.pm", 6))
		return;
	if (!scalar_holds(GvSV(c->q), 0) && !scalar_holds(GvSV(c->query_charset), 0)
			&& !scalar_holds(GvSV(c->been_there), 1)
			&& !aggregate_holds((SV *)GvAV(c->query_param))
			&& !aggregate_holds((SV *)GvHV(c->query_param))
			&& !aggregate_holds((SV *)GvHV(c->query_fieldnames))
			&& !aggregate_holds((SV *)GvHV(c->query_tmpfiles)))
		return;
	dSP;
	PUSHMARK(SP);
	PUTBACK;
	call_sv((SV *)pi->globals.cgi_pm_reset, G_VOID | G_DISCARD | G_EVAL);
}

/* Which modules whose settings are kept per script are loaded, one bit
 * per @PLXD::Worker::SETTINGS_MODULES entry: two hash lookups, and 0, so
 * that nothing else runs, in an interpreter with neither. */
unsigned settings_loaded(pTHX_ struct perl_interp *pi)
{
	HV *inc = GvHVn(PL_incgv);
	unsigned loaded = 0;
	for (SSize_t i = 0; i <= AvFILLp(pi->globals.settings_modules); i++) {
		SV *name = AvARRAY(pi->globals.settings_modules)[i];
		if (name && SvPOK(name) && hv_exists(inc, SvPVX(name), (I32)SvCUR(name)))
			loaded |= 1u << i;
	}
	return loaded;
}

/* Calls PLXD::Worker's sub cv with arg (a snapshot or a plan; NULL:
 * undef); with want_plan, in scalar context, for the array it returns
 * (owned; NULL if it failed). */
static AV *settings_call(pTHX_ CV *cv, SV *arg, int want_plan)
{
	dSP;
	ENTER;
	SAVETMPS;
	PUSHMARK(SP);
	XPUSHs(arg ? arg : &PL_sv_undef);
	PUTBACK;
	AV *plan = NULL;
	if (!want_plan) {
		call_sv((SV *)cv, G_VOID | G_DISCARD | G_EVAL);
	} else if (call_sv((SV *)cv, G_SCALAR | G_EVAL) == 1) {
		SPAGAIN;
		SV *got = POPs;
		if (SvROK(got) && SvTYPE(SvRV(got)) == SVt_PVAV)
			plan = (AV *)SvREFCNT_inc(SvRV(got));
		PUTBACK;
	}
	FREETMPS;
	LEAVE;
	return plan;
}

/* The loaded modules' settings become snapshot's (NULL: the set-up's). */
void settings_apply(pTHX_ struct perl_interp *pi, SV *snapshot)
{
	settings_call(aTHX_ pi->globals.settings_apply, snapshot, 0);
}

/* A plain value's string, as eq compares it, without converting the value
 * (which sets flags on a module's variable): NULL for a floating-point
 * number without one. buf holds an integer's digits. */
static const char *value_string(SV *sv, char *buf, size_t size, STRLEN *len)
{
	if (SvPOK(sv)) {
		*len = SvCUR(sv);
		return SvPVX(sv);
	}
	if (!SvIOK(sv))
		return NULL;
	int n = SvIsUV(sv) ? snprintf(buf, size, "%" UVuf, SvUVX(sv))
			   : snprintf(buf, size, "%" IVdf, SvIVX(sv));
	*len = (STRLEN)n;
	return buf;
}

/* A setting's value now against the one wanted: the same when both are
 * undef, references to one thing, or equal as eq compares them (a number
 * printed once has its string too). Anything not sure (magic, a float
 * without its string) is set again, which is always right. */
static int setting_same(SV *now, SV *want)
{
	if (SvGMAGICAL(now) || SvGMAGICAL(want))
		return 0;
	if (!SvOK(now) || !SvOK(want))
		return !SvOK(now) && !SvOK(want);
	if (SvROK(now) || SvROK(want))
		return SvROK(now) && SvROK(want) && SvRV(now) == SvRV(want);
	/* Most often both are as settings_assign copied them: no conversion. */
	if (!SvPOK(now) && !SvPOK(want) && SvIOK(now) && SvIOK(want))
		return SvIVX(now) == SvIVX(want) && !SvIsUV(now) == !SvIsUV(want);
	char nbuf[32], wbuf[32];
	STRLEN nlen = 0, wlen = 0;
	const char *n = value_string(now, nbuf, sizeof nbuf, &nlen);
	const char *w = value_string(want, wbuf, sizeof wbuf, &wlen);
	if (!n || !w || nlen != wlen || memcmp(n, w, nlen) != 0)
		return 0;
	/* The same bytes are one string unless only one of them is UTF-8
	 * and they go past ASCII. */
	int now_utf8 = SvPOK(now) && SvUTF8(now), want_utf8 = SvPOK(want) && SvUTF8(want);
	return now_utf8 == want_utf8 || is_ascii_string((const U8 *)n, nlen);
}

/* Whether the variables of plan ([reference, value, ...]) hold its values. */
static int plan_holds(pTHX_ AV *plan)
{
	for (SSize_t i = 0; i + 1 <= AvFILLp(plan); i += 2) {
		SV *ref = AvARRAY(plan)[i], *want = AvARRAY(plan)[i + 1];
		if (!ref || !want || !SvROK(ref))
			return 0;
		SV *var = SvRV(ref);
		if (SvTYPE(var) == SVt_PVAV) {
			if (!SvROK(want) || SvTYPE(SvRV(want)) != SVt_PVAV
					|| !av_same(aTHX_(AV *) var, (AV *)SvRV(want)))
				return 0;
		} else if (!setting_same(var, want)) {
			return 0;
		}
	}
	return 1;
}

/* Before a run of script: the loaded modules' settings as its compile
 * left them. Nearly always they are already (the same script ran last
 * and set none of them at run time): compared in C against the script's
 * plan, made again only when another module of them was loaded, and
 * the plan assigned (Perl, a few microseconds) only on a difference. */
void settings_restore(pTHX_ struct perl_interp *pi, struct perl_script *script)
{
	unsigned loaded = settings_loaded(aTHX_ pi);
	if (!loaded)
		return;
	if (!script->settings_plan || script->settings_plan_loaded != loaded) {
		/* Cleared first: a cancel may unwind out of the call. */
		AV *old = script->settings_plan;
		script->settings_plan = NULL;
		SvREFCNT_dec(old);
		script->settings_plan =
				settings_call(aTHX_ pi->globals.settings_plan, script->settings, 1);
		script->settings_plan_loaded = loaded;
	}
	if (!script->settings_plan) {
		settings_apply(aTHX_ pi, script->settings);
		return;
	}
	if (plan_holds(aTHX_ script->settings_plan))
		return;
	/* The plan in hand is what settings_apply would make again. */
	settings_call(aTHX_ pi->globals.settings_assign,
			sv_2mortal(newRV_inc((SV *)script->settings_plan)), 0);
}

/* The loaded modules' settings now, as a new reference; NULL: none. */
SV *settings_snapshot(pTHX_ struct perl_interp *pi)
{
	if (!settings_loaded(aTHX_ pi))
		return NULL;
	dSP;
	ENTER;
	SAVETMPS;
	PUSHMARK(SP);
	PUTBACK;
	SV *snap = NULL;
	if (call_sv((SV *)pi->globals.settings_snapshot, G_SCALAR | G_EVAL) == 1) {
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
