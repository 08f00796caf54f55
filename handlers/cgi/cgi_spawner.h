/* The spawner: a thread that starts CGI scripts (posix_spawn) for the
 * event threads, so that none of them waits while a child is created and
 * executes its program (posix_spawn returns only after the exec). A job
 * comes back to the loop it came from, through loop_post. */
#ifndef PLXD_CGI_SPAWNER_H
#define PLXD_CGI_SPAWNER_H

#include "spawn_child.h"

struct loop;
struct cgi_spawner;

struct cgi_spawn_job {
	struct cgi_spawn_job *next; /* the spawner's queue */
	struct spawn_spec spec;     /* what to start; its strings stay
					    the submitter's until done */
	struct spawn_child child;   /* the result */
	int error;                  /* 0, or why it could not start */
	struct loop *loop;          /* where done runs */
	void (*done)(struct cgi_spawn_job *job);
};

/* Starts the spawner thread. Returns NULL with err. */
struct cgi_spawner *cgi_spawner_create(char *err, size_t errlen);

/* Stops it; no job may be queued or running (plxd stops handlers after the
 * last request, and a request waits for its job). */
void cgi_spawner_destroy(struct cgi_spawner *s);

/* Queues job; job->done(job) runs on job->loop once it has been tried. */
void cgi_spawner_submit(struct cgi_spawner *s, struct cgi_spawn_job *job);

#endif
