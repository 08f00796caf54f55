/* --help in each of its forms: the options and every key of every section,
 * as text for a terminal, as Markdown (doc/configuration.md) and as the man
 * pages plxd(8) and plxd.conf(5). All of them come from the key tables the
 * parser reads and the few paragraphs in help.c, so none can say what the
 * others do not. */
#ifndef PLXD_HELP_H
#define PLXD_HELP_H

#include <stdio.h>

enum help_format {
	HELP_TEXT,     /* plxd --help */
	HELP_MARKDOWN, /* plxd --help=markdown: doc/configuration.md */
	HELP_MAN8,     /* plxd --help=man8: plxd(8) */
	HELP_MAN5      /* plxd --help=man5: plxd.conf(5) */
};

/* "text", "markdown", "man8" or "man5". Returns 0, or -1 for another name. */
int help_format_parse(const char *name, enum help_format *out);

/* The usage lines and the options (what a bad option prints). */
void help_usage(FILE *out);

/* Everything, in format. Handler modules are loaded to read their keys. */
void help_print(FILE *out, enum help_format format);

#endif
