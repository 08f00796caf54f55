/* bench/hop_floor: what one round trip between two processes costs on this
 * machine, the floor under a request that plxd hands to a worker process
 * (a .plx, a .psgi in processes). A parent sends a message over a
 * SOCK_SEQPACKET socketpair, as plxd sends a request; a child that sleeps
 * in recv between messages, as an idle worker does, answers it. Each round
 * trip is two wake-ups of a sleeping process, which a server that parses,
 * runs and answers in one process (uWSGI, Starman, Apache's prefork
 * mod_perl) does not pay.
 *
 * Printed: the microseconds of one round trip with both processes on one
 * CPU, then with each on a CPU of its own (when there are two): a wake-up
 * across CPUs may have to bring an idle CPU back from its halt, which on a
 * virtual machine is the host's work.
 *
 *   hop_floor [ROUND_TRIPS]   (default 20000) */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The size of a small request's message: its header and a short environment. */
#define MESSAGE 824

static int pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof set, &set);
}

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* The microseconds of one round trip, parent on cpu_a, child on cpu_b;
 * negative when the measurement could not be made. */
static double round_trip(long n, int cpu_a, int cpu_b)
{
	int sv[2];
	char buf[MESSAGE] = { 0 };
	double result = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		goto out;
	if (pid == 0) {
		close(sv[0]);
		if (pin(cpu_b) < 0)
			_exit(1);
		while (recv(sv[1], buf, sizeof buf, 0) > 0)
			if (send(sv[1], buf, 64, 0) < 0)
				_exit(1);
		_exit(0);
	}
	close(sv[1]);
	sv[1] = -1;
	if (pin(cpu_a) < 0)
		goto reap;
	/* A few round trips first, so that both are placed and warm. */
	double start = 0;
	for (long i = -100; i < n; i++) {
		if (i == 0)
			start = now_us();
		if (send(sv[0], buf, sizeof buf, 0) < 0 || recv(sv[0], buf, sizeof buf, 0) <= 0)
			goto reap;
	}
	result = (now_us() - start) / (double)n;
reap:
	close(sv[0]);
	sv[0] = -1;
	waitpid(pid, NULL, 0);
out:
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	return result;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 20000;
	if (n <= 0) {
		fprintf(stderr, "usage: hop_floor [ROUND_TRIPS]\n");
		return 2;
	}
	/* The first two CPUs this process may run on (a container's may not
	 * start at 0). */
	cpu_set_t allowed;
	int cpu[2] = { -1, -1 }, found = 0;
	if (sched_getaffinity(0, sizeof allowed, &allowed) < 0) {
		fprintf(stderr, "hop_floor: sched_getaffinity: %s\n", strerror(errno));
		return 1;
	}
	for (int i = 0; i < CPU_SETSIZE && found < 2; i++)
		if (CPU_ISSET(i, &allowed))
			cpu[found++] = i;
	double one = round_trip(n, cpu[0], cpu[0]);
	if (one < 0) {
		fprintf(stderr, "hop_floor: the round trips on CPU %d failed\n", cpu[0]);
		return 1;
	}
	printf("one CPU: %.1f us\n", one);
	fflush(stdout); /* not again from the next child */
	if (found == 2) {
		double two = round_trip(n, cpu[0], cpu[1]);
		if (two < 0) {
			fprintf(stderr, "hop_floor: the round trips on CPUs %d and %d failed\n",
					cpu[0], cpu[1]);
			return 1;
		}
		printf("two CPUs: %.1f us\n", two);
	}
	return 0;
}
