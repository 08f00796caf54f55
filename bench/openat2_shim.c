/* For bench/perl-steps and bench/run --status-cost only: valgrind 3.19 does not know openat2 (it
 * answers ENOSYS), which plxd opens every file under its root with. Loaded
 * with LD_PRELOAD into a plxd that runs under valgrind, it turns the call
 * into an openat with the same flags; the checks openat2's resolve flags
 * make (no symbolic link out of the root) are skipped, which a benchmark
 * of the scripts in the source tree does not need. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>

long syscall(long number, ...)
{
	static long (*next)(long, ...);
	long a[6];
	va_list ap;
	va_start(ap, number);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (number == SYS_openat2) {
		const struct open_how *how = (const struct open_how *)a[2];
		return openat((int)a[0], (const char *)a[1], (int)how->flags, (mode_t)how->mode);
	}
	if (!next)
		next = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	return next(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
