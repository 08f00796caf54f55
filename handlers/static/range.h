/* The Range request header (RFC 9110 section 14.2), bytes unit: which part
 * of a file to send. Pure C. */
#ifndef PLXD_RANGE_H
#define PLXD_RANGE_H

#include <stdint.h>

enum range_result {
	RANGE_NONE,         /* no usable Range: send the whole file (200) */
	RANGE_ONE,          /* one satisfiable range in *first..*last (206) */
	RANGE_MANY,         /* several ranges, some satisfiable: plxd sends the
				whole file (200) rather than multipart/byteranges */
	RANGE_UNSATISFIABLE /* no range overlaps the file (416) */
};

/* Parses a Range header's value for a file of size bytes. A syntax error,
 * a unit other than bytes or a range whose end is before its start makes
 * the whole header ignored (RANGE_NONE), as RFC 9110 allows. On RANGE_ONE,
 * *first <= *last < size, the end clamped to the file. */
enum range_result range_parse(const char *value, uint64_t size, uint64_t *first, uint64_t *last);

#endif
