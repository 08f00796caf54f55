/* resolve_path: files, PATH_INFO and never leaving the document root. */
#include "resolve.h"
#include "tap.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char top[64];

static void make(const char *rel, const char *content)
{
	char p[256];
	snprintf(p, sizeof p, "%s/%s", top, rel);
	if (!content) {
		mkdir(p, 0755);
		return;
	}
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, content, strlen(content)) < 0)
		abort();
	close(fd);
}

static void link_to(const char *target, const char *rel)
{
	char p[256];
	snprintf(p, sizeof p, "%s/%s", top, rel);
	if (symlink(target, p) < 0)
		abort();
}

int main(void)
{
	strcpy(top, "/tmp/plxd-test-resolve-XXXXXX");
	if (!mkdtemp(top))
		abort();
	make("root", NULL);
	make("root/a.pl", "print 1;\n");
	make("root/dir", NULL);
	make("root/dir/index.html", "hi\n");
	make("secret.txt", "secret\n");
	make("outdir", NULL);
	link_to("../secret.txt", "root/out.txt");
	link_to("../outdir", "root/outdir");
	link_to("a.pl", "root/inside.txt");
	link_to("/etc/passwd", "root/abs");
	make("root/idx", NULL);
	link_to("../a.pl", "root/idx/index.html"); /* an index that is a script */
	make("root/outidx", NULL);
	link_to("../../secret.txt", "root/outidx/index.html");
	make("root/dirnamed", NULL);
	make("root/dirnamed/index.html", NULL); /* a folder, not an index */
	link_to("dir", "root/linkdir");
	make("root2", NULL);
	make("root2/index.html", "root index\n");
	char p[256];
	snprintf(p, sizeof p, "%s/root/fifo", top);
	mkfifo(p, 0644);

	snprintf(p, sizeof p, "%s/root", top);
	int root = open(p, O_PATH | O_DIRECTORY);
	struct resolved r;

	ok(resolve_path(root, "/a.pl", 0, &r) == 0 && S_ISREG(r.st.st_mode) && r.name_len == 5,
			"a file");
	ok(r.real_name[0] == '\0' && r.index == NULL, "no link followed, no index");
	close(r.fd);
	ok(resolve_path(root, "/a.pl/x/y", 0, &r) == 0 && r.name_len == 5,
			"PATH_INFO after a file");
	close(r.fd);
	ok(resolve_path(root, "/a.pl/", 0, &r) == 0 && r.name_len == 5,
			"trailing slash is PATH_INFO");
	close(r.fd);
	ok(resolve_path(root, "/", 0, &r) == 0 && S_ISDIR(r.st.st_mode) && r.name_len == 1,
			"the root");
	close(r.fd);
	ok(resolve_path(root, "/dir", 0, &r) == 0 && S_ISDIR(r.st.st_mode) && r.name_len == 4,
			"a folder");
	close(r.fd);
	ok(resolve_path(root, "/dir/nothing/x", 0, &r) == 404 && r.fd == -1, "missing is 404");
	ok(resolve_path(root, "/dir/x/index.html", 0, &r) == 404,
			"missing folder in the middle is 404");
	ok(resolve_path(root, "/out.txt", 0, &r) == 403, "link to a file outside is 403");
	ok(resolve_path(root, "/outdir/", 0, &r) == 403, "link to a folder outside is 403");
	ok(resolve_path(root, "/abs", 0, &r) == 403, "absolute link outside is 403");
	ok(resolve_path(root, "/inside.txt", 0, &r) == 0, "link inside the root is followed");
	is_str(r.real_name, "a.pl", "a link's real name is reported (inside.txt -> a.pl)");
	close(r.fd);
	ok(resolve_path(root, "/inside.txt/x", 0, &r) == 0 && r.name_len == 11,
			"PATH_INFO after a link");
	is_str(r.real_name, "a.pl", "... with its real name");
	close(r.fd);
	ok(resolve_path(root, "/linkdir/index.html", 0, &r) == 0, "through a linked folder");
	is_str(r.real_name, "index.html", "the name stays when only a folder was a link");
	close(r.fd);

	ok(resolve_path(root, "/dir/", 0, &r) == 0 && S_ISREG(r.st.st_mode),
			"a folder's index.html");
	ok(r.index && strcmp(r.index, "index.html") == 0 && r.name_len == 15,
			"index reported; name_len counts /dir/index.html");
	close(r.fd);
	ok(resolve_path(root, "/dir", 0, &r) == 0 && S_ISDIR(r.st.st_mode) && !r.index,
			"no index without the slash");
	close(r.fd);
	ok(resolve_path(root, "/idx/", 0, &r) == 0 && r.index, "an index that is a link inside");
	is_str(r.real_name, "a.pl", "... has the real name of its target");
	close(r.fd);
	ok(resolve_path(root, "/outidx/", 0, &r) == 403 && r.fd == -1,
			"an index linking outside is 403");
	ok(resolve_path(root, "/outidx/", 1, &r) == 0 && r.index,
			"... unless follow_symlinks_outside");
	close(r.fd);
	ok(resolve_path(root, "/dirnamed/", 0, &r) == 0 && S_ISDIR(r.st.st_mode) && !r.index,
			"a folder named index.html is no index");
	close(r.fd);
	ok(resolve_path(root, "/", 0, &r) == 0 && S_ISDIR(r.st.st_mode) && !r.index,
			"the root without an index");
	close(r.fd);
	snprintf(p, sizeof p, "%s/root2", top);
	int root2 = open(p, O_PATH | O_DIRECTORY);
	ok(resolve_path(root2, "/", 0, &r) == 0 && r.index && r.name_len == 11,
			"the root's index.html");
	close(r.fd);
	close(root2);
	ok(resolve_path(root, "/out.txt", 1, &r) == 0, "follow_symlinks_outside follows it");
	close(r.fd);
	ok(resolve_path(root, "/fifo", 0, &r) == 403, "a FIFO is refused without blocking");

	close(root);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", top);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", top);
	return done_testing();
}
