/* A request's CGI/1.1 environment from what plxd holds of it: the one place
 * where the two script handlers (cgi for .pl, perl for .plx) turn a struct
 * plxd_request into cgi_env_build's input, so that a script sees the same
 * variables either way. */
#ifndef PLXD_GW_REQUEST_H
#define PLXD_GW_REQUEST_H

#include <stddef.h>

struct plxd_request;

/* Builds the environment (free it with cgi_env_free): the RFC 3875
 * variables and HTTP_* headers (cgi_env.h), then plxd's own: the
 * [request] limits (PLXD_REQUEST_*) and perl5lib ("PERL5LIB=...", where
 * PLXD::Request lives; NULL for none). path is the scripts' PATH. */
char **gw_request_env(struct plxd_request *r, const char *path, int pass_authorization,
		const char *perl5lib);

#endif
