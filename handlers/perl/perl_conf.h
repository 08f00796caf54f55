/* The [perl] section: the persistent Perl handler's settings, declared as
 * a table (conf.h) so that parsing, --help and the documentation agree. */
#ifndef PLXD_PERL_CONF_H
#define PLXD_PERL_CONF_H

#include "conf_key.h"

struct perl_backend;

struct perl_conf {
	char *isolation;       /* "process" or "thread" */
	unsigned long workers; /* 0: one per CPU core */
	unsigned long queue;
	unsigned long queue_timeout_ms;
	unsigned long timeout_ms;
	unsigned long start_timeout_ms;
	unsigned long max_requests;
	unsigned long long max_rss;
	unsigned long long max_memory;
	char *preload;
	char *inc;
	char *path;
	int pass_authorization;
	unsigned long long max_script_header_size;
	int timing;
	char *taint;                    /* "honour", "warn" or "refuse" */
	unsigned long inline_budget_ms; /* isolation = thread: 0, never inline */
	unsigned long inline_after;     /* short runs before inline; 0: at once */
};

extern const struct conf_key perl_conf_keys[];

/* Where c's scripts run ([perl] isolation): worker processes, or
 * interpreter threads inside plxd. The one place the mode is read. */
const struct perl_backend *perl_conf_backend(const struct perl_conf *c);

/* Logs the settings of a reload's c that take effect only after a restart:
 * the workers and the backend it started with. */
void perl_conf_warn_restart(const struct perl_conf *c, unsigned long workers,
		const struct perl_backend *be);

/* What c's scripts with -T or -t on their #! line get: an enum
 * perl_taint (perl_interp.h). */
unsigned perl_conf_taint(const struct perl_conf *c);

#endif
