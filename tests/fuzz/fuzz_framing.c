/* Fuzzes the framing checks. Input: "METHOD VERSION" on the first line,
 * then one header per line as "name:value"; a line starting with '~' is a
 * folded header. Any answer is 0, 400 or 501, with a reason when not 0. */
#include "framing.h"
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	char *save = NULL;
	char *line = strtok_r(text, "\n", &save);
	const char *method = line ? line : "";
	char *space = line ? strchr(line, ' ') : NULL;
	const char *version = "HTTP/1.1";
	if (space) {
		*space = '\0';
		version = space + 1;
	}
	struct framing f;
	framing_begin(&f, method, version);
	while ((line = strtok_r(NULL, "\n", &save))) {
		int folded = line[0] == '~';
		char *name = line + folded;
		char *colon = strchr(name, ':');
		const char *value = colon ? colon + 1 : "";
		size_t name_len = colon ? (size_t)(colon - name) : strlen(name);
		framing_field(&f, name, name_len, value, strlen(value), folded);
	}
	const char *why = NULL;
	unsigned status = framing_end(&f, &why);
	FUZZ_CHECK(status == 0 || status == 400 || status == 501);
	FUZZ_CHECK((status == 0) == (why == NULL));
	free(text);
	return 0;
}
