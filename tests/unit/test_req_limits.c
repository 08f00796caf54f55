/* The [request] key table: defaults, values from plxd.conf's syntax, and the
 * environment variables that carry the limits to scripts (both ways). */
#include "req_limits.h"
#include "tap.h"

#include <stdlib.h>

struct env {
	const char *names[8];
	const char *values[8];
};

static const char *lookup(const char *name, void *ctx)
{
	struct env *e = ctx;
	for (int i = 0; i < 8 && e->names[i]; i++)
		if (strcmp(e->names[i], name) == 0)
			return e->values[i];
	return NULL;
}

int main(void)
{
	struct req_limits l;
	req_limits_defaults(&l);
	ok(l.max_fields == 1000, "max_fields defaults to 1000");
	ok(l.max_field_size == 1ULL << 20, "max_field_size defaults to 1M");
	ok(l.max_upload_size == 64ULL << 20, "max_upload_size defaults to 64M");
	ok(l.max_total == 64ULL << 20, "max_total defaults to 64M");

	char err[256];
	ok(conf_key_set(conf_key_find(req_limits_keys, "max_fields"), &l, "10", NULL, err,
			   sizeof err) == 0
					&& l.max_fields == 10,
			"max_fields = 10");
	ok(conf_key_set(conf_key_find(req_limits_keys, "max_fields"), &l, "0", NULL, err,
			   sizeof err) < 0,
			"max_fields = 0 is refused");
	ok(conf_key_set(conf_key_find(req_limits_keys, "max_upload_size"), &l, "2G", NULL, err,
			   sizeof err) == 0
					&& l.max_upload_size == 2ULL << 30,
			"max_upload_size = 2G");
	ok(conf_key_set(conf_key_find(req_limits_keys, "max_upload_size"), &l, "0", NULL, err,
			   sizeof err) == 0
					&& l.max_upload_size == 0,
			"max_upload_size = 0 turns uploads off");
	ok(conf_key_set(conf_key_find(req_limits_keys, "max_total"), &l, "lots", NULL, err,
			   sizeof err) < 0,
			"a bad size is refused");
	for (const struct conf_key *k = req_limits_keys; k->name; k++)
		ok(k->help && k->help[0], "%s has a help text", k->name);

	char name[64];
	is_str(req_limits_env_name(conf_key_find(req_limits_keys, "max_field_size"), name,
			       sizeof name),
			"PLXD_REQUEST_MAX_FIELD_SIZE", "environment name of a key");

	l = (struct req_limits){ .max_fields = 7,
		.max_field_size = 100,
		.max_upload_size = 0,
		.max_total = 5000 };
	char **env = req_limits_env(&l, "/var/tmp");
	int n = 0;
	while (env[n])
		n++;
	ok(n == 5, "four limits and the folder (%d)", n);
	is_str(env[0], "PLXD_REQUEST_MAX_FIELDS=7", "max_fields");
	is_str(env[1], "PLXD_REQUEST_MAX_FIELD_SIZE=100", "max_field_size");
	is_str(env[2], "PLXD_REQUEST_MAX_UPLOAD_SIZE=0", "max_upload_size");
	is_str(env[3], "PLXD_REQUEST_MAX_TOTAL=5000", "max_total");
	is_str(env[4], "PLXD_REQUEST_TMPDIR=/var/tmp", "upload folder");

	/* What req_limits_env writes, req_limits_from_env reads back. */
	struct env e = { .names = { 0 } };
	for (int i = 0; i < 4; i++) {
		char *eq = strchr(env[i], '=');
		*eq = '\0';
		e.names[i] = env[i];
		e.values[i] = eq + 1;
	}
	struct req_limits back;
	req_limits_defaults(&back);
	ok(req_limits_from_env(&back, lookup, &e, err, sizeof err) == 0, "read back");
	ok(back.max_fields == 7 && back.max_field_size == 100 && back.max_upload_size == 0
					&& back.max_total == 5000,
			"the same limits come back");
	free(env);
	env = req_limits_env(&l, NULL);
	ok(env[4] == NULL, "no folder variable without a folder");
	free(env);

	struct env partial = { .names = { "PLXD_REQUEST_MAX_FIELDS" }, .values = { "3" } };
	req_limits_defaults(&back);
	ok(req_limits_from_env(&back, lookup, &partial, err, sizeof err) == 0
					&& back.max_fields == 3 && back.max_total == 64ULL << 20,
			"absent variables keep their defaults");
	struct env bad = { .names = { "PLXD_REQUEST_MAX_TOTAL" }, .values = { "12Q" } };
	ok(req_limits_from_env(&back, lookup, &bad, err, sizeof err) < 0
					&& strstr(err, "PLXD_REQUEST_MAX_TOTAL") != NULL,
			"a bad value names its variable: %s", err);
	return done_testing();
}
