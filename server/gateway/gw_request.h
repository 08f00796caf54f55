/* A request's CGI/1.1 environment from what plxd holds of it: the one place
 * where the two script handlers (cgi for .pl, perl for .plx) turn a struct
 * plxd_request into cgi_env_build's input, so that a script sees the same
 * variables either way. */
#ifndef PLXD_CGI_REQUEST_H
#define PLXD_CGI_REQUEST_H

#include <stddef.h>

struct plxd_request;

/* Builds the environment (free it with cgi_env_free): the RFC 3875
 * variables and HTTP_* headers (cgi_env.h), then plxd's own: the
 * [request] limits (PLXD_REQUEST_*) and perl5lib ("PERL5LIB=...", where
 * PLXD::Request lives; NULL for none). path is the scripts' PATH. */
char **cgi_request_env(struct plxd_request *r, const char *path, int pass_authorization,
		const char *perl5lib);

/* Logs why a script got no response of its own, in the one form both script
 * handlers use: "SCRIPT: answered STATUS: WHY; HOW" (how it ended: "died",
 * "exited with status 3", "killed by signal 11 (SIGSEGV)", or "" for none). */
void cgi_request_log_failure(const char *script, unsigned status, const char *why,
		const char *how);

/* Copies a parsed CGI response's headers (Content-Type, Location, the
 * rest but Server: plxd names itself once) onto resp; a header
 * libmicrohttpd refuses is logged with script's name and dropped. */
struct MHD_Response;
struct cgi_reply;
void cgi_request_add_headers(struct MHD_Response *resp, const struct cgi_reply *rep,
		const char *script);

/* The folder of the handler module this code is linked into (helpers such
 * as plxd-cgi-exec and plxd-perl-worker, and perl5/, sit beside it).
 * Returns 0, or -1. */
int cgi_request_module_dir(char *out, size_t outlen);

#endif
