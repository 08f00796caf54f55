/* A plugin for handlers.t's loading checks, built (tests/CMakeLists.txt)
 * with PLUGIN_GLOBAL_LIBRARY (libperl, which plxd is to make global) or
 * PLUGIN_ABI (a stale interface version), and loaded by a probe module
 * (probe.c's PROBE_PLUGIN) the way perl.so loads plxd-perl-threads.so. */
#include "handler.h"

#include <stddef.h>

#ifndef PLUGIN_ABI
#define PLUGIN_ABI PLXD_HANDLER_ABI
#endif
#ifndef PLUGIN_GLOBAL_LIBRARY
#define PLUGIN_GLOBAL_LIBRARY NULL
#endif

/* Stays invisible to the global scope: the plugin loads RTLD_LOCAL. */
int plxd_probe_plugin = 1;

const struct plxd_plugin probe_plugin = {
	.abi = PLUGIN_ABI,
	.global_library = PLUGIN_GLOBAL_LIBRARY,
};
