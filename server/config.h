/* plxd's configuration: the INI file (read with libinih) turned into a
 * validated, immutable struct config. A reload builds a new one beside the
 * running one. Pure C: no libmicrohttpd, no Perl, no dlopen; handlers are
 * found through a callback so that tests and fuzzers can supply their own. */
#ifndef PLXD_CONFIG_H
#define PLXD_CONFIG_H

#include <stddef.h>

#include "addr.h"
#include "conf_key.h"
#include "req_limits.h"

struct plxd_handler;
struct deny_list;

struct server_conf {
	char *listen;
	int master;
	unsigned long threads;
	char *root;
	char *user;
	int follow_symlinks_outside;
	int stat_cache;
	unsigned long max_connections;
	unsigned long per_ip_connections;
	unsigned long connection_timeout_ms;
	unsigned long header_timeout_ms;
	unsigned long body_timeout_ms;
	unsigned long long body_min_rate;
	unsigned long long max_header_size;
	unsigned long max_header_fields;
	unsigned long long max_body;
	unsigned long shutdown_timeout_ms;
	struct addr_list trusted_proxies;
	char *error_log;
	char *access_log;
	char *log_level;
	char *tmp_dir;
};

/* The keys of [server]. */
extern const struct conf_key server_keys[];

/* [status]: plxd's status page (server/status.c). */
struct status_conf {
	char *path;             /* "" for no page */
	struct addr_list allow; /* clients that may see it */
	int counters;           /* count requests and connections at all */
};

extern const struct conf_key status_keys[];

/* One handler's configuration: its [section], defaults filled in. */
/* A handler's section: [NAME] for a handler NAME, or [NAME:INSTANCE] for
 * another instance of it, started apart with settings of its own (two perl
 * pools, say); [handlers] routes to either by the section's name. */
struct handler_section {
	char *name; /* the section's name */
	const struct plxd_handler *handler;
	void *conf;        /* handler->conf_size bytes, filled by handler->keys */
	char *load;        /* the section's load = PATH, or NULL */
	void *state;       /* the running handler's state, set by modules_apply */
	unsigned stats_id; /* its requests' counters (stats.h), set by modules_apply */
};

/* One [handlers] row: files ending in ext go to section's handler. */
struct route {
	char *ext; /* lower case, with its leading dot */
	size_t ext_len;
	struct handler_section *section;
};

/* [mount]: a file served for every path under a URL prefix, whatever the
 * document root holds there (a PSGI application at /, as plackup serves
 * one). */
struct mount {
	char *prefix; /* "/" or "/a/b": no trailing '/', no dot segments */
	size_t prefix_len;
	char *file;       /* absolute */
	const char *name; /* its last component, in file */
	struct handler_section *section;
};

struct config {
	char *file; /* as given, for messages */
	/* Lines worth logging that are no error (an old key name used), one
	 * per line, each naming file, line and key; NULL when there are none.
	 * config_load cannot log them itself: plxd opens its logs only once it
	 * has a configuration. */
	char *warnings;
	struct server_conf server;
	struct req_limits request; /* [request]: limits for parsing parameters */
	struct status_conf status; /* [status] */
	struct handler_section *handlers;
	size_t nhandlers;
	struct route *routes;
	size_t nroutes;
	struct mount *mounts; /* longest prefix first */
	size_t nmounts;
	struct handler_section *fallback; /* "static": files no route claims */
	/* [static] deny: names no handler serves (routing refuses them with
	 * 404); from the static section's "deny" row, empty when it has none. */
	struct deny_list *deny;
};

/* Finds (loading it if need be) the handler called name; load is the
 * section's load = PATH or NULL. Returns NULL with a message in err when
 * there is no such handler. */
typedef const struct plxd_handler *config_find_fn(const char *name, const char *load, char *err,
		size_t errlen, void *ctx);

/* A value given on the command line; it replaces the file's. */
struct config_override {
	const char *origin; /* "--listen", for messages */
	const char *section;
	const char *key;
	const char *value;
};

/* Reads file (NULL: no file, defaults only) and applies overrides. Returns
 * the config, or NULL with every problem in *errors, one per line, each
 * naming file, line and key (caller frees). */
struct config *config_load(const char *file, const struct config_override *overrides,
		size_t noverrides, config_find_fn *find, void *ctx, char **errors);

void config_free(struct config *config);

/* The handler section that serves a file name (matched on its extension,
 * ignoring case), or the fallback. */
const struct handler_section *config_route(const struct config *config, const char *name);

/* The mount whose prefix path is under (path itself, or a '/' after the
 * prefix; "/" takes every path), the longest, or NULL. path is decoded and
 * normalised (server/path.c). */
const struct mount *config_mount(const struct config *config, const char *path);

/* Whether name is nothing but a mapped extension (".pl", ".PLX"): such a
 * file has no extension for config_route, yet must never be sent as
 * source, so routing refuses it. */
int config_bare_extension(const struct config *config, const char *name);

/* Splits "127.0.0.1:8080", "[::1]:0", "*:80" or ":80" into host (empty
 * for any address) and port. Returns 0, or -1. */
int config_parse_listen(const char *text, char *host, size_t hostlen, unsigned *port);

#endif
