/* mime_load and mime_lookup: a mime.types file, case, multi-part
 * extensions, first line wins, and the built-in table when the file is
 * missing. */
#include "mime.h"
#include "tap.h"

#include <stdlib.h>
#include <unistd.h>

int main(void)
{
	char file[] = "/tmp/plxd-test-mime-XXXXXX";
	int fd = mkstemp(file);
	static const char text[] = "# comment line\n"
				   "\n"
				   "text/html\t\thtml htm\n"
				   "application/x-first\tdup\n"
				   "application/x-second\tdup other\n"
				   "application/gzip gz\n"
				   "application/x-tar-gz tar.gz   # trailing comment\n"
				   "application/no-extensions\n"
				   "not-a-type x\n"
				   "text/plain txt\r\n";
	if (fd < 0 || write(fd, text, sizeof text - 1) != (ssize_t)(sizeof text - 1))
		abort();
	close(fd);

	char err[512];
	struct mime_table *t = mime_load(file, err, sizeof err);
	is_str(err, "", "no warning for a readable file");
	is_str(mime_lookup(t, "index.html"), "text/html", "html");
	is_str(mime_lookup(t, "PAGE.HTM"), "text/html", "extensions match without regard to case");
	is_str(mime_lookup(t, "a.dup"), "application/x-first",
			"the first line naming an extension wins");
	is_str(mime_lookup(t, "a.other"), "application/x-second",
			"later extensions of that line stay");
	is_str(mime_lookup(t, "x.tar.gz"), "application/x-tar-gz", "the longest extension first");
	is_str(mime_lookup(t, "x.gz"), "application/gzip", "then shorter ones");
	is_str(mime_lookup(t, "x.y.gz"), "application/gzip",
			"an unknown middle extension is skipped");
	is_str(mime_lookup(t, "notes.txt"), "text/plain", "a CRLF line");
	ok(mime_lookup(t, "x.x") == NULL, "a line without a slash in its type is ignored");
	ok(mime_lookup(t, "README") == NULL, "no extension: unknown");
	ok(mime_lookup(t, ".html") == NULL, "a leading dot is not an extension");
	ok(mime_lookup(t, "x.") == NULL, "an empty extension");
	ok(mime_lookup(t, "x.comment") == NULL, "comments are not types");
	ok(mime_count(t) == 7, "7 extensions, duplicates dropped (got %zu)", mime_count(t));
	mime_free(t);
	unlink(file);

	t = mime_load(file, err, sizeof err);
	ok(err[0] != '\0', "a missing file is reported: %s", err);
	is_str(mime_lookup(t, "style.css"), "text/css", "the built-in table has css");
	is_str(mime_lookup(t, "a.HTML"), "text/html", "and html");
	mime_free(t);

	t = mime_load("/etc/mime.types", err, sizeof err);
	if (err[0] == '\0') {
		is_str(mime_lookup(t, "a.svg"), "image/svg+xml", "/etc/mime.types: svg");
		is_str(mime_lookup(t, "a.css"), "text/css", "/etc/mime.types: css");
	}
	mime_free(t);
	return done_testing();
}
