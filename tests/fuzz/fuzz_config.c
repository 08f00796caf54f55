/* Fuzzes config_load on a file: the input is written to a memfd and read
 * back through /proc/self/fd, with fake handlers whose keys cover every
 * type (an alias too). A config comes back with no errors, or NULL with errors; either
 * way nothing leaks (ASan) and every route leads to a handler. */
#include "config.h"
#include "handler.h"
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct every_type {
	char *s;
	char *p;
	int b;
	unsigned long u;
	unsigned long long size;
	unsigned long ms;
	char *list;
	struct addr_list addrs;
};

static const char *check_word(const char *value)
{
	return strchr(value, '!') ? "no exclamation marks" : NULL;
}

#define KEY(n, t, f, d, ...)                                                    \
	{                                                                       \
		.name = n, .type = t, .offset = offsetof(struct every_type, f), \
		.default_value = d, .help = "h", __VA_ARGS__                    \
	}

/* clang-format off */
static const struct conf_key keys[] = {
	KEY("s", CONF_STRING, s, "x", .check = check_word),
	KEY("p", CONF_PATH, p, "rel/dir"),
	KEY("b", CONF_BOOL, b, "no"),
	KEY("u", CONF_UINT, u, "3", .min = 1, .max = 100),
	KEY("size", CONF_SIZE, size, "1K", .max = 1ULL << 40),
	KEY("ms", CONF_DURATION, ms, "2s"),
	KEY("list", CONF_LIST, list, "a b"),
	KEY("addrs", CONF_ADDRS, addrs, "127.0.0.0/8 ::1"),
	CONF_ALIAS_KEY("old_size", "size"),
	CONF_KEYS_END
};
/* clang-format on */

/* clang-format off */
static const struct plxd_handler fakes[] = {
	{ .abi = PLXD_HANDLER_ABI, .name = "static", .keys = keys, .conf_size = sizeof(struct every_type) },
	{ .abi = PLXD_HANDLER_ABI, .name = "echo", .keys = keys, .conf_size = sizeof(struct every_type) },
	{ .abi = PLXD_HANDLER_ABI, .name = "cgi", .keys = keys, .conf_size = sizeof(struct every_type) },
};
/* clang-format on */

static const struct plxd_handler *find(const char *name, const char *load, char *err, size_t errlen,
		void *ctx)
{
	(void)ctx;
	if (load) {
		snprintf(err, errlen, "no modules while fuzzing");
		return NULL;
	}
	for (size_t i = 0; i < sizeof fakes / sizeof fakes[0]; i++)
		if (strcmp(fakes[i].name, name) == 0)
			return &fakes[i];
	snprintf(err, errlen, "no handler called '%s'", name);
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	if (fd < 0)
		fd = memfd_create("plxd-fuzz-config", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	char file[64];
	snprintf(file, sizeof file, "/proc/self/fd/%d", fd);
	char *errors = NULL;
	struct config *c = config_load(file, NULL, 0, find, NULL, &errors);
	if (c) {
		FUZZ_CHECK(errors == NULL);
		FUZZ_CHECK(c->fallback != NULL);
		for (size_t i = 0; i < c->nroutes; i++) {
			FUZZ_CHECK(c->routes[i].section && c->routes[i].ext[0] == '.');
			FUZZ_CHECK(config_route(c, c->routes[i].ext + 1) != NULL);
		}
		FUZZ_CHECK(config_route(c, "index.html") != NULL);
		config_free(c);
	} else {
		FUZZ_CHECK(errors != NULL && errors[0] != '\0');
		free(errors);
	}
	return 0;
}
