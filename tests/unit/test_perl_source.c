/* perl_source.c: script paths to package names (one-to-one, unlike
 * mod_perl's Registry), where a script's code ends and its __DATA__
 * begins, and the switches of its #! line. Table-driven. */
#include "perl_source.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(void)
{
	for (size_t i = 0; i < sizeof packages / sizeof packages[0]; i++) {
		char *got = perl_source_package(packages[i].path, packages[i].generation);
		is_str(got, packages[i].want, "package of %s (generation %u)", packages[i].path,
				packages[i].generation);
		free(got);
	}
	size_t n = sizeof distinct / sizeof distinct[0];
	int collisions = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			char *a = perl_source_package(distinct[i], 1);
			char *b = perl_source_package(distinct[j], 1);
			if (strcmp(a, b) == 0) {
				collisions++;
				printf("# %s and %s both give %s\n", distinct[i], distinct[j], a);
			}
			free(a);
			free(b);
		}
	ok(collisions == 0, "%zu similar paths give %zu different packages", n, n);

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
