/* Interpreter threads: the parent interpreter, its clones, and the
 * hand-over of one request at a time to each. A request reaches its thread
 * as a pointer under the thread's mutex, with one condition-variable
 * signal; what the script printed comes back in memory (the tail of
 * STDOUT's buffer, passed to done) and, past that buffer, through the
 * thread's response pipe, as a worker's does. */
#include "perl_thread.h"
#include "alloc.h"
#include "clock.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

struct perl_thread {
	struct perl_threads *owner;
	pthread_t tid;
	int started;              /* tid is a thread to join */
	int out[2], err[2];       /* [0] plxd's read ends, [1] the clone's */
	pthread_mutex_t mu;       /* guards job, serving, pi, stop, ready, failed */
	pthread_cond_t cond;      /* a job or stop for the thread; ready for its maker */
	struct perl_job *job;     /* handed over, not taken yet */
	struct perl_job *serving; /* taken, its done not called yet */
	struct perl_run run;      /* its run, the interpreter's: the job may be
				     gone once done has returned */
	struct perl_interp *pi;   /* the clone serving */
	int stop;
	int abandoned; /* left running at a stop: it must touch no job */
	int ready, failed;
	char why[512]; /* why the clone failed */
	/* An event thread's (perl_threads_inline): its jobs run as they are
	 * submitted, on the submitter's thread. */
	int inline_run;
	int replace; /* its clone said it serves no more (answer_job) */
	struct perl_thread *next_inline;
};

struct perl_threads {
	struct perl_interp *parent;
	struct perl_thread *threads;
	unsigned n;
	pthread_mutex_t inline_lock; /* guards inlines */
	struct perl_thread *inlines;
	struct perl_threads *next_abandoned;
};

/* What an inline thread's pipes should hold: an inline run's output waits
 * there until it returns. */
#define INLINE_PIPE_ROOM (1024 * 1024)

/* How long a stop waits for a script that its cancel did not end (a loop
 * in C code that makes no system call, a system call with SIGALRM
 * blocked): then plxd stops without it. */
enum { STOP_GRACE_MS = 2000, STOP_POLL_MS = 50 };

/* Threads left running at a stop, with all they use, reachable from here
 * until the process ends: they may still return into it. */
static struct perl_threads *abandoned;
static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;

static void *thread_main(void *arg);
static struct perl_interp *clone_again(struct perl_thread *t, struct perl_interp *pi, int stop);
static struct perl_run *next_job(void *ctx);
static int answer_job(void *ctx, struct perl_run *run);
static void running_job(void *ctx, const struct perl_run *run);

/* Said in the error log as a worker's retirement is (perl_pool.c). */
static void log_harakiri(void)
{
	plxd_log(PLXD_LOG_INFO,
			"perl: an interpreter thread is replaced by a fresh clone: "
			"its PSGI application asked for it (psgix.harakiri.commit)");
}

static struct perl_run *next_job(void *ctx)
{
	struct perl_thread *t = ctx;
	pthread_mutex_lock(&t->mu);
	while (!t->job && !t->stop && !t->inline_run)
		pthread_cond_wait(&t->cond, &t->mu);
	struct perl_job *job = t->job;
	t->serving = job;
	t->job = NULL;
	if (job) {
		t->run = job->run;
		/* Told when the script is about to run, for its usage too
		 * (running_job); job->running only as the job asks. */
		t->run.want_running |= job->want_usage;
	}
	pthread_mutex_unlock(&t->mu);
	return job ? &t->run : NULL;
}

/* A canceled script's interpreter serves no more, nor one that loaded a
 * module that changed since, nor one whose script left Perl threads
 * running on its descriptors: a fresh clone takes its place (thread_main),
 * as a worker is replaced, and loads the module again. */
static int answer_job(void *ctx, struct perl_run *run)
{
	struct perl_thread *t = ctx;
	pthread_mutex_lock(&t->mu);
	struct perl_job *job = t->serving;
	t->serving = NULL;
	struct perl_interp *pi = t->pi;
	int gone = t->abandoned;
	pthread_mutex_unlock(&t->mu);
	if (gone) /* its job's request and loop may be gone too */
		return -1;
	job->fresh_out = -1;
	int fresh[2];
	if (run->forked && run->outcome != PERL_CANCELED && pipe2(fresh, O_CLOEXEC) == 0) {
		fcntl(fresh[0], F_SETFL, O_NONBLOCK);
		perl_interp_set_stdout(pi, fresh[1]);
		job->fresh_out = fresh[0];
	}
	int canceled = run->outcome == PERL_CANCELED;
	int harakiri = run->harakiri;
	job->done(job, run); /* job may be freed from now on */
	/* Interpreters kept for the Perl threads their scripts left, now
	 * that the answer is out. */
	perl_linger_reap();
	if (perl_interp_threads_left(pi)) {
		t->replace = 1;
		return -1; /* the log says so, under its script */
	}
	int changed = !canceled && perl_interp_modules_changed(pi);
	if (changed)
		plxd_log(PLXD_LOG_INFO,
				"perl: an interpreter thread is replaced by a fresh clone: "
				"a module it loaded changed");
	if (harakiri)
		log_harakiri();
	t->replace = canceled || changed || harakiri;
	return t->replace ? -1 : 0;
}

static int gone_job(void *ctx)
{
	struct perl_thread *t = ctx;
	struct perl_job *job = t->serving; /* this thread's own write */
	return job && __atomic_load_n(&job->gone, __ATOMIC_ACQUIRE);
}

static void running_job(void *ctx, const struct perl_run *run)
{
	struct perl_thread *t = ctx;
	struct perl_job *job = t->serving; /* this thread's own write */
	if (!job)
		return;
	if (job->running && job->run.want_running)
		job->running(job, run);
	if (!job->want_usage)
		return;
	/* As the run's clock starts: its compile, which may read files and
	 * wait for another interpreter's load, is not the run's. */
	struct perl_usage_mark *m = job->mark;
	if (m && m->usable && !run->compiled) {
		job->waits_at = m->waits;
		job->cpu_at = m->cpu_us;
		return;
	}
	struct rusage usage;
	job->waits_at = getrusage(RUSAGE_THREAD, &usage) == 0 ? usage.ru_nvcsw : -1;
	job->cpu_at = clock_thread_cpu_us();
	if (m)
		*m = (struct perl_usage_mark){ .valid = job->waits_at >= 0,
			.wall_us = clock_us(),
			.cpu_us = job->cpu_at,
			.waits = job->waits_at,
			.loop_waits = m->loop_waits_now };
}

static void thread_ready(struct perl_thread *t, int failed, const char *why)
{
	pthread_mutex_lock(&t->mu);
	t->ready = 1;
	t->failed = failed;
	if (why)
		snprintf(t->why, sizeof t->why, "%s", why);
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->mu);
}

/* The thread that waits for plxd's signals (SIGHUP, SIGTERM, ...) with
 * them blocked, and every other thread of plxd blocks them too; an
 * interpreter thread blocks none, so that the programs its scripts start
 * inherit an empty mask (perl's system() restores the thread's mask in the
 * child): one of those signals reaching it is passed on to plxd's. */
static pthread_t signal_thread;

static void forward_signal(int sig)
{
	pthread_kill(signal_thread, sig);
}

static void forward_signals(const sigset_t *waited)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = forward_signal;
	sa.sa_flags = SA_RESTART;
	sigfillset(&sa.sa_mask);
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP && sigismember(waited, sig) == 1)
			sigaction(sig, &sa, NULL);
}

static void *thread_main(void *arg)
{
	struct perl_thread *t = arg;
	char err[512];
	pthread_setname_np(pthread_self(), "plxd-perl");
	sigset_t none;
	sigemptyset(&none);
	int fds[3] = { open("/dev/null", O_RDWR | O_CLOEXEC), t->out[1], t->err[1] };
	t->out[1] = t->err[1] = -1; /* the clone's now */
	if (fds[0] < 0) {
		snprintf(err, sizeof err, "/dev/null: %s", strerror(errno));
		close(fds[1]);
		close(fds[2]);
		thread_ready(t, 1, err);
		return NULL;
	}
	struct perl_interp *pi = perl_interp_clone(t->owner->parent, fds, err, sizeof err);
	thread_ready(t, !pi, pi ? NULL : err);
	struct perl_transport tr = {
		.next = next_job,
		.answer = answer_job,
		.running = running_job,
		.gone = gone_job,
		.ctx = t,
	};
	while (pi) {
		/* Each clone starts with nothing blocked, whatever the one
		 * before left (its script's sigprocmask). */
		pthread_sigmask(SIG_SETMASK, &none, NULL);
		pthread_mutex_lock(&t->mu);
		t->pi = pi;
		pthread_mutex_unlock(&t->mu);
		perl_interp_serve(pi, &tr);
		pthread_mutex_lock(&t->mu);
		t->pi = NULL;
		int stop = t->stop, gone = t->abandoned;
		pthread_mutex_unlock(&t->mu);
		if (gone) /* plxd is ending without waiting for it */
			return NULL;
		/* Asked for by a cleanup handler, after its answer went
		 * (perl_psgi.c): answer_job could not say so. */
		if (!stop && !t->replace && t->run.harakiri)
			log_harakiri();
		pi = clone_again(t, pi, stop);
	}
	return NULL;
}

/* A fresh clone in place of pi (destroyed here), on the same channels and
 * with the processes its scripts started; NULL when stopping, or when it
 * cannot be made (logged). */
static struct perl_interp *clone_again(struct perl_thread *t, struct perl_interp *pi, int stop)
{
	char err[512];
	/* The clone's descriptors are its own copies: the next clone gets
	 * the same channels. */
	int next[3] = { open("/dev/null", O_RDWR | O_CLOEXEC),
		stop ? -1 : perl_interp_take_channel(pi, 1),
		stop ? -1 : perl_interp_take_channel(pi, 2) };
	size_t nchildren;
	pid_t *children = perl_interp_take_children(pi, &nchildren);
	perl_interp_destroy(pi);
	pi = NULL;
	if (stop || next[0] < 0 || next[1] < 0 || next[2] < 0) {
		for (int i = 0; i < 3; i++)
			if (next[i] >= 0)
				close(next[i]);
		free(children);
		return NULL;
	}
	pi = perl_interp_clone(t->owner->parent, next, err, sizeof err);
	if (!pi) {
		fprintf(stderr, "perl: an interpreter thread could not be replaced: %s\n", err);
		free(children);
		return NULL;
	}
	perl_interp_give_children(pi, children, nchildren);
	return pi;
}

/* The thread's pipes: plxd reads without blocking, the script writes
 * blocking (it waits for a slow client, as a CGI script does). */
static int thread_pipes(struct perl_thread *t)
{
	if (pipe2(t->out, O_CLOEXEC) < 0 || pipe2(t->err, O_CLOEXEC) < 0)
		return -1;
	if (fcntl(t->out[0], F_SETFL, O_NONBLOCK) < 0 || fcntl(t->err[0], F_SETFL, O_NONBLOCK) < 0)
		return -1;
	return 0;
}

static void thread_fini(struct perl_thread *t)
{
	for (int i = 0; i < 2; i++) {
		if (t->out[i] >= 0)
			close(t->out[i]);
		if (t->err[i] >= 0)
			close(t->err[i]);
	}
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->mu);
}

/* A pipe's read end is plxd's, non-blocking; its write end the clone's,
 * blocking, made to hold room bytes where the system allows. Returns
 * what it holds, or 0 with errno. */
static size_t inline_pipe(int fds[2], int room)
{
	if (pipe2(fds, O_CLOEXEC) < 0 || fcntl(fds[0], F_SETFL, O_NONBLOCK) < 0)
		return 0;
	int got = fcntl(fds[1], F_SETPIPE_SZ, room);
	if (got < 0)
		got = fcntl(fds[1], F_GETPIPE_SZ);
	return got > 0 ? (size_t)got : 0;
}

struct perl_thread *perl_threads_inline(struct perl_threads *p, size_t *room, char *err,
		size_t errlen)
{
	struct perl_thread *t = xcalloc(1, sizeof *t);
	t->owner = p;
	t->inline_run = 1;
	t->tid = pthread_self();
	t->out[0] = t->out[1] = t->err[0] = t->err[1] = -1;
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cond, NULL);
	size_t out_room = inline_pipe(t->out, INLINE_PIPE_ROOM);
	size_t err_room = out_room ? inline_pipe(t->err, INLINE_PIPE_ROOM) : 0;
	int fds[3] = { open("/dev/null", O_RDWR | O_CLOEXEC), -1, -1 };
	if (!out_room || !err_room || fds[0] < 0) {
		snprintf(err, errlen, "inline interpreter pipes: %s", strerror(errno));
		goto fail;
	}
	*room = out_room < err_room ? out_room : err_room;
	/* The clone's own ends from here, as thread_main takes them. */
	fds[1] = t->out[1];
	fds[2] = t->err[1];
	t->out[1] = t->err[1] = -1;
	t->pi = perl_interp_clone(p->parent, fds, err, errlen);
	fds[0] = -1;
	if (!t->pi)
		goto fail;
	sigset_t none;
	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, NULL);
	pthread_mutex_lock(&p->inline_lock);
	t->next_inline = p->inlines;
	p->inlines = t;
	pthread_mutex_unlock(&p->inline_lock);
	return t;

fail:
	if (fds[0] >= 0)
		close(fds[0]);
	thread_fini(t);
	free(t);
	return NULL;
}

struct perl_threads *perl_threads_create(const struct perl_interp_options *o, unsigned n, char *err,
		size_t errlen)
{
	static char *argv0[] = { "plxd", NULL };
	struct perl_threads *p = xcalloc(1, sizeof *p);
	pthread_mutex_init(&p->inline_lock, NULL);
	perl_interp_threads_init();
	p->parent = perl_interp_create(o, 1, argv0, err, errlen);
	if (!p->parent) {
		free(p);
		return NULL;
	}
	p->threads = xcalloc(n, sizeof *p->threads);
	/* The threads start with every signal blocked, until their clone is
	 * made; then they block none (forward_signals). */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	signal_thread = pthread_self();
	forward_signals(&old);
	for (unsigned i = 0; i < n; i++) {
		struct perl_thread *t = &p->threads[i];
		t->owner = p;
		t->out[0] = t->out[1] = t->err[0] = t->err[1] = -1;
		pthread_mutex_init(&t->mu, NULL);
		pthread_cond_init(&t->cond, NULL);
		p->n = i + 1;
		if (thread_pipes(t) < 0) {
			snprintf(err, errlen, "interpreter thread pipes: %s", strerror(errno));
			goto fail;
		}
		int e = pthread_create(&t->tid, NULL, thread_main, t);
		if (e) {
			snprintf(err, errlen, "cannot start an interpreter thread: %s",
					strerror(e));
			goto fail;
		}
		t->started = 1;
		pthread_mutex_lock(&t->mu);
		while (!t->ready)
			pthread_cond_wait(&t->cond, &t->mu);
		pthread_mutex_unlock(&t->mu);
		if (t->failed) {
			snprintf(err, errlen, "interpreter thread: %s", t->why);
			goto fail;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return p;

fail:
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	perl_threads_destroy(p);
	return NULL;
}

/* Asks each thread to stop, ending the script it runs as at its timeout
 * and killing the programs that script may wait for. Returns how many
 * processes were killed. */
static unsigned threads_stop(struct perl_threads *p)
{
	unsigned killed = 0;
	for (unsigned i = 0; i < p->n; i++) {
		struct perl_thread *t = &p->threads[i];
		pthread_mutex_lock(&t->mu);
		t->stop = 1;
		/* Its script may run on after its request was answered
		 * (FCGI's Finish): serving is over, the run is not. */
		if (t->pi) {
			/* Its programs first: once canceled, the script may end
			 * and forget them before they are read. */
			killed += perl_interp_kill_children(t->pi);
			perl_interp_cancel(t->pi);
		}
		pthread_cond_signal(&t->cond);
		pthread_mutex_unlock(&t->mu);
	}
	pthread_mutex_lock(&p->inline_lock);
	for (struct perl_thread *t = p->inlines; t; t = t->next_inline) {
		pthread_mutex_lock(&t->mu);
		t->stop = 1;
		if (t->pi && t->serving) {
			killed += perl_interp_kill_children(t->pi);
			perl_interp_cancel(t->pi);
		}
		pthread_mutex_unlock(&t->mu);
	}
	pthread_mutex_unlock(&p->inline_lock);
	return killed;
}

/* Joins t by give_up_ms, asking its script again to end meanwhile (a
 * cancel's signal can come just before a system call). Returns 0 when
 * joined, -1 when t runs on. */
static int thread_join(struct perl_thread *t, uint64_t give_up_ms)
{
	for (;;) {
		struct timespec at = clock_deadline(CLOCK_REALTIME, STOP_POLL_MS);
		if (pthread_timedjoin_np(t->tid, NULL, &at) == 0)
			return 0;
		if (clock_ms() >= give_up_ms)
			return -1;
		pthread_mutex_lock(&t->mu);
		if (t->pi)
			perl_interp_cancel(t->pi);
		pthread_mutex_unlock(&t->mu);
	}
}

/* A thread still running after its grace is left to the process's end: it
 * returns into nothing of the request's, and what it uses stays. */
static void thread_abandon(struct perl_thread *t)
{
	pthread_mutex_lock(&t->mu);
	t->abandoned = 1;
	const char *script = t->serving ? t->serving->run.script : NULL;
	fprintf(stderr,
			"perl: stopping without an interpreter thread that runs on %d ms after "
			"its script was ended, in C code that reaches no Perl op: %s\n",
			STOP_GRACE_MS, script ? script : "its script");
	pthread_mutex_unlock(&t->mu);
}

void perl_threads_destroy(struct perl_threads *p)
{
	if (!p)
		return;
	unsigned killed = threads_stop(p);
	if (killed)
		fprintf(stderr, "perl: stopping: %u processes that scripts started are killed\n",
				killed);
	unsigned left = 0;
	uint64_t give_up_ms = clock_ms() + STOP_GRACE_MS;
	for (unsigned i = 0; i < p->n; i++) {
		struct perl_thread *t = &p->threads[i];
		if (t->started && thread_join(t, give_up_ms) < 0) {
			thread_abandon(t);
			left++;
		}
	}
	if (left) {
		/* The parent, the pipes, the locks: all still theirs. */
		pthread_mutex_lock(&abandoned_lock);
		p->next_abandoned = abandoned;
		abandoned = p;
		pthread_mutex_unlock(&abandoned_lock);
		return;
	}
	for (unsigned i = 0; i < p->n; i++)
		thread_fini(&p->threads[i]);
	free(p->threads);
	/* The event threads that ran them have ended: from here. */
	while (p->inlines) {
		struct perl_thread *t = p->inlines;
		p->inlines = t->next_inline;
		perl_interp_destroy(t->pi);
		thread_fini(t);
		free(t);
	}
	pthread_mutex_destroy(&p->inline_lock);
	perl_interp_destroy(p->parent);
	free(p);
}

struct perl_thread *perl_threads_get(struct perl_threads *p, unsigned i)
{
	return i < p->n ? &p->threads[i] : NULL;
}

int perl_thread_alive(const struct perl_thread *t)
{
	return t->pi != NULL;
}

int perl_thread_load_would_wait(const struct perl_thread *t, const struct perl_run *run)
{
	return t->pi && perl_interp_load_would_wait(t->pi, run);
}

int perl_thread_out(const struct perl_thread *t)
{
	return t->out[0];
}

int perl_thread_err(const struct perl_thread *t)
{
	return t->err[0];
}

int perl_thread_cancel(struct perl_thread *t, struct perl_job *job)
{
	pthread_mutex_lock(&t->mu);
	int serving = t->serving == job && t->pi;
	if (serving) {
		/* As a worker's processes go with it: and a script waiting
		 * for one of them (system) gets to its next op. Before the
		 * cancel, as at a stop. */
		perl_interp_kill_children(t->pi);
		perl_interp_cancel(t->pi);
	}
	pthread_mutex_unlock(&t->mu);
	return serving;
}

/* An inline thread's job, on the caller's thread: served until its
 * transport has no more (the one job, and a FastCGI-style script's accept
 * that asks for the next finds none), then its clone replaced if it said
 * so. */
static void inline_serve(struct perl_thread *t)
{
	struct perl_transport tr = {
		.next = next_job,
		.answer = answer_job,
		.running = running_job,
		.gone = gone_job,
		.ctx = t,
	};
	t->replace = 0;
	perl_interp_serve(t->pi, &tr);
	/* A script that ended the interpreter, or whose accept loop asked for
	 * the next request (none: it returns), leaves a clone that serves
	 * no more. */
	if (!t->replace && !perl_interp_stopped(t->pi))
		return;
	pthread_mutex_lock(&t->mu);
	struct perl_interp *old = t->pi;
	t->pi = NULL;
	int stop = t->stop;
	pthread_mutex_unlock(&t->mu);
	/* As on an interpreter thread (thread_main). */
	if (!stop && !t->replace && t->run.harakiri)
		log_harakiri();
	struct perl_interp *pi = clone_again(t, old, stop);
	pthread_mutex_lock(&t->mu);
	t->pi = pi;
	pthread_mutex_unlock(&t->mu);
}

void perl_thread_submit(struct perl_thread *t, struct perl_job *job)
{
	pthread_mutex_lock(&t->mu);
	t->job = job;
	int run_here = t->inline_run && t->pi;
	pthread_mutex_unlock(&t->mu);
	if (run_here) {
		inline_serve(t);
		return;
	}
	/* After the unlock: the thread woken does not find the mutex held
	 * and sleep on it again. */
	pthread_cond_signal(&t->cond);
}

const struct perl_threads_api perl_threads_api = {
	.plugin = { .abi = PLXD_HANDLER_ABI, .global_library = PLXD_LIBPERL },
	.create = perl_threads_create,
	.destroy = perl_threads_destroy,
	.get = perl_threads_get,
	.out = perl_thread_out,
	.err = perl_thread_err,
	.submit = perl_thread_submit,
	.cancel = perl_thread_cancel,
	.inline_thread = perl_threads_inline,
	.alive = perl_thread_alive,
	.load_would_wait = perl_thread_load_would_wait,
};
