/* The libFuzzer entry point every fuzz_NAME.c defines; replay.c calls it
 * for each file of a corpus. A target aborts when a property fails. */
#ifndef PLXD_FUZZ_H
#define PLXD_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts with a message naming the property when cond is false. */
#define FUZZ_CHECK(cond)                                                                    \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, \
					#cond);                                             \
			abort();                                                            \
		}                                                                           \
	} while (0)

#endif
