/* The running configuration: a config and its open document root, shared by
 * reference. A request keeps the generation it started with, so a reload
 * (SIGHUP) never changes settings under a request in flight. */
#ifndef PLXD_SITE_H
#define PLXD_SITE_H

#include <stdatomic.h>
#include <stddef.h>

#include "config.h"

struct site {
	struct config *config;
	int root_fd; /* O_PATH descriptor of config->server.root */
	atomic_uint refs;
	unsigned generation; /* 1 for the first installed, one more per reload */
	/* config->request and tmp_dir as scripts' environment has them
	 * (req_limits_env): every CGI and Perl request passes them on. */
	char **limits_env;
};

/* Takes ownership of config. Returns NULL with a message in err when the
 * document root cannot be opened. */
struct site *site_create(struct config *config, char *err, size_t errlen);

/* The current site, with a reference the caller must release. */
struct site *site_acquire(void);
void site_release(struct site *site);

/* Makes site current; the previous one goes when its last request ends. */
void site_install(struct site *site);

#endif
