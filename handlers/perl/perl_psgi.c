/* The runtime's PSGI applications: a .psgi file is compiled by the
 * registry as a script is, run once per compile for its last value (the
 * app, kept with the compile), and each request calls the app with a PSGI
 * environment built here from the request's variables, not through %ENV.
 * The response goes to the response channel as a CGI response, so that
 * the gateway frames and streams it as it does a script's output: an
 * array of plain byte strings written here (perl_psgi_response.c),
 * anything else by PLXD/PSGI.pm. The app's own code (the file, the app,
 * its cleanup handlers) runs with STDOUT on STDERR, the log.
 * psgix.cleanup.handlers run after the request was answered (the answer
 * FastCGI-style scripts use, perl_fcgi.c), psgix.harakiri.commit retires
 * the interpreter after it (run->harakiri). The environment hash is
 * filled again for the next request when nothing else holds it
 * (env_fill, env_keep). */
#include "perl_interp.h"
#include "perl_interp_int.h"
#include "alloc.h"
#include "clock.h"

#include <perliol.h>

#include <string.h>
#include <strings.h>

static int load(pTHX_ struct perl_interp *pi, struct perl_script *s, struct perl_run *run,
		int *ret);
static HV *env_fill(pTHX_ struct perl_interp *pi, const struct perl_run *run);
static void env_keep(pTHX_ struct perl_interp *pi, HV *env);
static void env_set_str(pTHX_ SV *sv, const char *val, STRLEN vlen);
static void served(pTHX_ struct perl_interp *pi, struct perl_run *run, HV *env);
static void env_release(pTHX_ void *p);
static void cleanup_run(pTHX_ struct perl_interp *pi, HV *env);

/* PLXD::PSGI::client_gone(): whether the request's response is wanted no
 * more (the client left), for the streaming writer. */
XS(xs_psgi_client_gone)
{
	dXSARGS;
	PERL_UNUSED_VAR(items);
	struct perl_interp *pi = current;
	const struct perl_transport *t = pi ? pi->transport : NULL;
	int gone = t && t->gone && !pi->fcgi.answered && !forked_child && t->gone(t->ctx);
	XSRETURN_IV(gone);
}

int psgi_is_app(const char *path)
{
	size_t n = strlen(path);
	return n > 5 && strcasecmp(path + n - 5, ".psgi") == 0;
}

/* PLACK_ENV as Starman sets it (its plackup -E): frameworks read it as
 * they load, Mojolicious's app->start to return the app rather than run
 * its command line, which leaves a Mojolicious::Lite file's last value 1. */
char *const *psgi_process_env(char *const *env, char *out[4])
{
	static char plack_env[] = "PLACK_ENV=deployment";
	size_t n = 0;
	for (; *env && n < 2; env++)
		if (strncmp(*env, "PATH=", 5) == 0 || strncmp(*env, "PERL5LIB=", 9) == 0)
			out[n++] = *env;
	out[n++] = plack_env;
	out[n] = NULL;
	return out;
}

struct call_arg {
	SV *fn;
	SV *arg1, *arg2;
	I32 flags;
	SV *result; /* with G_SCALAR: the value, a new reference */
};

static void do_call(pTHX_ void *p)
{
	struct call_arg *a = p;
	dSP;
	ENTER;
	SAVETMPS;
	PUSHMARK(SP);
	if (a->arg1)
		XPUSHs(a->arg1);
	if (a->arg2)
		XPUSHs(a->arg2);
	PUTBACK;
	I32 n = call_sv(a->fn, a->flags | G_EVAL);
	SPAGAIN;
	if ((a->flags & G_SCALAR) && n == 1)
		a->result = newSVsv(POPs);
	else if (n > 0)
		SP -= n;
	PUTBACK;
	FREETMPS;
	LEAVE;
}

/* Logs the error in $@, "what" saying what failed: the log names the app
 * (the gateway labels what fd 2 gets with it). */
static void report_error(pTHX_ struct perl_interp *pi, const char *what)
{
	report(aTHX_ pi, sv_2mortal(newSVpvf("%s: %" SVf, what, SVfARG(ERRSV))));
}

/* Whether sv is something an app can be: a code reference, or an object
 * (one overloading &{}; calling it says when it is not). */
static int callable(pTHX_ SV *sv)
{
	return SvROK(sv) && (SvTYPE(SvRV(sv)) == SVt_PVCV || SvOBJECT(SvRV(sv)));
}

/* Runs the file's code once for its last value, the app, kept with s.
 * Returns 0, or -1 with run->outcome set (the request gets a 500), or
 * with *ret protect()'s when exit unwound it. */
static int load(pTHX_ struct perl_interp *pi, struct perl_script *s, struct perl_run *run, int *ret)
{
	/* Through PLXD::PSGI::call, so that what the file prints to STDOUT
	 * as it builds the app goes to the log, not into a response. */
	struct call_arg a = {
		.fn = (SV *)pi->psgi.call,
		.arg1 = sv_2mortal(newRV_inc((SV *)s->code)),
		.flags = G_SCALAR,
	};
	sv_setpvs(ERRSV, "");
	int held = load_begin(pi);
	*ret = held < 0 ? 2 : protect(aTHX_ do_call, &a); /* as in script_fetch */
	load_end(held);
	if (*ret != 0) {
		SvREFCNT_dec(a.result);
		return -1;
	}
	if (SvTRUE(ERRSV)) {
		report_error(aTHX_ pi, "the PSGI application did not load");
		SvREFCNT_dec(a.result);
		run->outcome = PERL_DIED;
		return -1;
	}
	if (!a.result || !callable(aTHX_ a.result)) {
		report(aTHX_ pi,
				sv_2mortal(newSVpvf("its last value is %s, not a PSGI "
						    "application (a code reference)",
						a.result && SvOK(a.result) ? SvPV_nolen(a.result)
									   : "undef")));
		SvREFCNT_dec(a.result);
		run->outcome = PERL_DIED;
		return -1;
	}
	s->app = a.result;
	return 0;
}

/* Calls fn with arg in scalar context, inside an eval. Returns its value
 * (mortal), or NULL with $@ set when it died. */
static SV *call_scalar(pTHX_ SV *fn, SV *arg1, SV *arg2)
{
	dSP;
	PUSHMARK(SP);
	XPUSHs(arg1);
	if (arg2)
		XPUSHs(arg2);
	PUTBACK;
	I32 n = call_sv(fn, G_SCALAR | G_EVAL);
	SPAGAIN;
	SV *got = n == 1 ? POPs : NULL;
	PUTBACK;
	return SvTRUE(ERRSV) ? NULL : got;
}

/* Whether gv, the empty psgi.input an earlier request had, is still as
 * PLXD::PSGI::input made it: an in-memory handle with nothing to read, put
 * back at its start, and nothing else of an app's on it. An app may have
 * opened its glob again onto other bytes (open $env->{'psgi.input'}, '<',
 * \$secret), pushed a layer or set its UTF-8 flag, read it, blessed or
 * tied it or its handle, named formats for it ($~, $^), or put values in
 * its glob's other slots (${*$in}, @{*$in}, %{*$in}): the next request, of
 * any app, must see nothing of that. */
static int still_empty(pTHX_ struct perl_interp *pi, GV *gv)
{
	IO *io = GvIO(gv);
	PerlIO *f = io ? IoIFP(io) : NULL;
	SV *sv = GvSV(gv);
	AV *av = GvAV(gv);
	HV *hv = GvHV(gv);
	char c;
	if (!f || SvOBJECT(gv) || SvRMAGICAL(gv) || SvRMAGICAL(io)
			|| SvSTASH(io) != pi->psgi.io_file || IoFMT_NAME(io) || IoTOP_NAME(io)
			|| IoFMT_GV(io) || IoTOP_GV(io) || GvCV(gv) || GvFORM(gv)
			|| (sv && (SvOK(sv) || SvMAGICAL(sv)))
			|| (av && (av_count(av) || SvMAGICAL(av)))
			|| (hv && (HvUSEDKEYS(hv) || SvMAGICAL(hv))))
		return 0;
	if (!PerlIOValid(f) || strcmp(PerlIOBase(f)->tab->name, "scalar") != 0
			|| (PerlIOBase(f)->flags & PERLIO_F_UTF8) || PerlIO_seek(f, 0, SEEK_SET) < 0
			|| PerlIO_read(f, &c, 1) != 0)
		return 0;
	PerlIO_clearerr(f);
	IoLINES(io) = 0;
	return PerlIO_seek(f, 0, SEEK_SET) >= 0;
}

/* psgi.input: the empty handle again for a request without a body, else
 * what PLXD::PSGI::input makes (a new empty handle when the last one was
 * closed or is empty no more). */
static SV *input_for(pTHX_ struct perl_interp *pi, HV *env)
{
	SV **length = hv_fetchs(env, "CONTENT_LENGTH", 0);
	SV *none = pi->psgi.none;
	SV *input = (SV *)pi->psgi.input;
	if (!length || !SvTRUE(*length)) {
		if (SvROK(none) && isGV_with_GP(SvRV(none))
				&& still_empty(aTHX_ pi, (GV *)SvRV(none)))
			return none;
		/* Not reused: input opens another, on a new glob. */
		sv_setsv(none, &PL_sv_undef);
	}
	return call_scalar(aTHX_ input, length ? *length : &PL_sv_undef, NULL);
}

struct release_arg {
	struct perl_interp *pi;
	HV *env;
	int keep;
};

struct serve_arg {
	struct perl_interp *pi;
	SV *app;
	HV *env;
};

/* A request: the app called with its environment, its response written,
 * as a Perl sub of PLXD/PSGI.pm did around the C writer: an array response
 * of plain byte strings is written here, anything else is
 * PLXD::PSGI::answer's. A failure leaves $@ set. */
static void serve(pTHX_ void *p)
{
	struct serve_arg *a = p;
	struct perl_interp *pi = a->pi;
	SV *answer = (SV *)pi->psgi.answer;
	ENTER;
	SAVETMPS;
	/* local *STDOUT = *STDERR: what the app prints goes to the log; the
	 * response goes to OUT. */
	save_gp(pi->psgi.stdout_gv, 1);
	sv_setsv((SV *)pi->psgi.stdout_gv, (SV *)pi->psgi.stderr_gv);
	/* Counted before the app runs: a responder of an earlier request,
	 * called by this one's app, knows it is not this one's. */
	sv_inc(pi->psgi.served);
	SV *this = sv_2mortal(newSVsv(pi->psgi.served));
	SV *envref = sv_2mortal(newRV_inc((SV *)a->env));
	SV *input = input_for(aTHX_ pi, a->env);
	SV *res = NULL;
	if (input) {
		sv_setsv(*hv_fetchs(a->env, "psgi.input", 1), input); /* env_fill's */
		res = call_scalar(aTHX_ a->app, envref, NULL);
	}
	int answered = res
			&& (psgi_respond_plain(aTHX_ res, GvIOp(pi->psgi.out))
					|| call_scalar(aTHX_ answer, res, this));
	/* What failed, kept past the frees below: a DESTROY of the response
	 * that runs an eval sets $@ anew, and a good response is no failure. */
	SV *failure = answered ? NULL : newSVsv(ERRSV);
	FREETMPS;
	LEAVE;
	if (failure) {
		sv_setsv(ERRSV, failure);
		SvREFCNT_dec(failure);
	} else {
		sv_setpvs(ERRSV, "");
	}
}

int psgi_run(pTHX_ struct perl_interp *pi, struct perl_script *s, struct perl_run *run)
{
	int ret = 0;
	if (!s->app) {
		/* Building the app is part of its compile, once per
		 * interpreter: its time is the compile's, not the request's
		 * (inline_budget, the status page's run times). */
		uint64_t t0 = clock_us();
		int loaded = load(aTHX_ pi, s, run, &ret);
		uint64_t took = clock_us() - t0;
		run->compiled = 1;
		run->compile_us += took;
		pi->fcgi.turn_start += took;
		if (loaded < 0)
			return ret;
	}
	run_running(pi, run);
	HV *env = env_fill(aTHX_ pi, run);
	struct serve_arg a = { .pi = pi, .app = s->app, .env = env };
	sv_setpvs(ERRSV, "");
	ret = protect(aTHX_ serve, &a);
	if (ret == 0) /* else exit inside the app, or a cancel: as a script's */
		served(aTHX_ pi, run, env);
	/* Let go of under protect too: an object the app left in the
	 * environment may call exit in its DESTROY, as a script's lexical
	 * may. */
	struct release_arg r = { .pi = pi, .env = env, .keep = ret == 0 };
	int released = protect(aTHX_ env_release, &r);
	return ret != 0 ? ret : released;
}

/* After the app's request was served: its error logged, harakiri, the
 * cleanup handlers. */
static void served(pTHX_ struct perl_interp *pi, struct perl_run *run, HV *env)
{
	if (SvTRUE(ERRSV)) {
		report_error(aTHX_ pi, "the PSGI application died");
		run->outcome = PERL_DIED;
	}
	SV **commit = hv_fetchs(env, "psgix.harakiri.commit", 0);
	if (commit && SvTRUE(*commit))
		run->harakiri = 1;
	cleanup_run(aTHX_ pi, env);
	/* A cleanup handler asked for the end after the request was
	 * answered. An interpreter thread is replaced before its next job.
	 * A worker may already have been given its next request: it serves
	 * it, and retires with that answer, which tells plxd. */
	commit = hv_fetchs(env, "psgix.harakiri.commit", 0);
	if (pi->fcgi.answered && commit && SvTRUE(*commit)) {
		if (pi->cloned) {
			pi->stop = 1;
			run->harakiri = 1; /* for the log (perl_thread.c) */
		} else {
			pi->retire_next = 1;
		}
	}
}

static void env_release(pTHX_ void *p)
{
	struct release_arg *r = p;
	if (r->keep)
		env_keep(aTHX_ r->pi, r->env);
	SvREFCNT_dec(r->env);
}

/* psgix.cleanup.handlers: the request is answered first (its response
 * ends for the client), then each is called with the environment. */
static void cleanup_run(pTHX_ struct perl_interp *pi, HV *env)
{
	SV **h = hv_fetchs(env, "psgix.cleanup.handlers", 0);
	if (!h || !SvROK(*h) || SvTYPE(SvRV(*h)) != SVt_PVAV)
		return;
	AV *handlers = (AV *)SvRV(*h);
	if (av_count(handlers) == 0)
		return;
	SvREFCNT_inc_simple_void_NN(handlers);
	/* Inline, the client waits for them: the route is not short. */
	if (pi->run)
		pi->run->ran_on = 1;
	fcgi_answer_early(aTHX_ pi);
	SV *envref = sv_2mortal(newRV_inc((SV *)env));
	for (Size_t i = 0; i < av_count(handlers); i++) {
		SV **cb = av_fetch(handlers, (SSize_t)i, 0);
		if (!cb)
			continue;
		struct call_arg a = {
			.fn = (SV *)pi->psgi.call,
			.arg1 = *cb,
			.arg2 = envref,
			.flags = G_VOID | G_DISCARD,
		};
		sv_setpvs(ERRSV, "");
		if (protect(aTHX_ do_call, &a) != 0)
			break;
		if (SvTRUE(ERRSV))
			report_error(aTHX_ pi, "a psgix.cleanup handler died");
	}
	SvREFCNT_dec(handlers);
}

static int hex_value(char c)
{
	return c >= '0' && c <= '9'            ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;
}

/* Whether a and b are the same path once runs of '/' count as one. */
static int same_but_slashes(const char *a, size_t alen, const char *b)
{
	size_t i = 0;
	while (i < alen && *b) {
		if (a[i] != *b)
			return 0;
		if (*b == '/') {
			while (i < alen && a[i] == '/')
				i++;
			while (*b == '/')
				b++;
			continue;
		}
		i++;
		b++;
	}
	return i == alen && !*b;
}

/* PATH_INFO as PSGI wants it: the request's own path, percent-decoded
 * once, after SCRIPT_NAME, its repeated slashes kept (plxd's PATH_INFO
 * has them merged, as it resolved the file). Only when that is the only
 * difference from plxd's: dot segments and the like keep plxd's reading.
 * Sets path_info, plxd's, to it. */
static void raw_path_info(pTHX_ HV *env, SV *path_info)
{
	SV **uri = hv_fetchs(env, "REQUEST_URI", 0);
	SV **script = hv_fetchs(env, "SCRIPT_NAME", 0);
	if (!uri || !script || !strstr(SvPV_nolen(*uri), "//"))
		return;
	STRLEN ulen, slen;
	const char *u = SvPV(*uri, ulen);
	const char *sn = SvPV(*script, slen);
	const char *q = memchr(u, '?', ulen);
	if (q)
		ulen = (STRLEN)(q - u);
	SV *dec = sv_2mortal(newSV(ulen + 1));
	char *d = SvPVX(dec);
	size_t n = 0;
	for (size_t i = 0; i < ulen; i++) {
		int hi, lo;
		if (u[i] == '%' && i + 2 < ulen && (hi = hex_value(u[i + 1])) >= 0
				&& (lo = hex_value(u[i + 2])) >= 0) {
			d[n++] = (char)(hi * 16 + lo);
			i += 2;
		} else
			d[n++] = u[i];
	}
	if (n < slen || memcmp(d, sn, slen) != 0 || (n > slen && d[slen] != '/'))
		return;
	if (same_but_slashes(d + slen, n - slen, SvPV_nolen(path_info)))
		env_set_str(aTHX_ path_info, d + slen, n - slen);
}

/* Whether sv, a value of the environment hash, is a plain scalar that
 * nothing else holds: it can take the next request's value in place. */
static int plain(SV *sv)
{
	return SvREFCNT(sv) == 1 && SvTYPE(sv) <= SVt_PVMG && !SvMAGICAL(sv) && !SvOBJECT(sv)
			&& !SvREADONLY(sv);
}

/* Whether av, the psgix.cleanup.handlers array, is the app's no more. */
static int plain_array(SV *av)
{
	return SvTYPE(av) == SVt_PVAV && SvREFCNT(av) == 1 && !SvMAGICAL(av) && !SvOBJECT(av)
			&& !SvREADONLY(av);
}

/* env's element key, a plain scalar for the request's value: the one
 * there when it is plain, else a new one. Recorded as written. */
static SV *env_slot(pTHX_ struct perl_interp *pi, HV *env, const char *key, I32 klen)
{
	SV *sv = *hv_fetch(env, key, klen, 1);
	if (!plain(sv)) {
		sv = newSV(0);
		(void)hv_store(env, key, klen, sv, 0);
	}
	if (pi->psgi.nwritten == pi->psgi.written_cap) {
		pi->psgi.written_cap = pi->psgi.written_cap ? pi->psgi.written_cap * 2 : 64;
		pi->psgi.written = xrealloc(pi->psgi.written,
				pi->psgi.written_cap * sizeof *pi->psgi.written);
	}
	pi->psgi.written[pi->psgi.nwritten++] = sv;
	return sv;
}

#define env_slots(pi, env, key) env_slot(aTHX_ pi, env, "" key "", sizeof key - 1)

static void env_set_str(pTHX_ SV *sv, const char *val, STRLEN vlen)
{
	sv_setpvn(sv, val, vlen);
	SvUTF8_off(sv); /* sv_setpvn keeps it, as an app's utf8::decode left it */
	if (TAINTING_get)
		SvTAINTED_on(sv);
}

static void env_set_ref(pTHX_ SV *sv, SV *target)
{
	if (!SvROK(sv) || SvRV(sv) != target)
		sv_setrv_inc(sv, target);
}

/* psgi.version, [1, 1], one per interpreter, read-only as the app sees
 * it: an app that changed it would change it for the next request too. */
static AV *version(pTHX_ struct perl_interp *pi)
{
	AV *kept = pi->psgi.version;
	/* Made writable again (Internals::SvREADONLY) and changed, it goes. */
	if (kept
			&& !(SvREADONLY(kept) && av_count(kept) == 2 && SvREADONLY(AvARRAY(kept)[0])
					&& SvREADONLY(AvARRAY(kept)[1])
					&& SvIV(AvARRAY(kept)[0]) == 1
					&& SvIV(AvARRAY(kept)[1]) == 1)) {
		SvREFCNT_dec(kept);
		pi->psgi.version = NULL;
	}
	if (!pi->psgi.version) {
		AV *av = newAV();
		av_push(av, newSViv(1));
		av_push(av, newSViv(1));
		for (SSize_t i = 0; i < 2; i++)
			SvREADONLY_on(AvARRAY(av)[i]);
		SvREADONLY_on((SV *)av);
		pi->psgi.version = av;
	}
	return pi->psgi.version;
}

/* Deletes he from env while env is iterated, which is safe for the
 * iteration's current element. */
static void env_delete(pTHX_ HV *env, HE *he)
{
	(void)hv_delete(env, HeKEY(he), HeKUTF8(he) ? -HeKLEN(he) : HeKLEN(he), G_DISCARD);
}

/* Deletes env's elements that are not among the values this fill wrote:
 * a name the last request had and this one has not, or what the last
 * request's app added. */
static void env_prune(pTHX_ struct perl_interp *pi, HV *env)
{
	HE *he;
	hv_iterinit(env);
	while ((he = hv_iternext(env))) {
		SV *val = HeVAL(he);
		size_t i = 0;
		while (i < pi->psgi.nwritten && pi->psgi.written[i] != val)
			i++;
		if (i == pi->psgi.nwritten)
			env_delete(aTHX_ env, he);
	}
}

/* The PSGI environment: the request's CGI variables as plxd computed
 * them (the process's own, PATH and PERL5LIB, and PLXD::Request's
 * settings, PLXD_REQUEST_*, aside), then PSGI's keys. Made in the hash the
 * last request left when env_keep kept it: most of what a new hash costs
 * is allocating and freeing its elements, their values and shared keys,
 * and consecutive requests mostly have the same names. */
static HV *env_fill(pTHX_ struct perl_interp *pi, const struct perl_run *run)
{
	HV *env = pi->psgi.env;
	pi->psgi.env = NULL;
	if (!env) {
		env = newHV();
		/* Room for the CGI variables, the headers and PSGI's keys at
		 * once, rather than three doublings on the way. */
		hv_ksplit(env, 64);
	}
	pi->psgi.nwritten = 0;
	const char *https = NULL;
	SV *path_info = NULL;
	for (char *const *e = run->env; *e; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq)
			continue;
		size_t klen = (size_t)(eq - *e);
		if ((klen == 4 && memcmp(*e, "PATH", 4) == 0) || strncmp(*e, "PLXD_", 5) == 0
				|| (klen == 8 && memcmp(*e, "PERL5LIB", 8) == 0))
			continue;
		if (klen == 14 && memcmp(*e, "REQUEST_SCHEME", 14) == 0)
			https = eq + 1;
		SV *sv = env_slot(aTHX_ pi, env, *e, (I32)klen);
		env_set_str(aTHX_ sv, eq + 1, strlen(eq + 1));
		if (klen == 9 && memcmp(*e, "PATH_INFO", 9) == 0)
			path_info = sv;
	}
	if (!path_info) {
		path_info = env_slots(pi, env, "PATH_INFO");
		env_set_str(aTHX_ path_info, "", 0);
	}
	raw_path_info(aTHX_ env, path_info);
	env_set_ref(aTHX_ env_slots(pi, env, "psgi.version"), (SV *)version(aTHX_ pi));
	const char *scheme = https && strcmp(https, "https") == 0 ? "https" : "http";
	env_set_str(aTHX_ env_slots(pi, env, "psgi.url_scheme"), scheme, strlen(scheme));
	env_set_ref(aTHX_ env_slots(pi, env, "psgi.errors"), (SV *)pi->stdio.std_gv[2]);
	int threads = pi->cloned;
	sv_setsv(env_slots(pi, env, "psgi.multithread"), threads ? &PL_sv_yes : &PL_sv_no);
	sv_setsv(env_slots(pi, env, "psgi.multiprocess"), threads ? &PL_sv_no : &PL_sv_yes);
	sv_setsv(env_slots(pi, env, "psgi.run_once"), &PL_sv_no);
	sv_setsv(env_slots(pi, env, "psgi.nonblocking"), &PL_sv_no);
	sv_setsv(env_slots(pi, env, "psgi.streaming"), &PL_sv_yes);
	sv_setsv(env_slots(pi, env, "psgix.input.buffered"), &PL_sv_yes);
	sv_setsv(env_slots(pi, env, "psgix.harakiri"), &PL_sv_yes);
	sv_setsv(env_slots(pi, env, "psgix.cleanup"), &PL_sv_yes);
	SV *handlers = env_slots(pi, env, "psgix.cleanup.handlers");
	if (!SvROK(handlers) || !plain_array(SvRV(handlers)) || av_count((AV *)SvRV(handlers)))
		sv_setrv_noinc(handlers, (SV *)newAV());
	env_set_ref(aTHX_ env_slots(pi, env, "psgix.logger"), (SV *)pi->psgi.logger);
	(void)env_slots(pi, env, "psgi.input"); /* serve sets it */
	if (HvUSEDKEYS(env) != pi->psgi.nwritten)
		env_prune(aTHX_ pi, env);
	return env;
}

/* Whether he, an element of a request's environment hash, may stay for
 * the next request: a plain scalar, a reference to the interpreter's own
 * psgi.version, psgi.errors, psgix.logger or empty psgi.input, or the
 * cleanup handlers' array (emptied here). */
static int keepable(pTHX_ struct perl_interp *pi, HE *he)
{
	SV *val = HeVAL(he);
	if (!plain(val))
		return 0;
	if (!SvROK(val))
		return 1;
	SV *target = SvRV(val);
	if (target == (SV *)pi->psgi.version || target == (SV *)pi->stdio.std_gv[2]
			|| target == (SV *)pi->psgi.logger
			|| (SvROK(pi->psgi.none) && target == SvRV(pi->psgi.none)))
		return 1;
	if (HeKLEN(he) != sizeof "psgix.cleanup.handlers" - 1
			|| memcmp(HeKEY(he), "psgix.cleanup.handlers", (size_t)HeKLEN(he)) != 0
			|| !plain_array(target))
		return 0;
	av_clear((AV *)target);
	return 1;
}

/* Keeps the request's environment hash for the next one when nothing but
 * the request holds it (the app kept no reference to it, and left it a
 * plain hash). What freeing it would have freed is freed now: the app's
 * objects in it (their DESTROY runs as the request ends, as before),
 * psgi.input and its body, the cleanup handlers. */
static void env_keep(pTHX_ struct perl_interp *pi, HV *env)
{
	if (pi->psgi.env || TAINTING_get || SvREFCNT(env) != 1 || SvMAGICAL(env) || SvOBJECT(env)
			|| SvREADONLY(env) || (SvOOK(env) && HvAUX(env)->xhv_backreferences))
		return;
	HE *he;
	hv_iterinit(env);
	while ((he = hv_iternext(env)))
		if (!keepable(aTHX_ pi, he))
			env_delete(aTHX_ env, he);
	pi->psgi.env = (HV *)SvREFCNT_inc_simple_NN(env);
}

void psgi_unbind(pTHX_ struct perl_interp *pi)
{
	SvREFCNT_dec(pi->psgi.env);
	SvREFCNT_dec(pi->psgi.version);
	free(pi->psgi.written);
	pi->psgi.env = NULL;
	pi->psgi.version = NULL;
	pi->psgi.written = NULL;
}
