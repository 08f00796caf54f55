/* The status page's counters: see stats.h. A counter has one writer, the
 * event thread it belongs to, which adds with a relaxed load and store
 * (a plain add on x86: no locked instruction); readers load it relaxed. */
#include "stats.h"
#include "alloc.h"
#include "clock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef _Atomic uint64_t counter;

struct stats_handler {
	counter requests;
	counter by_class[6];
	counter sum_us;
	counter hist[HIST_BUCKETS];
};

/* One event thread's counters, aligned so that no two threads' share a
 * cache line. */
struct stats_thread {
	_Alignas(64) counter phase[3]; /* connections per phase; [STATS_IDLE] unused */
	struct stats_handler handlers[STATS_HANDLERS];
};

static int enabled;
static uint64_t started_us;
static struct stats_thread *threads;
static unsigned nthreads;
static _Thread_local struct stats_thread *self;

/* Names of the handler ids; count is published with release after the
 * name is written, so a reader that sees an id sees its name. */
static char *names[STATS_HANDLERS];
static _Atomic unsigned nnames;

static inline void add(counter *c, uint64_t d)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d,
			memory_order_relaxed);
}

static inline uint64_t get(counter *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

void stats_init(int on)
{
	enabled = on;
	started_us = clock_us();
	if (atomic_load(&nnames) == 0) {
		names[STATS_PLXD] = xstrdup("plxd");
		names[STATS_STATUS] = xstrdup("status");
		atomic_store_explicit(&nnames, 2, memory_order_release);
	}
}

int stats_enabled(void)
{
	return enabled;
}

unsigned stats_handler_id(const char *name)
{
	unsigned n = atomic_load_explicit(&nnames, memory_order_relaxed);
	for (unsigned i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	if (n == STATS_HANDLERS)
		return STATS_HANDLERS - 1;
	names[n] = xstrdup(n == STATS_HANDLERS - 1 ? "other" : name);
	atomic_store_explicit(&nnames, n + 1, memory_order_release);
	return n;
}

void stats_threads_create(unsigned n)
{
	if (posix_memalign((void **)&threads, 64, n * sizeof *threads) != 0)
		abort(); /* out of memory: see alloc.h */
	memset(threads, 0, n * sizeof *threads);
	nthreads = n;
}

void stats_thread_attach(unsigned i)
{
	self = &threads[i];
}

void stats_threads_destroy(void)
{
	free(threads);
	threads = NULL;
	nthreads = 0;
}

void stats_conn_phase(unsigned char *phase, enum stats_phase to)
{
	struct stats_thread *t = self;
	if (!enabled || !t || *phase == to)
		return;
	if (*phase != STATS_IDLE)
		add(&t->phase[*phase], (uint64_t)-1);
	if (to != STATS_IDLE)
		add(&t->phase[to], 1);
	*phase = (unsigned char)to;
}

void stats_request(unsigned handler, unsigned status, uint64_t duration_us)
{
	struct stats_thread *t = self;
	if (!enabled || !t || handler >= STATS_HANDLERS)
		return;
	struct stats_handler *h = &t->handlers[handler];
	unsigned cls = status >= 100 && status < 600 ? status / 100 : 0;
	add(&h->requests, 1);
	add(&h->by_class[cls], 1);
	add(&h->sum_us, duration_us);
	add(&h->hist[hist_index(duration_us)], 1);
}

void stats_read(struct stats_sum *out)
{
	memset(out, 0, sizeof *out);
	out->uptime_us = clock_us() - started_us;
	unsigned n = atomic_load_explicit(&nnames, memory_order_acquire);
	out->nhandlers = n;
	for (unsigned i = 0; i < n; i++)
		out->handlers[i].name = names[i];
	uint64_t reading = 0, writing = 0;
	for (unsigned k = 0; k < nthreads; k++) {
		struct stats_thread *t = &threads[k];
		reading += get(&t->phase[STATS_READING]);
		writing += get(&t->phase[STATS_WRITING]);
		for (unsigned i = 0; i < n; i++) {
			struct stats_handler *h = &t->handlers[i];
			struct stats_handler_sum *s = &out->handlers[i];
			s->requests += get(&h->requests);
			for (unsigned c = 0; c < 6; c++)
				s->by_class[c] += get(&h->by_class[c]);
			s->sum_us += get(&h->sum_us);
			for (unsigned b = 0; b < HIST_BUCKETS; b++)
				s->hist[b] += get(&h->hist[b]);
		}
	}
	/* Each thread's gauges count its own connections only, so none is
	 * ever below zero, and neither is their sum. */
	out->reading = reading;
	out->writing = writing;
}
