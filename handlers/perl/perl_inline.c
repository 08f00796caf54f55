/* Inline runs: which scripts have proven short, each event thread's own
 * interpreter, and the watchdog that stands in for the event thread's
 * loop while a run holds it. No perl.h. */
#include "perl_inline.h"
#include "alloc.h"
#include "clock.h"
#include "log.h"
#include "loop.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* What a run may have printed before its end to stay short: a quarter of
 * what an inline thread's pipe must hold, so that a run that prints more
 * than its last ones still does not fill it before the watchdog reads it. */
#define OUTPUT_MAX (256 * 1024)
#define PIPE_MIN   (4 * OUTPUT_MAX)
/* The fitness of this many scripts is remembered; others run on the
 * interpreter threads. */
#define FITS_BUCKETS   256
#define FITS_MAX       4096
#define SHORT_RUNS_MAX 1000000
/* And of this many routes of applications, apart: a client asking for
 * ever new paths fills this, not the scripts' room. A route is recorded
 * only up to this length of PATH_INFO. */
#define ROUTES_MAX     4096
#define ROUTE_PATH_MAX 256
/* How often the watchdog looks, and after how long a run has its pipes
 * read into memory (stdout) and the log (stderr). */
#define WATCHDOG_MS         20
#define SPILL_AFTER_MS      40
#define WATCHDOG_IDLE_TICKS 50 /* 1 s */

/* Each demotion of a script that ran far past the budget inline (more
 * than PERL_INLINE_SLOW_FACTOR times it, by its own time: run_own_us)
 * doubles the short runs its next promotion needs (up to DEMOTIONS_MAX
 * doublings, 512 times inline_after): one that is fast, then slow, then
 * fast again (a slow query on a quick route) holds its event thread ever
 * more rarely. A run just past the budget demotes it without doubling,
 * however long the scheduler held it: it proves itself again as soon as
 * before. */
#define DEMOTIONS_MAX 9

/* A script's (or a route's) record of short runs. */
struct fit {
	struct fit *next;
	unsigned long short_runs; /* in a row, up to SHORT_RUNS_MAX */
	unsigned demotions;       /* runs far past the budget inline, up to
				     DEMOTIONS_MAX */
	uint64_t avg_us;          /* its runs' own time, smoothed
				     (perl_inline_smooth) */
	int route;
	char script[];
};

struct perl_inline_thread {
	struct perl_thread *t;
	struct loop *loop; /* the event thread's */
	int out, err;      /* read ends of its pipes, non-blocking */
	/* Its run in progress, for the watchdog (under the lock). */
	struct perl_job *job;
	const char *script;
	uint64_t since_us, deadline_ms;
	int timed_out;               /* the watchdog ended it */
	int spilled;                 /* the watchdog read its pipes */
	int held;                    /* the watchdog marked its loop held (loop_set_held) */
	struct perl_usage_mark mark; /* its own, for its runs (the event thread's) */
	char *spill;                 /* its stdout, read by the watchdog */
	size_t spill_len, spill_cap;
	struct log_lines err_lines; /* its stderr, read by the watchdog */
	struct perl_inline_thread *next;
};

struct perl_inline {
	const struct perl_threads_api *api;
	struct perl_threads *threads;
	pthread_mutex_t lock; /* guards all below and each thread's run */
	struct fit *fits[FITS_BUCKETS];
	size_t nfits, nroutes;
	struct perl_inline_thread *list;
	int off; /* an inline thread could not be made: none is */
	pthread_t watchdog;
	int watching, stop;
	/* The watchdog's ticks with no inline run, up to WATCHDOG_IDLE_TICKS;
	 * then it sleeps until a run begins (asleep), so that an idle plxd
	 * is not woken 50 times a second. */
	unsigned idle_ticks;
	int asleep;
	pthread_cond_t wake;
};

struct perl_inline *perl_inline_create(const struct perl_threads_api *api,
		struct perl_threads *threads)
{
	struct perl_inline *in = xcalloc(1, sizeof *in);
	in->api = api;
	in->threads = threads;
	pthread_mutex_init(&in->lock, NULL);
	pthread_cond_init(&in->wake, NULL);
	return in;
}

void perl_inline_destroy(struct perl_inline *in)
{
	if (!in)
		return;
	if (in->watching) {
		pthread_mutex_lock(&in->lock);
		in->stop = 1;
		pthread_cond_signal(&in->wake);
		pthread_mutex_unlock(&in->lock);
		pthread_join(in->watchdog, NULL);
	}
	while (in->list) {
		struct perl_inline_thread *it = in->list;
		in->list = it->next;
		close(it->out);
		close(it->err);
		free(it->spill);
		free(it);
	}
	for (size_t i = 0; i < FITS_BUCKETS; i++)
		while (in->fits[i]) {
			struct fit *f = in->fits[i];
			in->fits[i] = f->next;
			free(f);
		}
	pthread_cond_destroy(&in->wake);
	pthread_mutex_destroy(&in->lock);
	free(in);
}

/* ---- which scripts run inline ---- */

static size_t fit_bucket(const char *script)
{
	size_t h = 2166136261u;
	for (const unsigned char *c = (const unsigned char *)script; *c; c++)
		h = (h ^ *c) * 16777619u;
	return h % FITS_BUCKETS;
}

/* Forgets every route's record, when there is no room for a new route:
 * they prove themselves again, and an application whose paths name
 * records (/user/123) never keeps new routes off the event threads for
 * good. Scripts' records stay. Under lock. */
static void forget_routes(struct perl_inline *in)
{
	for (size_t i = 0; i < FITS_BUCKETS; i++)
		for (struct fit **at = &in->fits[i]; *at;) {
			struct fit *f = *at;
			if (!f->route) {
				at = &f->next;
				continue;
			}
			*at = f->next;
			free(f);
		}
	in->nroutes = 0;
}

/* key's record, made when make is set and there is room; under lock. */
static struct fit *fit_find(struct perl_inline *in, const char *key, int route, int make)
{
	size_t i = fit_bucket(key);
	for (struct fit *f = in->fits[i]; f; f = f->next)
		if (strcmp(f->script, key) == 0)
			return f;
	if (make && route && in->nroutes >= ROUTES_MAX)
		forget_routes(in);
	size_t *count = route ? &in->nroutes : &in->nfits;
	if (!make || *count >= (route ? ROUTES_MAX : FITS_MAX))
		return NULL;
	size_t len = strlen(key) + 1;
	struct fit *f = xcalloc(1, sizeof *f + len);
	memcpy(f->script, key, len);
	f->route = route;
	f->next = in->fits[i];
	in->fits[i] = f;
	(*count)++;
	return f;
}

/* How many short runs in a row f needs to run inline. */
static unsigned long runs_needed(const struct fit *f, unsigned long after)
{
	return after << f->demotions;
}

/* What q's runs are recorded under: its script; for an application, its
 * route (the file and PATH_INFO, kept in q at the first look, while its
 * environment is there), since one file serves every route and a slow
 * route must not make the others wait. NULL: not recorded, q never runs
 * inline (a path past ROUTE_PATH_MAX). */
static const char *fit_key(struct perl_req *q)
{
	if (!perl_req_is_psgi(q->script))
		return q->script;
	if (q->route || !q->env)
		return q->route;
	const char *path = "";
	for (char **e = q->env; *e; e++)
		if (strncmp(*e, "PATH_INFO=", 10) == 0) {
			path = *e + 10;
			break;
		}
	if (strlen(path) <= ROUTE_PATH_MAX)
		q->route = xasprintf("%s\n%s", q->script, path);
	return q->route;
}

/* How long a run of q's that took run_us by the clock held its thread by
 * its own doing: its CPU time when it never waited (a sleep, a read that
 * blocked, a lock), the rest being the scheduler's, which on a machine
 * busy enough takes the core from a short run for a tick (4 ms) or more;
 * else its time by the clock, and *waited is set. Looked at only for a
 * run past the budget, on the thread that ran it, as the run ends. */
static uint64_t run_own_us(const struct perl_req *q, uint64_t run_us, int *waited)
{
	const struct perl_job *job = &q->b.thread.job;
	struct rusage now;
	*waited = job->waits_at < 0 || getrusage(RUSAGE_THREAD, &now) != 0
			|| now.ru_nvcsw != job->waits_at;
	if (*waited)
		return run_us;
	uint64_t cpu_us = clock_thread_cpu_us() - job->cpu_at;
	return cpu_us < run_us ? cpu_us : run_us;
}

enum perl_inline_verdict perl_inline_judge(const struct perl_req *q, const struct perl_run *run,
		uint64_t *own_us)
{
	uint64_t budget_us = (uint64_t)q->conf->inline_budget_ms * 1000;
	int waited = 0;
	*own_us = run->run_us <= budget_us ? run->run_us : run_own_us(q, run->run_us, &waited);
	int clean = !run->forked && !run->accept_loop && !run->ran_on && run->flushed <= OUTPUT_MAX
			&& run->outcome != PERL_CANCELED && run->outcome != PERL_FATAL;
	return perl_inline_verdict_of(budget_us, run->run_us, *own_us, waited, clean);
}

void perl_inline_note(struct perl_inline *in, struct perl_req *q, enum perl_inline_verdict verdict,
		uint64_t own_us, int was_inline, uint64_t run_us)
{
	const char *key = fit_key(q);
	if (!key)
		return;
	unsigned long after = q->conf->inline_after;
	uint64_t budget_us = (uint64_t)q->conf->inline_budget_ms * 1000;
	pthread_mutex_lock(&in->lock);
	struct fit *f = fit_find(in, key, key != q->script, 1);
	if (f)
		f->avg_us = perl_inline_smooth(f->avg_us, own_us, budget_us);
	if (verdict == PERL_INLINE_STRAY && !(f && perl_inline_forgiven(f->avg_us, budget_us)))
		verdict = PERL_INLINE_LONG;
	/* A straggler forgiven neither counts as short nor breaks the count. */
	int past = verdict != PERL_INLINE_SHORT && verdict != PERL_INLINE_STRAY;
	if (f && verdict == PERL_INLINE_SHORT && f->short_runs < SHORT_RUNS_MAX)
		f->short_runs++;
	else if (f && past)
		f->short_runs = 0;
	if (f && verdict == PERL_INLINE_FAR && was_inline && f->demotions < DEMOTIONS_MAX)
		f->demotions++;
	unsigned long needed = f ? runs_needed(f, after) : after;
	uint64_t avg_us = f ? f->avg_us : own_us;
	pthread_mutex_unlock(&in->lock);
	const char *route = key != q->script ? key + strlen(q->script) + 1 : NULL;
	if (past && was_inline)
		plxd_log(PLXD_LOG_INFO,
				"%s%s%s: ran %llu us inline, past inline_budget (or printed or forked "
				"too much): it runs on the interpreter threads until it has run "
				"short %lu times (its runs' own time, smoothed: %llu us)",
				q->script, route ? ", route " : "",
				route ? (*route ? route : "(the file's own URL)") : "",
				(unsigned long long)run_us, needed ? needed : 1,
				(unsigned long long)avg_us);
}

/* ---- the watchdog ---- */

/* Appends what fd holds to it's spill (out) or logs it (err). Returns
 * whether there was anything. */
static int pipe_take(struct perl_inline_thread *it, int fd, int out, const char *script)
{
	char buf[16384];
	ssize_t n;
	int any = 0;
	while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
		if (n < 0)
			continue;
		any = 1;
		if (!out) {
			log_lines_feed(&it->err_lines, script, buf, (size_t)n);
			continue;
		}
		if (it->spill_len + (size_t)n > it->spill_cap) {
			it->spill_cap = (it->spill_len + (size_t)n) * 2;
			it->spill = xrealloc(it->spill, it->spill_cap);
		}
		memcpy(it->spill + it->spill_len, buf, (size_t)n);
		it->spill_len += (size_t)n;
	}
	return any;
}

/* Whether an inline run is in progress; under lock. */
static int running(const struct perl_inline *in)
{
	for (const struct perl_inline_thread *it = in->list; it; it = it->next)
		if (it->job)
			return 1;
	return 0;
}

/* Every WATCHDOG_MS: a run that has gone on SPILL_AFTER_MS has its pipes
 * read, so that it never waits on a full one, and its loop marked held;
 * a run past its timeout is ended, as the loop's deadline would. */
static void *watchdog_main(void *arg)
{
	struct perl_inline *in = arg;
	pthread_setname_np(pthread_self(), "plxd-watchdog");
	pthread_mutex_lock(&in->lock);
	while (!in->stop) {
		if (in->idle_ticks >= WATCHDOG_IDLE_TICKS && !running(in)) {
			in->asleep = 1;
			pthread_cond_wait(&in->wake, &in->lock);
			in->asleep = 0;
			in->idle_ticks = 0;
			continue;
		}
		struct timespec at = clock_deadline(CLOCK_REALTIME, WATCHDOG_MS);
		pthread_cond_timedwait(&in->wake, &in->lock, &at);
		uint64_t now_us = clock_us();
		in->idle_ticks++;
		for (struct perl_inline_thread *it = in->list; it; it = it->next) {
			if (!it->job)
				continue;
			in->idle_ticks = 0;
			if (now_us - it->since_us >= SPILL_AFTER_MS * 1000) {
				it->spilled |= pipe_take(it, it->out, 1, it->script);
				it->spilled |= pipe_take(it, it->err, 0, it->script);
				/* New connections go to the other event threads
				 * until it ends. */
				if (!it->held)
					loop_set_held(it->loop, 1);
				it->held = 1;
			}
			if (now_us / 1000 < it->deadline_ms)
				continue;
			if (in->api->cancel(it->t, it->job) && !it->timed_out) {
				it->timed_out = 1;
				plxd_log(PLXD_LOG_WARN,
						"%s: ran past timeout inline: its interpreter ends "
						"it",
						it->script);
			}
		}
	}
	pthread_mutex_unlock(&in->lock);
	return NULL;
}

/* ---- each event thread's interpreter ---- */

/* The calling event thread's, made at its first call (a clone takes a
 * while, once); NULL when none can be. */
static struct perl_inline_thread *thread_of(struct perl_inline *in, struct loop *loop)
{
	pthread_mutex_lock(&in->lock);
	struct perl_inline_thread *it = in->list;
	while (it && it->loop != loop)
		it = it->next;
	int off = in->off;
	pthread_mutex_unlock(&in->lock);
	if (it || off)
		return it;
	char err[512];
	size_t room = 0;
	struct perl_thread *t = in->api->inline_thread(in->threads, &room, err, sizeof err);
	int out = t ? fcntl(in->api->out(t), F_DUPFD_CLOEXEC, 3) : -1;
	int errfd = t ? fcntl(in->api->err(t), F_DUPFD_CLOEXEC, 3) : -1;
	if (t && room < PIPE_MIN)
		snprintf(err, sizeof err, "its pipes hold %zu bytes, fewer than %d", room,
				PIPE_MIN);
	else if (t && (out < 0 || errfd < 0))
		snprintf(err, sizeof err, "its pipes: %s", strerror(errno));
	if (!t || room < PIPE_MIN || out < 0 || errfd < 0) {
		/* A clone made stays the threads' until their end. */
		if (out >= 0)
			close(out);
		if (errfd >= 0)
			close(errfd);
		pthread_mutex_lock(&in->lock);
		in->off = 1;
		pthread_mutex_unlock(&in->lock);
		plxd_log(PLXD_LOG_WARN, "perl: no script runs inline: %s", err);
		return NULL;
	}
	it = xcalloc(1, sizeof *it);
	it->t = t;
	it->loop = loop;
	it->out = out;
	it->err = errfd;
	pthread_mutex_lock(&in->lock);
	it->next = in->list;
	in->list = it;
	if (!in->watching)
		in->watching = pthread_create(&in->watchdog, NULL, watchdog_main, in) == 0;
	pthread_mutex_unlock(&in->lock);
	plxd_log(PLXD_LOG_INFO, "perl: an event thread has its interpreter for inline runs");
	return it;
}

struct perl_inline_thread *perl_inline_for(struct perl_inline *in, struct perl_req *q)
{
	if (!q->conf->inline_budget_ms)
		return NULL;
	const char *key = fit_key(q);
	if (!key || q->has_body)
		return NULL;
	unsigned long after = q->conf->inline_after;
	pthread_mutex_lock(&in->lock);
	struct fit *f = after ? fit_find(in, key, key != q->script, 0) : NULL;
	int proven = !after || (f && f->short_runs >= runs_needed(f, after));
	pthread_mutex_unlock(&in->lock);
	struct perl_inline_thread *it = proven ? thread_of(in, q->loop) : NULL;
	return it && in->api->alive(it->t) ? it : NULL;
}

struct perl_thread *perl_inline_perl_thread(const struct perl_inline_thread *it)
{
	return it->t;
}

struct perl_usage_mark *perl_inline_mark(struct perl_inline_thread *it)
{
	return &it->mark;
}

void perl_inline_begin(struct perl_inline *in, struct perl_inline_thread *it, struct perl_req *q)
{
	uint64_t now = clock_us();
	struct perl_usage_mark *m = &it->mark;
	m->loop_waits_now = loop_waits(it->loop);
	m->usable = perl_inline_mark_usable(m->valid, m->loop_waits, m->loop_waits_now,
			now - m->wall_us);
	pthread_mutex_lock(&in->lock);
	it->job = &q->b.thread.job;
	it->script = q->script;
	it->since_us = now;
	it->deadline_ms = it->since_us / 1000 + q->conf->timeout_ms;
	it->timed_out = it->spilled = 0;
	/* Under load the watchdog never sleeps, and this costs nothing. */
	if (in->asleep)
		pthread_cond_signal(&in->wake);
	pthread_mutex_unlock(&in->lock);
}

int perl_inline_end(struct perl_inline *in, struct perl_inline_thread *it, struct perl_req *q,
		const struct perl_run *run, int *old_out)
{
	*old_out = -1;
	pthread_mutex_lock(&in->lock);
	it->job = NULL;
	if (it->held)
		loop_set_held(it->loop, 0);
	it->held = 0;
	int spilled = it->spilled;
	q->b.thread.timed_out = it->timed_out;
	pthread_mutex_unlock(&in->lock);
	/* From here the watchdog leaves it alone. What the script flushed
	 * (or a program it started wrote) goes before the tail, and the pipe
	 * is empty for the next run; stderr is logged under its name. */
	struct pollfd pipes[2] = {
		{ .fd = it->out, .events = POLLIN },
		{ .fd = it->err, .events = POLLIN },
	};
	/* One poll says what most runs leave there, nothing, where a read
	 * of each would. */
	int polled = poll(pipes, 2, 0) >= 0;
	if (!polled || pipes[0].revents)
		pipe_take(it, it->out, 1, q->script);
	if (!polled || pipes[1].revents)
		pipe_take(it, it->err, 0, q->script);
	log_lines_flush(&it->err_lines, q->script);
	if (it->spill_len) {
		q->tail = xmalloc(it->spill_len + run->tail_len);
		memcpy(q->tail, it->spill, it->spill_len);
		if (run->tail_len)
			memcpy(q->tail + it->spill_len, run->tail, run->tail_len);
		q->tail_len = it->spill_len + run->tail_len;
		it->spill_len = 0;
	}
	if (q->b.thread.job.fresh_out >= 0) {
		/* It forked: its interpreter writes to a new pipe from now; the
		 * programs it started hold the old one, which the request reads
		 * as its output goes out, then closes. */
		*old_out = it->out;
		it->out = q->b.thread.job.fresh_out;
		q->b.thread.job.fresh_out = -1;
	}
	return !spilled && !q->b.thread.timed_out;
}
