/* The script registry: compiles each script once per interpreter, as
 *
 *     package PLXD::Script::srv::cgi_2dbin::x_2eplx;
 *     sub __plxd_script {
 *     #line 1 "/srv/cgi-bin/x.plx"
 *     ...the script, up to its __END__ or __DATA__ line...
 *     }
 *
 * and keeps it until the file changes (device, inode, size or mtime).
 *
 * Three things mod_perl's Registry gets wrong are handled here:
 * - Package names are one-to-one with paths (perl_source.c).
 * - __DATA__/__END__ would end the wrapper sub; the text after it is cut
 *   off before compiling and served through PACKAGE::DATA instead.
 * - A named sub that uses a file-level `my` variable captures the variable
 *   of the first run only ("will not stay shared"): each run of the wrapper
 *   gets fresh lexicals while the named sub keeps the first ones. Under CGI
 *   every run is the first, so scripts rely on it. After each run we point
 *   the named subs' captured slots at the wrapper's fresh variables (see
 *   perl_registry_rebind), so the next run's named subs see the next run's
 *   values, and the compile-time warning is filtered out.
 * END blocks compiled with the script are taken out of PL_endav and kept
 * with it; the interpreter runs them after each request. */
#include "perl_registry.h"
#include "alloc.h"

#include <XSUB.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCRIPT_SUB "__plxd_script"

struct perl_registry {
	HV *scripts;     /* path -> IV holding a struct perl_script * */
	CV *warn_filter; /* installed as __WARN__ while compiling */
};

struct capture_walk {
	CV **cvs;        /* the wrapper, then named subs nested in it */
	size_t ncvs, cap;
	HV *seen;        /* stashes visited */
};

static SV *read_source(pTHX_ const char *path, struct stat *st);
static SV *wrap_source(pTHX_ const char *path, const char *package, SV *src, SV **data);
static AV *take_end_blocks(pTHX_ const char *path, SSize_t before);
static void collect_captures(pTHX_ struct perl_script *s);
static void walk_stash(pTHX_ HV *stash, struct capture_walk *w, int depth);
static void consider_cv(pTHX_ CV *cv, struct capture_walk *w);
static void script_clear(pTHX_ struct perl_script *s);
static int facts_match(const struct perl_script *s, const struct perl_file_facts *f);
static void drop_package(pTHX_ const char *package);

XS(xs_warn_filter);

/* __WARN__ while a script compiles: drops "will not stay shared", which
 * perl_registry_rebind makes untrue, and prints everything else as perl
 * would. */
XS(xs_warn_filter)
{
	dXSARGS;
	if (items < 1)
		XSRETURN_EMPTY;
	STRLEN len;
	const char *msg = SvPV(ST(0), len);
	if (!memmem(msg, len, "will not stay shared", 20))
		Perl_write_to_stderr(aTHX_ ST(0));
	XSRETURN_EMPTY;
}

struct perl_registry *perl_registry_create(pTHX)
{
	struct perl_registry *reg = xcalloc(1, sizeof *reg);
	reg->scripts = newHV();
	reg->warn_filter = newXS_flags("PLXD::Registry::warn_filter", xs_warn_filter, __FILE__,
			NULL, 0);
	SvREFCNT_inc_simple_void_NN(reg->warn_filter);
	return reg;
}

static void script_clear(pTHX_ struct perl_script *s)
{
	SvREFCNT_dec(s->code);
	SvREFCNT_dec(s->ends);
	SvREFCNT_dec(s->data);
	SvREFCNT_dec(s->inc);
	s->code = NULL;
	s->ends = NULL;
	s->data = NULL;
	s->data_gv = NULL;
	s->inc = NULL;
	free(s->captures);
	s->captures = NULL;
	s->ncaptures = 0;
	free(s->package);
	s->package = NULL;
}

void perl_registry_destroy(pTHX_ struct perl_registry *reg)
{
	if (!reg)
		return;
	HE *he;
	hv_iterinit(reg->scripts);
	while ((he = hv_iternext(reg->scripts))) {
		struct perl_script *s = INT2PTR(struct perl_script *, SvIV(HeVAL(he)));
		script_clear(aTHX_ s);
		free(s->path);
		free(s);
	}
	SvREFCNT_dec(reg->scripts);
	SvREFCNT_dec(reg->warn_filter);
	free(reg);
}

/* Empties a package of an earlier compilation (PLXD::Worker). */
static void drop_package(pTHX_ const char *package)
{
	dSP;
	ENTER;
	SAVETMPS;
	PUSHMARK(SP);
	mXPUSHs(newSVpv(package, 0));
	PUTBACK;
	call_pv("PLXD::Worker::delete_package", G_VOID | G_DISCARD | G_EVAL);
	FREETMPS;
	LEAVE;
}

static int facts_match(const struct perl_script *s, const struct perl_file_facts *f)
{
	return s->code && s->dev == f->dev && s->ino == f->ino && s->size == f->size &&
		s->mtime_sec == f->mtime_sec && s->mtime_nsec == f->mtime_nsec;
}

/* The file's bytes as a mortal SV, or NULL with errno. */
static SV *read_source(pTHX_ const char *path, struct stat *st)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
		int e = S_ISREG(st->st_mode) ? errno : EISDIR;
		close(fd);
		errno = e;
		return NULL;
	}
	SV *sv = sv_2mortal(newSV((STRLEN)st->st_size + 1));
	SvPOK_on(sv);
	STRLEN have = 0;
	for (;;) {
		if (SvLEN(sv) - have < 4096)
			SvGROW(sv, SvLEN(sv) * 2);
		ssize_t n = read(fd, SvPVX(sv) + have, SvLEN(sv) - have - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return NULL;
		}
		if (n == 0)
			break;
		have += (STRLEN)n;
	}
	close(fd);
	SvCUR_set(sv, have);
	*SvEND(sv) = '\0';
	return sv;
}

/* The text to compile, and the data section (a new SV) when there is one. */
static SV *wrap_source(pTHX_ const char *path, const char *package, SV *src, SV **data)
{
	STRLEN len;
	const char *text = SvPV(src, len);
	size_t data_at;
	int has_data, in_pod;
	size_t code_len = perl_source_split(text, len, &data_at, &has_data, &in_pod);
	*data = has_data ? newSVpvn(text + data_at, len - data_at) : NULL;

	SV *code = sv_2mortal(newSVpvf("package %s; sub " SCRIPT_SUB " {\n", package));
	/* #line cannot quote a name holding '"' or a newline: such a file
	 * keeps perl's "(eval N)" name in messages. */
	if (!strpbrk(path, "\"\n"))
		sv_catpvf(code, "#line 1 \"%s\"\n", path);
	sv_catpvn(code, text, code_len);
	/* The newline ends a last line that is a comment; "=cut" ends POD the
	 * script left open, which would swallow the closing brace. */
	sv_catpvs(code, "\n");
	if (in_pod)
		sv_catpvs(code, "=cut\n");
	sv_catpvs(code, ";}\n1;\n");
	return code;
}

/* END blocks are unshifted onto PL_endav as they compile: the ones the
 * script defined (its file name in CvFILE) are the first ones added since
 * `before`. END blocks of modules it loaded stay where they are and run
 * when the worker exits. */
static AV *take_end_blocks(pTHX_ const char *path, SSize_t before)
{
	if (!PL_endav)
		return NULL;
	SSize_t added = (SSize_t)av_count(PL_endav) - before;
	AV *mine = NULL;
	AV *others = NULL;
	for (SSize_t i = 0; i < added; i++) {
		SV *cv = av_shift(PL_endav);
		if (SvTYPE(cv) == SVt_PVCV && CvFILE((CV *)cv) &&
				strcmp(CvFILE((CV *)cv), path) == 0) {
			if (!mine)
				mine = newAV();
			av_push(mine, cv);
		} else {
			if (!others)
				others = newAV();
			av_push(others, cv);
		}
	}
	if (others) {
		/* Put back in their order. */
		for (SSize_t i = (SSize_t)av_count(others); i-- > 0;) {
			SV **svp = av_fetch(others, i, 0);
			av_unshift(PL_endav, 1);
			av_store(PL_endav, 0, SvREFCNT_inc(*svp));
		}
		SvREFCNT_dec(others);
	}
	return mine;
}

enum perl_fetch perl_registry_fetch(pTHX_ struct perl_registry *reg, const char *path,
		const struct perl_file_facts *facts, struct perl_script **out)
{
	size_t plen = strlen(path);
	SV **svp = hv_fetch(reg->scripts, path, (I32)plen, 0);
	struct perl_script *s = svp ? INT2PTR(struct perl_script *, SvIV(*svp)) : NULL;
	if (s && facts_match(s, facts)) {
		*out = s;
		return PERL_FETCH_CACHED;
	}

	/* Everything below that can be cut short by exit (in a BEGIN block)
	 * is mortal or Perl-owned; C allocations come after the compile. */
	struct stat st;
	SV *src = read_source(aTHX_ path, &st);
	if (!src)
		return PERL_FETCH_UNREADABLE;
	unsigned generation = s ? s->generation + 1 : 1;
	char *pkg = perl_source_package(path, generation);
	SV *package = sv_2mortal(newSVpv(pkg, 0));
	free(pkg);
	SV *data = NULL;
	SV *code = wrap_source(aTHX_ path, SvPVX(package), src, &data);
	if (data)
		sv_2mortal(data);

	SSize_t ends_before = PL_endav ? (SSize_t)av_count(PL_endav) : 0;
	ENTER;
	if (!PL_warnhook) {
		SAVEGENERICSV(PL_warnhook);
		PL_warnhook = newRV_inc((SV *)reg->warn_filter);
	}
	eval_sv(code, G_VOID | G_EVAL | G_DISCARD);
	LEAVE;
	AV *ends = take_end_blocks(aTHX_ path, ends_before);

	SV *fq = sv_2mortal(newSVpvf("%s::" SCRIPT_SUB, SvPVX(package)));
	CV *cv = SvTRUE(ERRSV) ? NULL : get_cvn_flags(SvPVX(fq), SvCUR(fq), 0);
	if (!cv) {
		SvREFCNT_dec(ends);
		if (!SvTRUE(ERRSV))
			sv_setpvf(ERRSV, "%s did not compile to a sub", path);
		/* Not kept: the next request compiles again. The old code (if
		 * any) is dropped too, as the file has changed. */
		SV *err = sv_2mortal(newSVsv(ERRSV));
		drop_package(aTHX_ SvPVX(package));
		if (s) {
			if (s->package)
				drop_package(aTHX_ s->package);
			script_clear(aTHX_ s);
			s->generation = generation;
		}
		sv_setsv(ERRSV, err);
		return PERL_FETCH_ERROR;
	}

	if (!s) {
		s = xcalloc(1, sizeof *s);
		s->path = xstrdup(path);
		(void)hv_store(reg->scripts, path, (I32)plen, newSViv(PTR2IV(s)), 0);
	} else {
		if (s->package)
			drop_package(aTHX_ s->package);
		script_clear(aTHX_ s);
	}
	s->generation = generation;
	s->package = xstrdup(SvPVX(package));
	s->dev = (uint64_t)st.st_dev;
	s->ino = (uint64_t)st.st_ino;
	s->size = (uint64_t)st.st_size;
	s->mtime_sec = (int64_t)st.st_mtim.tv_sec;
	s->mtime_nsec = (int64_t)st.st_mtim.tv_nsec;
	s->code = (CV *)SvREFCNT_inc_simple_NN((SV *)cv);
	s->ends = ends;
	if (data) {
		s->data = SvREFCNT_inc_simple_NN(data);
		SV *name = sv_2mortal(newSVpvf("%s::DATA", s->package));
		s->data_gv = gv_fetchsv(name, GV_ADD, SVt_PVIO);
	}
	collect_captures(aTHX_ s);
	*out = s;
	return PERL_FETCH_COMPILED;
}

/* ---- named subs and the wrapper's lexicals ---- */

static void consider_cv(pTHX_ CV *cv, struct capture_walk *w)
{
	if (!cv || CvISXSUB(cv) || !CvOUTSIDE(cv) || CvANON(cv))
		return;
	for (size_t i = 0; i < w->ncvs; i++) {
		if (w->cvs[i] == cv)
			return;
	}
	/* Nested in the wrapper, or in a named sub nested in it. The walk is
	 * repeated until nothing new is found, so the order of discovery does
	 * not matter. */
	for (size_t i = 0; i < w->ncvs; i++) {
		if (CvOUTSIDE(cv) == w->cvs[i]) {
			if (w->ncvs == w->cap) {
				w->cap *= 2;
				w->cvs = xrealloc(w->cvs, w->cap * sizeof *w->cvs);
			}
			w->cvs[w->ncvs++] = cv;
			return;
		}
	}
}

static void walk_stash(pTHX_ HV *stash, struct capture_walk *w, int depth)
{
	if (!stash || depth > 64)
		return;
	char key[sizeof(void *) * 2 + 3];
	int klen = snprintf(key, sizeof key, "%p", (void *)stash);
	if (hv_exists(w->seen, key, klen))
		return;
	(void)hv_store(w->seen, key, klen, &PL_sv_yes, 0);
	SvREFCNT_inc_simple_void_NN(&PL_sv_yes);

	for (STRLEN b = 0; b <= HvMAX(stash); b++) {
		for (HE *he = HvARRAY(stash)[b]; he; he = HeNEXT(he)) {
			SV *val = HeVAL(he);
			if (!val)
				continue;
			if (SvROK(val) && SvTYPE(SvRV(val)) == SVt_PVCV) {
				consider_cv(aTHX_ (CV *)SvRV(val), w);
				continue;
			}
			if (!isGV_with_GP(val))
				continue;
			GV *gv = (GV *)val;
			consider_cv(aTHX_ GvCV(gv), w);
			consider_cv(aTHX_ GvFORM(gv), w);
			I32 len = HeKLEN(he);
			const char *name = HeKEY(he);
			if (len > 2 && name[len - 1] == ':' && name[len - 2] == ':' && GvHV(gv))
				walk_stash(aTHX_ GvHV(gv), w, depth + 1);
		}
	}
}

/* Finds the named subs and formats compiled inside the script (possibly
 * in other packages) and records, for each of their captured outer
 * lexicals, where the variable lives in the enclosing sub's pad. */
static void collect_captures(pTHX_ struct perl_script *s)
{
	struct capture_walk w = { .cap = 16 };
	w.cvs = xmalloc(w.cap * sizeof *w.cvs);
	w.cvs[w.ncvs++] = s->code;
	w.seen = newHV();
	size_t before;
	do {
		before = w.ncvs;
		hv_clear(w.seen);
		walk_stash(aTHX_ PL_defstash, &w, 0);
		/* END blocks are in no stash, and close over file lexicals
		 * as often as named subs do ("my $dbh; END { ... }"). */
		for (Size_t i = 0; s->ends && i < av_count(s->ends); i++)
			consider_cv(aTHX_ (CV *)AvARRAY(s->ends)[i], &w);
	} while (w.ncvs != before);
	SvREFCNT_dec(w.seen);

	size_t cap = 0;
	for (size_t i = 1; i < w.ncvs; i++) {
		CV *inner = w.cvs[i];
		PADLIST *pl = CvPADLIST(inner);
		if (!pl)
			continue;
		PADNAMELIST *names = PadlistNAMES(pl);
		PADNAME **name = PadnamelistARRAY(names);
		for (SSize_t ix = 1; ix <= PadnamelistMAX(names); ix++) {
			PADNAME *pn = name[ix];
			if (!pn || !PadnameLEN(pn) || !PadnameOUTER(pn) || PadnameIsOUR(pn) ||
					PadnameIsSTATE(pn) || PadnamePV(pn)[0] == '&')
				continue;
			if (s->ncaptures == cap) {
				cap = cap ? cap * 2 : 8;
				s->captures = xrealloc(s->captures, cap * sizeof *s->captures);
			}
			s->captures[s->ncaptures++] = (struct perl_capture){
				.inner = inner, .inner_ix = (PADOFFSET)ix,
				.outer = CvOUTSIDE(inner), .outer_ix = PARENT_PAD_INDEX(pn),
			};
		}
	}
	free(w.cvs);
}

/* The wrapper's `my` variables that a named sub captured are replaced by
 * new ones when the wrapper returns (the named sub still holds the old
 * one). Pointing the named subs at the replacements makes the next run's
 * `my $x = ...` visible to them, as it is under CGI. Captures were
 * recorded outer before inner, so a sub nested two deep picks up its
 * parent's updated slot. */
void perl_registry_rebind(pTHX_ struct perl_script *s)
{
	for (size_t i = 0; i < s->ncaptures; i++) {
		struct perl_capture *c = &s->captures[i];
		PADLIST *outer = CvPADLIST(c->outer);
		if (!outer || PadlistMAX(outer) < 1)
			continue;
		PAD *opad = PadlistARRAY(outer)[1];
		if (!opad || (SSize_t)c->outer_ix > PadMAX(opad))
			continue;
		SV *now = PadARRAY(opad)[c->outer_ix];
		PADLIST *inner = CvPADLIST(c->inner);
		if (!now || !inner)
			continue;
		for (SSize_t d = 1; d <= PadlistMAX(inner); d++) {
			PAD *pad = PadlistARRAY(inner)[d];
			if (!pad || (SSize_t)c->inner_ix > PadMAX(pad))
				continue;
			SV **slot = &PadARRAY(pad)[c->inner_ix];
			if (*slot == now)
				continue;
			SV *old = *slot;
			*slot = SvREFCNT_inc_simple_NN(now);
			SvREFCNT_dec(old);
		}
	}
}
