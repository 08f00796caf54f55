/* glibc's locale functions made safe to call in a forked child (locale_fork.c). */
#ifndef PLXD_LOCALE_FORK_H
#define PLXD_LOCALE_FORK_H

/* Registers the fork handlers that keep the locale functions' lock free at
 * each fork. Once, at start-up, before any other fork handler: its prepare
 * handler then runs last, after those that take locks under which libperl
 * calls newlocale (perl_interp.c). */
void locale_fork_init(void);

#endif
