/* A hexadecimal digit's value, for the parsers that read one (percent
 * escapes, chunk sizes). */
#ifndef PLXD_HEX_H
#define PLXD_HEX_H

/* c's value, 0 to 15, or -1 when c is no hexadecimal digit. */
static inline int hex_digit_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#endif
