/* The script registry of one interpreter: each script compiled once into a
 * package of its own, derived from its file name without collisions, as
 * the body of a sub; recompiled when the file changes. Part of the worker's
 * Perl runtime (perl_interp.c drives it). */
#ifndef PLXD_PERL_REGISTRY_H
#define PLXD_PERL_REGISTRY_H

#include <EXTERN.h>
#include <perl.h>

#include <stddef.h>
#include <stdint.h>

#include "perl_source.h"

/* A named sub (or format) of the script that captured one of the script's
 * file-level lexicals: rebound after every run (see perl_registry.c). */
struct perl_capture {
	CV *inner;
	PADOFFSET inner_ix;
	CV *outer;
	PADOFFSET outer_ix;
};

struct perl_script {
	char *path;
	uint64_t dev, ino, size;
	int64_t mtime_sec, mtime_nsec;
	unsigned generation;    /* compiles of this path so far */
	char *package;          /* "PLXD::Script::..." */
	CV *code;               /* the script as a sub (owned reference) */
	AV *ends;               /* its own END blocks, newest first; NULL: none */
	SV *data;               /* text after __DATA__ or __END__; NULL: none */
	GV *data_gv;            /* PACKAGE::DATA when data is set */
	AV *inc;                /* @INC as compiling left it, when that differed
				   from the interpreter's; else NULL */
	struct perl_capture *captures;
	size_t ncaptures;
};

struct perl_registry;

struct perl_registry *perl_registry_create(pTHX);
void perl_registry_destroy(pTHX_ struct perl_registry *reg);

/* What a file looks like now, as the caller saw it. */
struct perl_file_facts {
	uint64_t dev, ino, size;
	int64_t mtime_sec, mtime_nsec;
};

enum perl_fetch {
	PERL_FETCH_CACHED,   /* compiled before, file unchanged */
	PERL_FETCH_COMPILED, /* compiled now */
	PERL_FETCH_ERROR,    /* did not compile: $@ holds why */
	PERL_FETCH_UNREADABLE /* the file could not be read: errno */
};

/* The compiled script for path, compiling it when it is new or facts
 * differ from its last compilation. Must run inside the caller's exit
 * protection (a BEGIN block may call exit); the working directory and %ENV
 * should already be the request's, as BEGIN blocks see them. A failed
 * compilation is not kept. *out is set with CACHED and COMPILED. */
enum perl_fetch perl_registry_fetch(pTHX_ struct perl_registry *reg, const char *path,
		const struct perl_file_facts *facts, struct perl_script **out);

/* Gives the script's named subs the file-level lexicals of the run that
 * just ended's successor (see perl_registry.c for why). Call after every
 * run. */
void perl_registry_rebind(pTHX_ struct perl_script *s);

#endif
