/* perl_source.c: script paths to package names (one-to-one, unlike
 * mod_perl's Registry), where a script's code ends and its __DATA__
 * begins, and the switches of its #! line. Table-driven. */
#include "perl_source.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct package_case {
	const char *path;
	unsigned generation;
	const char *want;
};

/* clang-format off */
static const struct package_case packages[] = {
	{ "/srv/hello.plx", 1, "PLXD::Script::srv::hello_2eplx" },
	{ "/a_b/c.plx", 1, "PLXD::Script::a_5fb::c_2eplx" },
	{ "/a/b_c.plx", 1, "PLXD::Script::a::b_5fc_2eplx" },
	{ "/cgi-bin/x-y.plx", 1, "PLXD::Script::cgi_2dbin::x_2dy_2eplx" },
	{ "//double//slash.plx", 1, "PLXD::Script::double::slash_2eplx" },
	{ "/9lives/\xc3\xa9.plx", 1, "PLXD::Script::9lives::_c3_a9_2eplx" },
	{ "/a/b.plx", 2, "PLXD::Script::a::b_2eplx_g2" },
	{ "/a/b.plx_g2", 1, "PLXD::Script::a::b_2eplx_5fg2" },
};
/* clang-format on */

/* A name perl takes in `package NAME;`: [A-Za-z0-9_] words joined by
 * "::", at most PERL_SOURCE_PACKAGE_MAX bytes; and one perl_source_package
 * can make: every '_' starts _XX (lower-case hex), or "_h" and 16 hex
 * digits (once, after the readable part), or "_gN" at the end. */
static int well_formed(const char *name)
{
	size_t len = strlen(name);
	if (len > PERL_SOURCE_PACKAGE_MAX || strncmp(name, "PLXD::Script", 12) != 0)
		return 0;
	int hashed = 0;
	for (size_t i = 0; i < len; i++) {
		const char *c = name + i;
		if (*c == ':') {
			if (c[1] != ':' || c[2] == ':' || c[2] == '\0' || hashed)
				return 0;
			i++;
		} else if (*c == '_' && c[1] == 'h' && !hashed) {
			if (strspn(c + 2, "0123456789abcdef") < 16)
				return 0;
			hashed = 1;
			i += 17;
		} else if (*c == '_' && c[1] == 'g') {
			if (c[2] < '1' || c[2] > '9'
					|| strspn(c + 2, "0123456789") != strlen(c + 2))
				return 0;
			return 1;
		} else if (*c == '_') {
			if (strspn(c + 1, "0123456789abcdef") < 2 || hashed)
				return 0;
			i += 2;
		} else if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')
					   || (*c >= '0' && *c <= '9'))
				|| hashed) {
			return 0;
		}
	}
	return 1;
}

/* A path of n bytes: "/", then components of up to component bytes of c,
 * then "/" and tail. */
static char *long_path(size_t n, size_t component, char c, const char *tail)
{
	char *p = malloc(n + 1);
	size_t tl = strlen(tail);
	size_t at = 0;
	while (at + 1 + tl < n) {
		p[at++] = '/';
		for (size_t k = 0; k < component && at + 1 + tl < n; k++)
			p[at++] = c;
	}
	p[at++] = '/';
	memcpy(p + at, tail, tl + 1);
	return p;
}

/* Two packages must not be alike, nor one nested in the other (deleting
 * one would delete the other's symbols with it). */
static int apart(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (strcmp(a, b) == 0)
		return 0;
	if (la < lb && strncmp(a, b, la) == 0 && b[la] == ':')
		return 0;
	if (lb < la && strncmp(a, b, lb) == 0 && a[lb] == ':')
		return 0;
	return 1;
}

static void check_long_names(void)
{
	/* "PLXD::Script::" is 14 bytes: a name of 238 more is at the limit. */
	char at_max[300], past_max[300];
	at_max[0] = past_max[0] = '/';
	memset(at_max + 1, 'a', 238);
	at_max[239] = '\0';
	memset(past_max + 1, 'a', 239);
	past_max[240] = '\0';
	char want[300];
	snprintf(want, sizeof want, "PLXD::Script::%s", at_max + 1);
	char *got = perl_source_package(at_max, 1, 0);
	ok(strlen(want) == PERL_SOURCE_PACKAGE_MAX, "the readable name at the limit is %zu bytes",
			strlen(want));
	is_str(got, want, "a readable name of exactly %d bytes is kept", PERL_SOURCE_PACKAGE_MAX);
	free(got);
	got = perl_source_package(past_max, 1, 0);
	ok(well_formed(got) && strlen(got) == PERL_SOURCE_PACKAGE_MAX
					&& strncmp(got, want, PERL_SOURCE_PACKAGE_MAX - 18) == 0
					&& strstr(got, "_h") == got + PERL_SOURCE_PACKAGE_MAX - 18,
			"one byte more: cut, and ended with a hash (%s)", got);
	free(got);
	got = perl_source_package(at_max, 2, 0);
	ok(well_formed(got) && strlen(got) == PERL_SOURCE_PACKAGE_MAX && strstr(got, "_h")
					&& strcmp(got + strlen(got) - 3, "_g2") == 0,
			"the limit counts the generation's suffix (%s)", got);
	free(got);

	/* Cut wherever the limit falls: inside an escape, at a "::", in the
	 * middle of a UTF-8 character or a byte that is no UTF-8; always a name
	 * perl takes, and no two alike or nested. */
	enum { N = 48 };
	char *paths[N + 8];
	size_t n = 0;
	for (size_t k = 0; k < 24; k++) {
		char tail[64];
		snprintf(tail, sizeof tail, "\xc3\xa9\xe6\x97\xa5%zu.plx", k);
		paths[n++] = long_path(226 + k, 10 + k % 4, k % 2 ? '-' : 'x', tail);
		paths[n++] = long_path(226 + k, 200, k % 2 ? '\xff' : '_', "a b.plx");
	}
	/* Alike once cut: the same first 300 bytes, then x or y. */
	paths[n++] = long_path(300, 250, 'n', "x.plx");
	paths[n++] = long_path(300, 250, 'n', "y.plx");
	/* Alike once escaped and cut: 400 bytes of 0xe9 (_e9 each), then
	 * "_" (_5f) or a byte that is no UTF-8. */
	paths[n++] = long_path(400, 254, '\xe9', "_.plx");
	paths[n++] = long_path(400, 254, '\xe9', "\xff.plx");
	/* PATH_MAX deep: 4095 bytes in folders of 254 and of 1. */
	paths[n++] = long_path(4095, 254, 'd', "x.plx");
	paths[n++] = long_path(4095, 1, '\xff', "x.plx");
	paths[n++] = long_path(4095, 1, '\xff', "y.plx");
	paths[n++] = strdup("/short/one.plx");
	char *pkgs[N + 8];
	int bad = 0, met = 0;
	for (size_t i = 0; i < n; i++) {
		pkgs[i] = perl_source_package(paths[i], 1, 0);
		if (!well_formed(pkgs[i])) {
			bad++;
			printf("# %s is no package name perl takes\n", pkgs[i]);
		}
	}
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			if (!apart(pkgs[i], pkgs[j])) {
				met++;
				printf("# %s and %s meet (%s, %s)\n", paths[i], paths[j], pkgs[i],
						pkgs[j]);
			}
		}
	ok(bad == 0, "%zu long paths: every package a name perl takes", n);
	ok(met == 0, "%zu long paths: no two packages alike, none nested in another", n);
	char *again = perl_source_package(paths[n - 3], 1, 0);
	is_str(again, pkgs[n - 3], "a cut name is the same every time");
	free(again);
	char *clash = perl_source_package(paths[n - 3], 1, 1);
	ok(well_formed(clash) && strcmp(clash, pkgs[n - 3]) != 0,
			"another clash number gives a cut name another hash (%s)", clash);
	free(clash);
	clash = perl_source_package(paths[n - 1], 1, 1);
	is_str(clash, pkgs[n - 1], "a readable name does not depend on it");
	free(clash);
	for (size_t i = 0; i < n; i++) {
		free(paths[i]);
		free(pkgs[i]);
	}
}

/* Paths that would collide under a '_'-for-everything scheme. */
/* clang-format off */
static const char *const distinct[] = {
	"/a_b/c.plx", "/a/b_c.plx", "/a/b/c.plx", "/a.b/c.plx", "/a/b.c.plx", "/a_2fb/c.plx",
	"/a/b_2fc.plx", "/a::b/c.plx",
};
/* clang-format on */

struct split_case {
	const char *name;
	const char *src;
	const char *code; /* expected code part */
	const char *data; /* expected data part, NULL: none */
	int in_pod;
};

/* clang-format off */
static const struct split_case splits[] = {
	{ "no data", "print 1;\n", "print 1;\n", NULL, 0 },
	{ "__DATA__", "print 1;\n__DATA__\nx\ny\n", "print 1;\n", "x\ny\n", 0 },
	{ "__END__", "print 1;\n__END__\ntext", "print 1;\n", "text", 0 },
	{ "marker with trailing text", "1;\n__END__ stuff\nd\n", "1;\n", "d\n", 0 },
	{ "CRLF marker", "1;\r\n__DATA__\r\nd\r\n", "1;\r\n", "d\r\n", 0 },
	{ "not a marker", "__END__X = 1;\n__DATAX__;\n", "__END__X = 1;\n__DATAX__;\n", NULL, 0 },
	{ "indented is code", "  __END__\n", "  __END__\n", NULL, 0 },
	{ "marker at EOF", "1;\n__END__", "1;\n", "", 0 },
	{ "in POD", "1;\n=pod\n\n__END__\n\n=cut\n2;\n__END__\nd", "1;\n=pod\n\n__END__\n\n=cut\n2;\n",
	  "d", 0 },
	{ "=cut first line stays POD", "1;\n=cut\n__END__\n", "1;\n=cut\n__END__\n", NULL, 1 },
	{ "POD left open", "1;\n=head1 X\n", "1;\n=head1 X\n", NULL, 1 },
	{ "here-doc", "print <<EOT;\n__END__\nEOT\n__END__\nd", "print <<EOT;\n__END__\nEOT\n", "d", 0 },
	{ "quoted here-doc", "print << \"A B\";\n__DATA__\nA B\n", "print << \"A B\";\n__DATA__\nA B\n",
	  NULL, 0 },
	{ "indented here-doc", "print <<~E;\n  __END__\n  E\n__END__\n", "print <<~E;\n  __END__\n  E\n",
	  "", 0 },
	{ "two here-docs", "f(<<A, <<'B');\na\nA\n__END__\nB\n__END__\nd",
	  "f(<<A, <<'B');\na\nA\n__END__\nB\n", "d", 0 },
	{ "shift is no here-doc", "my $x = 1 << 2;\n__END__\nd", "my $x = 1 << 2;\n", "d", 0 },
	{ "comment is no here-doc", "# <<EOT\n__END__\nd", "# <<EOT\n", "d", 0 },
	{ "after code on its line", "sub { [200, [], ['x']] }; __END__\nd", "sub { [200, [], ['x']] }; ",
	  "d", 0 },
	{ "after a brace, __DATA__", "sub { 1 } __DATA__ rest\nd\n", "sub { 1 } ", "d\n", 0 },
	{ "after code, at EOF", "1;__END__", "1;", "", 0 },
	{ "in a string", "print '; __END__';\n", "print '; __END__';\n", NULL, 0 },
	{ "in a string, escaped quote", "print \"\\\"; __END__\";\n", "print \"\\\"; __END__\";\n", NULL,
	  0 },
	{ "in a comment", "1; # ; __END__\n", "1; # ; __END__\n", NULL, 0 },
	{ "in a quote-like", "print q{; __END__};\n", "print q{; __END__};\n", NULL, 0 },
	{ "in a regex", "/; __END__/;\n", "/; __END__/;\n", NULL, 0 },
	{ "a string open past the line", "print \"a\n; __END__\";\n", "print \"a\n; __END__\";\n", NULL, 0 },
	{ "after a here-doc's start", "print <<X; __END__\nX\n", "print <<X; __END__\nX\n", NULL, 0 },
	{ "a quote-like open past the line", "print q{\n; __END__};\n", "print q{\n; __END__};\n", NULL,
	  0 },
	{ "not after ; or }", "f(1) __END__\n", "f(1) __END__\n", NULL, 0 },
	{ "a longer word", "1; __END__X;\n", "1; __END__X;\n", NULL, 0 },
};
/* clang-format on */

/* A #! line and what perl_source_shebang makes of it, written out by
 * describe(): "" for nothing to do. */
struct shebang_case {
	const char *src;
	const char *want;
};

/* clang-format off */
static const struct shebang_case shebangs[] = {
	{ "print 1;\n", "" },
	{ "#!/usr/bin/perl\nprint 1;\n", "" },
	{ "#!/usr/bin/perl -- -w\n", "" },
	{ "#!/usr/bin/perl -w\n", "w=on" },
	{ "#!/usr/bin/perl -w # comment -T\n", "w=on" },
	{ "  #!/usr/bin/perl -w\n", "w=on" },
	{ "\xef\xbb\xbf#!/usr/bin/perl -w\n", "w=on" },
	{ "#!/usr/bin/env perl -w\n", "w=on" },
	{ "#!/usr/local/bin/perl5.36 -W\n", "w=all" },
	{ "#!/usr/bin/perl -W -w\n", "w=all" },
	{ "#!/usr/bin/perl -X -W\n", "w=all" },
	{ "#!/usr/bin/perl -wX\n", "w=none" },
	{ "#!/usr/bin/perl -w\r\n", "w=on" },
	{ "#!/usr/bin/perl -wT\n", "w=on T" },
	{ "#!/usr/bin/perl -t\n", "t" },
	{ "#!/usr/bin/perl -tT\n", "T" },
	{ "#!/usr/bin/perl -0\n", "rs=00" },
	{ "#!/usr/bin/perl -00\n", "rs=" },
	{ "#!/usr/bin/perl -0777\n", "rs=undef" },
	{ "#!/usr/bin/perl -012\n", "rs=0a" },
	{ "#!/usr/bin/perl -g\n", "rs=undef" },
	{ "#!/usr/bin/perl -0x41\n", "rs=00 refused=Can't emulate -x on #! line" },
	{ "#!/usr/bin/perl -l\n", "ors=0a l" },
	{ "#!/usr/bin/perl -l0\n", "ors=00 l" },
	{ "#!/usr/bin/perl -l012 -w\n", "w=on ors=0a l" },
	{ "#!/usr/bin/perl -00 -l\n", "rs= ors=0a0a l" },
	{ "#!/usr/bin/perl -0777 -l\n", "rs=undef ors=undef l" },
	{ "#!/usr/bin/perl -l -0\n", "rs=00 ors=0a l" },
	{ "#!/usr/bin/perl -n\n", "n" },
	{ "#!/usr/bin/perl -pl\n", "ors=0a p l" },
	{ "#!/usr/bin/perl -a\n", "n a" },
	{ "#!/usr/bin/perl -F: -w\n", "w=on n a F=:" },
	{ "#!/usr/bin/perl -F/,/\n", "n a F=/,/" },
	{ "#!/usr/bin/perl -i.bak\n", "i=.bak" },
	{ "#!/usr/bin/perl -i\n", "i=" },
	{ "#!/usr/bin/perl -Ilib -I /opt/x -w\n", "w=on I=lib|/opt/x" },
	{ "#!/usr/bin/perl -I /a /b -w\n", "w=on I=/a /b" },
	{ "#!/usr/bin/perl -I\n", "refused=No directory specified for -I" },
	{ "#!/usr/bin/perl -c\n", "c" },
	{ "#!/usr/bin/perl -U -s\n", "U" },
	{ "#!/usr/bin/perl -D -w\n", "w=on D" },
	{ "#!/usr/bin/perl -Dtls\n", "D" },
	{ "#!/usr/bin/perl -C\n", "" },
	{ "#!/usr/bin/perl -C0 -w\n", "w=on" },
	{ "#!/usr/bin/perl -CSD\n", "refused=Too late for \"-CSD\" option" },
	{ "#!/usr/bin/perl -C7\n", "refused=Too late for \"-C7\" option" },
	{ "#!/usr/bin/perl -Cq\n", "refused=Unknown Unicode option letter 'q'" },
	{ "#!/usr/bin/perl -Mstrict\n", "refused=Too late for \"-Mstrict\" option" },
	{ "#!/usr/bin/perl -w -mPOSIX\n", "w=on refused=Too late for \"-mPOSIX\" option" },
	{ "#!/usr/bin/perl -d\n", "refused=-d runs the Perl debugger, which needs a terminal" },
	{ "#!/usr/bin/perl -u\n", "refused=-u dumps core after compiling the script" },
	{ "#!/usr/bin/perl -v\n", "refused=-v prints perl's version instead of running the script" },
	{ "#!/usr/bin/perl -h\n", "refused=-h prints perl's usage instead of running the script" },
	{ "#!/usr/bin/perl -e\n", "refused=Can't emulate -e on #! line" },
	{ "#!/usr/bin/perl -x\n", "refused=Can't emulate -x on #! line" },
	{ "#!/usr/bin/perl -S\n", "refused=Can't emulate -S on #! line" },
	{ "#!/usr/bin/perl -V\n", "refused=Can't emulate -V on #! line" },
	{ "#!/usr/bin/perl -q\n", "refused=Unrecognized switch: -q  (-h will show valid options)" },
	{ "#!/bin/sh\necho\n", "refused=its #! line names another interpreter (/bin/sh)" },
	{ "#!\n", "" },
	{ "#!/bin/indir -x\n", "" },
	{ "#!/usr/bin/perl -w", "w=on" },
};
/* clang-format on */

static void separator(char *out, size_t cap, const char *name, const struct perl_separator *s)
{
	size_t n = strlen(out);
	if (!s->set)
		return;
	if (s->undef) {
		snprintf(out + n, cap - n, " %s=undef", name);
		return;
	}
	n += (size_t)snprintf(out + n, cap - n, " %s=", name);
	for (size_t i = 0; i < s->len; i++)
		n += (size_t)snprintf(out + n, cap - n, "%02x", (unsigned char)s->bytes[i]);
}

static void describe(const struct perl_shebang *sb, char *out, size_t cap)
{
	static const char *const warn[] = { "", " w=on", " w=all", " w=none" };
	snprintf(out, cap, "%s", warn[sb->warnings]);
	separator(out, cap, "rs", &sb->rs);
	separator(out, cap, "ors", &sb->ors);
	size_t n = strlen(out);
	n += (size_t)snprintf(out + n, cap - n, "%s%s%s%s", sb->minus_n ? " n" : "",
			sb->minus_p ? " p" : "", sb->minus_l ? " l" : "", sb->minus_a ? " a" : "");
	if (sb->split)
		n += (size_t)snprintf(out + n, cap - n, " F=%s", sb->split);
	if (sb->inplace)
		n += (size_t)snprintf(out + n, cap - n, " i=%s", sb->inplace);
	for (size_t i = 0; sb->inc && sb->inc[i]; i++)
		n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? "|" : " I=", sb->inc[i]);
	n += (size_t)snprintf(out + n, cap - n, "%s%s%s", sb->check_only ? " c" : "",
			sb->unsafe ? " U" : "", sb->debugging ? " D" : "");
	if (sb->taint)
		n += (size_t)snprintf(out + n, cap - n, " %c", sb->taint);
	if (sb->refused)
		snprintf(out + n, cap - n, " refused=%s", sb->refused);
}

/* perl_source_open: a file and a folder deeper than PATH_MAX bytes below
 * /, which open(2) alone refuses, opened by their absolute paths; and a
 * missing one there still fails with ENOENT. The tree is made with mkdirat
 * from a folder's descriptor, as no path to it could be given. */
static void check_long_paths(void)
{
	char top[] = "/tmp/plxd-test-long-XXXXXX";
	if (!mkdtemp(top)) {
		ok(0, "mkdtemp: %s", strerror(errno));
		return;
	}
	char comp[201];
	memset(comp, 'd', 200);
	comp[200] = '\0';
	size_t cap = PATH_MAX * 2;
	char *path = malloc(cap);
	snprintf(path, cap, "%s", top);
	int dir = open(top, O_PATH | O_DIRECTORY);
	int levels = 0;
	while (strlen(path) < PATH_MAX + 300 && dir >= 0) {
		if (mkdirat(dir, comp, 0700) < 0)
			break;
		int next = openat(dir, comp, O_PATH | O_DIRECTORY);
		close(dir);
		dir = next;
		strcat(path, "/");
		strcat(path, comp);
		levels++;
	}
	int fd = dir >= 0 ? openat(dir, "f", O_WRONLY | O_CREAT, 0600) : -1;
	ok(fd >= 0 && write(fd, "x", 1) == 1, "a folder %zu bytes deep, with a file", strlen(path));
	if (fd >= 0)
		close(fd);
	size_t dir_len = strlen(path);
	strcat(path, "/f");
	errno = 0;
	ok(open(path, O_RDONLY) < 0 && errno == ENAMETOOLONG, "open(2) alone refuses its path");
	fd = perl_source_open(path, O_RDONLY | O_CLOEXEC);
	char c = 0;
	ok(fd >= 0 && read(fd, &c, 1) == 1 && c == 'x', "perl_source_open reads the file");
	if (fd >= 0)
		close(fd);
	path[dir_len] = '\0';
	int here = open(".", O_PATH | O_DIRECTORY);
	fd = perl_source_open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int in = fd >= 0 && fchdir(fd) == 0 && access("f", R_OK) == 0;
	ok(in, "... and opens its folder, which fchdir enters");
	if (fd >= 0)
		close(fd);
	if (here >= 0 && fchdir(here) == 0)
		close(here);
	strcat(path, "/missing/f");
	errno = 0;
	ok(perl_source_open(path, O_RDONLY) < 0 && errno == ENOENT,
			"a missing file that deep: ENOENT");
	/* Remove the tree from the bottom, a level up at a time. */
	if (dir >= 0) {
		unlinkat(dir, "f", 0);
		for (int i = 0; i < levels; i++) {
			int up = openat(dir, "..", O_PATH | O_DIRECTORY);
			close(dir);
			dir = up;
			if (dir < 0 || unlinkat(dir, comp, AT_REMOVEDIR) < 0)
				break;
		}
		if (dir >= 0)
			close(dir);
	}
	ok(rmdir(top) == 0, "the tree is removed");
	free(path);
}

int main(void)
{
	for (size_t i = 0; i < sizeof packages / sizeof packages[0]; i++) {
		char *got = perl_source_package(packages[i].path, packages[i].generation, 0);
		is_str(got, packages[i].want, "package of %s (generation %u)", packages[i].path,
				packages[i].generation);
		free(got);
	}
	size_t n = sizeof distinct / sizeof distinct[0];
	int collisions = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			char *a = perl_source_package(distinct[i], 1, 0);
			char *b = perl_source_package(distinct[j], 1, 0);
			if (strcmp(a, b) == 0) {
				collisions++;
				printf("# %s and %s both give %s\n", distinct[i], distinct[j], a);
			}
			free(a);
			free(b);
		}
	ok(collisions == 0, "%zu similar paths give %zu different packages", n, n);
	check_long_names();
	check_long_paths();

	for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
		const struct split_case *c = &splits[i];
		size_t len = strlen(c->src), data_at;
		int has_data, in_pod;
		size_t code_len = perl_source_split(c->src, len, &data_at, &has_data, &in_pod);
		ok(code_len == strlen(c->code) && memcmp(c->src, c->code, code_len) == 0,
				"%s: code part (%zu bytes)", c->name, code_len);
		ok(has_data == (c->data != NULL), "%s: data %s", c->name,
				c->data ? "found" : "absent");
		if (c->data)
			ok(len - data_at == strlen(c->data)
							&& memcmp(c->src + data_at, c->data,
									   len - data_at)
									== 0,
					"%s: data part", c->name);
		ok(in_pod == c->in_pod, "%s: ends %sinside POD", c->name, c->in_pod ? "" : "not ");
	}

	for (size_t i = 0; i < sizeof shebangs / sizeof shebangs[0]; i++) {
		const struct shebang_case *c = &shebangs[i];
		size_t len = strlen(c->src);
		struct perl_shebang sb;
		int any = perl_source_shebang(c->src, len, &sb);
		char got[512];
		describe(&sb, got, sizeof got);
		const char *g = got[0] == ' ' ? got + 1 : got;
		ok(any == (c->want[0] != '\0'), "#! %.*s: %s", (int)strcspn(c->src, "\n"), c->src,
				any ? "switches" : "nothing to do");
		is_str(g, c->want, "#! %.*s", (int)strcspn(c->src, "\n"), c->src);
		perl_source_shebang_free(&sb);
	}
	return done_testing();
}
