/* The [request] key table, its defaults, and its form as environment
 * variables for scripts. */
#include "req_limits.h"
#include "alloc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQ_KEY(n, t, field, def, ...)                                              \
	{                                                                           \
		.name = n, .type = t, .offset = offsetof(struct req_limits, field), \
		.default_value = def, __VA_ARGS__                                   \
	}

/* Sizes are kept below 2^53 so that Perl holds them exactly. */
/* clang-format off */
const struct conf_key req_limits_keys[] = {
	REQ_KEY("max_fields", CONF_UINT, max_fields, "1000", .min = 1, .max = 1000000,
		.help = "parameters (query string, form fields and uploads together) in one request",
		.limit = "400 from PLXD::Request, naming the problem",
		.tests = "integration/request_cli.t integration/request_plx.t unit/test_req_urlencoded.c"),
	REQ_KEY("max_field_size", CONF_SIZE, max_field_size, "1M", .min = 1, .max = 1ULL << 40,
		.help = "bytes in one parameter's name or value, decoded (uploads excepted)",
		.limit = "400 from PLXD::Request",
		.tests = "integration/request_cli.t unit/test_req_urlencoded.c unit/test_req_multipart.c"),
	REQ_KEY("max_upload_size", CONF_SIZE, max_upload_size, "64M", .max = 1ULL << 50,
		.help = "bytes in one uploaded file (0: no uploads at all)",
		.limit = "400 from PLXD::Request",
		.tests = "integration/request_cli.t unit/test_req_multipart.c"),
	REQ_KEY("max_total", CONF_SIZE, max_total, "64M", .max = 1ULL << 50,
		.help = "bytes of query string and request body together",
		.limit = "400 from PLXD::Request, before the body is read",
		.tests = "integration/request_cli.t unit/test_req_limits.c"),
	CONF_KEYS_END
};
/* clang-format on */

void req_limits_defaults(struct req_limits *l)
{
	char err[256];
	memset(l, 0, sizeof *l);
	/* The table's defaults are constants: they cannot fail to parse. */
	if (conf_section_defaults(req_limits_keys, l, NULL, err, sizeof err) < 0)
		abort();
}

/* Built by hand rather than with snprintf: scripts look every name up on
 * every request. */
const char *req_limits_env_name(const struct conf_key *key, char *out, size_t outlen)
{
	static const char prefix[] = "PLXD_REQUEST_";
	size_t o = 0;
	for (const char *s = prefix; *s && o + 1 < outlen; s++)
		out[o++] = *s;
	for (const char *s = key->name; *s && o + 1 < outlen; s++)
		out[o++] = (char)toupper((unsigned char)*s);
	if (outlen)
		out[o] = '\0';
	return out;
}

static void format_value(const struct conf_key *key, const struct req_limits *l, char *out,
		size_t outlen)
{
	const char *field = (const char *)l + key->offset;
	if (key->type == CONF_UINT)
		snprintf(out, outlen, "%lu", *(const unsigned long *)(const void *)field);
	else
		snprintf(out, outlen, "%llu", *(const unsigned long long *)(const void *)field);
}

char **req_limits_env(const struct req_limits *l, const char *tmp_dir)
{
	size_t nkeys = 0, bytes = 0;
	char name[64], value[32];
	for (const struct conf_key *k = req_limits_keys; k->name; k++) {
		format_value(k, l, value, sizeof value);
		bytes += strlen(req_limits_env_name(k, name, sizeof name)) + 1 + strlen(value) + 1;
		nkeys++;
	}
	if (tmp_dir)
		bytes += sizeof REQ_LIMITS_ENV_TMPDIR + 1 + strlen(tmp_dir);
	size_t slots = nkeys + (tmp_dir ? 1 : 0) + 1;
	char **env = xmalloc(slots * sizeof *env + bytes);
	char *text = (char *)(env + slots);
	size_t i = 0;
	for (const struct conf_key *k = req_limits_keys; k->name; k++) {
		format_value(k, l, value, sizeof value);
		env[i++] = text;
		text += sprintf(text, "%s=%s", req_limits_env_name(k, name, sizeof name), value)
				+ 1;
	}
	if (tmp_dir) {
		env[i++] = text;
		sprintf(text, "%s=%s", REQ_LIMITS_ENV_TMPDIR, tmp_dir);
	}
	env[i] = NULL;
	return env;
}

int req_limits_from_env(struct req_limits *l, req_limits_getenv_fn *lookup, void *ctx, char *err,
		size_t errlen)
{
	char name[64], why[200];
	for (const struct conf_key *k = req_limits_keys; k->name; k++) {
		const char *value = lookup(req_limits_env_name(k, name, sizeof name), ctx);
		if (!value)
			continue;
		if (conf_key_set(k, l, value, NULL, why, sizeof why) < 0) {
			snprintf(err, errlen, "%s: %s", name, why);
			return -1;
		}
	}
	return 0;
}
