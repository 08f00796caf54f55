/* deny_check, deny_name and deny_path: the [static] deny patterns, one path
 * segment at a time, in any case, with "!" exceptions. */
#include "deny.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

/* [static] deny's default (handlers/static/static.c). */
#define DEFAULT ".* !.well-known *~ #*# *.bak *.old *.orig *.rej *.save *.swo *.swp *.tmp"

struct row {
	const char *name;
	int denied;
};

/* clang-format off */
static const struct row defaults[] = {
	{ ".htpasswd", 1 }, { ".htaccess", 1 }, { ".env", 1 }, { ".git", 1 }, { ".svn", 1 },
	{ ".DS_Store", 1 }, { ".x.pl", 1 }, { ".x.pl.swp", 1 }, { ".well-known", 0 },
	{ ".WELL-KNOWN", 0 }, { ".well-known2", 1 }, { "x.pl~", 1 }, { "~", 1 }, { "#x.pl#", 1 },
	{ "##", 1 }, { "#x.pl", 0 }, { "x#", 0 }, { "x.pl.bak", 1 }, { "X.PL.BAK", 1 },
	{ "x.bak.txt", 0 }, { "bak", 0 }, { "x.old", 1 }, { "old.txt", 0 }, { "x.orig", 1 },
	{ "x.rej", 1 }, { "x.save", 1 }, { "x.swo", 1 }, { "x.swp", 1 }, { "x.tmp", 1 },
	{ "a~b", 0 }, { "x.pl", 0 }, { "index.html", 0 }, { "a.", 0 },
};
/* clang-format on */

int main(void)
{
	ok(deny_check(DEFAULT) == NULL, "the default list is valid");
	ok(deny_check("") == NULL && deny_check("  \t ") == NULL, "an empty list is valid");
	ok(deny_check("a/b") != NULL, "a pattern with '/' is refused");
	ok(deny_check(".* !") != NULL, "'!' alone is refused");
	ok(deny_check("!a *.[") == NULL, "other patterns are fnmatch's business");

	struct deny_list *d = deny_create(DEFAULT);
	for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
		const struct row *r = &defaults[i];
		ok(deny_name(d, r->name, strlen(r->name)) == r->denied, "default: %s %s", r->name,
				r->denied ? "denied" : "served");
	}
	ok(!deny_name(d, "", 0), "an empty name is not denied");
	ok(deny_name(d, ".envX", 4), "only len bytes of the name count");

	ok(deny_path(d, "/.git/config", 12), "a hidden folder denies what is in it");
	ok(deny_path(d, "/a/b/.htpasswd", 14), "a hidden file in a folder");
	ok(!deny_path(d, "/a/b/c.txt", 10), "a plain path");
	ok(!deny_path(d, "/", 1) && !deny_path(d, "", 0), "the root");
	ok(!deny_path(d, "/.well-known/acme-challenge/tok", 31), "/.well-known/ is served");
	ok(deny_path(d, "/.well-known/.htaccess", 22), "... but not what is hidden in it");
	ok(!deny_path(d, "/x.pl/.hidden", 5), "only the bytes asked about: /x.pl");
	ok(deny_path(d, "/a//b~", 6), "empty segments are skipped");

	/* Exceptions win wherever they are in the list. */
	struct deny_list *e = deny_create("!keep.* *.secret");
	ok(deny_name(e, "a.secret", 8) && !deny_name(e, "keep.secret", 11),
			"an exception before the pattern it excepts from");
	deny_destroy(e);

	/* A name longer than any file name is matched whole. */
	size_t long_len = 5000;
	char *long_name = malloc(long_len + 1);
	memset(long_name, 'a', long_len);
	long_name[long_len - 1] = '~';
	long_name[long_len] = '\0';
	ok(deny_name(d, long_name, long_len), "a 5000-byte name ending in ~");
	long_name[0] = '/';
	ok(deny_path(d, long_name, long_len), "... as a path segment");
	free(long_name);
	deny_destroy(d);

	struct deny_list *empty = deny_create("");
	ok(!deny_name(empty, ".htpasswd", 9), "an empty list denies nothing");
	deny_destroy(empty);
	ok(!deny_name(NULL, ".env", 4) && !deny_path(NULL, "/.env", 5), "no list denies nothing");
	deny_destroy(NULL);
	return done_testing();
}
