/* Typed configuration values: parsing text into the fields that key tables
 * name. Strict on purpose: a value that does not parse whole is an error,
 * never a silent zero. */
#include "conf_key.h"
#include "addr.h"
#include "alloc.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct conf_key *find_row(const struct conf_key *keys, const char *name)
{
	for (; keys && keys->name; keys++)
		if (strcmp(keys->name, name) == 0)
			return keys;
	return NULL;
}

const struct conf_key *conf_key_find(const struct conf_key *keys, const char *name)
{
	const struct conf_key *key = find_row(keys, name);
	if (key && key->type == CONF_ALIAS) {
		/* One step only: an alias of an alias is a table's mistake. */
		key = key->alias_of ? find_row(keys, key->alias_of) : NULL;
		if (key && key->type == CONF_ALIAS)
			key = NULL;
	}
	return key;
}

const char *conf_type_name(enum conf_type type)
{
	switch (type) {
	case CONF_STRING:
		return "string";
	case CONF_PATH:
		return "path";
	case CONF_BOOL:
		return "yes|no";
	case CONF_UINT:
		return "number";
	case CONF_SIZE:
		return "size";
	case CONF_DURATION:
		return "duration";
	case CONF_LIST:
		return "list";
	case CONF_ADDRS:
		return "addresses";
	case CONF_ALIAS:
		return "alias";
	}
	return "?";
}

static int conf_parse_bool(const char *text, int *out)
{
	static const char *const yes[] = { "yes", "on", "true", "1" };
	static const char *const no[] = { "no", "off", "false", "0" };
	for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
		if (strcasecmp(text, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(text, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

/* A plain decimal number followed by a suffix; strtoull alone would accept
 * signs, spaces and hex. */
static int parse_number(const char *text, unsigned long long *value, const char **suffix)
{
	if (!isdigit((unsigned char)text[0]))
		return -1;
	errno = 0;
	char *end;
	*value = strtoull(text, &end, 10);
	if (errno == ERANGE)
		return -1;
	*suffix = end;
	return 0;
}

static int multiply(unsigned long long *value, unsigned long long by)
{
	if (*value > ~0ULL / by)
		return -1;
	*value *= by;
	return 0;
}

int conf_parse_size(const char *text, unsigned long long *out)
{
	unsigned long long v;
	const char *suffix;
	if (parse_number(text, &v, &suffix) < 0)
		return -1;
	unsigned long long unit = 1;
	if (*suffix) {
		switch (toupper((unsigned char)*suffix)) {
		case 'K':
			unit = 1ULL << 10;
			break;
		case 'M':
			unit = 1ULL << 20;
			break;
		case 'G':
			unit = 1ULL << 30;
			break;
		default:
			return -1;
		}
		suffix++;
		if (*suffix == 'B' || *suffix == 'b')
			suffix++;
		if (*suffix)
			return -1;
	}
	if (multiply(&v, unit) < 0)
		return -1;
	*out = v;
	return 0;
}

static int conf_parse_duration_ms(const char *text, unsigned long *out)
{
	unsigned long long v;
	const char *suffix;
	if (parse_number(text, &v, &suffix) < 0)
		return -1;
	unsigned long long unit;
	if (*suffix == '\0' || strcmp(suffix, "s") == 0)
		unit = 1000;
	else if (strcmp(suffix, "ms") == 0)
		unit = 1;
	else if (strcmp(suffix, "m") == 0)
		unit = 60 * 1000;
	else if (strcmp(suffix, "h") == 0)
		unit = 3600 * 1000;
	else
		return -1;
	if (multiply(&v, unit) < 0 || v > (unsigned long)-1)
		return -1;
	*out = (unsigned long)v;
	return 0;
}

static int in_range(const struct conf_key *key, unsigned long long v, char *err, size_t errlen)
{
	if (v < key->min || (key->max && v > key->max)) {
		if (key->max)
			snprintf(err, errlen, "must be between %llu and %llu", key->min, key->max);
		else
			snprintf(err, errlen, "must be at least %llu", key->min);
		return -1;
	}
	return 0;
}

static char *absolute_path(const char *text, const char *base_dir)
{
	if (text[0] == '/' || text[0] == '\0' || strcmp(text, "-") == 0 || !base_dir)
		return xstrdup(text);
	return xasprintf("%s/%s", base_dir, text);
}

int conf_key_set(const struct conf_key *key, void *section, const char *text, const char *base_dir,
		char *err, size_t errlen)
{
	void *field = (char *)section + key->offset;
	unsigned long long number;
	unsigned long ms;
	int flag;
	struct addr_list list;

	switch (key->type) {
	case CONF_STRING:
	case CONF_LIST:
	case CONF_PATH:
		if (key->check) {
			const char *why = key->check(text);
			if (why) {
				snprintf(err, errlen, "%s", why);
				return -1;
			}
		}
		free(*(char **)field);
		*(char **)field = key->type == CONF_PATH ? absolute_path(text, base_dir)
							 : xstrdup(text);
		return 0;
	case CONF_BOOL:
		if (conf_parse_bool(text, &flag) < 0) {
			snprintf(err, errlen, "'%s' is not yes or no", text);
			return -1;
		}
		*(int *)field = flag;
		return 0;
	case CONF_UINT:
		if (conf_parse_size(text, &number) < 0 || strpbrk(text, "kKmMgG")) {
			snprintf(err, errlen, "'%s' is not a whole number", text);
			return -1;
		}
		if (in_range(key, number, err, errlen) < 0)
			return -1;
		*(unsigned long *)field = (unsigned long)number;
		return 0;
	case CONF_SIZE:
		if (conf_parse_size(text, &number) < 0) {
			snprintf(err, errlen,
					"'%s' is not a size (bytes, or a number with K, M or G)",
					text);
			return -1;
		}
		if (in_range(key, number, err, errlen) < 0)
			return -1;
		*(unsigned long long *)field = number;
		return 0;
	case CONF_DURATION:
		if (conf_parse_duration_ms(text, &ms) < 0) {
			snprintf(err, errlen,
					"'%s' is not a duration (seconds, or a number with ms, s, m or h)",
					text);
			return -1;
		}
		if (in_range(key, ms, err, errlen) < 0)
			return -1;
		*(unsigned long *)field = ms;
		return 0;
	case CONF_ADDRS:
		if (addr_list_parse(text, &list, err, errlen) < 0)
			return -1;
		addr_list_free(field);
		*(struct addr_list *)field = list;
		return 0;
	case CONF_ALIAS:
		break;
	}
	snprintf(err, errlen, "unknown key type");
	return -1;
}

int conf_section_defaults(const struct conf_key *keys, void *section, const char *base_dir,
		char *err, size_t errlen)
{
	for (; keys && keys->name; keys++) {
		const char *text = keys->default_value ? keys->default_value : "";
		int is_text = keys->type == CONF_STRING || keys->type == CONF_PATH
				|| keys->type == CONF_LIST;
		if (!keys->default_value && !is_text)
			continue;
		/* Defaults are not checked: an empty string often means "off". */
		if (is_text) {
			char **field = (char **)((char *)section + keys->offset);
			free(*field);
			*field = keys->type == CONF_PATH ? absolute_path(text, base_dir)
							 : xstrdup(text);
			continue;
		}
		if (conf_key_set(keys, section, text, NULL, err, errlen) < 0)
			return -1;
	}
	return 0;
}

void conf_section_free(const struct conf_key *keys, void *section)
{
	for (; keys && keys->name; keys++) {
		if (keys->type == CONF_STRING || keys->type == CONF_PATH
				|| keys->type == CONF_LIST) {
			char **field = (char **)((char *)section + keys->offset);
			free(*field);
			*field = NULL;
		} else if (keys->type == CONF_ADDRS) {
			addr_list_free((struct addr_list *)(void *)((char *)section
					+ keys->offset));
		}
	}
}

static size_t value_size(enum conf_type type)
{
	switch (type) {
	case CONF_BOOL:
		return sizeof(int);
	case CONF_UINT:
	case CONF_DURATION:
		return sizeof(unsigned long);
	case CONF_SIZE:
		return sizeof(unsigned long long);
	default:
		return sizeof(char *);
	}
}

static int is_string(enum conf_type type)
{
	return type == CONF_STRING || type == CONF_PATH || type == CONF_LIST;
}

int conf_value_equal(const struct conf_key *key, const void *a, const void *b)
{
	const char *fa = (const char *)a + key->offset;
	const char *fb = (const char *)b + key->offset;
	if (is_string(key->type)) {
		const char *sa = *(char *const *)(const void *)fa,
			   *sb = *(char *const *)(const void *)fb;
		return strcmp(sa ? sa : "", sb ? sb : "") == 0;
	}
	if (key->type == CONF_ADDRS)
		return addr_list_equal((const void *)fa, (const void *)fb);
	if (key->type == CONF_ALIAS)
		return 1;
	return memcmp(fa, fb, value_size(key->type)) == 0;
}

void conf_value_copy(const struct conf_key *key, void *dst, const void *src)
{
	char *fd = (char *)dst + key->offset;
	const char *fs = (const char *)src + key->offset;
	if (is_string(key->type)) {
		char **d = (char **)(void *)fd;
		const char *s = *(char *const *)(const void *)fs;
		free(*d);
		*d = s ? xstrdup(s) : NULL;
		return;
	}
	if (key->type == CONF_ADDRS) {
		addr_list_free((void *)fd);
		addr_list_copy((void *)fd, (const void *)fs);
		return;
	}
	if (key->type == CONF_ALIAS)
		return;
	memcpy(fd, fs, value_size(key->type));
}
