/* The XS half of PLXD::Request: the request parsers of handlers/perl/request
 * wrapped for Perl. Parsed fields go straight into the object's stores
 * ({ names => [...], values => { name => [...] } }); file parts stream to
 * temporary files. Perl-side names start with '_': the module's own API is
 * PLXD::Request.pm, but for what nearly every request calls, which is here
 * for speed: new() (its common case), param(), content_type() and
 * send_header(). */
#define PERL_NO_GET_CONTEXT
#include "EXTERN.h"
#include "perl.h"
#include "XSUB.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "req.h"
#include "req_cookie.h"
#include "req_limits.h"
#include "req_multipart.h"
#include "req_urlencoded.h"

/* One request's limits and what its parsers used of them, kept in the
 * PV of an SV ($self->{_state}) so that Perl owns and frees it. */
struct xs_state {
	struct req_limits lim;
	struct req_usage used;
};

/* Where fields go: a store's name list and name-to-values hash. */
struct xs_store {
	AV *names;
	HV *values;
	struct req_error *err;
};

/* A multipart parse in progress: PLXD::Request::_Multipart. */
struct xs_multipart {
	struct req_multipart *parser;
	struct xs_state state;      /* copied back to state_sv after each call */
	SV *state_sv;
	SV *store_ref;              /* keeps store alive */
	struct xs_store store;
	AV *uploads;                /* upload objects, in order */
	char *tmpdir;
	int fd;                     /* the file being written, or -1 */
	HV *upload;                 /* its object (owned by uploads) */
	struct req_error err;
};

/* The state is written in place: a copy-on-write buffer shared with a
 * copy of the SV must be made the SV's own first. */
static struct xs_state *state_of(pTHX_ SV *sv)
{
	if (!SvPOK(sv) || SvCUR(sv) != sizeof(struct xs_state) || SvREADONLY(sv))
		croak("PLXD::Request: not a parser state");
	if (SvIsCOW(sv))
		sv_force_normal(sv);
	return (struct xs_state *)SvPVX(sv);
}

static void store_of(pTHX_ SV *ref, struct xs_store *s, struct req_error *err)
{
	SV **names, **values;
	HV *hv;
	if (!SvROK(ref) || SvTYPE(SvRV(ref)) != SVt_PVHV)
		croak("PLXD::Request: a store must be a hash reference");
	hv = (HV *)SvRV(ref);
	names = hv_fetchs(hv, "names", 0);
	values = hv_fetchs(hv, "values", 0);
	if (!names || !values || !SvROK(*names) || SvTYPE(SvRV(*names)) != SVt_PVAV
			|| !SvROK(*values) || SvTYPE(SvRV(*values)) != SVt_PVHV)
		croak("PLXD::Request: a store needs names => [] and values => {}");
	s->names = (AV *)SvRV(*names);
	s->values = (HV *)SvRV(*values);
	s->err = err;
}

/* req_field_fn: appends value to name's list, and name to the name list
 * the first time it is seen. Callbacks run inside an XSUB's call, so dTHX
 * finds the interpreter that called it. */
static int store_add(void *ctx, const char *name, size_t name_len, const char *value,
		size_t value_len)
{
	struct xs_store *s = ctx;
	dTHX;
	HE *he;
	SV *slot;
	if (name_len > I32_MAX)
		return req_error_set(s->err, REQ_FIELD_TOO_LARGE, "a parameter name is too large");
	/* One look-up: an lvalue fetch adds the entry (undef) when it is new. */
	he = (HE *)hv_common_key_len(s->values, name, (I32)name_len, HV_FETCH_LVALUE, NULL, 0);
	slot = HeVAL(he);
	if (!SvROK(slot)) {
		sv_setrv_noinc(slot, (SV *)newAV());
		/* The name list shares the hash's copy of the name: no second
		 * buffer. */
		av_push(s->names, newSVhek(HeKEY_hek(he)));
	}
	av_push((AV *)SvRV(slot), newSVpvn(value, value_len));
	return 0;
}

/* A parser's error as { code, message, status }; PLXD::Request blesses it. */
static SV *error_sv(pTHX_ const struct req_error *err)
{
	HV *hv = newHV();
	(void)hv_stores(hv, "code", newSVpv(req_code_name(err->code), 0));
	(void)hv_stores(hv, "message", newSVpv(err->message, 0));
	(void)hv_stores(hv, "status", newSVuv(req_code_status(err->code)));
	return sv_2mortal(newRV_noinc((SV *)hv));
}

/* ---- uploads: the multipart sink ----------------------------------------- */

static int upload_begin(void *ctx, const struct req_part *part)
{
	struct xs_multipart *mp = ctx;
	dTHX;
	HV *up;
	SV *path = newSVpvf("%s/plxd-upload-XXXXXX", mp->tmpdir);
	int fd = mkostemp(SvPVX(path), O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		SvREFCNT_dec(path);
		return req_error_set(&mp->err, REQ_STORE, "cannot create an upload file in %s: %s",
				mp->tmpdir, strerror(e));
	}
	/* Registered at once, so that the request object removes it even if
	 * the body turns out bad later. */
	up = newHV();
	(void)hv_stores(up, "name", newSVpvn(part->name, part->name_len));
	(void)hv_stores(up, "filename", newSVpv(part->filename, 0));
	(void)hv_stores(up, "type", part->content_type ? newSVpv(part->content_type, 0)
			: newSV(0));
	(void)hv_stores(up, "tempname", path);
	(void)hv_stores(up, "size", newSVuv(0));
	av_push(mp->uploads, sv_bless(newRV_noinc((SV *)up),
			gv_stashpvs("PLXD::Request::Upload", GV_ADD)));
	mp->fd = fd;
	mp->upload = up;
	/* As CGI.pm, the parameter's value is the file name. */
	return store_add(&mp->store, part->name, part->name_len, part->filename,
			strlen(part->filename));
}

static int upload_data(void *ctx, const char *data, size_t len)
{
	struct xs_multipart *mp = ctx;
	while (len > 0) {
		ssize_t n = write(mp->fd, data, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return req_error_set(&mp->err, REQ_STORE, "cannot write an upload file: %s",
					n < 0 ? strerror(errno) : "no progress");
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

static int upload_end(void *ctx, unsigned long long size)
{
	struct xs_multipart *mp = ctx;
	dTHX;
	int rc = close(mp->fd);
	mp->fd = -1;
	if (rc < 0 && errno != EINTR)
		return req_error_set(&mp->err, REQ_STORE, "cannot write an upload file: %s",
				strerror(errno));
	(void)hv_stores(mp->upload, "size", newSVuv((UV)size));
	mp->upload = NULL;
	return 0;
}

static int multipart_field(void *ctx, const char *name, size_t name_len, const char *value,
		size_t value_len)
{
	struct xs_multipart *mp = ctx;
	return store_add(&mp->store, name, name_len, value, value_len);
}

static const struct req_multipart_sink upload_sink = {
	.field = multipart_field, .file_begin = upload_begin, .file_data = upload_data,
	.file_end = upload_end,
};

static void multipart_free(pTHX_ struct xs_multipart *mp)
{
	if (!mp)
		return;
	if (mp->fd >= 0)
		close(mp->fd);
	req_multipart_destroy(mp->parser);
	SvREFCNT_dec(mp->state_sv);
	SvREFCNT_dec(mp->store_ref);
	SvREFCNT_dec((SV *)mp->uploads);
	free(mp->tmpdir);
	free(mp);
}

static struct xs_multipart *multipart_of(pTHX_ SV *self)
{
	if (!sv_isa(self, "PLXD::Request::_Multipart") || !SvIOK(SvRV(self)) || !SvIVX(SvRV(self)))
		croak("PLXD::Request: not a multipart parser");
	return INT2PTR(struct xs_multipart *, SvIVX(SvRV(self)));
}

/* ---- per-interpreter data ------------------------------------------------ */

/* Room for req_limits_keys (checked when the module loads). */
#define XS_LIMIT_KEYS 8
/* A limit's value longer than this is parsed on every request. */
#define XS_CACHED_VALUE 32

/* One environment variable of the limits, and its value when last parsed. */
struct xs_limit_var {
	char name[48];              /* PLXD_REQUEST_MAX_FIELDS... */
	I32 name_len;
	U32 hash;                   /* of name, for hv_common_key_len */
	int present;
	STRLEN len;
	char value[XS_CACHED_VALUE];
};

/* Kept per interpreter (perl may be built with ithreads): the limits'
 * defaults, the last environment limits parsed, and what new() looks up on
 * every request. */
#define MY_CXT_KEY "PLXD::Request::_guts" XS_VERSION
typedef struct {
	struct req_limits defaults;
	size_t nvars;
	struct xs_limit_var var[XS_LIMIT_KEYS];
	int cached;                 /* var[].value and env_limits hold a result */
	struct req_limits env_limits;
	GV *source;                 /* *PLXD::Request::Source */
	HV *stash;                  /* PLXD::Request */
	GV *stdout_gv;              /* *main::STDOUT */
} my_cxt_t;

START_MY_CXT

static void cxt_init(pTHX_ my_cxt_t *cxt)
{
	const struct conf_key *k;
	size_t n = 0;
	req_limits_defaults(&cxt->defaults);
	for (k = req_limits_keys; k->name; k++, n++) {
		struct xs_limit_var *v = &cxt->var[n];
		if (n == XS_LIMIT_KEYS)
			croak("PLXD::Request: more limits than XS_LIMIT_KEYS");
		req_limits_env_name(k, v->name, sizeof v->name);
		v->name_len = (I32)strlen(v->name);
		PERL_HASH(v->hash, v->name, v->name_len);
	}
	cxt->nvars = n;
	cxt->cached = 0;
	cxt->source = gv_fetchpvs("PLXD::Request::Source", GV_ADD, SVt_PV);
	cxt->stash = gv_stashpvs("PLXD::Request", GV_ADD);
	cxt->stdout_gv = gv_fetchpvs("STDOUT", GV_ADD | GV_NOTQUAL, SVt_PVIO);
}

/* ---- limits from the environment ----------------------------------------- */

/* The values new() fetched, for req_limits_from_env. */
struct fetched {
	const my_cxt_t *cxt;
	const char *const *value;
};

static const char *fetched_lookup(const char *name, void *ctx)
{
	const struct fetched *f = ctx;
	size_t i;
	for (i = 0; i < f->cxt->nvars; i++)
		if (!strcmp(f->cxt->var[i].name, name))
			return f->value[i];
	return NULL;
}

/* The defaults, then the environment's limits. A server gives every request
 * the same four variables, so when they are byte for byte the ones last
 * parsed, that result is used again. Returns 0, or -1 with why set. */
static int env_limits(pTHX_ pMY_CXT_ HV *env, struct req_limits *lim, char *why,
		size_t whylen)
{
	const char *value[XS_LIMIT_KEYS];
	STRLEN len[XS_LIMIT_KEYS];
	int hit = MY_CXT.cached, cacheable = 1;
	size_t i;
	for (i = 0; i < MY_CXT.nvars; i++) {
		struct xs_limit_var *v = &MY_CXT.var[i];
		SV **sv = (SV **)hv_common_key_len(env, v->name, v->name_len, HV_FETCH_JUST_SV, NULL,
				v->hash);
		value[i] = NULL;
		len[i] = 0;
		if (sv && SvOK(*sv))
			value[i] = SvPV(*sv, len[i]);
		if (len[i] >= XS_CACHED_VALUE)
			cacheable = hit = 0;
		else if (hit && (v->present != (value[i] != NULL) || v->len != len[i]
				|| (value[i] && memcmp(v->value, value[i], len[i]))))
			hit = 0;
	}
	if (hit) {
		*lim = MY_CXT.env_limits;
		return 0;
	}
	{
		struct fetched f = { &MY_CXT, value };
		*lim = MY_CXT.defaults;
		if (req_limits_from_env(lim, fetched_lookup, &f, why, whylen) < 0)
			return -1;
	}
	MY_CXT.cached = cacheable;
	if (cacheable) {
		for (i = 0; i < MY_CXT.nvars; i++) {
			struct xs_limit_var *v = &MY_CXT.var[i];
			v->present = value[i] != NULL;
			v->len = len[i];
			if (value[i])
				memcpy(v->value, value[i], len[i]);
		}
		MY_CXT.env_limits = *lim;
	}
	return 0;
}

/* The environment's limits, then the script's own (a hash of name =>
 * value as in plxd.conf). Returns 0, or -1 with why set. */
static int state_limits(pTHX_ pMY_CXT_ struct req_limits *lim, HV *env, SV *limits,
		char *why, size_t whylen)
{
	HE *he;
	if (env_limits(aTHX_ aMY_CXT_ env, lim, why, whylen) < 0)
		return -1;
	if (!SvROK(limits) || SvTYPE(SvRV(limits)) != SVt_PVHV)
		return 0;
	hv_iterinit((HV *)SvRV(limits));
	while ((he = hv_iternext((HV *)SvRV(limits)))) {
		const char *key = HePV(he, PL_na);
		const struct conf_key *k = conf_key_find(req_limits_keys, key);
		char err[200];
		if (!k) {
			snprintf(why, whylen, "unknown limit '%s'", key);
			return -1;
		}
		if (conf_key_set(k, lim, SvPV_nolen(HeVAL(he)), NULL, err, sizeof err) < 0) {
			snprintf(why, whylen, "limit %s: %s", key, err);
			return -1;
		}
	}
	return 0;
}

/* ---- the request object -------------------------------------------------- */

/* A new store: { names => [], values => {} }; s (if not NULL) is set to
 * fill it. */
static SV *store_new(pTHX_ struct xs_store *s, struct req_error *err)
{
	HV *hv = newHV();
	AV *names = newAV();
	HV *values = newHV();
	(void)hv_stores(hv, "names", newRV_noinc((SV *)names));
	(void)hv_stores(hv, "values", newRV_noinc((SV *)values));
	if (s) {
		s->names = names;
		s->values = values;
		s->err = err;
	}
	return newRV_noinc((SV *)hv);
}

/* A request object, mortal: { env => env_ref (taken), query, param,
 * _state }, its query string parsed under lim; err is set if that fails.
 * What most requests never use (the body store, uploads, headers_out) is
 * made by the Perl part when first needed. */
static SV *request_new(pTHX_ HV *stash, SV *env_ref, const struct req_limits *lim,
		struct req_error *err)
{
	HV *self = newHV();
	SV *self_ref = sv_2mortal(sv_bless(newRV_noinc((SV *)self), stash));
	struct xs_store qs;
	SV *query = store_new(aTHX_ &qs, err), **qsv;
	struct xs_state st;
	memset(&st, 0, sizeof st);
	st.lim = *lim;
	(void)hv_stores(self, "env", env_ref);
	(void)hv_stores(self, "query", query);
	/* A reference of its own: assigning one slot must not change the other. */
	(void)hv_stores(self, "param", newRV_inc(SvRV(query)));
	qsv = hv_fetchs((HV *)SvRV(env_ref), "QUERY_STRING", 0);
	if (qsv && SvOK(*qsv)) {
		STRLEN len;
		const char *bytes = SvPVbyte(*qsv, len);
		if (len)
			req_urlencoded_parse(bytes, len, "query string", &st.lim, &st.used, store_add,
					&qs, err);
	}
	(void)hv_stores(self, "_state", newSVpvn((const char *)&st, sizeof st));
	return self_ref;
}

/* new() for the common request, in one call: no options, no
 * $PLXD::Request::Source, no body to read, a query string that parses.
 * Returns the object (mortal), or NULL for new() to take the Perl path
 * (_new), which does everything else and reports every error. */
static SV *new_fast(pTHX_ pMY_CXT_ SV *class)
{
	SV *source = GvSV(MY_CXT.source), **cl, *self;
	HV *env, *stash;
	struct req_limits lim;
	struct req_error err;
	char why[256];
	if (!SvOK(class) || SvROK(class) || (source && SvTRUE(source)) || !PL_envgv)
		return NULL;
	env = GvHVn(PL_envgv);
	/* As the Perl path: a CONTENT_LENGTH that is true means a body. */
	cl = hv_fetchs(env, "CONTENT_LENGTH", 0);
	if (cl && SvTRUE(*cl))
		return NULL;
	if (env_limits(aTHX_ aMY_CXT_ env, &lim, why, sizeof why) < 0)
		return NULL;
	if (SvPOK(class) && SvCUR(class) == sizeof "PLXD::Request" - 1
			&& memEQ(SvPVX(class), "PLXD::Request", sizeof "PLXD::Request" - 1))
		stash = MY_CXT.stash;
	else
		stash = gv_stashsv(class, GV_ADD);
	err.code = REQ_OK;
	self = request_new(aTHX_ stash, newRV_inc((SV *)env), &lim, &err);
	/* A bad query string is parsed again by the Perl path, which fails it:
	 * errors are rare, and are reported in one place. */
	return err.code == REQ_OK ? self : NULL;
}

/* ---- the response --------------------------------------------------------- */

/* The reason phrases of send_header's Status line and of the error
 * response. */
static const struct {
	const char code[4];
	const char *reason;
} reasons[] = {
	{ "200", "OK" }, { "201", "Created" }, { "202", "Accepted" }, { "204", "No Content" },
	{ "206", "Partial Content" }, { "301", "Moved Permanently" }, { "302", "Found" },
	{ "303", "See Other" }, { "304", "Not Modified" }, { "307", "Temporary Redirect" },
	{ "308", "Permanent Redirect" }, { "400", "Bad Request" }, { "401", "Unauthorized" },
	{ "403", "Forbidden" }, { "404", "Not Found" }, { "405", "Method Not Allowed" },
	{ "406", "Not Acceptable" }, { "409", "Conflict" }, { "410", "Gone" },
	{ "412", "Precondition Failed" }, { "413", "Content Too Large" },
	{ "415", "Unsupported Media Type" }, { "422", "Unprocessable Content" },
	{ "429", "Too Many Requests" }, { "500", "Internal Server Error" },
	{ "501", "Not Implemented" }, { "502", "Bad Gateway" }, { "503", "Service Unavailable" },
	{ "504", "Gateway Timeout" },
};

/* The phrase of a status ("404"), or NULL for one without. */
static const char *reason_of(const char *code, STRLEN len)
{
	size_t i;
	if (len != 3)
		return NULL;
	for (i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
		if (!memcmp(reasons[i].code, code, 3))
			return reasons[i].reason;
	return NULL;
}

/* A status without a phrase of its own gets its class's. */
static const char *class_reason(char c)
{
	switch (c) {
	case '2': return "OK";
	case '3': return "Redirection";
	case '4': return "Client Error";
	case '5': return "Server Error";
	}
	return NULL;
}

static HV *request_hv(pTHX_ SV *self, const char *method)
{
	if (!SvROK(self) || SvTYPE(SvRV(self)) != SVt_PVHV)
		croak("PLXD::Request::%s: not a request object", method);
	return (HV *)SvRV(self);
}

/* A value for a header line: defined, and no control character but tab (a
 * CR or LF would end the header early: header injection). A UTF-8 string's
 * bytes hold such a character only where its characters do. */
static int header_value_ok(pTHX_ SV *value)
{
	STRLEN len, i;
	const char *s;
	if (!SvOK(value))
		return 0;
	s = SvPV_nomg(value, len);
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return 0;
	}
	return 1;
}

/* content_type($type)'s setting half. A bad type goes to the Perl
 * _check_value, which dies with the message (and caller) of every other
 * setter. */
static void set_content_type(pTHX_ HV *self, SV *type)
{
	SvGETMAGIC(type);
	if (!header_value_ok(aTHX_ type)) {
		dSP;
		PUSHMARK(SP);
		XPUSHs(sv_2mortal(newSVpvs("a content type")));
		XPUSHs(type);
		PUTBACK;
		(void)call_pv("PLXD::Request::_check_value", G_DISCARD);
		croak("PLXD::Request: a content type holds a control character");
	}
	(void)hv_stores(self, "content_type", newSVsv_nomg(type));
}

/* The value of key, when it is defined; else NULL. */
static SV *defined_in(pTHX_ HV *hv, const char *key, I32 len)
{
	SV **slot = hv_fetch(hv, key, len, 0);
	return slot && SvOK(*slot) ? *slot : NULL;
}
#define DEFINED_IN(hv, key) defined_in(aTHX_ hv, "" key "", sizeof key - 1)

/* The CGI header block of the response: Status, Location, the other
 * headers, Content-Type, a blank line. Mortal. */
static SV *header_block(pTHX_ HV *self)
{
	SV *h = sv_2mortal(newSV(128)), **slot, *v, *location;
	sv_setpvs(h, "");
	slot = hv_fetchs(self, "status", 0);
	if (slot && SvTRUE(*slot)) {
		STRLEN len;
		const char *code = SvPV(*slot, len), *phrase = NULL;
		sv_catpvs(h, "Status: ");
		sv_catsv(h, *slot);
		sv_catpvs(h, " ");
		if ((v = DEFINED_IN(self, "reason")))
			sv_catsv(h, v);
		else if ((phrase = reason_of(code, len)) || (phrase = class_reason(code[0])))
			sv_catpv(h, phrase);
		sv_catpvs(h, "\r\n");
	}
	if ((location = DEFINED_IN(self, "location"))) {
		sv_catpvs(h, "Location: ");
		sv_catsv(h, location);
		sv_catpvs(h, "\r\n");
	}
	slot = hv_fetchs(self, "headers_out", 0);
	if (slot && SvROK(*slot) && SvTYPE(SvRV(*slot)) == SVt_PVAV) {
		AV *extra = (AV *)SvRV(*slot);
		SSize_t i, n = av_count(extra);
		for (i = 0; i < n; i++) {
			SV **pair = av_fetch(extra, i, 0), **name, **value;
			if (!pair || !SvROK(*pair) || SvTYPE(SvRV(*pair)) != SVt_PVAV
					|| !(name = av_fetch((AV *)SvRV(*pair), 0, 0))
					|| !(value = av_fetch((AV *)SvRV(*pair), 1, 0)))
				continue;
			sv_catsv(h, *name);
			sv_catpvs(h, ": ");
			sv_catsv(h, *value);
			sv_catpvs(h, "\r\n");
		}
	}
	v = DEFINED_IN(self, "content_type");
	if (v) {
		/* An empty type sends none. */
		STRLEN len;
		(void)SvPV(v, len);
		if (len) {
			sv_catpvs(h, "Content-Type: ");
			sv_catsv(h, v);
			sv_catpvs(h, "\r\n");
		}
	} else if (!location) {
		/* CGI.pm's default; a redirect needs none. */
		sv_catpvs(h, "Content-Type: text/html; charset=ISO-8859-1\r\n");
	}
	sv_catpvs(h, "\r\n");
	return h;
}

/* Writes h to STDOUT when that is exactly what print would do: an
 * untied handle open for output, no :utf8 layer, a string of bytes, no $\
 * (and $| honoured). Returns 0 when perl's print must do it. */
static int print_plain(pTHX_ pMY_CXT_ SV *h)
{
	IO *io = GvIO(MY_CXT.stdout_gv);
	PerlIO *fp;
	if (!io || SvRMAGICAL(io) || !(fp = IoOFP(io)) || PerlIO_isutf8(fp) || SvUTF8(h)
			|| (PL_ors_sv && SvOK(PL_ors_sv)))
		return 0;
	if (SvCUR(h))
		(void)PerlIO_write(fp, SvPVX(h), SvCUR(h));
	if (IoFLAGS(io) & IOf_FLUSH)
		(void)PerlIO_flush(fp);
	return 1;
}

MODULE = PLXD::Request		PACKAGE = PLXD::Request

PROTOTYPES: DISABLE

BOOT:
{
	MY_CXT_INIT;
	cxt_init(aTHX_ &MY_CXT);
}

void
CLONE(...)
    CODE:
	/* A new interpreter (thread): its own copy, with its own GV and stash. */
	MY_CXT_CLONE;
	cxt_init(aTHX_ &MY_CXT);

void
new(class, ...)
	SV *class
    PREINIT:
	dMY_CXT;
	SV *self;
	CV *slow;
	I32 i;
    PPCODE:
	self = items == 1 ? new_fast(aTHX_ aMY_CXT_ class) : NULL;
	if (self) {
		PUSHs(self);
		XSRETURN(1);
	}
	/* Everything else: the Perl constructor, with the same arguments
	 * (still on the stack, above SP). It may not return: a bad request
	 * ends there, with exit. */
	slow = get_cvs("PLXD::Request::_new", 0);
	if (!slow)
		croak("PLXD::Request: _new is missing");
	PUSHMARK(SP);
	for (i = 0; i < items; i++)
		PUSHs(ST(i));
	PUTBACK;
	(void)call_sv((SV *)slow, G_SCALAR);
	/* Its one value is where ST(0) was. */
	XSRETURN(1);

void
_start(class, env, limits, on_error, output)
	const char *class
	SV *env
	SV *limits
	SV *on_error
	SV *output
    PREINIT:
	dMY_CXT;
	struct req_limits lim;
	struct req_error err;
	char why[256];
	SV *self_ref;
    PPCODE:
	/* new()'s Perl path: the object, its limits (defaults, then the
	 * environment, then the script's) and its query string parsed. Returns
	 * (object, parse error or undef, configuration error or undef). */
	if (!SvROK(env) || SvTYPE(SvRV(env)) != SVt_PVHV)
		croak("PLXD::Request: env must be a hash reference");
	if (state_limits(aTHX_ aMY_CXT_ &lim, (HV *)SvRV(env), limits, why, sizeof why) < 0) {
		XPUSHs(&PL_sv_undef);
		XPUSHs(&PL_sv_undef);
		XPUSHs(sv_2mortal(newSVpv(why, 0)));
		XSRETURN(3);
	}
	err.code = REQ_OK;
	self_ref = request_new(aTHX_ gv_stashpv(class, GV_ADD), newSVsv(env), &lim, &err);
	if (SvOK(on_error))
		(void)hv_stores((HV *)SvRV(self_ref), "on_error", newSVsv(on_error));
	if (SvOK(output))
		(void)hv_stores((HV *)SvRV(self_ref), "out", newSVsv(output));
	XPUSHs(self_ref);
	XPUSHs(err.code != REQ_OK ? error_sv(aTHX_ &err) : &PL_sv_undef);
	XSRETURN(2);

void
param(self, ...)
	SV *self
    PREINIT:
	SV **store, **names, **values;
	HE *he;
	AV *list = NULL;
	SSize_t i, n;
    PPCODE:
	/* CGI.pm's rules: no name, the names in order (their count in scalar
	 * context); a name, all its values in list context, the first (or
	 * undef) in scalar context. Copies, so a caller changing what it got
	 * changes nothing here. In XS: scripts call it in loops. */
	if (!SvROK(self) || SvTYPE(SvRV(self)) != SVt_PVHV
			|| !(store = hv_fetchs((HV *)SvRV(self), "param", 0))
			|| !SvROK(*store) || SvTYPE(SvRV(*store)) != SVt_PVHV
			|| !(names = hv_fetchs((HV *)SvRV(*store), "names", 0)) || !SvROK(*names)
			|| !(values = hv_fetchs((HV *)SvRV(*store), "values", 0)) || !SvROK(*values))
		croak("PLXD::Request::param: not a request object");
	if (items < 2) {
		list = (AV *)SvRV(*names);
	} else {
		he = hv_fetch_ent((HV *)SvRV(*values), ST(1), 0, 0);
		if (he && SvROK(HeVAL(he)))
			list = (AV *)SvRV(HeVAL(he));
	}
	n = list ? av_count(list) : 0;
	if (GIMME_V != G_LIST) {
		if (items < 2)
			XPUSHs(sv_2mortal(newSViv((IV)n)));
		else
			XPUSHs(n ? sv_mortalcopy(*av_fetch(list, 0, 0)) : &PL_sv_undef);
		XSRETURN(1);
	}
	EXTEND(SP, n);
	for (i = 0; i < n; i++) {
		SV **v = av_fetch(list, i, 0);
		PUSHs(v ? sv_mortalcopy(*v) : &PL_sv_undef);
	}
	XSRETURN(n);

void
content_type(self, ...)
	SV *self
    PREINIT:
	HV *hv;
	SV **slot;
    PPCODE:
	/* In XS, as send_header: every response calls them. */
	hv = request_hv(aTHX_ self, "content_type");
	if (items < 2) {
		slot = hv_fetchs(hv, "content_type", 0);
		PUSHs(slot ? sv_mortalcopy(*slot) : &PL_sv_undef);
		XSRETURN(1);
	}
	set_content_type(aTHX_ hv, ST(1));
	/* A copy, as a Perl sub's return $self is. */
	ST(0) = sv_mortalcopy(self);
	XSRETURN(1);

void
send_header(self, ...)
	SV *self
    PREINIT:
	dMY_CXT;
	HV *hv;
	SV **slot, *h, *out;
    PPCODE:
	/* send_header($type) is content_type($type) and send_header, as
	 * Apache's send_http_header($type). */
	hv = request_hv(aTHX_ self, "send_header");
	slot = hv_fetchs(hv, "header_sent", 0);
	if (slot && SvTRUE(*slot)) {
		warn("PLXD::Request: send_header called twice; the second call does nothing\n");
		PUSHs(sv_2mortal(newSViv(0)));
		XSRETURN(1);
	}
	if (items > 1)
		set_content_type(aTHX_ hv, ST(1));
	h = header_block(aTHX_ hv);
	slot = hv_fetchs(hv, "out", 0);
	out = slot && SvTRUE(*slot) ? *slot : NULL;
	if (out || !print_plain(aTHX_ aMY_CXT_ h)) {
		/* Any other handle, or layer, is perl's print's. */
		PUSHMARK(SP);
		XPUSHs(out ? out : &PL_sv_undef);
		XPUSHs(h);
		PUTBACK;
		(void)call_pv("PLXD::Request::_print", G_DISCARD);
		SPAGAIN;
	}
	(void)hv_stores(hv, "header_sent", newSViv(1));
	PUSHs(sv_2mortal(newSViv(1)));
	XSRETURN(1);

void
_reason(status)
	SV *status
    PREINIT:
	STRLEN len;
	const char *code, *phrase;
    PPCODE:
	code = SvPV(status, len);
	phrase = reason_of(code, len);
	PUSHs(phrase ? sv_2mortal(newSVpv(phrase, 0)) : &PL_sv_undef);
	XSRETURN(1);

void
_limits(state)
	SV *state
    PREINIT:
	struct xs_state *st;
	HV *hv;
    PPCODE:
	st = state_of(aTHX_ state);
	hv = newHV();
	(void)hv_stores(hv, "max_fields", newSVuv(st->lim.max_fields));
	(void)hv_stores(hv, "max_field_size", newSVuv((UV)st->lim.max_field_size));
	(void)hv_stores(hv, "max_upload_size", newSVuv((UV)st->lim.max_upload_size));
	(void)hv_stores(hv, "max_total", newSVuv((UV)st->lim.max_total));
	(void)hv_stores(hv, "used_fields", newSVuv(st->used.fields));
	(void)hv_stores(hv, "used_bytes", newSVuv((UV)st->used.bytes));
	XPUSHs(sv_2mortal(newRV_noinc((SV *)hv)));
	XSRETURN(1);

void
_parse_urlencoded(state, store, input, where)
	SV *state
	SV *store
	SV *input
	const char *where
    PREINIT:
	struct xs_state *st;
	struct xs_store s;
	struct req_error err;
	STRLEN len;
	const char *bytes;
    PPCODE:
	st = state_of(aTHX_ state);
	memset(&err, 0, sizeof err);
	store_of(aTHX_ store, &s, &err);
	bytes = SvPVbyte(input, len);
	if (req_urlencoded_parse(bytes, len, where, &st->lim, &st->used, store_add, &s, &err) < 0)
		XPUSHs(error_sv(aTHX_ &err));
	else
		XPUSHs(&PL_sv_undef);
	XSRETURN(1);

void
_parse_cookies(store, header)
	SV *store
	SV *header
    PREINIT:
	struct xs_store s;
	struct req_error err;
	STRLEN len;
	const char *bytes;
    PPCODE:
	memset(&err, 0, sizeof err);
	store_of(aTHX_ store, &s, &err);
	bytes = SvPVbyte(header, len);
	if (req_cookie_parse(bytes, len, store_add, &s, &err) < 0)
		XPUSHs(error_sv(aTHX_ &err));
	else
		XPUSHs(&PL_sv_undef);
	XSRETURN(1);

void
_multipart_new(state, store, uploads, content_type, tmpdir)
	SV *state
	SV *store
	SV *uploads
	const char *content_type
	const char *tmpdir
    PREINIT:
	struct xs_multipart *mp;
	struct xs_store checked;
	struct req_error unused;
	SV *obj;
    PPCODE:
	/* Everything that can croak comes before mp exists. */
	state_of(aTHX_ state);
	store_of(aTHX_ store, &checked, &unused);
	if (!SvROK(uploads) || SvTYPE(SvRV(uploads)) != SVt_PVAV)
		croak("PLXD::Request: uploads must be an array reference");
	mp = calloc(1, sizeof *mp);
	if (!mp)
		croak("PLXD::Request: out of memory");
	mp->fd = -1;
	mp->state = *state_of(aTHX_ state);
	mp->state_sv = SvREFCNT_inc_simple_NN(state);
	mp->store_ref = SvREFCNT_inc_simple_NN(SvRV(store));
	store_of(aTHX_ store, &mp->store, &mp->err);
	mp->uploads = (AV *)SvREFCNT_inc_simple_NN(SvRV(uploads));
	mp->tmpdir = strdup(tmpdir);
	/* The object owns mp from here: its DESTROY frees it. */
	obj = sv_2mortal(sv_setref_pv(newSV(0), "PLXD::Request::_Multipart", mp));
	if (!mp->tmpdir)
		croak("PLXD::Request: out of memory");
	mp->parser = req_multipart_create(content_type, &mp->state.lim, &mp->state.used,
			&upload_sink, mp, &mp->err);
	if (!mp->parser) {
		XPUSHs(&PL_sv_undef);
		XPUSHs(error_sv(aTHX_ &mp->err));
		XSRETURN(2);
	}
	XPUSHs(obj);
	XSRETURN(1);

MODULE = PLXD::Request		PACKAGE = PLXD::Request::_Multipart

void
feed(self, chunk)
	SV *self
	SV *chunk
    PREINIT:
	struct xs_multipart *mp;
	STRLEN len;
	const char *bytes;
	int rc;
    PPCODE:
	mp = multipart_of(aTHX_ self);
	bytes = SvPVbyte(chunk, len);
	rc = req_multipart_feed(mp->parser, bytes, len);
	*state_of(aTHX_ mp->state_sv) = mp->state;
	XPUSHs(rc < 0 ? error_sv(aTHX_ &mp->err) : &PL_sv_undef);
	XSRETURN(1);

void
finish(self)
	SV *self
    PREINIT:
	struct xs_multipart *mp;
	int rc;
    PPCODE:
	mp = multipart_of(aTHX_ self);
	rc = req_multipart_finish(mp->parser);
	*state_of(aTHX_ mp->state_sv) = mp->state;
	XPUSHs(rc < 0 ? error_sv(aTHX_ &mp->err) : &PL_sv_undef);
	XSRETURN(1);

void
DESTROY(self)
	SV *self
    CODE:
	if (SvROK(self) && SvIOK(SvRV(self))) {
		multipart_free(aTHX_ INT2PTR(struct xs_multipart *, SvIVX(SvRV(self))));
		sv_setiv(SvRV(self), 0);
	}
