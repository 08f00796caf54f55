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
 * Four things mod_perl's Registry gets wrong are handled here:
 * - Package names are one-to-one with paths (perl_source.c), and short
 *   enough for perl whatever the path's length (a long one is cut and
 *   ends with a hash; package_for keeps two such from meeting).
 * - __DATA__/__END__ would end the wrapper sub; the text after it is cut
 *   off before compiling and served through PACKAGE::DATA instead.
 * - A named sub that uses a file-level `my` variable captures the variable
 *   of the first run only ("will not stay shared"): each run of the wrapper
 *   gets fresh lexicals while the named sub keeps the first ones. Under CGI
 *   every run is the first, so scripts rely on it. After each run we point
 *   the named subs' captured slots at the wrapper's fresh variables (see
 *   perl_rebind.c), so the next run's named subs see the next run's
 *   values, and the compile-time warning is dropped from what the compile
 *   writes to fd 2 (not through a __WARN__ hook: a module the script loads
 *   may install its own while the script compiles).
 * - The switches of the #! line: each gets the meaning perl gives it when
 *   it runs the file (perl_source_shebang reads them), or the script is
 *   refused with perl's reason or ours; none is dropped silently.
 * END blocks compiled with the script are taken out of PL_endav and kept
 * with it; the interpreter runs them after each request.
 *
 * The registry also keeps, per script, whether its runs keep leaving more
 * behind (perl_registry_note_run): setup at a script's top level that adds
 * to an object outliving the request (a framework's routes) grows the
 * worker on every request, which no error shows. */
#include "perl_registry.h"
#include "perl_source.h"
#include "alloc.h"

#include <XSUB.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCRIPT_SUB "__plxd_script"

struct perl_registry {
	HV *scripts; /* path -> IV holding a struct perl_script * */
	enum perl_taint taint;
};

static SV *read_source(pTHX_ const char *path, struct stat *st);
static SV *wrap_source(pTHX_ const char *path, const char *package, SV *src,
		const struct perl_shebang *sb, SV **data);
static SV *wrap_app(pTHX_ const char *path, const char *package, SV *src, SV **data);
static void loop_preamble(pTHX_ SV *code, const struct perl_shebang *sb);
static int switches_refused(pTHX_ struct perl_registry *reg, const struct perl_shebang *sb,
		const char *path);
static void switches_fill(pTHX_ struct perl_script_switches *sw, const struct perl_shebang *sb);
static struct perl_script_switches *switches_keep(pTHX_ const struct perl_script_switches *sw);
static void switches_free(pTHX_ struct perl_script_switches *sw);
static SV *separator_sv(pTHX_ const struct perl_separator *sep);
static void inc_unshift(pTHX_ char *const *dirs);
static void compile_settings(pTHX_ const struct perl_script_switches *sw);
static int line_dropped(const char *line, size_t len, const char *path);
static AV *take_end_blocks(pTHX_ const char *path, SSize_t before);
static void script_clear(pTHX_ struct perl_script *s);
static void drop_package(pTHX_ const char *package);
static char *package_for(pTHX_ struct perl_registry *reg, const char *path, unsigned generation);
static int package_taken(pTHX_ struct perl_registry *reg, const char *package, const char *path);

struct perl_registry *perl_registry_create(pTHX_ enum perl_taint taint)
{
	struct perl_registry *reg = xcalloc(1, sizeof *reg);
	reg->scripts = newHV();
	reg->taint = taint;
	return reg;
}

static void script_clear(pTHX_ struct perl_script *s)
{
	SvREFCNT_dec(s->code);
	SvREFCNT_dec(s->app);
	s->app = NULL;
	SvREFCNT_dec(s->ends);
	SvREFCNT_dec(s->data);
	SvREFCNT_dec(s->inc);
	SvREFCNT_dec(s->sig);
	SvREFCNT_dec(s->settings);
	SvREFCNT_dec(s->settings_plan);
	switches_free(aTHX_ s->switches);
	s->code = NULL;
	s->ends = NULL;
	s->data = NULL;
	s->data_gv = NULL;
	s->inc = NULL;
	s->sig = NULL;
	s->settings = NULL;
	s->settings_plan = NULL;
	s->settings_plan_loaded = 0;
	s->switches = NULL;
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

/* Whether a script of this interpreter other than path's compiled into
 * package. */
static int package_taken(pTHX_ struct perl_registry *reg, const char *package, const char *path)
{
	HE *he;
	hv_iterinit(reg->scripts);
	while ((he = hv_iternext(reg->scripts))) {
		const struct perl_script *s = INT2PTR(struct perl_script *, SvIV(HeVAL(he)));
		if (s->package && strcmp(s->package, package) == 0 && strcmp(s->path, path) != 0)
			return 1;
	}
	return 0;
}

/* The package for path's compile. A name perl_source_package had to cut
 * can meet another path's (their hashes alike): it is asked again with
 * the next clash number until no other script holds it. A readable name
 * is one-to-one with its path and never held by another; the bound only
 * keeps a bug from looping. */
static char *package_for(pTHX_ struct perl_registry *reg, const char *path, unsigned generation)
{
	char *pkg = perl_source_package(path, generation, 0);
	for (unsigned clash = 1; clash < 64 && package_taken(aTHX_ reg, pkg, path); clash++) {
		free(pkg);
		pkg = perl_source_package(path, generation, clash);
	}
	return pkg;
}

int perl_registry_current(const struct perl_script *s, const struct perl_file_facts *f)
{
	return s->code && s->dev == f->dev && s->ino == f->ino && s->size == f->size
			&& s->mtime_sec == f->mtime_sec && s->mtime_nsec == f->mtime_nsec;
}

/* The file's bytes as a mortal SV, or NULL with errno. */
static SV *read_source(pTHX_ const char *path, struct stat *st)
{
	int fd = perl_source_open(path, O_RDONLY | O_CLOEXEC);
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

/* The text to compile, and the data section (a new SV) when there is one.
 * With -n or -p the script is the body of perl's own loop, opened on the
 * wrapper's first line so that the script's lines keep their numbers. */
static SV *wrap_source(pTHX_ const char *path, const char *package, SV *src,
		const struct perl_shebang *sb, SV **data)
{
	STRLEN len;
	const char *text = SvPV(src, len);
	size_t data_at;
	int has_data, in_pod;
	size_t code_len = perl_source_split(text, len, &data_at, &has_data, &in_pod);
	*data = has_data ? newSVpvn(text + data_at, len - data_at) : NULL;

	SV *code = sv_2mortal(newSVpvf("package %s; sub " SCRIPT_SUB " {", package));
	int loop = sb && (sb->minus_n || sb->minus_p);
	if (loop)
		loop_preamble(aTHX_ code, sb);
	sv_catpvs(code, "\n");
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
	if (loop && sb->minus_p)
		sv_catpvs(code, ";}continue{print or die qq(-p destination: $!\\n);}");
	else if (loop)
		sv_catpvs(code, ";}");
	sv_catpvs(code, ";}\n1;\n");
	return code;
}

/* An application's file runs once, for its last value (perl_psgi.c): it is
 * compiled then, from a string eval whose one lexical scope is the file's
 * own, as plackup's `do FILE` compiles it, so that a named sub using a
 * file-level `my` variable shares it; inside the script's sub it would
 * not stay shared (an error under fatal warnings). The sub evaluates the
 * text, kept in the package's $PLXD_SOURCE. */
static SV *wrap_app(pTHX_ const char *path, const char *package, SV *src, SV **data)
{
	STRLEN len;
	const char *text = SvPV(src, len);
	size_t data_at;
	int has_data, in_pod;
	size_t code_len = perl_source_split(text, len, &data_at, &has_data, &in_pod);
	*data = has_data ? newSVpvn(text + data_at, len - data_at) : NULL;

	SV *file = get_sv(form("%s::PLXD_SOURCE", package), GV_ADD);
	sv_setpvf(file, "package %s;\n", package);
	if (!strpbrk(path, "\"\n"))
		sv_catpvf(file, "#line 1 \"%s\"\n", path);
	sv_catpvn(file, text, code_len);
	sv_catpvs(file, "\n");
	return sv_2mortal(newSVpvf("package %s; sub " SCRIPT_SUB
				   " { PLXD::PSGI::eval_file($%s::PLXD_SOURCE) }\n1;\n",
			package, package));
}

/* What perl's lexer puts before a -n or -p program (toke.c): the loop,
 * chomp for -l, the split for -a and -F. */
static void loop_preamble(pTHX_ SV *code, const struct perl_shebang *sb)
{
	sv_catpvs(code, "LINE: while (<>) {");
	if (sb->minus_l)
		sv_catpvs(code, "chomp;");
	if (!sb->minus_a)
		return;
	const char *split = sb->split;
	if (!split) {
		sv_catpvs(code, "our @F=split(' ');");
	} else if ((*split == '/' || *split == '\'' || *split == '"')
			&& strchr(split + 1, *split)) {
		sv_catpvf(code, "our @F=split(%s);", split);
	} else {
		/* q with NUL as its delimiter, backslashes doubled. */
		sv_catpvs(code, "our @F=split(q");
		sv_catpvn(code, "", 1);
		for (const char *c = split; *c; c++) {
			if (*c == '\\')
				sv_catpvs(code, "\\");
			sv_catpvn(code, c, 1);
		}
		sv_catpvn(code, "", 1);
		sv_catpvs(code, ");");
	}
}

/* Sets $@ and returns 1 when the #! line asks for what cannot be done.
 * Taint checks cannot be switched on or off in a running interpreter: a
 * script that asks for them is run in one started with them (the caller
 * chose it by perl_registry_taint_wanted), and one that does not in one
 * without them; the file changing in between is refused here, and its
 * next request goes to the right one. */
static int switches_refused(pTHX_ struct perl_registry *reg, const struct perl_shebang *sb,
		const char *path)
{
	if (sb && sb->refused) {
		sv_setpvf(ERRSV, "%s at %s line 1.\n", sb->refused, path);
		return 1;
	}
	char taint = sb ? sb->taint : 0;
	if (taint && reg->taint == PERL_TAINT_REFUSE) {
		sv_setpvf(ERRSV,
				"\"-%c\" is on the #! line, and [perl] taint = refuse "
				"(run the script as .pl, or remove the switch) at %s line 1.\n",
				taint, path);
		return 1;
	}
	if (taint && reg->taint == PERL_TAINT_WARN) {
		PerlIO_printf(Perl_error_log,
				"\"-%c\" is on the #! line: the script runs without taint checks "
				"([perl] taint = warn) at %s line 1.\n",
				taint, path);
		return 0;
	}
	if ((taint != 0) != (TAINTING_get != 0)) {
		sv_setpvf(ERRSV,
				"the #! line changed while the script was being started (%s "
				"\"-T\"): run it again at %s line 1.\n",
				taint ? "now with" : "now without", path);
		return 1;
	}
	return 0;
}

char perl_registry_taint_wanted(const char *path)
{
	int fd = perl_source_open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	/* The first line, as perl_source_shebang reads it from the whole file;
	 * one longer than the buffer is read in part, and its compile tells. */
	char line[16384];
	size_t have = 0;
	while (have < sizeof line && !memchr(line, '\n', have)) {
		ssize_t n = read(fd, line + have, sizeof line - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	close(fd);
	if (have <= 2 || line[0] != '#' || line[1] != '!')
		return 0;
	const char *nl = memchr(line, '\n', have);
	struct perl_shebang sb;
	char taint = 0;
	if (perl_source_shebang(line, nl ? (size_t)(nl - line) + 1 : have, &sb)) {
		taint = sb.taint;
		perl_source_shebang_free(&sb);
	}
	return taint;
}

static SV *separator_sv(pTHX_ const struct perl_separator *sep)
{
	if (!sep->set)
		return NULL;
	return sv_2mortal(sep->undef ? newSV(0) : newSVpvn(sep->bytes, sep->len));
}

/* What the switches mean at run time, with mortal values: the compile
 * may be cut short by exit, and only a successful one keeps them. */
static void switches_fill(pTHX_ struct perl_script_switches *sw, const struct perl_shebang *sb)
{
	/* As perl's moreswitches() sets PL_dowarn. */
	switch (sb->warnings) {
	case PERL_WARN_ON:
		sw->dowarn = (PL_dowarn & G_WARN_ALL_MASK) ? PL_dowarn : PL_dowarn | G_WARN_ON;
		break;
	case PERL_WARN_ALL:
		sw->dowarn = G_WARN_ALL_ON | G_WARN_ON;
		break;
	case PERL_WARN_NONE:
		sw->dowarn = G_WARN_ALL_OFF;
		break;
	default:
		sw->dowarn = PL_dowarn;
		break;
	}
	sw->unsafe = sb->unsafe;
	sw->check_only = sb->check_only;
	sw->rs = separator_sv(aTHX_ & sb->rs);
	sw->ors = separator_sv(aTHX_ & sb->ors);
	sw->inplace = sb->inplace ? sv_2mortal(newSVpv(sb->inplace, 0)) : NULL;
	/* perl -t is perl -T whose taint errors are warnings. */
	sw->taint_warn = sb->taint == 't' && TAINTING_get;
}

/* A copy to keep with the script, or NULL when no run needs anything
 * (-I went into the script's @INC, -D and -s did their part at compile). */
static struct perl_script_switches *switches_keep(pTHX_ const struct perl_script_switches *sw)
{
	if (sw->dowarn == PL_dowarn && !sw->unsafe && !sw->check_only && !sw->rs && !sw->ors
			&& !sw->inplace && !sw->taint_warn)
		return NULL;
	struct perl_script_switches *kept = xmalloc(sizeof *kept);
	*kept = *sw;
	SvREFCNT_inc_simple_void(kept->rs);
	SvREFCNT_inc_simple_void(kept->ors);
	SvREFCNT_inc_simple_void(kept->inplace);
	return kept;
}

static void switches_free(pTHX_ struct perl_script_switches *sw)
{
	if (!sw)
		return;
	SvREFCNT_dec(sw->rs);
	SvREFCNT_dec(sw->ors);
	SvREFCNT_dec(sw->inplace);
	free(sw);
}

/* -I, as perl's incpush() does it for the #! line: each folder goes in
 * front of @INC, after those of its version and architecture subfolders
 * that exist; a later -I goes in front of an earlier one. */
static void inc_unshift(pTHX_ char *const *dirs)
{
	/* clang-format off */
	static const char *const subdirs[] = {
		"/" PERL_FS_VERSION "/" ARCHNAME, "/" PERL_FS_VERSION, "/" ARCHNAME,
	};
	/* clang-format on */
	AV *inc = GvAVn(PL_incgv);
	for (size_t i = 0; dirs && dirs[i]; i++) {
		SV *found[sizeof subdirs / sizeof subdirs[0]];
		size_t n = 0;
		for (size_t j = 0; j < sizeof subdirs / sizeof subdirs[0]; j++) {
			SV *sub = newSVpvf("%s%s", dirs[i], subdirs[j]);
			struct stat st;
			if (stat(SvPVX(sub), &st) == 0 && S_ISDIR(st.st_mode))
				found[n++] = sub;
			else
				SvREFCNT_dec(sub);
		}
		av_unshift(inc, (SSize_t)n + 1);
		for (size_t j = 0; j < n; j++)
			av_store(inc, (SSize_t)j, found[j]);
		av_store(inc, (SSize_t)n, newSVpv(dirs[i], 0));
	}
}

/* The warnings of the script's switches, for its compile (the caller's
 * LEAVE undoes them). The compile starts from &PL_compiling's lexical
 * warnings, so that nothing of the code that ran last leaks into it. */
static void compile_settings(pTHX_ const struct perl_script_switches *sw)
{
	SAVEVPTR(PL_curcop);
	PL_curcop = &PL_compiling;
	SAVECOMPILEWARNINGS();
	PL_compiling.cop_warnings = pWARN_STD;
	if (!sw)
		return;
	SAVEI8(PL_dowarn);
	SAVEBOOL(PL_unsafe);
	SAVEBOOL(PL_taint_warn);
	PL_dowarn = sw->dowarn;
	PL_unsafe = sw->unsafe;
	PL_taint_warn = sw->taint_warn;
	if (sw->dowarn & G_WARN_ALL_ON)
		PL_compiling.cop_warnings = pWARN_ALL;
	else if (sw->dowarn & G_WARN_ALL_OFF)
		PL_compiling.cop_warnings = pWARN_NONE;
}

/* ---- what a compile writes to fd 2 ---- */

void perl_registry_hold_stderr(pTHX_ struct perl_stderr_hold *h)
{
	h->log = h->held = -1;
	int held = memfd_create("plxd-compile-stderr", MFD_CLOEXEC);
	int log = fcntl(h->fd, F_DUPFD_CLOEXEC, 10);
	if (held < 0 || log < 0) {
		if (held >= 0)
			close(held);
		if (log >= 0)
			close(log);
		return; /* the warnings pass unfiltered */
	}
	PerlIO_flush(Perl_error_log);
	dup2(held, h->fd);
	h->log = log;
	h->held = held;
}

static void write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		p += n;
		len -= (size_t)n;
	}
}

/* A "will not stay shared" warning about the script's own file (which
 * perl_registry_rebind makes untrue); the same about a module's code is
 * true and kept. A script whose name cannot go into #line is "(eval N)". */
static int line_dropped(const char *line, size_t len, const char *path)
{
	static const char what[] = "will not stay shared at ";
	const char *at = memmem(line, len, what, sizeof what - 1);
	if (!at)
		return 0;
	at += sizeof what - 1;
	size_t rest = len - (size_t)(at - line);
	const char *name = strpbrk(path, "\"\n") ? "(eval " : path;
	size_t nlen = strlen(name);
	return rest > nlen && memcmp(at, name, nlen) == 0;
}

void perl_registry_release_stderr(pTHX_ struct perl_stderr_hold *h, const char *path,
		const char *prefix)
{
	if (h->held < 0)
		return;
	PerlIO_flush(Perl_error_log);
	/* fd 2 goes back to the log unless a BEGIN block moved it (open
	 * STDERR, ...): that stays for the run, as it would under perl. */
	struct stat now, held;
	if (fstat(h->fd, &now) == 0 && fstat(h->held, &held) == 0 && now.st_dev == held.st_dev
			&& now.st_ino == held.st_ino)
		dup2(h->log, h->fd);
	off_t size = lseek(h->held, 0, SEEK_CUR);
	char *text = size > 0 ? mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, h->held, 0)
			      : MAP_FAILED;
	if (text != MAP_FAILED) {
		const char *p = text, *end = text + size;
		while (p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
			if (!line_dropped(p, n, path)) {
				if (prefix)
					write_all(h->log, prefix, strlen(prefix));
				write_all(h->log, p, n);
			}
			p += n;
		}
		munmap(text, (size_t)size);
	}
	close(h->held);
	close(h->log);
	h->log = h->held = -1;
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
		if (SvTYPE(cv) == SVt_PVCV && CvFILE((CV *)cv)
				&& strcmp(CvFILE((CV *)cv), path) == 0) {
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

struct perl_script *perl_registry_lookup(pTHX_ struct perl_registry *reg, const char *path,
		const struct perl_file_facts *facts)
{
	SV **svp = hv_fetch(reg->scripts, path, (I32)strlen(path), 0);
	struct perl_script *s = svp ? INT2PTR(struct perl_script *, SvIV(*svp)) : NULL;
	return s && perl_registry_current(s, facts) ? s : NULL;
}

enum perl_fetch perl_registry_compile(pTHX_ struct perl_registry *reg, const char *path, int app,
		struct perl_script **out)
{
	size_t plen = strlen(path);
	SV **svp = hv_fetch(reg->scripts, path, (I32)plen, 0);
	struct perl_script *s = svp ? INT2PTR(struct perl_script *, SvIV(*svp)) : NULL;

	/* Everything below that can be cut short by exit (in a BEGIN block)
	 * is mortal or Perl-owned; C allocations come after the compile, and
	 * the #! line's are released before it. */
	struct stat st;
	SV *src = read_source(aTHX_ path, &st);
	if (!src)
		return PERL_FETCH_UNREADABLE;
	struct perl_shebang sb;
	int has_switches = perl_source_shebang(SvPVX(src), SvCUR(src), &sb);
	if (switches_refused(aTHX_ reg, has_switches ? &sb : NULL, path)) {
		if (has_switches)
			perl_source_shebang_free(&sb);
		return PERL_FETCH_ERROR;
	}
	unsigned generation = s ? s->generation + 1 : 1;
	char *pkg = package_for(aTHX_ reg, path, generation);
	SV *package = sv_2mortal(newSVpv(pkg, 0));
	free(pkg);
	SV *data = NULL;
	SV *code = app ? wrap_app(aTHX_ path, SvPVX(package), src, &data)
		       : wrap_source(aTHX_ path, SvPVX(package), src, has_switches ? &sb : NULL,
				       &data);
	if (data)
		sv_2mortal(data);
	struct perl_script_switches sw = { 0 };
	int debugging = 0;
	if (has_switches) {
		switches_fill(aTHX_ & sw, &sb);
		inc_unshift(aTHX_ sb.inc);
		debugging = sb.debugging;
		perl_source_shebang_free(&sb);
	}

	SSize_t ends_before = PL_endav ? (SSize_t)av_count(PL_endav) : 0;
	ENTER;
	compile_settings(aTHX_ has_switches ? &sw : NULL);
	if (debugging)
		Perl_ck_warner_d(aTHX_ packWARN(WARN_DEBUGGING),
				"Recompile perl with "
				"-DDEBUGGING to use -D switch (did you mean -d ?)\n");
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
	s->runs = 0;
	s->grew = 0;
	s->package = xstrdup(SvPVX(package));
	s->dev = (uint64_t)st.st_dev;
	s->ino = (uint64_t)st.st_ino;
	s->size = (uint64_t)st.st_size;
	s->mtime_sec = (int64_t)st.st_mtim.tv_sec;
	s->mtime_nsec = (int64_t)st.st_mtim.tv_nsec;
	s->code = (CV *)SvREFCNT_inc_simple_NN((SV *)cv);
	s->ends = ends;
	s->switches = has_switches ? switches_keep(aTHX_ & sw) : NULL;
	if (data) {
		s->data = SvREFCNT_inc_simple_NN(data);
		SV *name = sv_2mortal(newSVpvf("%s::DATA", s->package));
		s->data_gv = gv_fetchsv(name, GV_ADD, SVt_PVIO);
	}
	perl_registry_captures(aTHX_ s);
	*out = s;
	return PERL_FETCH_COMPILED;
}

/* ---- growth ---- */

/* The measure is perl's count of live SVs (PL_sv_count, kept in every
 * build) before and after a request. A script that builds its application
 * once leaves it where it found it from its second or third run on; one
 * that adds routes to an application kept in a package variable on every
 * run (Mojolicious::Lite, Dancer2 as their examples write them) leaves 17
 * to 200 more each time. The package's own symbols do not show it (the
 * routes live in the framework's objects).
 *
 * A run that follows another script's can also free what that one left
 * (a `my` variable of a module's sub, renewed when its scope ended while
 * something still held it, and let go by the next script), or leave what
 * the next one frees: with the samples and the compatibility suite's
 * applications taking turns, 1 to 33 values either way in every run of
 * scripts that do not grow. No such hand-over happens between two runs of
 * the same script, so a run right after another run of the same script
 * measures the script alone. The rule: after PERL_GROWTH_WINDOW
 * runs of this compile, a run right after its own that grew, while at
 * least PERL_GROWTH_MIN of the last PERL_GROWTH_WINDOW runs grew (the
 * window forgives a run that stopped early, and the caches a module fills
 * in its first runs); a run right after its own that did not grow starts
 * the window again. */
#if PERL_GROWTH_WINDOW > 32
#error "the window is a uint32_t of bits"
#endif
unsigned perl_registry_note_run(struct perl_script *s, int grew, int again)
{
	s->grew = s->grew << 1 | (grew ? 1u : 0u);
	s->runs++;
	if (!again || s->growth_told)
		return 0;
	if (!grew) {
		s->grew = 0;
		s->runs = 0;
		return 0;
	}
	if (s->runs < PERL_GROWTH_WINDOW)
		return 0;
	unsigned n = (unsigned)__builtin_popcount(s->grew);
	if (n < PERL_GROWTH_MIN)
		return 0;
	s->growth_told = true;
	return n;
}
