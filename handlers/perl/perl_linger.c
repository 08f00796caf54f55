/* Interpreters whose scripts left Perl threads running (threads_check,
 * perl_stdio.c). threads.pm vetoes the destruction of the interpreter that
 * started them while any of them is not yet freed, and perl then frees
 * nothing of it, its descriptors included: a script that left a thread on
 * every request leaked an interpreter and three descriptors each time.
 * Such an interpreter is kept here instead, its threads detached and its
 * objects destroyed so that each thread frees itself as it ends, and
 * destroyed once they all have (perl_linger_reap, after each Perl request
 * served in thread mode).
 * Thread mode only: a worker process that a thread outlives is ended. */
#include "perl_interp.h"
#include "perl_interp_int.h"

#include <pthread.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct perl_interp *kept; /* through clone.linger_next */
static int nkept;                /* atomic: read without the lock */

/* Whether every Perl thread pi's scripts started is freed. Called with
 * pi running nowhere; the calling thread's context is put back. */
static int threads_gone(struct perl_interp *pi)
{
	void *was = PERL_GET_CONTEXT;
	dTHXa(pi->perl);
	PERL_SET_CONTEXT(pi->perl);
	/* A thread left unjoined is freed only when joined or detached, and
	 * none of its script's code runs again; threads started since (by
	 * the threads themselves) too. */
	ENTER;
	SAVETMPS;
	eval_pv("$_->detach for threads->list()", FALSE);
	/* The objects list made hold their threads too. */
	FREETMPS;
	LEAVE;
	/* A thread object the script kept (in a global) holds its thread
	 * as long as the interpreter: its objects are destroyed now, once,
	 * as perl's own destruction would first. */
	if (!pi->clone.objects_cleaned) {
		pi->clone.objects_cleaned = 1;
		Perl_sv_clean_objs(aTHX);
	}
	/* threads.pm's hook, which decides the veto, also warns "Perl
	 * exited with active threads": plxd is not exiting. */
	PL_dowarn |= G_WARN_ALL_OFF;
	int gone = !PL_threadhook(aTHX);
	PERL_SET_CONTEXT(was);
	return gone;
}

int perl_linger(struct perl_interp *pi)
{
	if (!pi->perl || !pi->stdio.threads_left || threads_gone(pi))
		return 0;
	pthread_mutex_lock(&lock);
	pi->clone.linger_next = kept;
	kept = pi;
	__atomic_add_fetch(&nkept, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&lock);
	return 1;
}

void perl_linger_reap(void)
{
	if (!__atomic_load_n(&nkept, __ATOMIC_ACQUIRE))
		return;
	struct perl_interp *done = NULL;
	pthread_mutex_lock(&lock);
	for (struct perl_interp **p = &kept; *p;) {
		struct perl_interp *pi = *p;
		if (!threads_gone(pi)) {
			p = &pi->clone.linger_next;
			continue;
		}
		*p = pi->clone.linger_next;
		pi->clone.linger_next = done;
		done = pi;
		__atomic_sub_fetch(&nkept, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&lock);
	void *was = PERL_GET_CONTEXT;
	struct perl_interp *was_current = current;
	while (done) {
		struct perl_interp *pi = done;
		done = pi->clone.linger_next;
		perl_interp_destroy(pi);
	}
	PERL_SET_CONTEXT(was);
	current = was_current;
}
