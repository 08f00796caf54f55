/* What the Perl registry needs to know of a script's text and name, in
 * plain C (no perl.h) so that it can be unit-tested alone: the package a
 * script compiles into, and where its code ends and its __DATA__ begins. */
#ifndef PLXD_PERL_SOURCE_H
#define PLXD_PERL_SOURCE_H

#include <stddef.h>

/* The package for a script path: "PLXD::Script" then "::" and each path
 * component with every byte outside [A-Za-z0-9] written as _XX (lower-case
 * hex). '_' is escaped too, so the mapping is one-to-one: "/a_b/c.plx" and
 * "/a/b_c.plx" get different names (mod_perl's Registry gives both the
 * same). With generation > 1 (the script was compiled again after a
 * change), "_gN" follows, which no path can produce. Caller frees
 * (xmalloc). */
char *perl_source_package(const char *path, unsigned generation);

/* Splits a script's text at its __END__ or __DATA__ line, which ends the
 * code; the lines after it are what the DATA handle reads. Lines inside
 * POD and here-documents do not count. Returns the length of the code;
 * *data_at is the offset of the data (len when there is none), *has_data
 * whether there was such a line, *in_pod whether the code ends inside
 * POD (the caller must then close it before adding code after it). */
size_t perl_source_split(const char *src, size_t len, size_t *data_at, int *has_data,
		int *in_pod);

#endif
