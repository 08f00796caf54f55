/* cgi_env_build: the RFC 3875 meta-variables, header rules (httpoxy,
 * collisions, Authorization), trusted proxies, nothing else inherited. */
#include "cgi_env.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define MAX_HEADERS 8
#define MAX_CHECKS  12

struct row {
	const char *name;
	struct cgi_env_header headers[MAX_HEADERS];
	const char *path_info;
	int64_t content_length;
	const char *content_type;
	const char *remote_addr;
	const char *server_name;
	int https;
	int pass_authorization;
	const char *trusted_proxies; /* as [server] trusted_proxies is written */
	/* "NAME=value": must be exactly that; "!NAME": must be unset. */
	const char *checks[MAX_CHECKS];
};

/* clang-format off */
static const struct row rows[] = {
	{ "basic", .checks = {
		"GATEWAY_INTERFACE=CGI/1.1", "REQUEST_METHOD=GET", "SERVER_PROTOCOL=HTTP/1.1",
		"QUERY_STRING=a=%20b&c", "SCRIPT_NAME=/a.pl", "REQUEST_URI=/a.pl?a=%20b&c",
		"SCRIPT_FILENAME=/srv/www/a.pl", "DOCUMENT_ROOT=/srv/www", "REDIRECT_STATUS=200",
		"SERVER_SOFTWARE=plxd/test", "PATH=/usr/bin:/bin", "REQUEST_SCHEME=http" } },
	{ "addresses", .checks = {
		"REMOTE_ADDR=192.0.2.7", "REMOTE_HOST=192.0.2.7", "REMOTE_PORT=40000",
		"SERVER_ADDR=127.0.0.1", "SERVER_PORT=8080", "SERVER_NAME=127.0.0.1" } },
	{ "no body: no CONTENT_*, no auth, no HTTPS", .checks = {
		"!CONTENT_LENGTH", "!CONTENT_TYPE", "!AUTH_TYPE", "!REMOTE_USER", "!HTTPS",
		"!PATH_INFO", "!PATH_TRANSLATED" } },
	{ "body", .content_length = 42, .content_type = "application/x-www-form-urlencoded",
		.headers = { { "Content-Type", "application/x-www-form-urlencoded" },
			     { "Content-Length", "42" } },
		.checks = { "CONTENT_LENGTH=42", "CONTENT_TYPE=application/x-www-form-urlencoded",
			"!HTTP_CONTENT_TYPE", "!HTTP_CONTENT_LENGTH" } },
	{ "empty body still has a length", .content_length = 0, .checks = { "CONTENT_LENGTH=0" } },
	{ "path info", .path_info = "/x/y z", .checks = {
		"PATH_INFO=/x/y z", "PATH_TRANSLATED=/srv/www/x/y z" } },
	{ "headers", .headers = { { "Accept", "*/*" }, { "User-Agent", "t/1" },
			{ "X-Custom-Thing", "v" } },
		.checks = { "HTTP_ACCEPT=*/*", "HTTP_USER_AGENT=t/1", "HTTP_X_CUSTOM_THING=v" } },
	{ "repeated headers join", .headers = { { "Accept", "a" }, { "accept", "b" },
			{ "Cookie", "x=1" }, { "Cookie", "y=2" } },
		.checks = { "HTTP_ACCEPT=a, b", "HTTP_COOKIE=x=1; y=2" } },
	{ "httpoxy: Proxy never becomes HTTP_PROXY", .headers = { { "Proxy", "http://evil:1" },
			{ "Proxy-Authorization", "Basic x" } },
		.checks = { "!HTTP_PROXY", "!HTTP_PROXY_AUTHORIZATION" } },
	{ "the withheld headers in any case", .headers = { { "proxy", "http://evil:1" },
			{ "PROXY-AUTHORIZATION", "Basic x" }, { "content-type", "text/plain" },
			{ "CONTENT-length", "7" }, { "authorization", "Basic dTpw" } },
		.checks = { "!HTTP_PROXY", "!HTTP_PROXY_AUTHORIZATION", "!HTTP_CONTENT_TYPE",
			"!HTTP_CONTENT_LENGTH", "!HTTP_AUTHORIZATION" } },
	{ "underscore names cannot shadow dash names",
		.headers = { { "X-Forwarded-Host", "good" }, { "X_Forwarded_Host", "evil" },
			     { "X.Dot", "d" }, { "", "e" } },
		.checks = { "HTTP_X_FORWARDED_HOST=good", "!HTTP_X_DOT" } },
	{ "underscore first still loses",
		.headers = { { "X_Real_IP", "evil" }, { "X-Real-IP", "good" } },
		.checks = { "HTTP_X_REAL_IP=good" } },
	{ "Authorization withheld by default", .headers = { { "Authorization", "Basic dTpw" } },
		.checks = { "!HTTP_AUTHORIZATION" } },
	{ "Authorization passed when configured", .pass_authorization = 1,
		.headers = { { "Authorization", "Basic dTpw" } },
		.checks = { "HTTP_AUTHORIZATION=Basic dTpw" } },
	{ "Host gives SERVER_NAME", .headers = { { "Host", "example.com:8080" } },
		.checks = { "SERVER_NAME=example.com", "HTTP_HOST=example.com:8080" } },
	{ "IPv6 Host keeps its colons", .headers = { { "Host", "[::1]:8080" } },
		.checks = { "SERVER_NAME=[::1]" } },
	{ "a bad Host falls back to the address", .headers = { { "Host", "a/b" } },
		.checks = { "SERVER_NAME=127.0.0.1" } },
	{ "configured SERVER_NAME wins", .server_name = "www.test",
		.headers = { { "Host", "other" } }, .checks = { "SERVER_NAME=www.test" } },
	{ "https", .https = 1, .checks = { "HTTPS=on", "REQUEST_SCHEME=https" } },
	{ "X-Forwarded-For ignored from an untrusted peer",
		.headers = { { "X-Forwarded-For", "203.0.113.9" }, { "X-Forwarded-Proto", "https" } },
		.trusted_proxies = "10.0.0.1",
		.checks = { "REMOTE_ADDR=192.0.2.7", "REMOTE_PORT=40000", "!HTTPS" } },
	{ "X-Forwarded-For believed from a trusted proxy", .remote_addr = "10.0.0.1",
		.headers = { { "X-Forwarded-For", "203.0.113.9" }, { "X-Forwarded-Proto", "https" } },
		.trusted_proxies = "127.0.0.1 10.0.0.1",
		.checks = { "REMOTE_ADDR=203.0.113.9", "REMOTE_HOST=203.0.113.9", "!REMOTE_PORT",
			"HTTPS=on", "REQUEST_SCHEME=https" } },
	{ "rightmost untrusted hop is the client", .remote_addr = "10.0.0.1",
		.headers = { { "X-Forwarded-For", "1.1.1.1, 203.0.113.9, 10.0.0.2" } },
		.trusted_proxies = "10.0.0.1 10.0.0.2",
		.checks = { "REMOTE_ADDR=203.0.113.9" } },
	{ "repeated X-Forwarded-For lines are one list", .remote_addr = "10.0.0.1",
		.headers = { { "X-Forwarded-For", "198.51.100.1" },
			     { "X-Forwarded-For", "10.0.0.1" } },
		.trusted_proxies = "10.0.0.1", .checks = { "REMOTE_ADDR=198.51.100.1" } },
	{ "garbage in X-Forwarded-For is not believed", .remote_addr = "10.0.0.1",
		.headers = { { "X-Forwarded-For", "<script>, 203.0.113.9" } },
		.trusted_proxies = "10.0.0.1", .checks = { "REMOTE_ADDR=203.0.113.9" } },
	{ "only garbage keeps the proxy", .remote_addr = "10.0.0.1",
		.headers = { { "X-Forwarded-For", "not-an-ip" } },
		.trusted_proxies = "10.0.0.1", .checks = { "REMOTE_ADDR=10.0.0.1" } },
	{ "IPv6 proxy, mapped address", .remote_addr = "::ffff:10.0.0.1",
		.headers = { { "X-Forwarded-For", "2001:db8::5" } },
		.trusted_proxies = "10.0.0.1", .checks = { "REMOTE_ADDR=2001:db8::5" } },
	{ "X-Forwarded-Proto http clears https", .remote_addr = "10.0.0.1", .https = 1,
		.headers = { { "X-Forwarded-Proto", "http" } },
		.trusted_proxies = "10.0.0.1", .checks = { "!HTTPS", "REQUEST_SCHEME=http" } },
	{ "a CIDR range trusts the peer", .remote_addr = "127.0.0.2",
		.headers = { { "X-Forwarded-For", "203.0.113.9" } },
		.trusted_proxies = "127.0.0.0/8", .checks = { "REMOTE_ADDR=203.0.113.9" } },
	{ "a CIDR range trusts the hops inside it", .remote_addr = "10.1.2.3",
		.headers = { { "X-Forwarded-For", "198.51.100.1, 10.200.0.1, 10.9.9.9" } },
		.trusted_proxies = "10.0.0.0/8", .checks = { "REMOTE_ADDR=198.51.100.1" } },
	{ "the walk stops at the first hop outside the range", .remote_addr = "127.0.0.1",
		.headers = { { "X-Forwarded-For", "198.51.100.1, 128.0.0.1, 127.9.9.9" } },
		.trusted_proxies = "127.0.0.0/8", .checks = { "REMOTE_ADDR=128.0.0.1" } },
	{ "a peer outside the range is not believed", .remote_addr = "128.0.0.1",
		.headers = { { "X-Forwarded-For", "203.0.113.9" } },
		.trusted_proxies = "127.0.0.0/8", .checks = { "REMOTE_ADDR=128.0.0.1" } },
	{ "an IPv6 range", .remote_addr = "fd00::17",
		.headers = { { "X-Forwarded-For", "2001:db8::5" } },
		.trusted_proxies = "fd00::/8", .checks = { "REMOTE_ADDR=2001:db8::5" } },
	{ "::1 written in full is ::1", .remote_addr = "::1",
		.headers = { { "X-Forwarded-For", "203.0.113.9" } },
		.trusted_proxies = "0:0:0:0:0:0:0:1", .checks = { "REMOTE_ADDR=203.0.113.9" } },
};
/* clang-format on */

static int check(char **env, const char *want, const char *row)
{
	if (want[0] == '!')
		return ok(cgi_env_get(env, want + 1) == NULL, "%s: %s unset", row, want + 1);
	const char *eq = strchr(want, '=');
	char name[64];
	snprintf(name, sizeof name, "%.*s", (int)(eq - want), want);
	return is_str(cgi_env_get(env, name), eq + 1, "%s: %s", row, name);
}

/* Every entry NAME=value, and no NAME twice. */
static void check_shape(char **env, const char *row)
{
	int good = 1;
	for (size_t i = 0; env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		if (!eq || eq == env[i])
			good = 0;
		for (size_t j = 0; good && j < i; j++)
			if (strncmp(env[i], env[j], (size_t)(eq - env[i]) + 1) == 0)
				good = 0;
	}
	ok(good, "%s: every entry is NAME=value, each NAME once", row);
}

int main(void)
{
	setenv("PLXD_SECRET", "leak", 1);
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		const struct row *w = &rows[i];
		size_t nh = 0;
		while (nh < MAX_HEADERS && w->headers[nh].name)
			nh++;
		struct cgi_env_request req = {
			.method = "GET",
			.protocol = "HTTP/1.1",
			.target = "/a.pl?a=%20b&c",
			.query = "a=%20b&c",
			.script_name = "/a.pl",
			.path_info = w->path_info,
			.script_file = "/srv/www/a.pl",
			.document_root = "/srv/www",
			.remote_addr = w->remote_addr ? w->remote_addr : "192.0.2.7",
			.remote_port = 40000,
			.server_addr = "127.0.0.1",
			.server_port = 8080,
			.server_name = w->server_name,
			.content_type = w->content_type,
			.content_length = w->content_length
					? w->content_length
					: (strstr(w->name, "empty body") ? 0 : -1),
			.https = w->https,
			.headers = w->headers,
			.header_count = nh,
		};
		struct addr_list trusted = { 0 };
		char err[128];
		if (w->trusted_proxies
				&& addr_list_parse(w->trusted_proxies, &trusted, err, sizeof err)
						< 0)
			ok(0, "%s: trusted_proxies: %s", w->name, err);
		struct cgi_env_options opt = {
			.path = "/usr/bin:/bin",
			.server_software = "plxd/test",
			.pass_authorization = w->pass_authorization,
			.trusted_proxies = w->trusted_proxies ? &trusted : NULL,
		};
		char **env = cgi_env_build(&req, &opt);
		addr_list_free(&trusted);
		for (size_t k = 0; k < MAX_CHECKS && w->checks[k]; k++)
			check(env, w->checks[k], w->name);
		check_shape(env, w->name);
		ok(cgi_env_get(env, "PLXD_SECRET") == NULL, "%s: plxd's environment stays out",
				w->name);
		cgi_env_free(env);
	}

	/* Minimal facts and no options: nothing crashes, defaults apply. */
	struct cgi_env_request bare = { .method = "GET", .content_length = -1 };
	char **env = cgi_env_build(&bare, NULL);
	is_str(cgi_env_get(env, "QUERY_STRING"), "", "bare: QUERY_STRING is empty, not unset");
	is_str(cgi_env_get(env, "SERVER_SOFTWARE"), "plxd", "bare: SERVER_SOFTWARE default");
	ok(cgi_env_get(env, "PATH") == NULL, "bare: no PATH unless configured");
	cgi_env_free(env);

	/* plxd's own variables; names and values longer than the builder's
	 * first buffers (it grows them), repeated so that a join moves it. */
	static char long_name[300], long_value[5000], long_var[310];
	memset(long_name, 'n', sizeof long_name - 1);
	memset(long_value, 'v', sizeof long_value - 1);
	snprintf(long_var, sizeof long_var, "HTTP_%s", long_name);
	for (char *p = long_var; *p; p++)
		*p = *p == 'n' ? 'N' : *p;
	/* clang-format off */
	struct cgi_env_header big_headers[] = {
		{ long_name, long_value }, { "Cookie", long_value }, { "Cookie", "z=9" },
	};
	/* clang-format on */
	char *const extra[] = { "PERL5LIB=/opt/plxd/perl5", "PLXD_REQUEST_MAX_FIELDS=10", NULL };
	struct cgi_env_request big = { .method = "GET",
		.content_length = -1,
		.headers = big_headers,
		.header_count = 3 };
	struct cgi_env_options extras = { .extra = extra };
	env = cgi_env_build(&big, &extras);
	is_str(cgi_env_get(env, "PERL5LIB"), "/opt/plxd/perl5", "extra: PERL5LIB");
	is_str(cgi_env_get(env, "PLXD_REQUEST_MAX_FIELDS"), "10", "extra: a [request] limit");
	is_str(cgi_env_get(env, long_var), long_value, "a 300-byte header name, 5000-byte value");
	const char *cookie = cgi_env_get(env, "HTTP_COOKIE");
	ok(cookie && strlen(cookie) == strlen(long_value) + 5
					&& strncmp(cookie, long_value, strlen(long_value)) == 0
					&& strcmp(cookie + strlen(long_value), "; z=9") == 0,
			"a long repeated header joins whole");
	check_shape(env, "long variables");
	cgi_env_free(env);
	return done_testing();
}
