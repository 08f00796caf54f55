/* IP address lists: "127.0.0.1 10.0.0.0/8 ::1 fd00::/8", parsed once (at
 * configuration load) into binary ranges that every user matches the same
 * way: the connection limiter, the CGI environment's X-Forwarded-For walk,
 * the status page's allow list. nginx's set_real_ip_from is the model. An
 * IPv4-mapped IPv6 address (::ffff:1.2.3.4) is the IPv4 address, in a list
 * and in a peer alike. Pure C: no libmicrohttpd. */
#ifndef PLXD_ADDR_H
#define PLXD_ADDR_H

#include <stddef.h>
#include <sys/socket.h>

/* One address, or a range when prefix is shorter than the address. */
struct addr_range {
	int family;              /* AF_INET or AF_INET6 */
	unsigned char bytes[16]; /* network order; IPv4 in the first 4 */
	unsigned prefix;         /* leading bits that must match: 32 or 128 for one address */
};

struct addr_list {
	struct addr_range *v;
	size_t n;
};

/* Parses whitespace-separated addresses and ADDR/BITS ranges into *out
 * (empty text: an empty list). A range whose address has bits set past its
 * prefix (10.0.0.1/8) is an error: it most likely says something else than
 * was meant. Returns 0, or -1 with a message in err naming the word. */
int addr_list_parse(const char *text, struct addr_list *out, char *err, size_t errlen);

void addr_list_free(struct addr_list *l);

/* Whether two lists hold the same ranges in the same order. */
int addr_list_equal(const struct addr_list *a, const struct addr_list *b);

/* Copies src into *dst (which owns nothing yet). */
void addr_list_copy(struct addr_list *dst, const struct addr_list *src);

/* Whether a socket address (AF_INET or AF_INET6) falls in the list. */
int addr_list_match(const struct addr_list *l, const struct sockaddr *sa);

/* Parses one address written as text ("1.2.3.4", "::1", "[::1]", blanks
 * around it allowed), len bytes. Returns 0 with *out a full-length range,
 * or -1. */
int addr_parse(const char *text, size_t len, struct addr_range *out);

/* Whether an address (a full-length range from addr_parse) falls in the list. */
int addr_list_match_addr(const struct addr_list *l, const struct addr_range *a);

/* The client's address as plxd believes it (REMOTE_ADDR, the status
 * page's allow): peer, unless peer is in trusted; then X-Forwarded-For,
 * whose n lines (a repeated header, in order) list the hops left to right,
 * each proxy appending the address it saw. They are walked from the right,
 * stopping at the first address that is not a trusted proxy: only that one
 * and those right of it were written by proxies plxd trusts. Returns 1 when
 * *out came from X-Forwarded-For, 0 when it is peer, and -1 when garbage
 * ("unknown", a port, an empty entry) stopped the walk before an address
 * that is not a trusted proxy: the client is unknown, and *out is the last
 * address believed (the peer, or the nearest trusted hop), as REMOTE_ADDR
 * gives it. */
int addr_client(const struct addr_list *trusted, const struct addr_range *peer,
		const char *const *lines, size_t n, struct addr_range *out);

#endif
