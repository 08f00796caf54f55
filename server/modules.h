/* The handler registry: built-in handlers and handlers loaded from shared
 * objects, found by name. */
#ifndef PLXD_MODULES_H
#define PLXD_MODULES_H

#include <stddef.h>

#include "config.h"
#include "handler.h"

/* config_find_fn for config_load: a built-in handler, or a module loaded
 * from load (when given), else from the folder beside the plxd binary
 * (build tree) or the install folder. */
const struct plxd_handler *modules_find(const char *name, const char *load, char *err,
		size_t errlen, void *ctx);

/* Starts every handler config names that is not running yet, or
 * reconfigures it if it is, and records each one's state in its section.
 * Returns 0, or -1 (logged) if one failed to start. */
int modules_apply(struct config *config);

/* Stops every started handler, in reverse order. */
void modules_stop_all(void);

/* Stops what still runs and unloads the modules: call it after the last
 * config that names their handlers (and their key tables) is freed. */
void modules_unload(void);

/* Where rel (a path relative to the folder of the running plxd binary)
 * leads, written to out as an absolute path without "..": 0, or -1 when
 * it names nothing. An installed tree finds its own files this way under
 * whatever prefix it was installed or moved to. */
int modules_from_binary(const char *rel, char *out, size_t outlen);

/* Calls fn for every handler that can be found: built-ins and the modules
 * in the module folders (for --help). */
void modules_each_known(void (*fn)(const struct plxd_handler *h, int builtin, void *ctx),
		void *ctx);

#endif
