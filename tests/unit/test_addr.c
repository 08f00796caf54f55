/* Address lists: parsing (addresses, CIDR ranges, errors) and matching
 * socket addresses and text addresses, IPv4-mapped IPv6 folded. */
#include "addr.h"
#include "tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

static int matches(const char *list, const char *addr)
{
	struct addr_list l;
	char err[256];
	if (addr_list_parse(list, &l, err, sizeof err) < 0)
		return -1;
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, addr, &sin->sin_addr) == 1)
		sin->sin_family = AF_INET;
	else if (inet_pton(AF_INET6, addr, &sin6->sin6_addr) == 1)
		sin6->sin6_family = AF_INET6;
	int m = addr_list_match(&l, (struct sockaddr *)&ss);
	addr_list_free(&l);
	return m;
}

static const char *error_of(const char *list)
{
	static char err[256];
	struct addr_list l;
	if (addr_list_parse(list, &l, err, sizeof err) == 0) {
		addr_list_free(&l);
		return NULL;
	}
	return err;
}

static int text_matches(const char *list, const char *text)
{
	struct addr_list l;
	char err[256];
	struct addr_range a;
	if (addr_list_parse(list, &l, err, sizeof err) < 0)
		return -1;
	int m = addr_parse(text, strlen(text), &a) == 0 && addr_list_match_addr(&l, &a);
	addr_list_free(&l);
	return m;
}

int main(void)
{
	ok(matches("", "127.0.0.1") == 0, "an empty list matches nothing");
	ok(matches("127.0.0.1", "127.0.0.1") == 1, "one IPv4 address");
	ok(matches("127.0.0.1", "127.0.0.2") == 0, "... and not its neighbour");
	ok(matches("::1", "::1") == 1, "one IPv6 address");
	ok(matches("0:0:0:0:0:0:0:1", "::1") == 1, "an IPv6 address however it is written");
	ok(matches("::1", "127.0.0.1") == 0, "::1 is not 127.0.0.1");
	ok(matches("10.0.0.0/8", "10.255.1.2") == 1, "a /8 range");
	ok(matches("10.0.0.0/8", "11.0.0.0") == 0, "... and the address just past it");
	ok(matches("10.0.0.0/8", "9.255.255.255") == 0, "... and just before it");
	ok(matches("192.168.1.128/25", "192.168.1.128") == 1, "a /25: its first address");
	ok(matches("192.168.1.128/25", "192.168.1.255") == 1, "... its last");
	ok(matches("192.168.1.128/25", "192.168.1.127") == 0,
			"... not the one before (a prefix in mid-byte)");
	ok(matches("0.0.0.0/0", "203.0.113.9") == 1, "/0 matches every IPv4 address");
	ok(matches("0.0.0.0/0", "::1") == 0, "... and no IPv6 one");
	ok(matches("1.2.3.4/32", "1.2.3.4") == 1, "/32 is one address");
	ok(matches("fd00::/8", "fdab::1") == 1, "an IPv6 range");
	ok(matches("fd00::/8", "fe00::1") == 0, "... and outside it");
	ok(matches("2001:db8::/127", "2001:db8::1") == 1, "a /127");
	ok(matches("2001:db8::/127", "2001:db8::2") == 0, "... one past it");
	ok(matches("127.0.0.1", "::ffff:127.0.0.1") == 1,
			"an IPv4-mapped peer is its IPv4 address");
	ok(matches("::ffff:127.0.0.1", "127.0.0.1") == 1, "an IPv4-mapped list entry too");
	ok(matches("::ffff:10.0.0.0/104", "10.9.8.7") == 1,
			"a mapped range counts its 96 leading bits");
	ok(matches(" 10.0.0.1 \t::1\n", "::1") == 1, "any whitespace separates words");

	ok(text_matches("127.0.0.1", "[127.0.0.1]") == 1, "a text address in brackets");
	ok(text_matches("::1", " [::1] ") == 1, "... with blanks around it");
	ok(text_matches("10.0.0.0/8", "10.1.1.1") == 1, "a text address in a range");
	ok(text_matches("10.0.0.0/8", "unknown") == 0, "text that is no address matches nothing");

	ok(error_of("10.0.0.0/8 ::1/128 ::/0 0.0.0.0/0") == NULL, "valid ranges parse");
	ok(error_of("1.2.3.4/33") != NULL, "an IPv4 prefix of 33: %s", error_of("1.2.3.4/33"));
	ok(error_of("1.2.3.4/32") == NULL, "... of 32 is fine");
	ok(error_of("::/129") != NULL, "an IPv6 prefix of 129");
	ok(error_of("::/128") == NULL, "... of 128 is fine");
	ok(error_of("10.0.0.1/8") != NULL, "host bits past the prefix: %s", error_of("10.0.0.1/8"));
	ok(error_of("10.128.0.0/8") != NULL, "... also in a later byte");
	ok(error_of("10.128.0.0/9") == NULL, "... not when inside the prefix");
	ok(error_of("::ffff:10.0.0.0/95") != NULL, "a mapped range shorter than /96");
	ok(error_of("example.com") != NULL, "a name is not an address: %s",
			error_of("example.com"));
	ok(error_of("1.2.3.4/") != NULL, "an empty prefix");
	ok(error_of("1.2.3.4/x") != NULL, "a prefix that is no number");
	ok(error_of("1.2.3.4/0008") != NULL, "a prefix of more than three digits");
	ok(error_of("[::1]") != NULL, "brackets are not written in a list");
	ok(error_of("256.1.1.1") != NULL, "an IPv4 byte over 255");

	struct addr_list a, b, c;
	char err[256];
	addr_list_parse("10.0.0.0/8 ::1", &a, err, sizeof err);
	addr_list_parse("10.0.0.0/8  ::1", &b, err, sizeof err);
	addr_list_parse("10.0.0.0/8", &c, err, sizeof err);
	ok(addr_list_equal(&a, &b), "the same ranges are equal");
	ok(!addr_list_equal(&a, &c), "different ranges are not");
	struct addr_list d;
	addr_list_copy(&d, &a);
	ok(addr_list_equal(&a, &d), "a copy is equal");
	addr_list_free(&a);
	addr_list_free(&b);
	addr_list_free(&c);
	addr_list_free(&d);

	/* addr_client: the walk REMOTE_ADDR and the status page share. */
	struct addr_list trusted;
	addr_list_parse("127.0.0.1 10.0.0.0/8", &trusted, err, sizeof err);
	struct addr_range peer, out, want;
	addr_parse("127.0.0.1", 9, &peer);
	const char *one[] = { "203.0.113.9" };
	ok(addr_client(&trusted, &peer, one, 1, &out) == 1
					&& addr_parse("203.0.113.9", 11, &want) == 0
					&& memcmp(out.bytes, want.bytes, 4) == 0,
			"a trusted peer: the address X-Forwarded-For names");
	const char *chain[] = { "198.51.100.1, 203.0.113.9", "10.1.1.1" };
	ok(addr_client(&trusted, &peer, chain, 2, &out) == 1
					&& memcmp(out.bytes, want.bytes, 4) == 0,
			"... the nearest untrusted hop, across repeated lines");
	const char *junk[] = { "203.0.113.9, junk" };
	ok(addr_client(&trusted, &peer, junk, 1, &out) == -1
					&& memcmp(out.bytes, peer.bytes, 4) == 0,
			"... garbage at the right: unknown, the peer as the last believed");
	const char *port[] = { "203.0.113.9:4711" };
	ok(addr_client(&trusted, &peer, port, 1, &out) == -1,
			"... an address with a port: unknown");
	const char *left_junk[] = { "junk, 10.2.2.2" };
	addr_parse("10.2.2.2", 8, &want);
	ok(addr_client(&trusted, &peer, left_junk, 1, &out) == -1
					&& memcmp(out.bytes, want.bytes, 4) == 0,
			"... garbage left of trusted hops: unknown, the nearest trusted hop believed");
	const char *past_client[] = { "junk, 203.0.113.9" };
	addr_parse("203.0.113.9", 11, &want);
	ok(addr_client(&trusted, &peer, past_client, 1, &out) == 1
					&& memcmp(out.bytes, want.bytes, 4) == 0,
			"... garbage left of the client: never read");
	struct addr_range stranger;
	addr_parse("192.0.2.1", 9, &stranger);
	ok(addr_client(&trusted, &stranger, one, 1, &out) == 0
					&& memcmp(out.bytes, stranger.bytes, 4) == 0,
			"an untrusted peer: itself, whatever the header says");
	ok(addr_client(&trusted, &peer, NULL, 0, &out) == 0
					&& memcmp(out.bytes, peer.bytes, 4) == 0,
			"no header: the peer");
	addr_list_free(&trusted);
	return done_testing();
}
