/* The script registry of one interpreter: each script compiled once into a
 * package of its own, derived from its file name without collisions, as
 * the body of a sub; recompiled when the file changes. Part of the worker's
 * Perl runtime (perl_run.c drives it). */
#ifndef PLXD_PERL_REGISTRY_H
#define PLXD_PERL_REGISTRY_H

#include <EXTERN.h>
#include <perl.h>

#include <stddef.h>
#include <stdint.h>

#include "perl_source.h"

/* A named sub (or format) of the script that captured one of the script's
 * file-level lexicals: rebound after every run (see perl_rebind.c). */
struct perl_capture {
	CV *inner;
	PADOFFSET inner_ix;
	CV *outer;
	PADOFFSET outer_ix;
};

/* What a script's #! line asks for (see perl_source_shebang), as the
 * interpreter applies it to each of the script's runs; its compile got it
 * too. */
struct perl_script_switches {
	U8 dowarn;       /* PL_dowarn: -w, -W, -X */
	bool unsafe;     /* -U */
	bool check_only; /* -c: compiled, never run */
	SV *rs, *ors;    /* $/ (-0, -g) and $\ (-l); NULL: the default */
	SV *inplace;     /* $^I (-i); NULL: undef */
	bool taint_warn; /* -t, in an interpreter checking taint: warnings,
			    not errors */
};

struct perl_script {
	char *path;
	uint64_t dev, ino, size;
	int64_t mtime_sec, mtime_nsec;
	unsigned generation; /* compiles of this path so far */
	char *package;       /* "PLXD::Script::..." */
	CV *code;            /* the script as a sub (owned reference) */
	bool psgi;           /* a .psgi file: code returns the app */
	SV *app;             /* ... once it ran: the app (owned); NULL before */
	AV *ends;            /* its own END blocks, newest first; NULL: none */
	SV *data;            /* text after __DATA__ or __END__; NULL: none */
	GV *data_gv;         /* PACKAGE::DATA when data is set */
	AV *inc;             /* @INC as compiling left it, when that differed
				   from the interpreter's; else NULL */
	struct perl_capture *captures;
	size_t ncaptures;
	struct perl_script_switches *switches; /* NULL: no #! switches */
	AV *sig;                               /* %SIG as the script's compile left it, where
				   that differs from the interpreter's set-up:
				   pairs of signal number (0 __WARN__, -1
				   __DIE__) and handler (undef: none); NULL: no
				   difference. Kept by perl_run.c */
	SV *settings;                          /* the settings of CGI.pm and CGI::Carp as
				   the script's compile left them
				   (PLXD::Worker::settings_snapshot); NULL:
				   neither was loaded. Kept by perl_run.c */
	unsigned runs;                         /* runs of this compile that were measured */
	uint32_t grew;                         /* one bit per measured run, newest lowest:
				   it left more Perl values alive than it found */
	bool growth_told;                      /* the growth warning was given (once per
				   path and worker, recompiles included) */
	/* What the settings are set to before each run
	 * (PLXD::Worker::settings_plan), made for the modules loaded as
	 * settings_plan_loaded says; NULL: not made yet (perl_globals.c). */
	AV *settings_plan;
	unsigned settings_plan_loaded;
};

struct perl_registry;

/* taint: what a script whose #! line asks for taint checks gets; whether
 * this interpreter checks taint is perl's own (TAINTING_get). */
struct perl_registry *perl_registry_create(pTHX_ enum perl_taint taint);
void perl_registry_destroy(pTHX_ struct perl_registry *reg);

/* What a file looks like now, as the caller saw it. */
struct perl_file_facts {
	uint64_t dev, ino, size;
	int64_t mtime_sec, mtime_nsec;
};

enum perl_fetch {
	PERL_FETCH_COMPILED,  /* compiled now */
	PERL_FETCH_ERROR,     /* did not compile, or its #! line asks for what
				cannot be done: $@ holds why */
	PERL_FETCH_UNREADABLE /* the file could not be read: errno */
};

/* The compiled script for path if it was compiled from the file facts
 * describe, else NULL (compile it). No Perl code runs. */
struct perl_script *perl_registry_lookup(pTHX_ struct perl_registry *reg, const char *path,
		const struct perl_file_facts *facts);

/* Compiles path (again). Must run inside the caller's exit protection (a
 * BEGIN block may call exit); the working directory and %ENV should
 * already be the request's, as BEGIN blocks see them. A failed
 * compilation is not kept. *out is set with COMPILED. app: path is a PSGI
 * application, whose code is compiled as it runs, at file scope. */
enum perl_fetch perl_registry_compile(pTHX_ struct perl_registry *reg, const char *path, int app,
		struct perl_script **out);

/* What path's #! line asks for: 'T' (-T), 't' (-t) or 0 (neither, or
 * the file cannot be read: its compile says why). Reads its first line
 * only. */
char perl_registry_taint_wanted(const char *path);

/* Whether s was compiled from the file facts describe. */
int perl_registry_current(const struct perl_script *s, const struct perl_file_facts *facts);

/* Around a compile and its exit protection: what the compile writes to
 * fd 2 (warnings, a BEGIN block's prints) is held back, then passed on to
 * the log without the "will not stay shared" warnings about the script's
 * own file, which perl_registry_rebind makes untrue. Holding fd 2 rather
 * than installing a __WARN__ hook keeps the filter working when a module
 * the script loads installs a hook of its own (CGI::Carp does). With a
 * prefix, each line passed on starts with it. */
struct perl_stderr_hold {
	int log;  /* fd 2 as it was */
	int held; /* what fd 2 is while held; -1: nothing held */
	int fd;   /* the descriptor STDERR lives on: 2 in a worker, an
		     interpreter thread's own inside plxd (never plxd's 2) */
};
/* Holds what is written to h->fd (set by the caller) until released. */
void perl_registry_hold_stderr(pTHX_ struct perl_stderr_hold *h);
void perl_registry_release_stderr(pTHX_ struct perl_stderr_hold *h, const char *path,
		const char *prefix);

/* After a run of s that did not compile it: grew says whether the
 * interpreter held more Perl values (SVs) once the request was over than
 * when it began, again whether the request before was for s too. Returns,
 * the first time s is found to keep growing (see perl_registry.c), how
 * many of its last PERL_GROWTH_WINDOW runs grew: the caller logs the
 * warning. Else 0. A shift and a few compares per run. */
#define PERL_GROWTH_WINDOW 32
#define PERL_GROWTH_MIN    24
unsigned perl_registry_note_run(struct perl_script *s, int grew, int again);

/* Records, for s just compiled, the file-level lexicals its named subs,
 * formats and END blocks captured (perl_rebind.c), for
 * perl_registry_rebind. */
void perl_registry_captures(pTHX_ struct perl_script *s);

/* Gives the script's named subs the file-level lexicals of the run that
 * just ended's successor (see perl_rebind.c for why). Call after every
 * run. */
void perl_registry_rebind(pTHX_ struct perl_script *s);

#endif
