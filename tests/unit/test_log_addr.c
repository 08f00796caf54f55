/* log_format_addr: an IPv4 address written by hand, as inet_ntop writes
 * it, for every value of an octet in every place and at the edges of the
 * buffer; IPv6 through inet_ntop; "-" for what it cannot write. */
#include "log.h"
#include "tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

static struct sockaddr_in v4(unsigned char a, unsigned char b, unsigned char c, unsigned char d)
{
	struct sockaddr_in sin;
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	unsigned char bytes[4] = { a, b, c, d };
	memcpy(&sin.sin_addr, bytes, 4);
	return sin;
}

int main(void)
{
	/* Each octet value in each place, beside others of each width. */
	int same = 1;
	char got[64], want[64];
	for (int place = 0; place < 4; place++)
		for (unsigned v = 0; v < 256; v++) {
			unsigned char o[4] = { 7, 42, 199, 0 };
			o[place] = (unsigned char)v;
			struct sockaddr_in sin = v4(o[0], o[1], o[2], o[3]);
			log_format_addr((struct sockaddr *)&sin, got, sizeof got);
			inet_ntop(AF_INET, &sin.sin_addr, want, sizeof want);
			if (strcmp(got, want) != 0) {
				same = 0;
				printf("# %s, not %s\n", got, want);
			}
		}
	ok(same, "every octet value in every place is written as inet_ntop writes it");

	/* The buffer: the longest address needs 16 bytes with its NUL. */
	struct sockaddr_in longest = v4(255, 255, 255, 255);
	char exact[16];
	log_format_addr((struct sockaddr *)&longest, exact, sizeof exact);
	is_str(exact, "255.255.255.255", "255.255.255.255 in exactly 16 bytes");
	char short_by_one[15];
	log_format_addr((struct sockaddr *)&longest, short_by_one, sizeof short_by_one);
	is_str(short_by_one, "-", "... and \"-\" in 15");
	struct sockaddr_in shortest = v4(0, 0, 0, 0);
	char eight[8];
	log_format_addr((struct sockaddr *)&shortest, eight, sizeof eight);
	is_str(eight, "0.0.0.0", "0.0.0.0 in exactly 8 bytes");
	char seven[7];
	log_format_addr((struct sockaddr *)&shortest, seven, sizeof seven);
	is_str(seven, "-", "... and \"-\" in 7");

	struct sockaddr_in6 sin6;
	memset(&sin6, 0, sizeof sin6);
	sin6.sin6_family = AF_INET6;
	inet_pton(AF_INET6, "2001:db8::1", &sin6.sin6_addr);
	log_format_addr((struct sockaddr *)&sin6, got, sizeof got);
	is_str(got, "2001:db8::1", "IPv6 as inet_ntop writes it");

	log_format_addr(NULL, got, sizeof got);
	is_str(got, "-", "no address: \"-\"");
	struct sockaddr unix_like = { .sa_family = AF_UNIX };
	log_format_addr(&unix_like, got, sizeof got);
	is_str(got, "-", "another family: \"-\"");
	return done_testing();
}
