/* What the Perl registry needs to know of a script's text and name, in
 * plain C (no perl.h) so that it can be unit-tested alone: the package a
 * script compiles into, where its code ends and its __DATA__ begins, and
 * what the switches on its #! line ask for. */
#ifndef PLXD_PERL_SOURCE_H
#define PLXD_PERL_SOURCE_H

#include <stddef.h>

/* The package for a script path: "PLXD::Script" then "::" and each path
 * component with every byte outside [A-Za-z0-9] written as _XX (lower-case
 * hex). '_' is escaped too, so the mapping is one-to-one: "/a_b/c.plx" and
 * "/a/b_c.plx" get different names (mod_perl's Registry gives both the
 * same). With generation > 1 (the script was compiled again after a
 * change), "_gN" follows, which no path can produce.
 *
 * perl refuses a package name longer than PERL_SOURCE_PACKAGE_MAX bytes
 * ("Identifier too long": toke.c scans it into its 256-byte token buffer).
 * A longer name is cut there, minus room for "_h" and 16 hex digits of a
 * 64-bit hash of the whole path and clash (and "_gN"), which then end it:
 * no readable name holds "_h", so a cut name never equals, contains as a
 * package nested in it, or is nested in, a readable one. Two paths whose
 * cut names and hashes are alike could still meet; the caller, which knows
 * the packages in use, then asks again with clash 1, 2, ... (clash changes
 * only a cut name's hash). Caller frees (xmalloc). */
#define PERL_SOURCE_PACKAGE_MAX 252
char *perl_source_package(const char *path, unsigned generation, unsigned clash);

/* open(path, flags) for a path of any length: a script, or its folder
 * (O_PATH | O_DIRECTORY, for fchdir), may lie deeper than PATH_MAX bytes
 * below /, where open(2) alone refuses it. A descriptor, or -1 with
 * errno. */
int perl_source_open(const char *path, int flags);

/* Splits a script's text at its __END__ or __DATA__ line, which ends the
 * code; the lines after it are what the DATA handle reads. Lines inside
 * POD and here-documents do not count. Returns the length of the code;
 * *data_at is the offset of the data (len when there is none), *has_data
 * whether there was such a line, *in_pod whether the code ends inside
 * POD (the caller must then close it before adding code after it). */
size_t perl_source_split(const char *src, size_t len, size_t *data_at, int *has_data, int *in_pod);

/* The warnings a #! line asks for, as perl's -w, -W and -X set them (a
 * later switch overrides an earlier one, except that -w changes nothing
 * after -W or -X). */
enum perl_warn_switch {
	PERL_WARN_DEFAULT,
	PERL_WARN_ON,  /* -w: $^W, for code without `use warnings` */
	PERL_WARN_ALL, /* -W: every warning, whatever `no warnings` says */
	PERL_WARN_NONE /* -X: no warning at all, whatever `use warnings` says */
};

/* $/ or $\ as a switch sets it. */
struct perl_separator {
	int set;    /* the switch was given */
	int undef;  /* undef (-0777, -g; -l after them) */
	size_t len; /* 0 to 2 bytes: "" is paragraph mode for $/ */
	char bytes[2];
};

/* What a script's #! line asks of perl, read the way perl reads it when it
 * runs the file (`perl FILE`, which is how the CGI handler runs a .pl):
 * the line counts when it starts with #! and names perl; the switches
 * after the first word holding "perl" are parsed as perl's moreswitches()
 * does. */
struct perl_shebang {
	enum perl_warn_switch warnings;
	struct perl_separator rs;  /* -0[octal], -g */
	struct perl_separator ors; /* -l[octal] */
	int minus_n, minus_p;      /* the script is the body of perl's
				       LINE: while (<>) { ... } loop */
	int minus_l;               /* -l: that loop chomps */
	int minus_a;               /* autosplit into @F (-a, -F) */
	char *split;               /* -F's pattern, or NULL */
	char *inplace;             /* -i's extension ("" for none), or NULL */
	char **inc;                /* -I folders in order, NULL-terminated; NULL: none */
	int check_only;            /* -c */
	int unsafe;                /* -U */
	int debugging;             /* -D: perl only warns (it was built without
				       -DDEBUGGING) */
	char taint;                /* 'T' or 't' when asked for, else 0: the caller
				       decides, as only it knows whether its
				       interpreter checks taint */
	char *refused;             /* why perl would not run the script this
				       way, in perl's words where perl has
				       some, without " at FILE line 1."; NULL:
				       it would */
};

/* Reads the #! line at the start of src. Returns 1 when it holds
 * switches (or is refused), filling *sb (free it with
 * perl_source_shebang_free); 0 when there is nothing to do, *sb then being
 * empty. */
int perl_source_shebang(const char *src, size_t len, struct perl_shebang *sb);
void perl_source_shebang_free(struct perl_shebang *sb);

/* What a script with -T or -t on its #! line gets ([perl] taint). */
enum perl_taint {
	PERL_TAINT_HONOUR, /* it runs in an interpreter started with taint checks
			      on, made when first needed (one per worker
			      process or interpreter thread, beside the plain
			      one), as perl -T runs it */
	PERL_TAINT_WARN,   /* it runs without them, after a line in the log */
	PERL_TAINT_REFUSE  /* it does not run: 500, and a line in the log */
};

#endif
