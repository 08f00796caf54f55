/* Fuzzes path_from_target: whatever the target, a success is a normalised
 * path inside the root ("/" first; no "//", "." or ".." segment), no longer
 * than its buffer, with the query inside the target; a refusal is 400 with
 * a reason. A path without '%' or '?' normalises to itself. */
#include "path.h"
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_normal(const char *path)
{
	FUZZ_CHECK(path[0] == '/');
	FUZZ_CHECK(strstr(path, "//") == NULL);
	FUZZ_CHECK(strstr(path, "/./") == NULL);
	FUZZ_CHECK(strstr(path, "/../") == NULL);
	size_t len = strlen(path);
	FUZZ_CHECK(!(len >= 2 && strcmp(path + len - 2, "/.") == 0));
	FUZZ_CHECK(!(len >= 3 && strcmp(path + len - 3, "/..") == 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *target = malloc(size + 1);
	if (!target)
		return 0;
	memcpy(target, data, size);
	target[size] = '\0';
	size_t cap = strlen(target) + 2;
	char *path = malloc(cap);
	const char *query = NULL, *why = NULL;
	int status = path_from_target(target, path, cap, &query, &why);
	if (status == 0) {
		FUZZ_CHECK(strlen(path) < cap);
		check_normal(path);
		FUZZ_CHECK(query
				&& (query[0] == '\0'
						|| (query > target && query <= target + size)));
		if (!strpbrk(path, "%?")) {
			char *again = malloc(strlen(path) + 2);
			const char *q2, *why2;
			FUZZ_CHECK(path_from_target(path, again, strlen(path) + 2, &q2, &why2)
					== 0);
			FUZZ_CHECK(strcmp(again, path) == 0);
			free(again);
		}
	} else {
		FUZZ_CHECK(status == 400 && why != NULL);
	}
	free(path);
	free(target);
	return 0;
}
