/* The status page's per-script figures of a perl pool, kept on plxd's
 * side from what each DONE message says (compiled or not, run time): no
 * round trip to a worker. One table per handler instance, under a lock
 * held for a lookup and a few additions. No perl.h, no microhttpd.h. */
#ifndef PLXD_PERL_SCRIPTS_H
#define PLXD_PERL_SCRIPTS_H

#include <stddef.h>
#include <stdint.h>

/* Scripts kept at most; a script first seen past this is not counted
 * (a document root with more persistent scripts than this is unusual). */
#define PERL_SCRIPTS_MAX 4096

struct perl_scripts;

struct perl_scripts *perl_scripts_create(void);
void perl_scripts_destroy(struct perl_scripts *t);

/* One run of path ended: compiled for it or not, run_us long. */
void perl_scripts_add(struct perl_scripts *t, const char *path, int compiled, uint64_t run_us);

/* What is known of one script. */
struct perl_script_figures {
	const char *path;
	uint64_t compiles, runs, run_us_sum, run_us_p99;
};

/* Calls fn for each script, in the order first seen, under the table's
 * lock (fn must not call back into t). */
void perl_scripts_each(struct perl_scripts *t,
		void (*fn)(const struct perl_script_figures *f, void *ctx), void *ctx);

/* How many scripts the table holds. */
size_t perl_scripts_count(struct perl_scripts *t);

#endif
