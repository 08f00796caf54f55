/* Fuzzes the CGI environment builder. The input is lines: the first byte
 * holds flags (pass_authorization, https, trusted peer), then a query
 * string line, a path-info line, then header lines "Name:value". Whatever
 * the headers, every variable is NAME=value with a clean name, no name
 * twice, no HTTP_PROXY, no withheld Authorization, and a REMOTE_ADDR
 * taken from X-Forwarded-For is a real address. */
#include "cgi_env.h"
#include "fuzz.h"

#include <arpa/inet.h>
#include <string.h>

#define MAX_HEADERS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	unsigned flags = data[0];
	char *text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';

	char *lines[2 + MAX_HEADERS];
	size_t n = 0;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line && n < 2 + MAX_HEADERS;
			line = strtok_r(NULL, "\n", &save))
		lines[n++] = line;
	struct cgi_env_header headers[MAX_HEADERS];
	size_t nh = 0;
	for (size_t i = 2; i < n; i++) {
		char *colon = strchr(lines[i], ':');
		if (!colon)
			continue;
		*colon = '\0';
		headers[nh].name = lines[i];
		headers[nh].value = colon + 1;
		nh++;
	}
	struct cgi_env_request req = {
		.method = "POST",
		.protocol = "HTTP/1.1",
		.target = "/x.pl",
		.query = n > 0 ? lines[0] : NULL,
		.script_name = "/x.pl",
		.path_info = n > 1 ? lines[1] : NULL,
		.script_file = "/srv/x.pl",
		.document_root = "/srv",
		.remote_addr = (flags & 4) ? "10.0.0.1" : "192.0.2.1",
		.remote_port = 1234,
		.server_addr = "127.0.0.1",
		.server_port = 80,
		.content_length = (flags & 8) ? 12 : -1,
		.https = !!(flags & 2),
		.headers = headers,
		.header_count = nh,
	};
	/* Parsed once, as plxd parses [server] trusted_proxies at load. */
	static struct addr_list trusted;
	static int parsed;
	if (!parsed) {
		char err[128];
		FUZZ_CHECK(addr_list_parse("10.0.0.1 ::1 10.0.0.2 172.16.0.0/12 fd00::/8", &trusted,
					   err, sizeof err)
				== 0);
		parsed = 1;
	}
	struct cgi_env_options opt = {
		.path = "/bin",
		.pass_authorization = flags & 1,
		.trusted_proxies = &trusted,
	};
	char **env = cgi_env_build(&req, &opt);
	for (size_t i = 0; env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		FUZZ_CHECK(eq && eq > env[i]);
		for (const char *c = env[i]; c < eq; c++)
			FUZZ_CHECK((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')
					|| *c == '_');
		for (size_t j = 0; j < i; j++)
			FUZZ_CHECK(strncmp(env[i], env[j], (size_t)(eq - env[i]) + 1) != 0);
	}
	FUZZ_CHECK(!cgi_env_get(env, "HTTP_PROXY"));
	FUZZ_CHECK(!cgi_env_get(env, "HTTP_PROXY_AUTHORIZATION"));
	if (!(flags & 1))
		FUZZ_CHECK(!cgi_env_get(env, "HTTP_AUTHORIZATION"));
	FUZZ_CHECK(cgi_env_get(env, "GATEWAY_INTERFACE"));
	const char *addr = cgi_env_get(env, "REMOTE_ADDR");
	unsigned char bin[16];
	FUZZ_CHECK(addr
			&& (inet_pton(AF_INET, addr, bin) == 1
					|| inet_pton(AF_INET6, addr, bin) == 1));
	if (!(flags & 4))
		FUZZ_CHECK(strcmp(addr, "192.0.2.1") == 0
				&& !cgi_env_get(env, "HTTPS") == !(flags & 2));
	cgi_env_free(env);
	free(text);
	return 0;
}
