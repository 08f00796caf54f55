/* Handler registry. The loading rule, all of it:
 *  - every module is opened RTLD_NOW | RTLD_LOCAL: each exports the same
 *    plxd_handler_module and may carry the same shared code (the CGI
 *    gateway), and no module may resolve to another's copy. Modules call
 *    back into plxd's own exported symbols (plxdcore is linked whole into
 *    the executable, never into a module);
 *  - a plugin (plxd_plugin_load), a shared object a module opens only
 *    when its settings need it, is opened the same way, and its struct may
 *    name a global_library: that one library is then opened RTLD_NOW |
 *    RTLD_GLOBAL before the plugin is handed over. perl.so's
 *    plxd-perl-threads.so names libperl, as Debian's XS modules (POSIX.so,
 *    ...) do not link it and resolve Perl_* in the global scope
 *    ("undefined symbol: Perl_xs_handshake" otherwise). That is the one
 *    way libperl is loaded into plxd to stay, and it happens only for an
 *    instance with isolation = thread;
 *  - a module and a plugin both carry PLXD_HANDLER_ABI, checked here, the
 *    one check of what they were built against;
 *  - nothing else is ever global. */
#include "modules.h"
#include "stats.h"
#include "alloc.h"
#include "log.h"

#include <dirent.h>
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef PLXD_MODULE_DIR
#define PLXD_MODULE_DIR "/usr/local/lib/plxd"
#endif
/* The same folder from the binary's (bin/): "" when either is absolute. */
#ifndef PLXD_MODULE_FROM_BIN
#define PLXD_MODULE_FROM_BIN "../lib/plxd"
#endif

extern const struct plxd_handler static_handler;

static const struct plxd_handler *const builtins[] = { &static_handler };

struct loaded {
	const struct plxd_handler *handler;
	void *dl; /* NULL for built-ins */
};

/* A started handler: one per section name ([perl] and [perl:thread] are
 * two), in the order they started. */
struct instance {
	char *name;
	const struct plxd_handler *handler;
	void *state;
};

/* Touched by the main thread only (start-up, reload, shutdown). */
static struct loaded *loaded;
static size_t nloaded;
static struct instance *instances;
static size_t ninstances;

static struct loaded *find_loaded(const char *name)
{
	for (size_t i = 0; i < nloaded; i++)
		if (strcmp(loaded[i].handler->name, name) == 0)
			return &loaded[i];
	return NULL;
}

static struct loaded *remember(const struct plxd_handler *h, void *dl)
{
	loaded = xrealloc(loaded, (nloaded + 1) * sizeof *loaded);
	loaded[nloaded] = (struct loaded){ .handler = h, .dl = dl };
	return &loaded[nloaded++];
}

int modules_from_binary(const char *rel, char *out, size_t outlen)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0 || !rel[0])
		return -1;
	exe[n] = '\0';
	char *path = xasprintf("%s/%s", dirname(exe), rel);
	char *real = realpath(path, NULL);
	int rc = real && strlen(real) < outlen ? 0 : -1;
	if (rc == 0)
		memcpy(out, real, strlen(real) + 1);
	free(real);
	free(path);
	return rc;
}

/* The folders modules are looked for in: modules/ beside the binary when it
 * runs from the build tree; else the install folder as seen from the
 * binary's own (an installation under another prefix than the build's, or
 * moved), or where the build meant to install it. */
static void module_dirs(char dirs[2][PATH_MAX])
{
	if (modules_from_binary("modules", dirs[0], PATH_MAX) < 0)
		dirs[0][0] = '\0';
	if (modules_from_binary(PLXD_MODULE_FROM_BIN, dirs[1], PATH_MAX) < 0)
		snprintf(dirs[1], PATH_MAX, "%s", PLXD_MODULE_DIR);
}

/* Opens path RTLD_NOW | RTLD_LOCAL and finds symbol in it, a struct whose
 * first member is the abi it was built for (a module's struct
 * plxd_handler, a plugin's struct plxd_plugin). Returns the struct, with
 * the handle in *dl, or NULL with a message in err. */
static const void *open_checked(const char *path, const char *what, const char *symbol, void **dl,
		char *err, size_t errlen)
{
	*dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!*dl) {
		snprintf(err, errlen, "cannot load %s %s: %s", what, path, dlerror());
		return NULL;
	}
	const unsigned *abi = dlsym(*dl, symbol);
	if (!abi)
		snprintf(err, errlen, "%s is not a plxd %s (no %s)", path, what, symbol);
	else if (*abi != PLXD_HANDLER_ABI)
		snprintf(err, errlen,
				"%s was built for handler interface %08x, this plxd has %08x: "
				"rebuild it against this plxd's headers",
				path, *abi, PLXD_HANDLER_ABI);
	else
		return abi;
	dlclose(*dl);
	*dl = NULL;
	return NULL;
}

static const struct plxd_handler *load_module(const char *path, const char *name, char *err,
		size_t errlen)
{
	void *dl;
	const struct plxd_handler *h = open_checked(path, "handler module", "plxd_handler_module",
			&dl, err, errlen);
	if (!h)
		return NULL;
	if (name && strcmp(h->name, name) != 0) {
		snprintf(err, errlen, "%s holds handler '%s', not '%s'", path, h->name, name);
		dlclose(dl);
		return NULL;
	}
	struct loaded *already = find_loaded(h->name);
	if (already) { /* the same module by another path, or loaded twice */
		dlclose(dl);
		return already->handler;
	}
	return remember(h, dl)->handler;
}

/* The plugin and its global_library are never closed: libperl's atfork
 * handlers and thread keys point into them until the process ends. A
 * second load (another instance, a reload) finds them loaded. */
const void *plxd_plugin_load(const char *path, const char *symbol, char *err, size_t errlen)
{
	void *dl;
	const struct plxd_plugin *p = open_checked(path, "plugin", symbol, &dl, err, errlen);
	if (!p || !p->global_library)
		return p;
	/* Loads it, or makes global the copy the plugin itself linked. */
	if (!dlopen(p->global_library, RTLD_NOW | RTLD_GLOBAL)) {
		snprintf(err, errlen, "%s: cannot load %s, whose symbols it needs global: %s", path,
				p->global_library, dlerror());
		dlclose(dl);
		return NULL;
	}
	plxd_log(PLXD_LOG_DEBUG, "%s: %s loaded with its symbols global", path, p->global_library);
	return p;
}

const struct plxd_handler *modules_find(const char *name, const char *load, char *err,
		size_t errlen, void *ctx)
{
	(void)ctx;
	for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++) {
		if (strcmp(builtins[i]->name, name) == 0) {
			if (load) {
				snprintf(err, errlen, "%s is built in: load = is not allowed",
						name);
				return NULL;
			}
			struct loaded *l = find_loaded(name);
			return l ? l->handler : remember(builtins[i], NULL)->handler;
		}
	}
	struct loaded *l = find_loaded(name);
	if (l && !load)
		return l->handler;
	if (load)
		return load_module(load, name, err, errlen);
	if (strchr(name, '/') || name[0] == '.' || name[0] == '\0') {
		snprintf(err, errlen, "'%s' is not a handler name", name);
		return NULL;
	}
	char dirs[2][PATH_MAX];
	module_dirs(dirs);
	for (int i = 0; i < 2; i++) {
		if (!dirs[i][0])
			continue;
		char *path = xasprintf("%s/%s.so", dirs[i], name);
		const struct plxd_handler *h = NULL;
		int exists = access(path, F_OK) == 0;
		if (exists)
			h = load_module(path, name, err, errlen);
		free(path);
		if (exists)
			return h;
	}
	snprintf(err, errlen,
			"no handler called '%s' (built in: static; modules looked for in %s%s%s)",
			name, dirs[0], dirs[0][0] ? " and " : "", dirs[1]);
	return NULL;
}

int modules_apply(struct config *config)
{
	for (size_t i = 0; i < config->nhandlers; i++) {
		struct handler_section *s = &config->handlers[i];
		struct instance *in = NULL;
		for (size_t k = 0; k < ninstances && !in; k++)
			if (strcmp(instances[k].name, s->name) == 0)
				in = &instances[k];
		if (in) {
			if (in->handler->reconfigure
					&& in->handler->reconfigure(in->state, s->conf) < 0)
				plxd_log(PLXD_LOG_ERROR, "handler %s kept its old settings",
						s->name);
		} else {
			void *state = NULL;
			if (s->handler->start && s->handler->start(s->conf, &state) < 0) {
				plxd_log(PLXD_LOG_ERROR, "handler %s failed to start", s->name);
				return -1;
			}
			instances = xrealloc(instances, (ninstances + 1) * sizeof *instances);
			in = &instances[ninstances++];
			*in = (struct instance){ .name = xstrdup(s->name),
				.handler = s->handler,
				.state = state };
		}
		/* Requests find the state through their config, never through
		 * this registry, which a reload may grow under them. */
		s->state = in->state;
		s->stats_id = stats_handler_id(s->name);
	}
	return 0;
}

void modules_stop_all(void)
{
	for (size_t i = ninstances; i-- > 0;) {
		if (instances[i].handler->stop)
			instances[i].handler->stop(instances[i].state);
		free(instances[i].name);
	}
	free(instances);
	instances = NULL;
	ninstances = 0;
}

void modules_unload(void)
{
	modules_stop_all();
	for (size_t i = nloaded; i-- > 0;) {
		if (loaded[i].dl)
			dlclose(loaded[i].dl);
	}
	free(loaded);
	loaded = NULL;
	nloaded = 0;
}

void modules_each_known(void (*fn)(const struct plxd_handler *h, int builtin, void *ctx), void *ctx)
{
	for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
		fn(builtins[i], 1, ctx);
	char dirs[2][PATH_MAX];
	module_dirs(dirs);
	for (int i = 0; i < 2; i++) {
		DIR *d = dirs[i][0] ? opendir(dirs[i]) : NULL;
		if (!d)
			continue;
		struct dirent *de;
		while ((de = readdir(d))) {
			size_t len = strlen(de->d_name);
			if (len < 4 || strcmp(de->d_name + len - 3, ".so") != 0)
				continue;
			char name[256];
			snprintf(name, sizeof name, "%.*s", (int)(len - 3), de->d_name);
			if (find_loaded(name))
				continue;
			char err[512];
			const struct plxd_handler *h =
					modules_find(name, NULL, err, sizeof err, NULL);
			if (h)
				fn(h, 0, ctx);
		}
		closedir(d);
	}
}

int plxd_module_dir(const void *symbol, char *out, size_t outlen)
{
	Dl_info info;
	char self[PATH_MAX];
	if (!dladdr(symbol, &info) || !info.dli_fname || !realpath(info.dli_fname, self))
		return -1;
	char *slash = strrchr(self, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	int n = snprintf(out, outlen, "%s", self);
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}
