/* A request's CGI environment: see gw_request.h. */
#include "gw_request.h"
#include "cgi_env.h"
#include "handler.h"
#include "log.h"
#include "version.h"

#include <arpa/inet.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"

/* Request headers, in a stack array that most requests fit. */
struct header_list {
	struct cgi_env_header *v;
	size_t n, cap;
	struct cgi_env_header stack[48];
};

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *name,
		const char *value)
{
	(void)kind;
	struct header_list *h = cls;
	if (h->n == h->cap) {
		struct cgi_env_header *v = xmalloc(h->cap * 2 * sizeof *v);
		memcpy(v, h->v, h->n * sizeof *v);
		if (h->v != h->stack)
			free(h->v);
		h->v = v;
		h->cap *= 2;
	}
	h->v[h->n].name = name;
	h->v[h->n].value = value ? value : "";
	h->n++;
	return MHD_YES;
}

static unsigned sockaddr_port(const struct sockaddr *sa)
{
	if (sa && sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa && sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

char **gw_request_env(struct plxd_request *r, const char *path, int pass_authorization,
		const char *perl5lib)
{
	char remote[64], local[64];
	log_format_addr(r->client, remote, sizeof remote);
	log_format_addr(r->local, local, sizeof local);
	struct header_list headers = { .n = 0 };
	headers.v = headers.stack;
	headers.cap = sizeof headers.stack / sizeof headers.stack[0];
	MHD_get_connection_values(r->connection, MHD_HEADER_KIND, collect_header, &headers);

	/* The root without a trailing '/', so DOCUMENT_ROOT + SCRIPT_NAME is
	 * the file. */
	size_t root_len = strlen(r->root);
	while (root_len > 1 && r->root[root_len - 1] == '/')
		root_len--;
	char root[PATH_MAX];
	if (root_len >= sizeof root)
		root_len = sizeof root - 1;
	memcpy(root, r->root, root_len);
	root[root_len] = '\0';

	struct cgi_env_request req = {
		.method = r->method,
		.protocol = r->version,
		.target = r->target,
		.query = r->query,
		.script_name = r->script_name,
		.path_info = r->path_info,
		.script_file = r->file,
		.document_root = root,
		.remote_addr = remote,
		.remote_port = sockaddr_port(r->client),
		.server_addr = local,
		.server_port = sockaddr_port(r->local),
		/* Only a request with a body has a type: not a local redirect's
		 * GET, which keeps the first request's headers. */
		.content_type = r->content_length != 0
				? plxd_request_header(r, MHD_HTTP_HEADER_CONTENT_TYPE)
				: NULL,
		/* A body of known length may still be arriving (the cgi handler
		 * streams it); a chunked one was spooled, so its length is known. */
		.content_length = r->content_length > 0 ? r->content_length
				: r->content_length < 0 ? (int64_t)r->body_length
							: -1,
		.headers = headers.v,
		.header_count = headers.n,
	};

	char *const *limits = plxd_request_limits_env(r);
	size_t nlimits = 0;
	while (limits[nlimits])
		nlimits++;
	char *extra_stack[16];
	char **extra = nlimits + 2 <= 16 ? extra_stack : xmalloc((nlimits + 2) * sizeof *extra);
	memcpy(extra, limits, nlimits * sizeof *extra);
	extra[nlimits] = (char *)perl5lib;
	extra[nlimits + 1] = NULL;
	struct cgi_env_options opt = {
		.path = path,
		.server_software = "plxd/" PLXD_VERSION,
		.pass_authorization = pass_authorization,
		.trusted_proxies = plxd_trusted_proxies(r),
		.extra = extra,
	};
	char **env = cgi_env_build(&req, &opt);
	if (extra != extra_stack)
		free(extra);
	if (headers.v != headers.stack)
		free(headers.v);
	return env;
}
