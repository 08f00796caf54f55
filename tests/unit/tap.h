/* A minimal TAP producer, so that ctest and prove run C and Perl tests
 * alike. ok() reports one check; done_testing() prints the plan and gives
 * the exit code. */
#ifndef PLXD_TAP_H
#define PLXD_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_count, tap_failed;

#define ok(cond, ...)          tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_str(got, want, ...) tap_is_str((got), (want), __FILE__, __LINE__, __VA_ARGS__)

__attribute__((format(printf, 4, 5), unused)) static int tap_ok(int pass, const char *file,
		int line, const char *fmt, ...)
{
	va_list ap;
	tap_count++;
	printf("%sok %d - ", pass ? "" : "not ", tap_count);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!pass) {
		tap_failed++;
		printf("#   Failed at %s line %d\n", file, line);
	}
	return pass;
}

__attribute__((format(printf, 5, 6), unused)) static int tap_is_str(const char *got,
		const char *want, const char *file, int line, const char *fmt, ...)
{
	int pass = (got == NULL && want == NULL) || (got && want && strcmp(got, want) == 0);
	va_list ap;
	tap_count++;
	printf("%sok %d - ", pass ? "" : "not ", tap_count);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!pass) {
		tap_failed++;
		printf("#   Failed at %s line %d\n#          got: '%s'\n#     expected: '%s'\n",
				file, line, got ? got : "(null)", want ? want : "(null)");
	}
	return pass;
}

__attribute__((unused)) static int done_testing(void)
{
	printf("1..%d\n", tap_count);
	return tap_failed ? 1 : 0;
}

#endif
