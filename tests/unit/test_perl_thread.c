/* Interpreter threads (handlers/perl/perl_thread.c): two clones of one
 * parent serve a script at the same time, each with its own %ENV, working
 * directory, STDOUT and children's environment, none of them plxd's. */
#include "perl_thread.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Every close in this program, libperl's included, comes here: a close of
 * a descriptor that was not open is counted. Inside plxd that number may
 * already be another thread's (an accepted connection), which such a close
 * would take from it. */
static int bad_closes;

int close(int fd)
{
	long rc = syscall(SYS_close, fd);
	if (rc < 0 && errno == EBADF)
		__atomic_add_fetch(&bad_closes, 1, __ATOMIC_RELAXED);
	return (int)rc;
}

struct result {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	int done;
	enum perl_outcome outcome;
	int compiled;
	int fresh_out; /* the thread's new response pipe, after a run that forked */
	char tail[4096];
};

static void job_done(struct perl_job *job, const struct perl_run *run)
{
	struct result *res = job->ctx;
	pthread_mutex_lock(&res->mu);
	size_t n = run->tail_len < sizeof res->tail - 1 ? run->tail_len : sizeof res->tail - 1;
	memcpy(res->tail, run->tail ? run->tail : "", n);
	res->tail[n] = '\0';
	res->outcome = run->outcome;
	res->compiled = run->compiled;
	res->fresh_out = job->fresh_out;
	res->done = 1;
	pthread_cond_signal(&res->cond);
	pthread_mutex_unlock(&res->mu);
}

/* Waits for res's done; the thread's response pipe is *out from then on
 * (a new one is the test's to close when replaced; first is the thread's). */
static void wait_done(struct result *res, int *out, int first)
{
	pthread_mutex_lock(&res->mu);
	while (!res->done)
		pthread_cond_wait(&res->cond, &res->mu);
	pthread_mutex_unlock(&res->mu);
	if (res->fresh_out < 0)
		return;
	if (*out != first)
		close(*out);
	*out = res->fresh_out;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		printf("Bail out! cannot write %s\n", path);
		exit(1);
	}
}

/* What the thread's response pipe holds now. */
static void read_pipe(int fd, char *buf, size_t len)
{
	size_t have = 0;
	ssize_t n;
	while (have < len - 1 && (n = read(fd, buf + have, len - 1 - have)) > 0)
		have += (size_t)n;
	buf[have] = '\0';
}

static const char script[] =
		"use Cwd ();\n"
		"system('echo', \"child:$ENV{ID}\");\n"
		/* The descriptors a program gets: 0-2 only. */
		"system($^X, '-e', 'opendir my $d, q(/proc/self/fd); "
		"print q(fds:), join(q(,), grep { /^\\d+$/ && $_ > 2 && $_ != fileno($d) } "
		"readdir $d), qq(\\n)');\n"
		"my $env = `sh -c 'echo \\$ID'`; chomp $env;\n"
		"select(undef, undef, undef, 0.3);\n"
		"print \"id=$ENV{ID} cwd=\", Cwd::getcwd(), \" sh=$env\\n\";\n";

int main(void)
{
	char dir[] = "/tmp/plxd-thread-XXXXXX";
	if (!mkdtemp(dir)) {
		printf("Bail out! mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	char sub[2][64], path[2][160], cwd_before[512];
	for (int i = 0; i < 2; i++) {
		snprintf(sub[i], sizeof sub[i], "%s/%c", dir, 'a' + i);
		snprintf(path[i], sizeof path[i], "%s/s.plx", sub[i]);
		mkdir(sub[i], 0700);
		write_file(path[i], script);
	}
	if (!getcwd(cwd_before, sizeof cwd_before))
		return 1;

	char err[1024];
	struct perl_interp_options o = { .threaded = 1 };
	struct perl_threads *p = perl_threads_create(&o, 2, err, sizeof err);
	if (!ok(p != NULL, "two interpreter threads start (%s)", p ? "ok" : err))
		return 1;

	char *env[2][3] = { { "ID=A", "PATH=/usr/bin:/bin", NULL },
		{ "ID=B", "PATH=/usr/bin:/bin", NULL } };
	struct result res[2];
	struct perl_job job[2];
	for (int i = 0; i < 2; i++) {
		struct stat st;
		stat(path[i], &st);
		res[i] = (struct result){ .mu = PTHREAD_MUTEX_INITIALIZER,
			.cond = PTHREAD_COND_INITIALIZER };
		job[i] = (struct perl_job){
			.run = { .script = path[i],
					.dev = st.st_dev,
					.ino = st.st_ino,
					.size = (uint64_t)st.st_size,
					.mtime_sec = st.st_mtim.tv_sec,
					.mtime_nsec = st.st_mtim.tv_nsec,
					.env = env[i],
					.stdin_fd = -1 },
			.done = job_done,
			.ctx = &res[i],
		};
	}
	/* Both at once: each sleeps after its chdir, so a shared working
	 * directory would show in the other's. */
	/* Each thread's response pipe: a run that started processes leaves
	 * it a new one (fresh_out), the old one may still be held. */
	int outfd[2] = { perl_thread_out(perl_threads_get(p, 0)),
		perl_thread_out(perl_threads_get(p, 1)) };
	int first_out[2] = { outfd[0], outfd[1] };
	perl_thread_submit(perl_threads_get(p, 0), &job[0]);
	perl_thread_submit(perl_threads_get(p, 1), &job[1]);
	for (int i = 0; i < 2; i++)
		wait_done(&res[i], &outfd[i], first_out[i]);

	for (int i = 0; i < 2; i++) {
		char want[600], out[4096];
		char id = (char)('A' + i);
		ok(res[i].outcome == PERL_OK, "thread %d: the script returned", i);
		snprintf(want, sizeof want, "id=%c cwd=%s sh=%c\n", id, sub[i], id);
		is_str(res[i].tail, want, "thread %d: its own %%ENV, working directory and STDOUT",
				i);
		read_pipe(first_out[i], out, sizeof out);
		snprintf(want, sizeof want, "child:%c\nfds:\n", id);
		is_str(out, want,
				"thread %d: system()'s children wrote into its response pipe, with fds 0-2 only",
				i);
	}
	char cwd_after[512];
	ok(getcwd(cwd_after, sizeof cwd_after) && strcmp(cwd_before, cwd_after) == 0,
			"the process's working directory is untouched");
	ok(getenv("ID") == NULL, "the process's environment is untouched");

	/* A second run on thread 0 reuses its compiled script. */
	res[0].done = 0;
	perl_thread_submit(perl_threads_get(p, 0), &job[0]);
	wait_done(&res[0], &outfd[0], first_out[0]);
	ok(res[0].outcome == PERL_OK && !res[0].compiled, "a second request reuses the script");

	/* A runaway script is ended, uncaught by its eval, without its END
	 * block, and a fresh clone serves the thread's next request. */
	char runaway[300];
	snprintf(runaway, sizeof runaway, "%s/runaway.plx", dir);
	write_file(runaway,
			"$| = 1; print \"start\\n\";\n"
			"eval { 1 while 1 }; print \"caught\\n\";\n"
			"END { print \"end\\n\" }\n");
	struct stat rst;
	stat(runaway, &rst);
	struct result rres = { .mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	struct perl_job rjob = {
		.run = { .script = runaway,
				.dev = rst.st_dev,
				.ino = rst.st_ino,
				.size = (uint64_t)rst.st_size,
				.mtime_sec = rst.st_mtim.tv_sec,
				.mtime_nsec = rst.st_mtim.tv_nsec,
				.env = env[0],
				.stdin_fd = -1 },
		.done = job_done,
		.ctx = &rres,
	};
	struct perl_thread *t0 = perl_threads_get(p, 0);
	char drained[256];
	read_pipe(outfd[0], drained, sizeof drained); /* the run before */
	ok(perl_thread_cancel(t0, &rjob) == 0, "a job not running is not canceled");
	perl_thread_submit(t0, &rjob);
	struct pollfd pfd = { .fd = outfd[0], .events = POLLIN };
	char started[64] = "";
	if (poll(&pfd, 1, 10000) == 1)
		read_pipe(pfd.fd, started, sizeof started);
	is_str(started, "start\n", "the runaway script runs");
	ok(perl_thread_cancel(t0, &rjob) == 1, "it is canceled while it runs");
	wait_done(&rres, &outfd[0], first_out[0]);
	ok(rres.outcome == PERL_CANCELED, "its outcome says it was canceled");
	char rest[64];
	read_pipe(pfd.fd, rest, sizeof rest);
	is_str(rres.tail, "", "its eval did not catch the end, and its END block did not run");
	is_str(rest, "", "nothing more came through its pipe");
	res[0].done = 0;
	perl_thread_submit(t0, &job[0]);
	wait_done(&res[0], &outfd[0], first_out[0]);
	char want[600];
	snprintf(want, sizeof want, "id=A cwd=%s sh=A\n", sub[0]);
	ok(res[0].outcome == PERL_OK && res[0].compiled,
			"a fresh clone serves the next request (compiling the script again)");
	is_str(res[0].tail, want, "... as the first did");
	unlink(runaway);

	perl_threads_destroy(p);
	ok(__atomic_load_n(&bad_closes, __ATOMIC_RELAXED) == 0,
			"no descriptor was closed twice: a fresh clone replaced a canceled one, "
			"and both were destroyed (%d)",
			bad_closes);
	/* The new pipes the runs left (each replaced the one before). */
	for (int i = 0; i < 2; i++)
		if (outfd[i] != first_out[i])
			close(outfd[i]);
	for (int i = 0; i < 2; i++) {
		unlink(path[i]);
		rmdir(sub[i]);
	}
	rmdir(dir);
	return done_testing();
}
