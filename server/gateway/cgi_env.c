/* The CGI/1.1 environment builder: request facts in, "NAME=value" array
 * out. Pure string work, shared by the CGI and Perl handlers; see
 * cgi_env.h for the variables and the header rules. */
#include "cgi_env.h"

#include "alloc.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The variables while they are collected: "NAME=value" strings one after
 * the other in one growing buffer, found by their offsets (a request has
 * some thirty: an allocation each was a measurable part of a .plx
 * request's cost). Packed into the final block at the end. */
struct vars {
	char *buf;
	size_t len, cap;
	size_t *off;
	size_t n, ncap;
};

static void vars_put(struct vars *vs, const char *name, size_t nlen, const char *value,
		const char *more);
static void vars_set(struct vars *vs, const char *name, const char *value);
static const char *vars_item(const struct vars *vs, size_t i);
static char **vars_pack(struct vars *vs);
static const char *header_value(const struct cgi_env_request *req, const char *name);
static const char *forwarded_for(const struct cgi_env_request *req, const struct addr_list *list,
		const struct addr_range *peer, char *out, size_t outlen);
static int host_name_valid(const char *s, size_t len);
static void add_headers(struct vars *vs, const struct cgi_env_request *req,
		const struct cgi_env_options *opt);

/* Appends "name=value" as a new variable (name is nlen bytes); more, when
 * given, is appended to the value. */
static void vars_put(struct vars *vs, const char *name, size_t nlen, const char *value,
		const char *more)
{
	size_t vlen = strlen(value), mlen = more ? strlen(more) : 0;
	size_t len = nlen + 1 + vlen + mlen + 1;
	if (vs->len + len > vs->cap) {
		size_t cap = vs->cap ? vs->cap : 2048;
		while (cap < vs->len + len)
			cap *= 2;
		vs->buf = xrealloc(vs->buf, cap);
		vs->cap = cap;
	}
	char *p = vs->buf + vs->len;
	memcpy(p, name, nlen);
	p[nlen] = '=';
	memcpy(p + nlen + 1, value, vlen);
	if (mlen)
		memcpy(p + nlen + 1 + vlen, more, mlen);
	p[len - 1] = '\0';
	if (vs->n == vs->ncap) {
		vs->ncap = vs->ncap ? vs->ncap * 2 : 48;
		vs->off = xrealloc(vs->off, vs->ncap * sizeof *vs->off);
	}
	vs->off[vs->n++] = vs->len;
	vs->len += len;
}

static void vars_set(struct vars *vs, const char *name, const char *value)
{
	if (value)
		vars_put(vs, name, strlen(name), value, NULL);
}

static const char *vars_item(const struct vars *vs, size_t i)
{
	return vs->buf + vs->off[i];
}

/* One allocation: the pointer array, then the strings. A child after
 * vfork, or a Perl interpreter copying into %ENV, sees a plain envp. */
static char **vars_pack(struct vars *vs)
{
	size_t bytes = (vs->n + 1) * sizeof(char *) + vs->len;
	char **env = xmalloc(bytes);
	char *p = (char *)(env + vs->n + 1);
	for (size_t i = 0; i < vs->n; i++) {
		size_t len = strlen(vars_item(vs, i)) + 1;
		memcpy(p, vars_item(vs, i), len);
		env[i] = p;
		p += len;
	}
	env[vs->n] = NULL;
	free(vs->buf);
	free(vs->off);
	return env;
}

/* The last value of a header, or NULL. */
static const char *header_value(const struct cgi_env_request *req, const char *name)
{
	const char *value = NULL;
	for (size_t i = 0; i < req->header_count; i++)
		if (req->headers[i].name && strcasecmp(req->headers[i].name, name) == 0)
			value = req->headers[i].value;
	return value;
}

/* The client behind trusted proxies, as addr_client finds it in the
 * X-Forwarded-For lines (RFC 9110 5.3: a repeated header is one list, in
 * order), written into out; NULL when they name none. */
static const char *forwarded_for(const struct cgi_env_request *req, const struct addr_list *list,
		const struct addr_range *peer, char *out, size_t outlen)
{
	const char *stack[8];
	const char **lines = stack;
	size_t n = 0, cap = sizeof stack / sizeof stack[0];
	for (size_t i = 0; i < req->header_count; i++) {
		const struct cgi_env_header *h = &req->headers[i];
		if (!h->name || !h->value || strcasecmp(h->name, "X-Forwarded-For") != 0)
			continue;
		if (n == cap) {
			const char **more = xmalloc(2 * cap * sizeof *more);
			memcpy(more, lines, n * sizeof *more);
			if (lines != stack)
				free(lines);
			lines = more;
			cap *= 2;
		}
		lines[n++] = h->value;
	}
	struct addr_range ip;
	const char *found = NULL;
	if (addr_client(list, peer, lines, n, &ip) != 0
			&& inet_ntop(ip.family, ip.bytes, out, (socklen_t)outlen) != NULL)
		found = out;
	if (lines != stack)
		free(lines);
	return found;
}

/* A host name or IP literal fit for SERVER_NAME: no path, no spaces. */
static int host_name_valid(const char *s, size_t len)
{
	if (len == 0 || len > 255)
		return 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
				    || c == '.' || c == '-' || c == '_' || c == ':' || c == '['
				    || c == ']'))
			return 0;
	}
	return 1;
}

/* Writes a header's name as its variable's after "HTTP_": upper case, '-'
 * as '_'. 0 when the name holds another byte than a letter, a digit or
 * '-': it is left out (cgi_env.h says why). */
static int header_var_name(const char *name, size_t nlen, char *out)
{
	for (size_t k = 0; k < nlen; k++) {
		char c = name[k];
		if (c >= 'a' && c <= 'z')
			out[k] = (char)(c - 32);
		else if (c == '-')
			out[k] = '_';
		else if ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
			out[k] = c;
		else
			return 0;
	}
	out[nlen] = '\0';
	return 1;
}

/* The headers never passed as HTTP_*, by their variable's name after
 * "HTTP_" (cgi_env.h says why). */
static int header_withheld(const char *var_name, size_t len, const struct cgi_env_options *opt)
{
	switch (len) {
	case 5:
		return memcmp(var_name, "PROXY", 5) == 0;
	case 12:
		return memcmp(var_name, "CONTENT_TYPE", 12) == 0;
	case 13:
		return memcmp(var_name, "AUTHORIZATION", 13) == 0 && !opt->pass_authorization;
	case 14:
		return memcmp(var_name, "CONTENT_LENGTH", 14) == 0;
	case 19:
		return memcmp(var_name, "PROXY_AUTHORIZATION", 19) == 0;
	default:
		return 0;
	}
}

/* HTTP_* from the request headers; see cgi_env.h for what is left out
 * and why. */
static void add_headers(struct vars *vs, const struct cgi_env_request *req,
		const struct cgi_env_options *opt)
{
	size_t first = vs->n;
	for (size_t i = 0; i < req->header_count; i++) {
		const char *name = req->headers[i].name;
		const char *value = req->headers[i].value ? req->headers[i].value : "";
		if (!name || !*name)
			continue;
		size_t nlen = strlen(name);
		char small[128];
		char *var = 5 + nlen + 1 <= sizeof small ? small : xmalloc(5 + nlen + 1);
		memcpy(var, "HTTP_", 5);
		if (!header_var_name(name, nlen, var + 5) || header_withheld(var + 5, nlen, opt)) {
			if (var != small)
				free(var);
			continue;
		}
		size_t vlen = 5 + nlen;
		size_t j;
		for (j = first; j < vs->n; j++)
			if (strncmp(vars_item(vs, j), var, vlen) == 0
					&& vars_item(vs, j)[vlen] == '=')
				break;
		if (j < vs->n) {
			/* The joined value is appended as a new variable that then
			 * takes the place of the first (copies: the buffer may move). */
			const char *sep = strcmp(var, "HTTP_COOKIE") == 0 ? "; " : ", ";
			char *before = xstrdup(vars_item(vs, j) + vlen + 1);
			char *more = xasprintf("%s%s", sep, value);
			vars_put(vs, var, vlen, before, more);
			vs->off[j] = vs->off[--vs->n];
			free(before);
			free(more);
		} else
			vars_set(vs, var, value);
		if (var != small)
			free(var);
	}
}

/* n in decimal, at the end of buf: snprintf costs hundreds of
 * instructions for it, three times a request. */
static const char *decimal(uint64_t n, char buf[24])
{
	char *p = buf + 23;
	*p = '\0';
	do {
		*--p = (char)('0' + n % 10);
		n /= 10;
	} while (n);
	return p;
}

char **cgi_env_build(const struct cgi_env_request *req, const struct cgi_env_options *opt)
{
	static const struct cgi_env_options no_options;
	if (!opt)
		opt = &no_options;
	struct vars vs = { 0 };
	char num[24];
	char client[INET6_ADDRSTRLEN];
	const char *remote_addr = req->remote_addr;
	int remote_port_known = req->remote_port != 0;
	int https = req->https;

	struct addr_range peer;
	if (opt->trusted_proxies && remote_addr
			&& addr_parse(remote_addr, strlen(remote_addr), &peer) == 0
			&& addr_list_match_addr(opt->trusted_proxies, &peer)) {
		const char *fwd = forwarded_for(req, opt->trusted_proxies, &peer, client,
				sizeof client);
		if (fwd) {
			remote_addr = fwd;
			remote_port_known = 0; /* the proxy's port says nothing of the client's */
		}
		const char *proto = header_value(req, "X-Forwarded-Proto");
		if (proto)
			https = strcasecmp(proto, "https") == 0;
	}

	vars_set(&vs, "AUTH_TYPE", req->auth_type);
	if (req->content_length >= 0)
		vars_set(&vs, "CONTENT_LENGTH", decimal((uint64_t)req->content_length, num));
	if (req->content_type && *req->content_type)
		vars_set(&vs, "CONTENT_TYPE", req->content_type);
	vars_set(&vs, "GATEWAY_INTERFACE", "CGI/1.1");
	if (req->path_info && *req->path_info) {
		vars_set(&vs, "PATH_INFO", req->path_info);
		if (req->document_root)
			vars_put(&vs, "PATH_TRANSLATED", strlen("PATH_TRANSLATED"),
					req->document_root, req->path_info);
	}
	vars_set(&vs, "QUERY_STRING", req->query ? req->query : "");
	vars_set(&vs, "REMOTE_ADDR", remote_addr);
	vars_set(&vs, "REMOTE_HOST", remote_addr);
	vars_set(&vs, "REMOTE_USER", req->remote_user);
	vars_set(&vs, "REQUEST_METHOD", req->method);
	vars_set(&vs, "SCRIPT_NAME", req->script_name ? req->script_name : "");

	const char *server_name = req->server_name;
	char *host_copy = NULL;
	if (!server_name) {
		const char *host = header_value(req, "Host");
		if (host) {
			size_t hlen = strlen(host);
			/* Strip ":port", but not the colons of "[::1]". */
			const char *colon = strrchr(host, ':');
			const char *bracket = strrchr(host, ']');
			if (colon && (!bracket || colon > bracket))
				hlen = (size_t)(colon - host);
			if (host_name_valid(host, hlen))
				server_name = host_copy = xstrndup(host, hlen);
		}
		if (!server_name)
			server_name = req->server_addr;
	}
	vars_set(&vs, "SERVER_NAME", server_name);
	free(host_copy);
	vars_set(&vs, "SERVER_PORT", decimal(req->server_port, num));
	vars_set(&vs, "SERVER_PROTOCOL", req->protocol);
	vars_set(&vs, "SERVER_SOFTWARE", opt->server_software ? opt->server_software : "plxd");

	vars_set(&vs, "DOCUMENT_ROOT", req->document_root);
	if (https)
		vars_set(&vs, "HTTPS", "on");
	if (opt->path && *opt->path)
		vars_set(&vs, "PATH", opt->path);
	vars_set(&vs, "REDIRECT_STATUS", "200");
	if (remote_port_known)
		vars_set(&vs, "REMOTE_PORT", decimal(req->remote_port, num));
	vars_set(&vs, "REQUEST_SCHEME", https ? "https" : "http");
	vars_set(&vs, "REQUEST_URI", req->target);
	vars_set(&vs, "SCRIPT_FILENAME", req->script_file);
	vars_set(&vs, "SERVER_ADDR", req->server_addr);
	for (char *const *e = opt->extra; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		if (eq)
			vars_put(&vs, *e, (size_t)(eq - *e), eq + 1, NULL);
	}

	add_headers(&vs, req, opt);
	return vars_pack(&vs);
}

void cgi_env_free(char **env)
{
	free(env);
}

const char *cgi_env_get(char *const *env, const char *name)
{
	size_t len = strlen(name);
	for (; env && *env; env++)
		if (strncmp(*env, name, len) == 0 && (*env)[len] == '=')
			return *env + len + 1;
	return NULL;
}
