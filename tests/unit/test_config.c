/* config_load: the INI file against the key tables, and every mistake named
 * by file, line and key. */
#include "config.h"
#include "deny.h"
#include "handler.h"
#include "tap.h"

#include <stdlib.h>
#include <unistd.h>

struct fake_conf {
	char *word;
	unsigned long n;
};

/* clang-format off */
static const struct conf_key fake_keys[] = {
	{ .name = "word", .type = CONF_STRING, .default_value = "hi",
	  .offset = offsetof(struct fake_conf, word), .help = "h" },
	{ .name = "n", .type = CONF_UINT, .default_value = "1", .max = 5,
	  .offset = offsetof(struct fake_conf, n), .help = "h" },
	CONF_ALIAS_KEY("count", "n"),
	CONF_KEYS_END
};
/* clang-format on */

static const struct plxd_handler fake = {
	.abi = PLXD_HANDLER_ABI,
	.name = "fake",
	.keys = fake_keys,
	.conf_size = sizeof(struct fake_conf),
};
/* The static handler's deny row, which the core reads. */
struct static_fake_conf {
	char *deny;
};
/* clang-format off */
static const struct conf_key static_fake_keys[] = {
	{ .name = "deny", .type = CONF_LIST, .default_value = ".* !.well-known",
	  .offset = offsetof(struct static_fake_conf, deny), .check = deny_check, .help = "h" },
	CONF_KEYS_END
};
/* clang-format on */
static const struct plxd_handler static_fake = {
	.abi = PLXD_HANDLER_ABI,
	.name = "static",
	.keys = static_fake_keys,
	.conf_size = sizeof(struct static_fake_conf),
};

static char last_load[256];

static const struct plxd_handler *find(const char *name, const char *load, char *err, size_t errlen,
		void *ctx)
{
	(void)ctx;
	if (strcmp(name, "fake") == 0) {
		snprintf(last_load, sizeof last_load, "%s", load ? load : "");
		return &fake;
	}
	if (strcmp(name, "static") == 0)
		return &static_fake;
	snprintf(err, errlen, "no handler called '%s'", name);
	return NULL;
}

static char path[64];

static struct config *load_text(const char *text, char **errors)
{
	strcpy(path, "/tmp/plxd-test-config-XXXXXX");
	int fd = mkstemp(path);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		abort();
	close(fd);
	struct config *c = config_load(path, NULL, 0, find, NULL, errors);
	unlink(path);
	return c;
}

/* The config must fail with a message containing "file:line" and want. */
static void fails(const char *text, unsigned line, const char *want, const char *name)
{
	char *errors = NULL;
	struct config *c = load_text(text, &errors);
	for (char *p = errors; p && *p; p++)
		if (*p == '\n')
			*p = '|'; /* one TAP line */
	char where[96];
	snprintf(where, sizeof where, "%s:%u", path, line);
	ok(c == NULL && errors && (line == 0 || strstr(errors, where)) && strstr(errors, want),
			"%s: error names %s and says '%s' (got: %s)", name, line ? where : "file",
			want, errors ? errors : "no error");
	config_free(c);
	free(errors);
}

int main(void)
{
	char *errors = NULL;
	struct config *c = load_text("; comment\n"
				     "# another\n"
				     "[server]\n"
				     "listen = [::1]:0\n"
				     "root = www ; inline comment\n"
				     "max_body = 2M\n"
				     "\n"
				     "[handlers]\n"
				     ".FK = fake\n"
				     ".txt = static\n"
				     "[fake]\n"
				     "word = hello\n",
			&errors);
	ok(c != NULL, "a valid file loads (%s)", errors ? errors : "");
	if (c) {
		is_str(c->server.listen, "[::1]:0", "listen");
		ok(strncmp(c->server.root, "/tmp/", 5) == 0 && strstr(c->server.root, "/www"),
				"relative root resolved against the file's folder: %s",
				c->server.root);
		ok(c->server.max_body == 2 << 20, "max_body");
		ok(c->server.max_connections == 512, "default max_connections");
		ok(c->nroutes == 2, "two routes");
		const struct handler_section *s = config_route(c, "script.fk");
		ok(s && s->handler == &fake, "extension matched without regard to case");
		ok(s && strcmp(((struct fake_conf *)s->conf)->word, "hello") == 0,
				"handler key set");
		ok(s && ((struct fake_conf *)s->conf)->n == 1, "handler key default");
		ok(config_route(c, "x.fk.txt") == c->fallback
						|| config_route(c, "x.fk.txt")->handler
								== &static_fake,
				"last extension decides");
		ok(config_route(c, "fk") == c->fallback,
				"a name that is only the extension's letters");
		ok(config_route(c, "x.fkx") == c->fallback, "no partial extension match");
		ok(c->fallback && c->fallback->handler == &static_fake, "static fallback");
	}
	config_free(c);

	c = load_text("[request]\nmax_fields = 5\nmax_total = 1M\n", &errors);
	ok(c && c->request.max_fields == 5 && c->request.max_total == 1 << 20, "[request] limits");
	ok(c && c->request.max_field_size == 1 << 20, "[request] defaults");
	config_free(c);
	fails("[request]\nmax_fields = 0\n", 2, "[request] max_fields: must be between",
			"bad [request] value");
	fails("[request]\nnope = 1\n", 2, "[request] nope: unknown key", "unknown [request] key");

	/* A relative file: its relative paths become absolute, so that a
	 * handler that changes directory still finds them. */
	if (chdir("/tmp") == 0) {
		FILE *f = fopen("plxd-test-relative.conf", "w");
		fputs("[server]\nroot = www\n", f);
		fclose(f);
		c = config_load("plxd-test-relative.conf", NULL, 0, find, NULL, &errors);
		ok(c && strcmp(c->server.root, "/tmp/www") == 0,
				"relative config file: root is /tmp/www (%s)",
				c ? c->server.root : errors);
		config_free(c);
		unlink("plxd-test-relative.conf");
	}

	/* [static] deny is compiled for routing; names that are only an
	 * extension are known. */
	c = load_text("[handlers]\n.FK = fake\n", &errors);
	ok(c && deny_name(c->deny, ".env", 4) && !deny_name(c->deny, ".well-known", 11)
					&& !deny_name(c->deny, "a.txt", 5),
			"[static] deny: the default row");
	ok(c && config_bare_extension(c, ".fk") && config_bare_extension(c, ".FK"),
			"a name that is only a mapped extension, in any case");
	ok(c && !config_bare_extension(c, "x.fk") && !config_bare_extension(c, "fk")
					&& !config_bare_extension(c, ".fkx")
					&& !config_bare_extension(c, ".txt"),
			"... and names that are not");
	config_free(c);
	c = load_text("[static]\ndeny = *.x\n", &errors);
	ok(c && deny_name(c->deny, "a.X", 3) && !deny_name(c->deny, ".env", 4),
			"[static] deny: a list of one's own replaces the default");
	config_free(c);
	c = load_text("[static]\ndeny =\n", &errors);
	ok(c && !deny_name(c->deny, ".env", 4), "[static] deny: empty denies nothing");
	config_free(c);
	fails("[static]\ndeny = .* a/b\n", 2, "[static] deny: a pattern matches one name",
			"a deny pattern with '/'");

	/* An unrouted handler's section is still validated. */
	fails("[fake]\nn = 9\n", 2, "[fake] n: must be between 0 and 5",
			"unrouted section checked");
	fails("[server]\nlisten = nowhere\n", 2, "[server] listen: expected ADDRESS:PORT",
			"bad listen");
	fails("[server]\nlisten = ::1:80\n", 2, "listen", "IPv6 without brackets");
	fails("[server]\nbogus = 1\n", 2, "[server] bogus: unknown key", "unknown key");
	fails("[nosuch]\nx = 1\n", 1, "[nosuch]: unknown section", "unknown section");
	fails("[empty]\n", 1, "[empty]: unknown section", "unknown empty section");
	fails("[server]\nmax_body = 1\nmax_body = 2\n", 3,
			"max_body: duplicate key (first set on line 2)", "duplicate key");
	fails("[handlers]\n.pl = fake\n.PL = fake\n", 3, "duplicate key",
			"duplicate extension in any case");
	fails("[server]\nroot = /a\n  more\n", 3, "indented line", "continuation line");
	fails("[server]\n  root = /a\n", 2, "indented line", "indented key");
	fails("[server]\nmax_connections = lots\n", 2,
			"[server] max_connections: 'lots' is not a whole number", "bad number");
	fails("[server]\nlog_level = loud\n", 2, "log_level", "bad log level");
	fails("[server]\ntrusted_proxies = 10.0.0.1 nothost\n", 2,
			"[server] trusted_proxies: 'nothost' is not an IP address",
			"bad proxy address");
	fails("[server]\nlisten = 127.0.0.1:0\ntrusted_proxies = 127.0.0.0/33\n", 3,
			"[server] trusted_proxies: '127.0.0.0/33': the prefix length must be 32 at most",
			"a range's prefix too long");
	fails("[server]\ntrusted_proxies = ::1 10.0.0.1/8\n", 2,
			"[server] trusted_proxies: '10.0.0.1/8': the address has bits set past its /8 prefix",
			"a range with bits set past its prefix");
	fails("[server]\ntrusted_proxies = 10.0.0.0/\n", 2,
			"[server] trusted_proxies: '10.0.0.0/': the prefix length must be a number",
			"a range without its length");
	fails("[handlers]\n.pl = nosuch\n", 2, "[handlers] .pl: no handler called 'nosuch'",
			"unknown handler");
	fails("[handlers]\npl = fake\n", 2, "expected a file extension", "extension without dot");
	fails("[server]\nthis line has no equals\n", 2, "syntax error", "syntax error");
	fails("[server\n", 1, "syntax error", "unclosed section");
	char longline[400];
	snprintf(longline, sizeof longline, "[server]\nroot = /%0300d\n", 0);
	fails(longline, 2, "longer than", "overlong line");
	fails("[server]\nmax_body = 1\nbogus = 2\nlisten = x\n", 3, "bogus",
			"several errors: first");
	fails("[server]\nmax_body = 1\nbogus = 2\nlisten = x\n", 4, "listen",
			"several errors: second");

	/* trusted_proxies is parsed once, at load, into the ranges every user
	 * matches. */
	c = load_text("[server]\ntrusted_proxies = 127.0.0.0/8  0:0:0:0:0:0:0:1 ::ffff:10.1.2.3\n",
			&errors);
	ok(c && c->server.trusted_proxies.n == 3, "trusted_proxies: three ranges (%s)",
			errors ? errors : "");
	if (c && c->server.trusted_proxies.n == 3) {
		const struct addr_range *v = c->server.trusted_proxies.v;
		ok(v[0].family == AF_INET && v[0].prefix == 8 && v[0].bytes[0] == 127,
				"127.0.0.0/8");
		ok(v[1].family == AF_INET6 && v[1].prefix == 128 && v[1].bytes[15] == 1,
				"0:0:0:0:0:0:0:1 is ::1");
		ok(v[2].family == AF_INET && v[2].prefix == 32 && v[2].bytes[3] == 3,
				"an IPv4-mapped address is the IPv4 address");
	}
	config_free(c);
	c = load_text("[server]\nlisten = 127.0.0.1:0\n", &errors);
	ok(c && c->server.trusted_proxies.n == 0, "trusted_proxies: none by default");
	config_free(c);

	/* A renamed key: the old name works, with a warning naming file,
	 * line, old and new name; both names at once is a duplicate. */
	c = load_text("[fake]\nword = x\ncount = 3\n", &errors);
	const struct handler_section *fs = NULL;
	for (size_t i = 0; c && i < c->nhandlers; i++)
		if (c->handlers[i].handler == &fake)
			fs = &c->handlers[i];
	ok(c && fs && fs->handler == &fake && ((struct fake_conf *)fs->conf)->n == 3,
			"an old key name sets the key (%s)", errors ? errors : "");
	char where[256];
	snprintf(where, sizeof where, "%s:3: [fake] count is deprecated: it is now called n", path);
	ok(c && c->warnings && strcmp(c->warnings, where) == 0,
			"one warning, naming file, line and "
			"both names: %s",
			c && c->warnings ? c->warnings : "none");
	config_free(c);
	c = load_text("[fake]\nn = 3\n", &errors);
	ok(c && !c->warnings, "no warning under the current name");
	config_free(c);
	fails("[fake]\ncount = 3\nn = 4\n", 3,
			"[fake] n: duplicate key (first set on line 2 as count; count is the old name of n)",
			"old and new name both set");
	fails("[fake]\nn = 4\nword = x\ncount = 3\n", 4,
			"[fake] count: duplicate key (first set on line 2 as n; count is the old name of n)",
			"new and old name both set");

	c = config_load("/nonexistent/plxd.conf", NULL, 0, find, NULL, &errors);
	ok(!c && errors && strstr(errors, "/nonexistent/plxd.conf: cannot open: No such file"),
			"missing file named: %s", errors ? errors : "");
	free(errors);

	/* clang-format off */
	struct config_override over[] = {
		{ "--listen", "server", "listen", "127.0.0.1:0" },
		{ "--root", "server", "root", "/srv" },
	};
	/* clang-format on */
	c = config_load(NULL, over, 2, find, NULL, &errors);
	ok(c && strcmp(c->server.listen, "127.0.0.1:0") == 0 && strcmp(c->server.root, "/srv") == 0,
			"command-line values apply without a file");
	config_free(c);
	struct config_override bad[] = { { "--listen", "server", "listen", "nope" } };
	c = config_load(NULL, bad, 1, find, NULL, &errors);
	ok(!c && errors && strncmp(errors, "--listen: ", 10) == 0, "bad --listen named: %s",
			errors ? errors : "");
	free(errors);

	c = load_text("[fake]\nload = /some/where.so\n", &errors);
	ok(c && strcmp(last_load, "/some/where.so") == 0, "load = is passed to find");
	config_free(c);

	char host[64];
	unsigned port;
	ok(config_parse_listen("*:80", host, sizeof host, &port) == 0 && host[0] == 0 && port == 80,
			"*:80 is any address");
	ok(config_parse_listen("[::1]:0", host, sizeof host, &port) == 0
					&& strcmp(host, "::1") == 0,
			"[::1]:0");
	ok(config_parse_listen("1.2.3.4:65536", host, sizeof host, &port) < 0, "port too large");
	ok(config_parse_listen("1.2.3.4:", host, sizeof host, &port) < 0, "no port");
	ok(config_parse_listen("1.2.3.4:+80", host, sizeof host, &port) < 0, "signed port");
	return done_testing();
}
