/* The [perl] section: the persistent Perl handler's settings, declared as
 * a table (conf.h) so that parsing, --help and the documentation agree. */
#ifndef PLXD_PERL_CONF_H
#define PLXD_PERL_CONF_H

#include "conf_key.h"

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
	char *taint; /* "honour", "warn" or "refuse" */
};

extern const struct conf_key perl_conf_keys[];

/* Whether c runs scripts in interpreter threads inside plxd. */
int perl_conf_threaded(const struct perl_conf *c);

/* What c's scripts with -T or -t on their #! line get: an enum
 * perl_taint (perl_interp.h). */
unsigned perl_conf_taint(const struct perl_conf *c);

#endif
