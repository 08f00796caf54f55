/* The limits a request's parameters are parsed under: the [request] section
 * of plxd.conf, and the environment variables that carry it to a script.
 * Pure C: no libmicrohttpd, no Perl.
 *
 * How the limits reach a script: a handler that runs scripts appends
 * req_limits_env's strings to the script's environment
 * (PLXD_REQUEST_MAX_FIELDS=1000 ...); PLXD::Request reads them with
 * req_limits_from_env, and a variable that is absent (a script run from a
 * shell) keeps its default from req_limits_keys. */
#ifndef PLXD_REQ_LIMITS_H
#define PLXD_REQ_LIMITS_H

#include "conf_key.h"

struct req_limits {
	unsigned long max_fields;           /* parameters and uploads in one request */
	unsigned long long max_field_size;  /* one parameter's name or value, decoded */
	unsigned long long max_upload_size; /* one uploaded file */
	unsigned long long max_total;       /* query string plus request body */
};

/* The keys of [request], each filling a field of struct req_limits. */
extern const struct conf_key req_limits_keys[];

/* Fills l with the table's defaults. */
void req_limits_defaults(struct req_limits *l);

/* The environment variable of a key: PLXD_REQUEST_ and the key's name in
 * upper case ("max_fields" gives PLXD_REQUEST_MAX_FIELDS). Returns out. */
const char *req_limits_env_name(const struct conf_key *key, char *out, size_t outlen);

/* The variable naming the folder uploads are stored in. */
#define REQ_LIMITS_ENV_TMPDIR "PLXD_REQUEST_TMPDIR"

/* "NAME=value" strings for every key, and PLXD_REQUEST_TMPDIR=tmp_dir when
 * tmp_dir is not NULL: a NULL-terminated array in one allocation, which the
 * caller frees with free(). Never fails (aborting allocator). */
char **req_limits_env(const struct req_limits *l, const char *tmp_dir);

/* Looks a variable up; returns its value or NULL. */
typedef const char *req_limits_getenv_fn(const char *name, void *ctx);

/* Sets l's fields from the variables lookup finds; an absent variable
 * leaves its field as it was. Returns 0, or -1 with err naming the
 * variable and the problem (a value that does not parse, or out of range). */
int req_limits_from_env(struct req_limits *l, req_limits_getenv_fn *lookup, void *ctx, char *err,
		size_t errlen);

#endif
