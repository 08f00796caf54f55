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

/* sin written into room bytes. */
static void in_room(struct sockaddr_in sin, size_t room, const char *want)
{
	char buf[64], text[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &sin.sin_addr, text, sizeof text);
	log_format_addr((struct sockaddr *)&sin, buf, room);
	is_str(buf, want, "%s in %zu bytes: %s", text, room, want);
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

	/* The buffer: the longest address needs 16 bytes with its NUL, the
	 * shortest 8. */
	in_room(v4(255, 255, 255, 255), 16, "255.255.255.255");
	in_room(v4(255, 255, 255, 255), 15, "-");
	in_room(v4(0, 0, 0, 0), 8, "0.0.0.0");
	in_room(v4(0, 0, 0, 0), 7, "-");

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
