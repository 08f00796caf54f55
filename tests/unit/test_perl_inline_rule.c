/* perl_inline_rule.h: how an inline run went from its times, each limit
 * at its value and one past it (a budget of 1 ms: 1,000 us), the smoothed
 * own time that forgives a straggler, and when a run starts from readings
 * an earlier one took. Table-driven. */
#include "perl_inline_rule.h"
#include "tap.h"

#define B 1000 /* the budget, us */

struct verdict_case {
	const char *what;
	uint64_t run_us, own_us;
	int waited, clean;
	enum perl_inline_verdict want;
};

static const struct verdict_case verdicts[] = {
	{ "own time at the budget", B, B, 0, 1, PERL_INLINE_SHORT },
	{ "own time at the budget, waited", B, B, 1, 1, PERL_INLINE_SHORT },
	{ "own time 1 us past it, never waited: a straggler", B + 1, B + 1, 0, 1,
			PERL_INLINE_STRAY },
	{ "own time 1 us past it, waited", B + 1, B + 1, 1, 1, PERL_INLINE_LONG },
	{ "past by the clock, CPU time at the budget (preempted)", 3 * B, B, 0, 1,
			PERL_INLINE_SHORT },
	{ "CPU time at twice the budget: a straggler", 2 * B, 2 * B, 0, 1, PERL_INLINE_STRAY },
	{ "CPU time 1 us past twice it", 2 * B + 1, 2 * B + 1, 0, 1, PERL_INLINE_LONG },
	{ "CPU time at 4 times it: past, not far", 4 * B, 4 * B, 0, 1, PERL_INLINE_LONG },
	{ "CPU time 1 us past 4 times it: far", 4 * B + 1, 4 * B + 1, 0, 1, PERL_INLINE_FAR },
	{ "waited, 1 us past 4 times it by the clock: far", 4 * B + 1, 4 * B + 1, 1, 1,
			PERL_INLINE_FAR },
	{ "held by the clock at 4 times it and 16 ms, CPU time within it", 4 * B + 16000, B, 0, 1,
			PERL_INLINE_SHORT },
	{ "held 1 us longer: past, whatever held it", 4 * B + 16001, B, 0, 1, PERL_INLINE_LONG },
	{ "a straggler held 1 us longer", 4 * B + 16001, 2 * B, 0, 1, PERL_INLINE_LONG },
	{ "short but not clean (forked, printed too much, ended)", 10, 10, 0, 0, PERL_INLINE_LONG },
	{ "a straggler's time, not clean", 2 * B, 2 * B, 0, 0, PERL_INLINE_LONG },
};

int main(void)
{
	for (size_t i = 0; i < sizeof verdicts / sizeof *verdicts; i++) {
		const struct verdict_case *c = &verdicts[i];
		ok(perl_inline_verdict_of(B, c->run_us, c->own_us, c->waited, c->clean) == c->want,
				"%s", c->what);
	}

	/* Each run weighs an eighth. */
	ok(perl_inline_smooth(0, 800, B) == 100, "a run of 800 us from 0: 100 us");
	ok(perl_inline_smooth(800, 800, B) == 800, "steady runs keep their average");
	ok(perl_inline_smooth(0, 2 * B, B) == 250, "a run at twice the budget counts whole");
	ok(perl_inline_smooth(0, 2 * B + 1, B) == 250, "1 us past it counts as twice the budget");
	ok(perl_inline_smooth(0, 10000000, B) == 250, "... as does a run of 10 s");

	/* A route whose runs take 400 us, with one in 16 at 1.2 ms, is
	 * forgiven every straggler. */
	uint64_t avg = 0;
	int forgiven = 1;
	for (int run = 1; run <= 1000; run++) {
		int stray = run % 16 == 0;
		avg = perl_inline_smooth(avg, stray ? 1200 : 400, B);
		if (stray)
			forgiven &= perl_inline_forgiven(avg, B);
	}
	ok(forgiven, "runs of 400 us with a straggler of 1.2 ms in 16: every straggler forgiven");

	/* One whose runs all take 1.5 ms, from an average of 400 us, is not
	 * for long: its average passes the budget at the 6th. */
	avg = 400;
	int runs = 0;
	while (perl_inline_forgiven(perl_inline_smooth(avg, 1500, B), B) && runs < 100) {
		avg = perl_inline_smooth(avg, 1500, B);
		runs++;
	}
	ok(runs == 5, "runs of 1.5 ms from an average of 400 us: 5 forgiven, not the 6th (%d)",
			runs);
	ok(perl_inline_forgiven(B, B), "an average at the budget forgives");
	ok(!perl_inline_forgiven(B + 1, B), "1 us past it does not");

	/* The readings a run starts from, kept from an earlier run. */
	const uint64_t age = PERL_INLINE_MARK_AGE_US;
	ok(perl_inline_mark_usable(1, 7, 7, age), "readings %llu us old are used",
			(unsigned long long)age);
	ok(!perl_inline_mark_usable(1, 7, 7, age + 1), "1 us older, they are not");
	ok(!perl_inline_mark_usable(1, 7, 8, 0), "nor once the loop waited since");
	ok(!perl_inline_mark_usable(0, 7, 7, 0), "nor when none were read");
	return done_testing();
}
