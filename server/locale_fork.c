/* glibc's locale functions made safe to call in a child forked from a
 * threaded plxd. newlocale, duplocale, freelocale and setlocale take a
 * process-wide lock of glibc's, textdomain another, and its fork resets
 * neither: a child forked while another thread was inside one of them
 * waits forever at its own first call. In thread mode libperl calls them
 * all for each Perl setlocale (perl 5.36 emulates setlocale with
 * newlocale, then tells gettext with textdomain), and a script's child
 * that runs on in Perl (fork, a pipe open of "-|") may set its locale too
 * (tests/integration/perl_thread_fork.t).
 *
 * plxd's definitions below replace libc's for every library in the
 * process: the executable exports its symbols (ENABLE_EXPORTS), and the
 * dynamic linker looks there first. Each calls libc's (or the sanitizer's
 * interceptor in front of it: RTLD_NEXT) under a read lock of plxd's, which
 * a fork takes for writing, so that no call is under way when a fork
 * happens. */
#include "locale_fork.h"

#include <dlfcn.h>
#include <libintl.h>
#include <locale.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_rwlock_t guard = PTHREAD_RWLOCK_INITIALIZER;
static pthread_once_t resolved = PTHREAD_ONCE_INIT;
static locale_t (*libc_newlocale)(int, const char *, locale_t);
static locale_t (*libc_duplocale)(locale_t);
static void (*libc_freelocale)(locale_t);
static char *(*libc_setlocale)(int, const char *);
static char *(*libc_textdomain)(const char *);

static void *next_symbol(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);
	if (!f) {
		fprintf(stderr, "plxd: %s not found in the C library\n", name);
		abort();
	}
	return f;
}

static void resolve(void)
{
	libc_newlocale = (locale_t(*)(int, const char *, locale_t))next_symbol("newlocale");
	libc_duplocale = (locale_t(*)(locale_t))next_symbol("duplocale");
	libc_freelocale = (void (*)(locale_t))next_symbol("freelocale");
	libc_setlocale = (char *(*)(int, const char *))next_symbol("setlocale");
	libc_textdomain = (char *(*)(const char *))next_symbol("textdomain");
}

locale_t newlocale(int mask, const char *locale, locale_t base)
{
	pthread_once(&resolved, resolve);
	pthread_rwlock_rdlock(&guard);
	locale_t l = libc_newlocale(mask, locale, base);
	pthread_rwlock_unlock(&guard);
	return l;
}

locale_t duplocale(locale_t l)
{
	pthread_once(&resolved, resolve);
	pthread_rwlock_rdlock(&guard);
	locale_t d = libc_duplocale(l);
	pthread_rwlock_unlock(&guard);
	return d;
}

void freelocale(locale_t l)
{
	pthread_once(&resolved, resolve);
	pthread_rwlock_rdlock(&guard);
	libc_freelocale(l);
	pthread_rwlock_unlock(&guard);
}

char *setlocale(int category, const char *locale)
{
	pthread_once(&resolved, resolve);
	pthread_rwlock_rdlock(&guard);
	char *s = libc_setlocale(category, locale);
	pthread_rwlock_unlock(&guard);
	return s;
}

char *textdomain(const char *domain)
{
	pthread_once(&resolved, resolve);
	pthread_rwlock_rdlock(&guard);
	char *s = libc_textdomain(domain);
	pthread_rwlock_unlock(&guard);
	return s;
}

static void fork_prepare(void)
{
	pthread_rwlock_wrlock(&guard);
}

static void fork_parent(void)
{
	pthread_rwlock_unlock(&guard);
}

/* A new lock rather than an unlock: glibc tells a writer's unlock by the
 * thread id, which is not the same in the child. The child has one thread,
 * and nothing else holds the lock there. */
static void fork_child(void)
{
	pthread_rwlock_init(&guard, NULL);
}

void locale_fork_init(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}
