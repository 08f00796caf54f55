/* The spawner thread: see cgi_spawner.h. One thread is enough: a spawn
 * costs it tens of microseconds of clone and exec, while the scripts
 * themselves run in parallel in their own processes. */
#include "cgi_spawner.h"
#include "alloc.h"
#include "loop.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cgi_spawner {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct cgi_spawn_job *first, *last;
	int stopping;
};

static void run_done(void *arg)
{
	struct cgi_spawn_job *job = arg;
	job->done(job);
}

static void *spawner_main(void *arg)
{
	struct cgi_spawner *s = arg;
	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->first && !s->stopping)
			pthread_cond_wait(&s->wake, &s->lock);
		if (!s->first)
			break;
		struct cgi_spawn_job *job = s->first;
		s->first = job->next;
		if (!s->first)
			s->last = NULL;
		pthread_mutex_unlock(&s->lock);
		job->error = spawn_start(&job->spec, &job->child) < 0 ? errno : 0;
		loop_post(job->loop, run_done, job);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

struct cgi_spawner *cgi_spawner_create(char *err, size_t errlen)
{
	struct cgi_spawner *s = xcalloc(1, sizeof *s);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->wake, NULL);
	int rc = pthread_create(&s->thread, NULL, spawner_main, s);
	if (rc != 0) {
		snprintf(err, errlen, "cannot start the spawner thread: %s", strerror(rc));
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->wake);
		free(s);
		return NULL;
	}
	return s;
}

void cgi_spawner_destroy(struct cgi_spawner *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = 1;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->wake);
	free(s);
}

void cgi_spawner_submit(struct cgi_spawner *s, struct cgi_spawn_job *job)
{
	job->next = NULL;
	pthread_mutex_lock(&s->lock);
	if (s->last)
		s->last->next = job;
	else
		s->first = job;
	s->last = job;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
}
