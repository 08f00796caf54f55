/* The rule that says how an inline run went, from its times alone: pure
 * arithmetic, apart from the bookkeeping (perl_inline.c) so that each
 * limit is tested at its value (tests/unit/test_perl_inline_rule.c). */
#ifndef PLXD_PERL_INLINE_RULE_H
#define PLXD_PERL_INLINE_RULE_H

#include <stdint.h>

/* A run more than SLOW_FACTOR times past the budget by its own time is
 * far past it: its script's next promotion needs twice the short runs
 * (perl_inline.c, DEMOTIONS_MAX). */
#define PERL_INLINE_SLOW_FACTOR 4
/* A run past the budget by the clock only, its CPU time within it, is
 * short when nothing but the scheduler held it, up to SLOW_FACTOR times
 * the budget and this many more microseconds, four scheduler ticks at
 * 250 Hz: past that the event thread was held too long whatever held it
 * (a loop of sched_yield on a busy core makes no voluntary switch
 * either). */
#define PERL_INLINE_PREEMPTED_SLACK_US 16000
/* A run that never waited and took more CPU time than the budget, but at
 * most STRAY_FACTOR times it, is a straggler: the same code takes longer
 * now and then (a hash that grows, a cache missed, a core shared with
 * another thread), and a framework's route whose median run is a third of
 * the budget has one in a hundred past it. Demoting the route for each
 * sends it to the interpreter threads, whose hand-off and competing
 * threads make its runs slower still, and more of them stragglers. It is
 * forgiven while its script's own time, smoothed, stays within the
 * budget: each run weighs 1/AVG_WEIGHT, as TCP smooths round-trip times
 * (RFC 6298), counted up to STRAY_FACTOR times the budget, so that a run
 * far past it, which demotes its script anyway, does not keep it from
 * being forgiven a straggler long after it has proven short again. */
#define PERL_INLINE_STRAY_FACTOR 2
#define PERL_INLINE_AVG_WEIGHT   8
/* How old an event thread's readings of its CPU time and voluntary
 * context switches may be for a run to start from them, rather than read
 * them anew (struct perl_usage_mark): what the thread did since counts as
 * the run's own, up to this many microseconds of CPU time more, a fifth
 * of the default budget. */
#define PERL_INLINE_MARK_AGE_US 200

enum perl_inline_verdict {
	PERL_INLINE_SHORT, /* within the budget */
	PERL_INLINE_STRAY, /* a straggler */
	PERL_INLINE_LONG,  /* past the budget */
	PERL_INLINE_FAR,   /* more than SLOW_FACTOR times past it */
};

/* How a run went that took run_us by the clock and own_us by its own
 * doing (its CPU time when it never waited, else run_us). clean: it ended
 * on its own, and printed and started nothing too much. */
static inline enum perl_inline_verdict perl_inline_verdict_of(uint64_t budget_us, uint64_t run_us,
		uint64_t own_us, int waited, int clean)
{
	int held_too_long = run_us
			> budget_us * PERL_INLINE_SLOW_FACTOR + PERL_INLINE_PREEMPTED_SLACK_US;
	if (clean && !held_too_long && own_us <= budget_us)
		return PERL_INLINE_SHORT;
	if (clean && !held_too_long && !waited && own_us <= budget_us * PERL_INLINE_STRAY_FACTOR)
		return PERL_INLINE_STRAY;
	return own_us > budget_us * PERL_INLINE_SLOW_FACTOR ? PERL_INLINE_FAR : PERL_INLINE_LONG;
}

/* Whether readings of an event thread's usage, age_us old, taken when its
 * loop had waited waits_then times, may start a run that begins when it
 * has waited waits_now times: the thread has not slept since, and what it
 * did since, counted as the run's own, is little. */
static inline int perl_inline_mark_usable(int valid, unsigned long waits_then,
		unsigned long waits_now, uint64_t age_us)
{
	return valid && waits_then == waits_now && age_us <= PERL_INLINE_MARK_AGE_US;
}

/* A script's smoothed own time avg_us, with a run of own_us. */
static inline uint64_t perl_inline_smooth(uint64_t avg_us, uint64_t own_us, uint64_t budget_us)
{
	uint64_t most = budget_us * PERL_INLINE_STRAY_FACTOR;
	uint64_t counted = own_us < most ? own_us : most;
	return (avg_us * (PERL_INLINE_AVG_WEIGHT - 1) + counted) / PERL_INLINE_AVG_WEIGHT;
}

/* Whether a straggler is forgiven, its script's smoothed own time (with
 * it) being avg_us. */
static inline int perl_inline_forgiven(uint64_t avg_us, uint64_t budget_us)
{
	return avg_us <= budget_us;
}

#endif
