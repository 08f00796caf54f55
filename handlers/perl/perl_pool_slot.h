/* The worker pool's slots, shared by its lending (perl_pool.c) and its
 * keeper thread (perl_pool_keeper.c): what each slot holds, and the pool's
 * lock over them. Include perl_pool.h first: this header is the pool's
 * insides, so that the pool's own header does not depend on it. */
#ifndef PLXD_PERL_POOL_SLOT_H
#define PLXD_PERL_POOL_SLOT_H

#include "log.h"
#include "perl_queue.h"

#include <pthread.h>

/* How long a worker told to stop (or retiring) may take to run its END
 * blocks and exit before it is killed. */
#define STOP_GRACE_MS 3000

enum slot_state { SLOT_IDLE, SLOT_BUSY, SLOT_DOWN, SLOT_STARTING };

/* How the process of a DOWN slot must end. */
enum slot_end {
	END_NONE,   /* no process */
	END_STOP,   /* close its socket: it finishes and exits */
	END_RETIRE, /* it exits by itself */
	END_KILL    /* already sent SIGKILL */
};

struct slot {
	struct perl_worker w; /* first member: a worker is its slot */
	unsigned index;
	enum slot_state state;
	enum slot_end end;
	unsigned generation; /* of the settings it runs */
	unsigned failures;   /* start-ups failed in a row */
	uint64_t retry_at_ms;
	struct log_lines lines; /* its stderr while starting and ending */
	/* For the status page, under the pool's lock. */
	char script[PERL_VIEW_SCRIPT]; /* the script it runs while BUSY */
	uint64_t script_since_us;
	uint64_t served, compiled;
};

/* The spare, the one worker outside the slots (see the top). */
enum spare_state {
	SPARE_EMPTY,
	SPARE_STARTING, /* the keeper starts it, outside the lock */
	SPARE_READY,    /* a worker of spare.generation, waiting for a slot */
	SPARE_ENDING    /* holds an old worker the keeper must end */
};

struct settings {
	char *worker_path;
	unsigned long start_timeout_ms;
	uint64_t max_requests, max_rss_kb, max_memory;
	char *preload;
	char *inc;
	unsigned taint;
	int twin_at_start; /* see struct perl_wire_init */
};

struct perl_pool {
	pthread_mutex_t lock;
	pthread_cond_t keeper_cond; /* a slot went DOWN, or stopping */
	pthread_t keeper;
	int keeper_running;
	struct slot *slots;
	unsigned n;
	unsigned idle;
	struct perl_queue queue; /* waiting requests */
	struct slot spare;       /* its end says how to end an ENDING one */
	enum spare_state spare_state;
	int stopping;
	unsigned generation;
	struct settings *settings; /* current; replaced by reconfigure */
	/* A worker has made a tainted twin: the site has -T scripts, and
	 * workers started from now on make theirs before they are ready. */
	int twin_wanted;
};

/* perl_pool.c */
struct settings *pool_settings_copy(const struct perl_backend_settings *s);
void pool_settings_free(struct settings *s);
/* With the lock held: the worker goes to the longest-waiting request,
 * which is returned (the caller serves it with perl_queue_serve once the
 * lock is released), or it becomes idle. Handing it over directly keeps
 * the queue fair and spares the waiter a second round for the lock. */
struct perl_waiter *pool_slot_idle(struct perl_pool *p, struct slot *s);

/* perl_pool_keeper.c */
/* Starts a worker process for slot s. Returns 0, or -1 with err. */
int pool_spawn(struct slot *s, const struct settings *st, char *err, size_t errlen);
/* Waits for its READY, logging what it prints meanwhile. Returns 0, or -1
 * with err. */
int pool_await_ready(struct slot *s, unsigned long timeout_ms, char *err, size_t errlen);
/* Ends the slot's process however it stands, kills what is left of its
 * process group, reaps it, and closes its descriptors. */
void pool_end_process(struct slot *s, enum slot_end how, unsigned long grace_ms);
/* With the lock held: the ready spare's process goes into s, whose own
 * goes into the spare for the keeper to end as end says. */
void pool_spare_take(struct perl_pool *p, struct slot *s, enum slot_end end);
void *pool_keeper_main(void *arg);

#endif
