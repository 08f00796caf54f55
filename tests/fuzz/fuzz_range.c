/* Fuzzes range_parse: the first byte picks the file size, the rest is the
 * Range header's value. A single range always lies inside the file. */
#include "range.h"
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t sizes[] = { 0, 1, 2, 10, 12, 1000, 1ULL << 32, UINT64_MAX - 1,
		UINT64_MAX };
	if (size == 0)
		return 0;
	uint64_t file_size = sizes[data[0] % (sizeof sizes / sizeof sizes[0])];
	char *value = malloc(size);
	if (!value)
		return 0;
	memcpy(value, data + 1, size - 1);
	value[size - 1] = '\0';
	uint64_t first = 7, last = 7;
	enum range_result r = range_parse(value, file_size, &first, &last);
	FUZZ_CHECK(r == RANGE_NONE || r == RANGE_ONE || r == RANGE_MANY
			|| r == RANGE_UNSATISFIABLE);
	if (r == RANGE_ONE)
		FUZZ_CHECK(first <= last && last < file_size);
	if (file_size == 0)
		FUZZ_CHECK(r != RANGE_ONE && r != RANGE_MANY);
	free(value);
	return 0;
}
