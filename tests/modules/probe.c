/* A handler module for handlers.t's loading checks, built several times
 * (tests/CMakeLists.txt) with PROBE_NAME, PROBE_SYMBOL, and optionally
 * PROBE_PLUGIN (a plugin beside it, tests/modules/probe_plugin.c, that it
 * loads with plxd_plugin_load when started) or PROBE_ABI (a stale
 * interface version). Each exports a symbol of its own name and, when
 * started, logs which of the symbols below are visible in the global
 * scope: another probe's and a plugin's stay invisible (modules and
 * plugins load RTLD_LOCAL), plxd's own is visible, libperl's only once a
 * plugin that names it as its global_library is loaded. */
#include "handler.h"
#include "alloc.h"
#include "log.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#ifndef PROBE_ABI
#define PROBE_ABI PLXD_HANDLER_ABI
#endif

/* What another module could resolve to if it were loaded RTLD_GLOBAL. */
int PROBE_SYMBOL = 1;

struct probe_conf {
	unsigned long unused;
};

/* clang-format off */
static const struct conf_key probe_keys[] = {
	{ .name = "unused", .type = CONF_UINT, .default_value = "0",
	  .offset = offsetof(struct probe_conf, unused), .help = "nothing" },
	CONF_KEYS_END
};
/* clang-format on */

#ifdef PROBE_PLUGIN
static void probe_load_plugin(void)
{
	char dir[PATH_MAX], err[1024];
	if (plxd_module_dir(&plxd_handler_module, dir, sizeof dir) < 0) {
		plxd_log(PLXD_LOG_ERROR, "%s: no folder", PROBE_NAME);
		return;
	}
	char *path = xasprintf("%s/%s", dir, PROBE_PLUGIN);
	if (plxd_plugin_load(path, "probe_plugin", err, sizeof err))
		plxd_log(PLXD_LOG_INFO, "%s: plugin loaded", PROBE_NAME);
	else
		plxd_log(PLXD_LOG_INFO, "%s: plugin refused: %s", PROBE_NAME, err);
	free(path);
}
#endif

static int probe_start(const void *conf, void **state)
{
	(void)conf;
#ifdef PROBE_PLUGIN
	probe_load_plugin();
#endif
	static const char *const watched[] = { "plxd_probe_a", "plxd_probe_b", "plxd_log",
		"plxd_probe_plugin", "Perl_xs_handshake" };
	for (size_t i = 0; i < sizeof watched / sizeof watched[0]; i++)
		plxd_log(PLXD_LOG_INFO, "%s: %s is %s", PROBE_NAME, watched[i],
				dlsym(RTLD_DEFAULT, watched[i]) ? "visible" : "not visible");
	*state = NULL;
	return 0;
}

static int probe_handle(struct plxd_request *r)
{
	return plxd_respond_error(r, 404);
}

static void probe_finished(struct plxd_request *r, enum plxd_end how)
{
	(void)r;
	(void)how;
}

const struct plxd_handler plxd_handler_module = {
	.abi = PROBE_ABI,
	.name = PROBE_NAME,
	.keys = probe_keys,
	.conf_size = sizeof(struct probe_conf),
	.start = probe_start,
	.handle = probe_handle,
	.finished = probe_finished,
};
