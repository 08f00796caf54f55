/* Replays corpus files through a fuzz target without libFuzzer, so the
 * normal build (any compiler) runs every kept input as a regression test.
 * Arguments are files or folders of files; prints TAP. A crash or an
 * abort from a failed property fails the test; so does an empty corpus. */
#include "fuzz.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int run_file(const char *path, int *count);
static int by_name(const struct dirent **a, const struct dirent **b);

static int run_file(const char *path, int *count)
{
	FILE *f = fopen(path, "rbe");
	if (!f) {
		printf("not ok %d - cannot open %s\n", ++*count, path);
		return -1;
	}
	size_t cap = 4096, len = 0;
	uint8_t *data = malloc(cap);
	size_t n;
	while (data && (n = fread(data + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap)
			data = realloc(data, cap *= 2);
	}
	fclose(f);
	if (!data)
		abort();
	/* An exact-size copy, so that ASan sees a read past the input. */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact)
		abort();
	memcpy(exact, data, len);
	free(data);
	fflush(stdout);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	printf("ok %d - %s\n", ++*count, path);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	int count = 0, failed = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) < 0) {
			printf("not ok %d - no such file or folder %s\n", ++count, argv[i]);
			failed = 1;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			failed |= run_file(argv[i], &count) < 0;
			continue;
		}
		struct dirent **names;
		int n = scandir(argv[i], &names, NULL, by_name);
		for (int j = 0; j < n; j++) {
			if (names[j]->d_name[0] != '.') {
				char path[4096];
				snprintf(path, sizeof path, "%s/%s", argv[i], names[j]->d_name);
				failed |= run_file(path, &count) < 0;
			}
			free(names[j]);
		}
		free(n >= 0 ? names : NULL);
	}
	if (count == 0) {
		printf("not ok 1 - an empty corpus\n");
		count = failed = 1;
	}
	printf("1..%d\n", count);
	return failed;
}
