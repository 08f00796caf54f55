/* The XS half of PLXD::Request: the request parsers of handlers/request
 * wrapped for Perl. Parsed fields go straight into the object's stores
 * ({ names => [...], values => { name => [...] } }); file parts stream to
 * temporary files. Perl-side names start with '_': the module's own API is
 * PLXD::Request.pm. */
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
	SV **slot;
	AV *list;
	if (name_len > I32_MAX)
		return req_error_set(s->err, REQ_FIELD_TOO_LARGE, "a parameter name is too large");
	slot = hv_fetch(s->values, name, (I32)name_len, 0);
	if (slot && SvROK(*slot)) {
		list = (AV *)SvRV(*slot);
	} else {
		list = newAV();
		(void)hv_store(s->values, name, (I32)name_len, newRV_noinc((SV *)list), 0);
		av_push(s->names, newSVpvn(name, name_len));
	}
	av_push(list, newSVpvn(value, value_len));
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

/* ---- limits from the environment ----------------------------------------- */

/* The defaults of req_limits_keys, parsed once when the module loads. */
static struct req_limits xs_defaults;

static const char *hv_lookup(const char *name, void *ctx)
{
	dTHX;
	SV **v = hv_fetch((HV *)ctx, name, (I32)strlen(name), 0);
	return v && SvOK(*v) ? SvPV_nolen(*v) : NULL;
}

/* Applies the environment's limits, then the script's own (a hash of
 * name => value as in plxd.conf). Returns 0, or -1 with why set. */
static int state_limits(pTHX_ struct req_limits *lim, HV *env, SV *limits, char *why,
		size_t whylen)
{
	HE *he;
	if (req_limits_from_env(lim, hv_lookup, env, why, whylen) < 0)
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

/* A new store: { names => [], values => {} }. */
static SV *store_new(pTHX)
{
	HV *hv = newHV();
	(void)hv_stores(hv, "names", newRV_noinc((SV *)newAV()));
	(void)hv_stores(hv, "values", newRV_noinc((SV *)newHV()));
	return newRV_noinc((SV *)hv);
}

MODULE = PLXD::Request		PACKAGE = PLXD::Request

PROTOTYPES: DISABLE

BOOT:
	req_limits_defaults(&xs_defaults);

void
_start(class, env, limits, on_error, output)
	const char *class
	SV *env
	SV *limits
	SV *on_error
	SV *output
    PREINIT:
	struct xs_state st;
	struct xs_store qs;
	struct req_error err;
	char why[256];
	HV *self;
	SV *self_ref, *query, **qsv;
	STRLEN len;
	const char *bytes;
    PPCODE:
	/* What every request needs, in one call: the object, its limits
	 * (defaults, then the environment, then the script's), its stores, and
	 * the query string parsed. Returns (object, parse error or undef,
	 * configuration error or undef). */
	if (!SvROK(env) || SvTYPE(SvRV(env)) != SVt_PVHV)
		croak("PLXD::Request: env must be a hash reference");
	memset(&st, 0, sizeof st);
	memset(&err, 0, sizeof err);
	st.lim = xs_defaults;
	if (state_limits(aTHX_ &st.lim, (HV *)SvRV(env), limits, why, sizeof why) < 0) {
		XPUSHs(&PL_sv_undef);
		XPUSHs(&PL_sv_undef);
		XPUSHs(sv_2mortal(newSVpv(why, 0)));
		XSRETURN(3);
	}
	self = newHV();
	self_ref = sv_2mortal(sv_bless(newRV_noinc((SV *)self), gv_stashpv(class, GV_ADD)));
	(void)hv_stores(self, "env", newSVsv(env));
	if (SvOK(on_error))
		(void)hv_stores(self, "on_error", newSVsv(on_error));
	if (SvOK(output))
		(void)hv_stores(self, "out", newSVsv(output));
	(void)hv_stores(self, "uploads", newRV_noinc((SV *)newAV()));
	(void)hv_stores(self, "headers_out", newRV_noinc((SV *)newAV()));
	query = store_new(aTHX);
	(void)hv_stores(self, "query", query);
	/* A reference of its own: assigning one slot must not change the other. */
	(void)hv_stores(self, "param", newRV_inc(SvRV(query)));
	(void)hv_stores(self, "body", store_new(aTHX));
	qsv = hv_fetchs((HV *)SvRV(env), "QUERY_STRING", 0);
	if (qsv && SvOK(*qsv)) {
		bytes = SvPVbyte(*qsv, len);
		store_of(aTHX_ query, &qs, &err);
		if (len)
			req_urlencoded_parse(bytes, len, "query string", &st.lim, &st.used, store_add,
					&qs, &err);
	}
	(void)hv_stores(self, "_state", newSVpvn((const char *)&st, sizeof st));
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
