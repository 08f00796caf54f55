/* perl_source.c: script paths to package names (one-to-one, unlike
 * mod_perl's Registry), and where a script's code ends and its __DATA__
 * begins. Table-driven. */
#include "perl_source.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

struct package_case {
	const char *path;
	unsigned generation;
	const char *want;
};

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

/* Paths that would collide under a '_'-for-everything scheme. */
static const char *const distinct[] = {
	"/a_b/c.plx", "/a/b_c.plx", "/a/b/c.plx", "/a.b/c.plx", "/a/b.c.plx", "/a_2fb/c.plx",
	"/a/b_2fc.plx", "/a::b/c.plx",
};

struct split_case {
	const char *name;
	const char *src;
	const char *code;  /* expected code part */
	const char *data;  /* expected data part, NULL: none */
	int in_pod;
};

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
			ok(len - data_at == strlen(c->data) &&
					memcmp(c->src + data_at, c->data, len - data_at) == 0,
					"%s: data part", c->name);
		ok(in_pod == c->in_pod, "%s: ends %sinside POD", c->name, c->in_pod ? "" : "not ");
	}
	return done_testing();
}
