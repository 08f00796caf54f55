/* Inline runs ([perl] isolation = thread, inline_budget): a script whose
 * last runs were short runs on the event thread that owns its connection,
 * in that thread's own clone of the parent, with no hand-off; everything
 * else runs on the interpreter threads (perl_tpool.c, which asks here
 * first). What a run printed is in memory when it returns; a watchdog
 * thread ends a run at its timeout and reads the pipes of a long one, as
 * the event thread cannot meanwhile. No perl.h. */
#ifndef PLXD_PERL_INLINE_H
#define PLXD_PERL_INLINE_H

#include "perl_inline_rule.h"
#include "perl_req.h"

struct perl_inline;
struct perl_inline_thread;

struct perl_inline *perl_inline_create(const struct perl_threads_api *api,
		struct perl_threads *threads);
/* Stops the watchdog; no inline run may be in progress. The clones are
 * the threads' (api->destroy). */
void perl_inline_destroy(struct perl_inline *in);

/* The calling event thread's interpreter for q, when q may run inline now
 * (no body, its script, or its application's route, proven short); made at the thread's first such
 * request. NULL: q runs on the interpreter threads. */
struct perl_inline_thread *perl_inline_for(struct perl_inline *in, struct perl_req *q);
struct perl_thread *perl_inline_perl_thread(const struct perl_inline_thread *it);

/* it's readings of its event thread's usage, for its runs' jobs (struct
 * perl_usage_mark): usable by the run that perl_inline_begin begins. */
struct perl_usage_mark *perl_inline_mark(struct perl_inline_thread *it);

/* Around q's run on it: before the submit, and on the event thread as the
 * run returns (its done), which puts everything it printed in q->tail and
 * logs its stderr; *old_out is the pipe the programs it started (if it
 * forked) still hold, for the request to read and close, or -1. Returns
 * whether the run may stay short: not when the watchdog had to read its
 * pipes or ended it at its timeout (q->b.thread.timed_out). */
void perl_inline_begin(struct perl_inline *in, struct perl_inline_thread *it, struct perl_req *q);
int perl_inline_end(struct perl_inline *in, struct perl_inline_thread *it, struct perl_req *q,
		const struct perl_run *run, int *old_out);

/* How a run of q's script went (perl_inline_rule.h), by its own time
 * (*own_us: its CPU time when it never waited, else the clock's, so that
 * a run its thread, inline or an interpreter thread, was only preempted
 * for is judged by what it did). Called on that thread, as the run ends. */
enum perl_inline_verdict perl_inline_judge(const struct perl_req *q, const struct perl_run *run,
		uint64_t *own_us);

/* Counts a run of q's script (of its route, for an application): short
 * ones in a row, up to inline_after, make it run inline; a run that was
 * not short (logged when it ran inline, after run_us) sends it back to the
 * interpreter threads, and one far past the budget inline doubles the
 * short runs its next promotion needs. A straggler while the script's
 * smoothed own time is within the budget does neither. */
void perl_inline_note(struct perl_inline *in, struct perl_req *q, enum perl_inline_verdict verdict,
		uint64_t own_us, int was_inline, uint64_t run_us);

#endif
