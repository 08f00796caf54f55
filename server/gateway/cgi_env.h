/* The CGI/1.1 environment (RFC 3875 section 4.1 plus the extras scripts rely
 * on), built from plain request facts into an envp array. Shared by the CGI
 * handler and the persistent Perl handler. Pure C: no libmicrohttpd, no Perl.
 */
#ifndef PLXD_CGI_ENV_H
#define PLXD_CGI_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "addr.h"

/* One request header as received. Repeated names appear once per line. */
struct cgi_env_header {
	const char *name;
	const char *value;
};

/* What the builder knows of one request. Every string may be NULL where
 * noted; none is kept after cgi_env_build returns. */
struct cgi_env_request {
	const char *method;        /* REQUEST_METHOD: "GET" */
	const char *protocol;      /* SERVER_PROTOCOL: "HTTP/1.1" */
	const char *target;        /* REQUEST_URI: the request target exactly as received */
	const char *query;         /* QUERY_STRING: raw and undecoded, no '?'; NULL: "" */
	const char *script_name;   /* SCRIPT_NAME: URL path of the script, "/a.pl" */
	const char *path_info;     /* PATH_INFO: decoded path after the script, "/x/y";
				      NULL or "": PATH_INFO and PATH_TRANSLATED are unset */
	const char *script_file;   /* SCRIPT_FILENAME: absolute file name of the script */
	const char *document_root; /* DOCUMENT_ROOT, absolute without a trailing '/';
				      PATH_TRANSLATED is document_root + path_info */
	const char *remote_addr;   /* REMOTE_ADDR (and REMOTE_HOST: no DNS lookups) */
	unsigned remote_port;      /* REMOTE_PORT */
	const char *server_addr;   /* SERVER_ADDR: the local address the request came to */
	unsigned server_port;      /* SERVER_PORT */
	const char *server_name;   /* SERVER_NAME; NULL: the Host header without its port
				      when it is a valid host name, else server_addr */
	const char *content_type;  /* CONTENT_TYPE; NULL or "": unset */
	int64_t content_length;    /* CONTENT_LENGTH; -1: unset (no body) */
	int https;                 /* nonzero: HTTPS=on and REQUEST_SCHEME=https */
	const char *auth_type;     /* AUTH_TYPE; NULL: unset (plxd authenticates nobody) */
	const char *remote_user;   /* REMOTE_USER; NULL: unset */
	const struct cgi_env_header *headers; /* the request headers, in order */
	size_t header_count;
};

/* Settings of the handler building the environment. */
struct cgi_env_options {
	const char *path;            /* PATH for the script; NULL or "": unset */
	const char *server_software; /* SERVER_SOFTWARE; NULL: "plxd" */
	int pass_authorization;      /* nonzero: Authorization becomes HTTP_AUTHORIZATION */
	const struct addr_list *trusted_proxies; /* [server] trusted_proxies, NULL:
					none. When remote_addr falls in it, the nearest
					untrusted X-Forwarded-For address becomes
					REMOTE_ADDR (REMOTE_PORT is then unset) and
					X-Forwarded-Proto: https sets HTTPS */
	char *const *extra;                      /* "NAME=value" strings of plxd's own, added as
					they are (PERL5LIB, PLXD_REQUEST_*); NULL:
					none */
};

/* Builds the environment: a NULL-terminated array of "NAME=value" strings,
 * in one allocation the caller frees with cgi_env_free. Never fails (plxd's
 * allocators abort on out-of-memory).
 *
 * Variables: AUTH_TYPE, CONTENT_LENGTH, CONTENT_TYPE, GATEWAY_INTERFACE,
 * PATH_INFO, PATH_TRANSLATED, QUERY_STRING, REMOTE_ADDR, REMOTE_HOST,
 * REMOTE_USER, REQUEST_METHOD, SCRIPT_NAME, SERVER_NAME, SERVER_PORT,
 * SERVER_PROTOCOL, SERVER_SOFTWARE (RFC 3875), and DOCUMENT_ROOT, HTTPS,
 * PATH, REDIRECT_STATUS=200, REMOTE_PORT, REQUEST_SCHEME, REQUEST_URI,
 * SCRIPT_FILENAME, SERVER_ADDR, each only when it has a value; then HTTP_*
 * for request headers. Nothing of the calling process's environment.
 *
 * Header rules: a name becomes HTTP_ + upper case with '-' as '_'. Names
 * holding anything but letters, digits and '-' (an '_' above all) are
 * dropped, so "X-Foo" and "X_Foo" can never shadow each other; repeated
 * names are joined with ", " ("; " for Cookie) into one variable.
 * Content-Type and Content-Length are only CONTENT_TYPE/CONTENT_LENGTH.
 * Proxy never becomes HTTP_PROXY (httpoxy: libraries read it as their
 * proxy); Proxy-Authorization never passes; Authorization only with
 * pass_authorization. */
char **cgi_env_build(const struct cgi_env_request *req, const struct cgi_env_options *opt);

void cgi_env_free(char **env);

/* The value of name in env, or NULL. For tests and for the Perl handler,
 * which copies the array into %ENV. */
const char *cgi_env_get(char *const *env, const char *name);

#endif
