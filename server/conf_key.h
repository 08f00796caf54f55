/* Configuration keys declared as tables: one row per key gives its name, type,
 * default, where the parsed value is stored and a help text, so that parsing,
 * --help, --check and the documentation all come from the same rows.
 * Pure C: no libmicrohttpd, no Perl. */
#ifndef PLXD_CONF_KEY_H
#define PLXD_CONF_KEY_H

#include <stddef.h>

enum conf_type {
	CONF_STRING,   /* char *, owned by the section struct */
	CONF_PATH,     /* char *, made absolute against the config file's folder */
	CONF_BOOL,     /* int: yes/no, on/off, true/false, 1/0 */
	CONF_UINT,     /* unsigned long, within [min, max] */
	CONF_SIZE,     /* unsigned long long bytes, with an optional K, M or G suffix */
	CONF_DURATION, /* unsigned long milliseconds: "500ms", "2s", "3m", a bare number is seconds */
	CONF_LIST,     /* char *, whitespace-separated words, kept as written */
	CONF_ADDRS,    /* struct addr_list (addr.h): IP addresses and ADDR/BITS ranges,
			  whitespace-separated, parsed into binary ranges at load */
	CONF_ALIAS     /* no value: an old name of the row alias_of names (CONF_ALIAS_KEY) */
};

/* An extra check for a value that parsed; returns NULL when fine, or a
 * static message saying what is wrong. */
typedef const char *conf_check_fn(const char *value);

struct conf_key {
	const char *name;
	enum conf_type type;
	const char *default_value;   /* parsed like a value from the file; NULL: empty */
	size_t offset;               /* where the value goes in the section's struct */
	unsigned long long min, max; /* for UINT, SIZE and DURATION; max 0: no limit */
	conf_check_fn *check;
	unsigned flags;       /* CONF_RESTART */
	const char *help;     /* what it sets; `code` spans allowed */
	const char *alias_of; /* CONF_ALIAS only: the key's current name */
	const char *limit;    /* what happens at the limit; NULL: not a limit */
	const char *tests;    /* space-separated paths under tests/ that check
				      the key's behaviour, or "code:FILE" (read
				      against FILE, no test); for doc/configuration.md */
};

/* The running server cannot apply a new value on reload (SIGHUP). */
#define CONF_RESTART 1u

/* Tables end with a row whose name is NULL. */
#define CONF_KEYS_END        \
	{                    \
		.name = NULL \
	}

/* A renamed key: the old name keeps working, and config_load logs a
 * deprecation line naming file, line, old and new name where it is used.
 * The row holds nothing: walkers of a table skip CONF_ALIAS rows. */
#define CONF_ALIAS_KEY(old, current)                                 \
	{                                                            \
		.name = old, .type = CONF_ALIAS, .alias_of = current \
	}

/* The row called name, or NULL. An alias row is followed to the row it
 * names: the caller tells that an old name was used by the returned row's
 * name differing from name. */
const struct conf_key *conf_key_find(const struct conf_key *keys, const char *name);

/* Parses text into the field the row names. base_dir resolves relative PATH
 * values. Returns 0, or -1 with a message in err. */
int conf_key_set(const struct conf_key *key, void *section, const char *text, const char *base_dir,
		char *err, size_t errlen);

/* Sets every key of the table to its default; relative PATH defaults are
 * resolved against base_dir. Returns 0, or -1 with err (only a bad default
 * in a table can fail: a programming error). */
int conf_section_defaults(const struct conf_key *keys, void *section, const char *base_dir,
		char *err, size_t errlen);

/* Frees what a table's section struct owns (strings, address lists). */
void conf_section_free(const struct conf_key *keys, void *section);

const char *conf_type_name(enum conf_type type);

/* Whether a key's value is the same in two section structs, and copying it
 * from one to the other (for keys a reload cannot change). */
int conf_value_equal(const struct conf_key *key, const void *a, const void *b);
void conf_value_copy(const struct conf_key *key, void *dst, const void *src);

/* Value parsers, shared with the command line. Return 0, or -1. */
int conf_parse_size(const char *text, unsigned long long *out);

#endif
