/* path_from_target: decoding, normalising and refusing request targets. */
#include "path.h"
#include "tap.h"

struct row {
	const char *target;
	int status;
	const char *path;
	const char *query;
};

/* clang-format off */
static const struct row rows[] = {
	{ "/", 0, "/", "" },
	{ "/hello.pl", 0, "/hello.pl", "" },
	{ "/a.pl?x=1&y=%20", 0, "/a.pl", "x=1&y=%20" },
	{ "/a.pl/x/y?q", 0, "/a.pl/x/y", "q" },
	{ "//x.pl", 0, "/x.pl", "" },
	{ "/./x.pl", 0, "/x.pl", "" },
	{ "/y/../x.pl", 0, "/x.pl", "" },
	{ "/dir/", 0, "/dir/", "" },
	{ "/dir/.", 0, "/dir/", "" },
	{ "/dir/sub/..", 0, "/dir/", "" },
	{ "/a//b///c", 0, "/a/b/c", "" },
	{ "/x.pl%20", 0, "/x.pl ", "" },
	{ "/%7euser/a%2Bb", 0, "/~user/a+b", "" },
	{ "/%2e%2e/etc/passwd", 400, NULL, NULL },
	{ "/%2E%2e/", 400, NULL, NULL },
	{ "/..", 400, NULL, NULL },
	{ "/a/../../etc/passwd", 400, NULL, NULL },
	{ "/%252e%252e/x", 0, "/%2e%2e/x", "" },
	{ "/..%2fetc", 400, NULL, NULL },
	{ "/a%2fb", 400, NULL, NULL },
	{ "/x.pl%00.txt", 400, NULL, NULL },
	{ "/bad%zz", 400, NULL, NULL },
	{ "/bad%4", 400, NULL, NULL },
	{ "/bad%", 400, NULL, NULL },
	{ "/..\\x", 0, "/..\\x", "" },
	{ "/%c0%ae%c0%ae/x", 0, "/\xc0\xae\xc0\xae/x", "" },
	{ "http://example.com/a/b?c", 0, "/a/b", "c" },
	{ "HTTPS://example.com:8443/../x", 400, NULL, NULL },
	{ "http://example.com", 0, "/", "" },
	{ "http://example.com?q=1", 0, "/", "q=1" },
	{ "*", 400, NULL, NULL },
	{ "x.pl", 400, NULL, NULL },
	{ "", 400, NULL, NULL },
	{ "/a?b?c", 0, "/a", "b?c" },
	{ "/.?x", 0, "/", "x" },
	{ "/a/%2e/b", 0, "/a/b", "" },
	{ "/a/%2e%2e/b", 0, "/b", "" },
	{ "/%2e", 0, "/", "" },
	{ "/%2e%2e", 400, NULL, NULL },
	{ "/x%2epl", 0, "/x.pl", "" },
	{ "/x.pl%3f.txt", 0, "/x.pl?.txt", "" },
	{ "/x.pl%23", 0, "/x.pl#", "" },
	{ "/x.pl::$DATA", 0, "/x.pl::$DATA", "" },
	{ "/x.pl;.txt", 0, "/x.pl;.txt", "" },
	{ "/..%5cx", 0, "/..\\x", "" },
	{ "/...", 0, "/...", "" },
	{ "/a/b/..", 0, "/a/", "" },
	{ "/a/b/../", 0, "/a/", "" },
	{ "/sub/%2e%2e/%2e%2e/x", 400, NULL, NULL },
	{ "/%00", 400, NULL, NULL },
	{ "/%2F", 400, NULL, NULL },
	{ "http://h", 0, "/", "" },
	{ "http:/x", 400, NULL, NULL },
	{ "ftp://h/x", 400, NULL, NULL },
};
/* clang-format on */

int main(void)
{
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		const struct row *r = &rows[i];
		char path[256];
		const char *query = NULL, *why = NULL;
		int status = path_from_target(r->target, path, sizeof path, &query, &why);
		ok(status == r->status, "'%s' gives status %d (got %d%s%s)", r->target, r->status,
				status, why ? ": " : "", why ? why : "");
		if (status == 0 && r->status == 0) {
			is_str(path, r->path, "'%s' path", r->target);
			is_str(query, r->query, "'%s' query", r->target);
		}
	}
	char tiny[4];
	const char *query, *why;
	ok(path_from_target("/abcdef", tiny, sizeof tiny, &query, &why) == 400,
			"a path longer than the buffer is refused");
	return done_testing();
}
