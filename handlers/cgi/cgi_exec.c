/* plxd-cgi-exec: sets resource limits, then executes a CGI script in the
 * same process, so the limits hold from the script's first instruction
 * (posix_spawn has no way to set them). Run by the cgi handler only:
 *   plxd-cgi-exec CPU_SECONDS ADDRESS_SPACE PROCESSES PATH ARGV0 [ARGS...]
 * where 0 leaves a limit as it is. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

extern char **environ;

static int limit(int resource, const char *text)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(text, &end, 10);
	if (errno || *end || end == text)
		return -1;
	if (v == 0)
		return 0;
	struct rlimit now;
	if (getrlimit(resource, &now) < 0)
		return -1;
	struct rlimit rl = { .rlim_cur = (rlim_t)v, .rlim_max = (rlim_t)v };
	/* CPU: the soft limit sends SIGXCPU, the hard one a second later
	 * SIGKILL, for a script that catches SIGXCPU. */
	if (resource == RLIMIT_CPU)
		rl.rlim_max = (rlim_t)v + 1;
	/* Only root may raise a hard limit: never ask for more than there is. */
	if (now.rlim_max != RLIM_INFINITY && rl.rlim_max > now.rlim_max)
		rl.rlim_max = now.rlim_max;
	if (rl.rlim_cur > rl.rlim_max)
		rl.rlim_cur = rl.rlim_max;
	return setrlimit(resource, &rl);
}

int main(int argc, char **argv)
{
	if (argc < 6) {
		fprintf(stderr, "plxd-cgi-exec: usage: CPU AS NPROC PATH ARGV0 [ARGS...]\n");
		return 127;
	}
	if (limit(RLIMIT_CPU, argv[1]) < 0 || limit(RLIMIT_AS, argv[2]) < 0
			|| limit(RLIMIT_NPROC, argv[3]) < 0) {
		fprintf(stderr, "plxd-cgi-exec: cannot set limits: %s\n", strerror(errno));
		return 127;
	}
	execve(argv[4], argv + 5, environ);
	fprintf(stderr, "plxd-cgi-exec: cannot execute %s: %s\n", argv[4], strerror(errno));
	return 127;
}
