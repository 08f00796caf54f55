/* One request's exchange with a runner (a worker process or an interpreter
 * thread), shared by the handler's files (perl_req.c: its life;
 * perl_output.c: its output) and the backends' request calls
 * (perl_pool_req.c, perl_tpool.c). No perl.h. */
#ifndef PLXD_PERL_REQ_H
#define PLXD_PERL_REQ_H

#include "gateway.h"
#include "loop.h"
#include "perl_backend.h"
#include "perl_conf.h"
#include "perl_thread.h"
#include "perl_wire.h"

#include <limits.h>
#include <stdatomic.h>

/* After its response ended (or the client left), how long a script may
 * take to finish before its runner is killed (or its script ended). */
#define PERL_LINGER_MS 2000

/* What the handler holds for an instance. */
struct perl_state {
	const struct perl_backend *be; /* [perl] isolation, as started */
	void *backend;
	char worker[PATH_MAX];        /* plxd-perl-worker, beside this module */
	char threads[PATH_MAX];       /* plxd-perl-threads.so, beside it too */
	char perl5[PATH_MAX];         /* plxd's Perl modules (PLXD::Request), beside it too */
	char perl5lib[PATH_MAX + 16]; /* "PERL5LIB=" that folder, as .pl scripts get it */
	char *inc;                    /* [perl] inc, then perl5 */
	unsigned long workers;        /* as started: a reload cannot change it */
	struct perl_scripts *scripts; /* the status page's per-script figures */
};

/* Where a request stands with its runner. */
enum perl_req_phase {
	PERL_REQ_NEW,     /* no runner yet */
	PERL_REQ_WAITING, /* in the backend's queue (wt) */
	PERL_REQ_RUNNING, /* handed over: its script runs, the gateway reads it */
	PERL_REQ_ENDING,  /* its script was asked to end; its end comes */
	PERL_REQ_DONE,    /* its script returned (result, tail): the rest of its
			     output is read */
	PERL_REQ_LOST,    /* its runner died (or broke the protocol) */
	PERL_REQ_OVER     /* its runner is given back, or it never got one */
};

/* It may outlive its request (the script finishing after the client
 * left). */
struct perl_req {
	struct gw gw; /* first member: the gateway's ops get it */
	struct perl_state *st;
	const struct perl_backend *be;
	const struct perl_conf *conf;
	struct loop *loop;
	char *script;
	/* Thread mode, an application: its script and PATH_INFO, the route
	 * its inline fitness is recorded under (perl_inline.c). */
	char *route;
	enum perl_req_phase phase;
	struct perl_wire_request wire; /* the file facts, for the runner */
	int has_body;
	char **env;            /* the request's environment, until sent */
	struct perl_waiter wt; /* in the backend's queue */
	int attempts;
	struct perl_runner *w;     /* NULL: none yet, or given back */
	int in;                    /* write end of the body pipe, until started */
	struct loop_watch drain_w; /* output after the request, dropped */
	/* queue_timeout, then linger (or the backend's, while ENDING) */
	struct loop_timer timer;
	/* Its end came before it was handed over (a queued request's ready
	 * was posted after its runner took it). */
	int done_early;
	int done_late; /* ... and it ran past timeout where nothing could see
			  it (inline) */
	int running;   /* its script told its timing start */
	struct perl_wire_running run_info;
	uint64_t run_at_us; /* when it came */
	struct perl_wire_done result;
	char *tail; /* the output its end brought */
	size_t tail_len, tail_off;
	int fresh;      /* the new stdout pipe its end brought, or -1 */
	size_t drained; /* pipe output read after its end */
	int tail_done;  /* what the pipe held at its end, then the tail, were read */
	int pipe_eof;   /* every holder of the old pipe closed it */
	int pipe_clear; /* read empty after its end: what was written before it
			   is all read */
	int spent;      /* ... and its stderr too, and no new pipe: the runner
			   has nothing more for it */
	int lingering;  /* the timer is linger for the processes holding it */
	int held;       /* ... and they held it past linger */
	int dirty;      /* a program the script started writes on */
	int stopped;    /* the gateway is done with it */
	int completed;  /* ... after a complete response */
	int free_posted;
	/* The backend's own, for this request. */
	union {
		struct {
			struct loop_watch ctl_w; /* RUNNING, DONE, or the worker's end */
			struct loop_watch pid_w; /* a lost worker's exit, to say how it died */
		} proc;
		struct {
			struct perl_job job; /* the request, in memory */
			/* The runner it was handed to (q->w may not be set
			 * yet when it answers). */
			struct perl_runner *given;
			atomic_int run_known; /* run_info and run_at_us are set */
			int timed_out;        /* inline, ended at its timeout */
		} thread;
	} b;
};

/* perl_req.c: the request's life. */
struct plxd_request;
int perl_req_start(struct plxd_request *r);
/* Its script returned: q->result and the tail are in; fresh as
 * perl_req.fresh. */
void perl_req_done(struct perl_req *q, int fresh);
/* ... but it ran past timeout where no timer could see it (inline): it is
 * answered as at its timeout. */
void perl_req_done_late(struct perl_req *q, int fresh);
/* Its runner is gone: the response is cut (q->gw.end says how, once
 * known). */
void perl_req_lost(struct perl_req *q);
/* Gives the runner back the way this request left it (or asks its script
 * to end first), and lets go of the script. */
void perl_req_give_back(struct perl_req *q, enum perl_release how, const char *why);
void perl_req_maybe_free(struct perl_req *q);
/* Whether file is a PSGI application (.psgi) rather than a script. */
int perl_req_is_psgi(const char *file);
/* The request body's pipe: the script's end blocks (it reads with stdio);
 * ours, the gateway's, must not. Returns 0, or -1 with errno. */
int perl_req_body_pipe(int inp[2]);

/* perl_output.c: its output, for the gateway. */
extern const struct gw_ops perl_req_gw_ops;
/* Output nobody reads any more (the request ended first): drained while
 * the script finishes; its end gives the runner back. */
void perl_req_on_drain(struct loop_watch *w, unsigned events);
void perl_req_on_timer(struct loop_timer *t);
void perl_req_script_stop(struct gw *g, enum gw_stop how);

#endif
