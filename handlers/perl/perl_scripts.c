/* Per-script figures for the status page: see perl_scripts.h. A hash of
 * script paths, each with counts, a run-time sum and a histogram. */
#include "perl_scripts.h"
#include "alloc.h"
#include "hist.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS 1024

struct script {
	struct script *next;  /* in its hash bucket */
	struct script *order; /* the next one first seen after it */
	char *path;
	uint64_t compiles, runs, run_us_sum;
	uint64_t hist[HIST_BUCKETS];
};

struct perl_scripts {
	pthread_mutex_t lock;
	struct script *bucket[BUCKETS];
	struct script *first, *last;
	size_t n;
};

static unsigned hash(const char *s)
{
	unsigned h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h % BUCKETS;
}

struct perl_scripts *perl_scripts_create(void)
{
	struct perl_scripts *t = xcalloc(1, sizeof *t);
	pthread_mutex_init(&t->lock, NULL);
	return t;
}

void perl_scripts_destroy(struct perl_scripts *t)
{
	if (!t)
		return;
	for (struct script *s = t->first, *next; s; s = next) {
		next = s->order;
		free(s->path);
		free(s);
	}
	pthread_mutex_destroy(&t->lock);
	free(t);
}

void perl_scripts_add(struct perl_scripts *t, const char *path, int compiled, uint64_t run_us)
{
	unsigned b = hash(path);
	pthread_mutex_lock(&t->lock);
	struct script *s = t->bucket[b];
	while (s && strcmp(s->path, path) != 0)
		s = s->next;
	if (!s && t->n < PERL_SCRIPTS_MAX) {
		s = xcalloc(1, sizeof *s);
		s->path = xstrdup(path);
		s->next = t->bucket[b];
		t->bucket[b] = s;
		if (t->last)
			t->last->order = s;
		else
			t->first = s;
		t->last = s;
		t->n++;
	}
	if (s) {
		s->compiles += compiled != 0;
		s->runs++;
		s->run_us_sum += run_us;
		s->hist[hist_index(run_us)]++;
	}
	pthread_mutex_unlock(&t->lock);
}

void perl_scripts_each(struct perl_scripts *t,
		void (*fn)(const struct perl_script_figures *f, void *ctx), void *ctx)
{
	pthread_mutex_lock(&t->lock);
	for (struct script *s = t->first; s; s = s->order) {
		struct perl_script_figures f = {
			.path = s->path,
			.compiles = s->compiles,
			.runs = s->runs,
			.run_us_sum = s->run_us_sum,
			.run_us_p99 = hist_percentile(s->hist, 0.99),
		};
		fn(&f, ctx);
	}
	pthread_mutex_unlock(&t->lock);
}

size_t perl_scripts_count(struct perl_scripts *t)
{
	pthread_mutex_lock(&t->lock);
	size_t n = t->n;
	pthread_mutex_unlock(&t->lock);
	return n;
}
