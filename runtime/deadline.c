/* deadline.c - the one timer thread that cancels every scope whose deadline
 * passes (reason TIMEOUT) at that moment, whatever its owner is doing. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt.h"

/* A min-heap of the scopes with a deadline of their own, by deadline; each
 * scope knows its place (dl_slot, 1-based, 0: not in the heap).  Everything
 * here is under dl_lock.  The timer cancels without dl_lock (a cancellation
 * handler it runs may open a scope with a deadline), the scope it cancels
 * named in firing: a close that removes that scope waits until the cancel
 * is over, so the timer never touches a closed scope.  No path takes
 * dl_lock with a scope's lock held. */
static pthread_mutex_t dl_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dl_cond;
static scope_t **heap;
static size_t nheap, capheap;
static bool started;	     /* the timer thread runs (in this process) */
static int64_t sleep_till;   /* what the thread sleeps until; 0: no deadline */
static scope_t *firing;	     /* the scope the timer cancels now */
static pthread_cond_t fired; /* firing went back to NULL */
static pthread_once_t dl_once = PTHREAD_ONCE_INIT;

static void heap_set(size_t i, scope_t *s)
{
	heap[i] = s;
	s->dl_slot = i + 1;
}

static void heap_up(size_t i)
{
	scope_t *s = heap[i];

	while (i > 0) {
		size_t up = (i - 1) / 2;
		if (heap[up]->deadline <= s->deadline)
			break;
		heap_set(i, heap[up]);
		i = up;
	}
	heap_set(i, s);
}

static void heap_down(size_t i)
{
	scope_t *s = heap[i];

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= nheap)
			break;
		if (c + 1 < nheap && heap[c + 1]->deadline < heap[c]->deadline)
			c++;
		if (s->deadline <= heap[c]->deadline)
			break;
		heap_set(i, heap[c]);
		i = c;
	}
	heap_set(i, s);
}

static void heap_remove(scope_t *s)
{
	size_t i = s->dl_slot - 1;
	scope_t *last = heap[--nheap];

	s->dl_slot = 0;
	if (i == nheap)
		return;
	heap_set(i, last);
	heap_up(i);
	heap_down(last->dl_slot - 1);
}

static void dl_cond_make(void)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&dl_cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&fired, NULL);
}

static void dl_child(void)
{
	/* The timer thread did not come along: the next scope with a
	 * deadline starts another.  The lock may have been held by it.  The
	 * scopes inherited leave the heap: their locks may be held for good
	 * by threads that stayed behind, and a timer stuck on one would stop
	 * every deadline here; theirs are checked lazily (sc_check). */
	pthread_mutex_init(&dl_lock, NULL);
	dl_cond_make();
	for (size_t i = 0; i < nheap; i++)
		heap[i]->dl_slot = 0;
	nheap = 0;
	firing = NULL;
	started = false;
	sleep_till = 0;
}

static void dl_init(void)
{
	dl_cond_make();
	(void)pthread_atfork(NULL, NULL, dl_child);
}

static void *timer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&dl_lock);
	for (;;) {
		int64_t now = scope_now();

		while (nheap && heap[0]->deadline <= now) {
			scope_t *s = heap[0];

			heap_remove(s);
			firing = s;
			pthread_mutex_unlock(&dl_lock);
			sc_cancel(s, SC_CANCEL_TIMEOUT);
			pthread_mutex_lock(&dl_lock);
			firing = NULL;
			pthread_cond_broadcast(&fired);
			now = scope_now();
		}
		sleep_till = nheap ? heap[0]->deadline : 0;
		if (!sleep_till) {
			pthread_cond_wait(&dl_cond, &dl_lock);
		} else {
			struct timespec ts = {.tv_sec = sleep_till / 1000000000,
					      .tv_nsec = sleep_till % 1000000000};
			(void)pthread_cond_timedwait(&dl_cond, &dl_lock, &ts);
		}
	}
	return NULL;
}

/* Under dl_lock. */
static int timer_start(void)
{
	sigset_t all, old;
	pthread_attr_t a;
	pthread_t th;
	int rc;

	sc_helper_sigset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &a, timer_main, NULL);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return -rc;
	(void)pthread_setname_np(th, "scope-timer");
	started = true;
	return 0;
}

int sc_deadline_add(scope_t *s)
{
	int rc = 0;

	pthread_once(&dl_once, dl_init);
	pthread_mutex_lock(&dl_lock);
	if (!started && (rc = timer_start()) != 0)
		goto out;
	if (nheap == capheap) {
		size_t cap = capheap ? capheap * 2 : 64;
		scope_t **v = realloc(heap, cap * sizeof(*v));
		if (!v) {
			rc = -ENOMEM;
			goto out;
		}
		heap = v;
		capheap = cap;
	}
	heap_set(nheap++, s);
	heap_up(nheap - 1);
	s->dl_on = true;
	/* Only a deadline earlier than the one it sleeps for needs it. */
	if (!sleep_till || s->deadline < sleep_till)
		pthread_cond_signal(&dl_cond);
out:
	pthread_mutex_unlock(&dl_lock);
	return rc;
}

void sc_deadline_remove(scope_t *s)
{
	if (!s->dl_on)
		return;
	pthread_mutex_lock(&dl_lock);
	if (s->dl_slot)
		heap_remove(s);
	while (firing == s)
		pthread_cond_wait(&fired, &dl_lock);
	pthread_mutex_unlock(&dl_lock);
	s->dl_on = false;
}
