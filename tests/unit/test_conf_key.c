/* Typed values of key tables: every type parses strictly. */
#include "conf_key.h"
#include "addr.h"
#include "tap.h"

#include <stdlib.h>

struct sample {
	char *name;
	char *dir;
	int flag;
	unsigned long count;
	unsigned long long size;
	unsigned long ms;
	struct addr_list peers;
};

static const char *no_spaces(const char *v)
{
	return strchr(v, ' ') ? "no spaces allowed" : NULL;
}

/* clang-format off */
static const struct conf_key keys[] = {
	{ .name = "name", .type = CONF_STRING, .default_value = "anon",
	  .offset = offsetof(struct sample, name), .check = no_spaces, .help = "h" },
	{ .name = "dir", .type = CONF_PATH, .default_value = "data",
	  .offset = offsetof(struct sample, dir), .help = "h" },
	{ .name = "flag", .type = CONF_BOOL, .default_value = "no",
	  .offset = offsetof(struct sample, flag), .help = "h" },
	{ .name = "count", .type = CONF_UINT, .default_value = "4", .min = 1, .max = 10,
	  .offset = offsetof(struct sample, count), .help = "h" },
	{ .name = "size", .type = CONF_SIZE, .default_value = "1K",
	  .offset = offsetof(struct sample, size), .help = "h" },
	{ .name = "ms", .type = CONF_DURATION, .default_value = "2s",
	  .offset = offsetof(struct sample, ms), .help = "h" },
	{ .name = "peers", .type = CONF_ADDRS, .default_value = "127.0.0.1",
	  .offset = offsetof(struct sample, peers), .help = "h" },
	CONF_ALIAS_KEY("old_size", "size"),
	CONF_ALIAS_KEY("old_old_size", "old_size"),
	CONF_ALIAS_KEY("lost", "nowhere"),
	CONF_KEYS_END
};
/* clang-format on */

static int set(struct sample *s, const char *key, const char *text)
{
	char err[256];
	return conf_key_set(conf_key_find(keys, key), s, text, "/etc/base", err, sizeof err);
}

int main(void)
{
	struct sample s = { 0 };
	char err[256];
	ok(conf_section_defaults(keys, &s, "/base", err, sizeof err) == 0, "defaults apply");
	is_str(s.name, "anon", "string default");
	is_str(s.dir, "/base/data", "relative path default resolved against the base folder");
	ok(s.flag == 0 && s.count == 4 && s.size == 1024 && s.ms == 2000, "numeric defaults");
	ok(conf_key_find(keys, "nope") == NULL, "unknown key is not found");

	ok(set(&s, "name", "bob") == 0 && strcmp(s.name, "bob") == 0, "string set");
	ok(set(&s, "name", "bo b") < 0, "check function refuses");
	ok(set(&s, "dir", "/abs") == 0 && strcmp(s.dir, "/abs") == 0, "absolute path kept");
	ok(set(&s, "dir", "rel") == 0 && strcmp(s.dir, "/etc/base/rel") == 0,
			"relative path resolved");

	const char *yes[] = { "yes", "On", "TRUE", "1" }, *no[] = { "no", "off", "False", "0" };
	for (int i = 0; i < 4; i++) {
		ok(set(&s, "flag", yes[i]) == 0 && s.flag == 1, "bool '%s' is true", yes[i]);
		ok(set(&s, "flag", no[i]) == 0 && s.flag == 0, "bool '%s' is false", no[i]);
	}
	ok(set(&s, "flag", "maybe") < 0, "bool 'maybe' refused");

	ok(set(&s, "count", "10") == 0 && s.count == 10, "uint at max");
	ok(set(&s, "count", "11") < 0, "uint above max refused");
	ok(set(&s, "count", "0") < 0, "uint below min refused");
	ok(set(&s, "count", "-1") < 0, "negative refused");
	ok(set(&s, "count", " 5") < 0, "leading space refused");
	ok(set(&s, "count", "5x") < 0, "trailing junk refused");
	ok(set(&s, "count", "0x5") < 0, "hex refused");
	ok(set(&s, "count", "5K") < 0, "size suffix refused for a plain number");
	ok(set(&s, "count", "") < 0, "empty number refused");

	ok(set(&s, "size", "64M") == 0 && s.size == 64ULL << 20, "64M");
	ok(set(&s, "size", "2g") == 0 && s.size == 2ULL << 30, "2g");
	ok(set(&s, "size", "3KB") == 0 && s.size == 3072, "3KB");
	ok(set(&s, "size", "12") == 0 && s.size == 12, "bare bytes");
	ok(set(&s, "size", "1T") < 0, "unknown suffix refused");
	ok(set(&s, "size", "99999999999999999999") < 0, "overflow refused");
	ok(set(&s, "size", "99999999999G") < 0, "overflow by suffix refused");

	ok(set(&s, "ms", "500ms") == 0 && s.ms == 500, "500ms");
	ok(set(&s, "ms", "3") == 0 && s.ms == 3000, "bare number is seconds");
	ok(set(&s, "ms", "2m") == 0 && s.ms == 120000, "minutes");
	ok(set(&s, "ms", "1h") == 0 && s.ms == 3600000, "hours");
	ok(set(&s, "ms", "1.5s") < 0, "fractions refused");
	ok(set(&s, "ms", "5 s") < 0, "space before unit refused");

	struct sample t = { 0 };
	conf_section_defaults(keys, &t, "/base", err, sizeof err);
	ok(!conf_value_equal(conf_key_find(keys, "name"), &s, &t), "differing strings differ");
	conf_value_copy(conf_key_find(keys, "name"), &t, &s);
	ok(conf_value_equal(conf_key_find(keys, "name"), &s, &t), "copied string is equal");
	ok(!conf_value_equal(conf_key_find(keys, "size"), &s, &t), "differing sizes differ");
	conf_value_copy(conf_key_find(keys, "size"), &t, &s);
	ok(t.size == s.size, "copied size");

	/* Address lists: parsed at set, compared and copied as lists. */
	ok(s.peers.n == 1 && s.peers.v[0].prefix == 32, "address list default parsed");
	ok(set(&s, "peers", "10.0.0.0/8 ::1  fd00::/8") == 0 && s.peers.n == 3
					&& s.peers.v[0].prefix == 8 && s.peers.v[2].prefix == 8,
			"address list with ranges");
	ok(set(&s, "peers", "10.0.0.0/33") < 0 && s.peers.n == 3,
			"a bad range refused, the old list kept");
	char why[256];
	ok(conf_key_set(conf_key_find(keys, "peers"), &s, "10.1.0.0/8", NULL, why, sizeof why) < 0
					&& strstr(why, "10.1.0.0/8")
					&& strstr(why, "past its /8 prefix"),
			"the message names the word: %s", why);
	ok(!conf_value_equal(conf_key_find(keys, "peers"), &s, &t), "differing lists differ");
	conf_value_copy(conf_key_find(keys, "peers"), &t, &s);
	ok(conf_value_equal(conf_key_find(keys, "peers"), &s, &t) && t.peers.v != s.peers.v,
			"a copied list is equal, and its own");
	ok(set(&t, "peers", "10.0.0.0/8 ::1 fd00::/8") == 0
					&& conf_value_equal(conf_key_find(keys, "peers"), &s, &t),
			"the same list written again is equal");
	ok(set(&t, "peers", "10.0.0.0/8 fd00::/8 ::1") == 0
					&& !conf_value_equal(conf_key_find(keys, "peers"), &s, &t),
			"order counts");
	ok(set(&t, "peers", "") == 0 && t.peers.n == 0, "an empty list");
	is_str(conf_type_name(CONF_ADDRS), "addresses", "its type name, for --help");

	/* Aliases: the old name finds the current row; a bad alias finds
	 * nothing; walkers skip alias rows. */
	const struct conf_key *k = conf_key_find(keys, "old_size");
	ok(k && strcmp(k->name, "size") == 0, "an alias finds the row it names");
	ok(set(&s, "old_size", "2K") == 0 && s.size == 2048, "and sets its value");
	ok(conf_key_find(keys, "old_old_size") == NULL, "an alias of an alias finds nothing");
	ok(conf_key_find(keys, "lost") == NULL, "an alias of no row finds nothing");
	ok(conf_value_equal(&keys[7], &s, &t), "an alias row holds no value to compare");

	conf_section_free(keys, &s);
	conf_section_free(keys, &t);
	ok(s.name == NULL && s.dir == NULL, "free clears strings");
	ok(s.peers.v == NULL && s.peers.n == 0 && t.peers.v == NULL, "free clears address lists");
	return done_testing();
}
