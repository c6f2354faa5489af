/* halves.c - a loop's second half on a helper thread (halves.h).
 *
 * Hand-off: the caller stores the half, bumps `posted` (release) under the
 * mutex and signals; the helper, spinning on `posted` or asleep on the
 * condition, runs it and bumps `done` (release) under the mutex and
 * signals; the caller spins a little on `done`, then sleeps on the other
 * condition.  A signal to a condition nobody waits on costs no system
 * call, so a hand-off in the middle of a capture, with the helper still
 * spinning from the last one, is a few stores.
 *
 * Placement: woken by the caller, the helper is put on the caller's CPU
 * (the kernel keeps a waker and its wakee together) and stays there, the
 * other CPU idle, both halves taking turns on one: measured here, the
 * halves ran one after the other on the same CPU in every chunk.  So the
 * helper may run anywhere the caller may except where the caller runs now
 * (set again when the caller is found on another CPU). */
#include "halves.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* How long the helper waits on a CPU for the next half before it sleeps:
 * a capture's halves come about 0.1 ms apart (the unwinding between two
 * chunks of threads), captures themselves far further apart. */
#define HELPER_SPIN_NS 300000
/* How long the caller, done with its half, waits on a CPU for the
 * helper's before it sleeps (both halves take about as long). */
#define CALLER_SPIN_NS 50000

struct halves {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t go, fin;
	_Atomic unsigned posted, done;
	_Atomic bool stop;
	/* The half posted last: written before `posted` is bumped. */
	halves_fn *fn;
	void *ctx;
	size_t lo, hi;
	cpu_set_t allowed; /* the CPUs the caller's thread could use */
	int away_from;	   /* the CPU the helper is kept off (-1: none yet) */
};

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Spins until *v is no longer `was` (true), or for spin_ns (false).  It
 * yields the CPU now and then: on a machine with one free CPU the thread
 * it waits for may need this one. */
static bool spin_while(_Atomic unsigned *v, unsigned was, _Atomic bool *stop, int64_t spin_ns)
{
	int64_t until = 0;
	for (unsigned i = 1;; i++) {
		if (atomic_load_explicit(v, memory_order_acquire) != was ||
		    (stop && atomic_load_explicit(stop, memory_order_relaxed)))
			return true;
		relax();
		if ((i & 255) == 0) {
			int64_t now = mono_ns();
			if (!until)
				until = now + spin_ns;
			else if (now >= until)
				return false;
			sched_yield();
		}
	}
}

static void *helper_main(void *arg)
{
	struct halves *h = arg;
	unsigned seen = 0;

	for (;;) {
		if (!spin_while(&h->posted, seen, &h->stop, HELPER_SPIN_NS)) {
			pthread_mutex_lock(&h->mu);
			while (atomic_load_explicit(&h->posted, memory_order_acquire) == seen &&
			       !atomic_load_explicit(&h->stop, memory_order_relaxed))
				pthread_cond_wait(&h->go, &h->mu);
			pthread_mutex_unlock(&h->mu);
		}
		if (atomic_load_explicit(&h->stop, memory_order_relaxed))
			return NULL;
		seen = atomic_load_explicit(&h->posted, memory_order_acquire);
		h->fn(h->ctx, h->lo, h->hi);
		pthread_mutex_lock(&h->mu);
		atomic_store_explicit(&h->done, seen, memory_order_release);
		pthread_cond_signal(&h->fin);
		pthread_mutex_unlock(&h->mu);
	}
}

struct halves *halves_new(void)
{
	cpu_set_t cpus;
	if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0 || CPU_COUNT(&cpus) < 2)
		return NULL;
	struct halves *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->allowed = cpus;
	h->away_from = -1;
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->go, NULL);
	pthread_cond_init(&h->fin, NULL);
	/* The helper takes no signal: the daemon's are its main thread's. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&h->th, &attr, helper_main, h);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc) {
		pthread_cond_destroy(&h->fin);
		pthread_cond_destroy(&h->go);
		pthread_mutex_destroy(&h->mu);
		free(h);
		return NULL;
	}
	pthread_setname_np(h->th, "scoped-reader");
	return h;
}

void halves_free(struct halves *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	atomic_store_explicit(&h->stop, true, memory_order_relaxed);
	pthread_cond_signal(&h->go);
	pthread_mutex_unlock(&h->mu);
	pthread_join(h->th, NULL);
	pthread_cond_destroy(&h->fin);
	pthread_cond_destroy(&h->go);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

int halves_run(struct halves *h, halves_fn *fn, void *ctx, size_t n, size_t min)
{
	if (!h || n < min || n < 2) {
		fn(ctx, 0, n);
		return 0;
	}
	size_t mid = n / 2;
	int cpu = sched_getcpu();
	if (cpu >= 0 && cpu != h->away_from && cpu < CPU_SETSIZE) {
		cpu_set_t other = h->allowed;
		CPU_CLR(cpu, &other);
		if (CPU_COUNT(&other) > 0 &&
		    pthread_setaffinity_np(h->th, sizeof(other), &other) == 0)
			h->away_from = cpu;
	}
	unsigned want = atomic_load_explicit(&h->posted, memory_order_relaxed) + 1;
	h->fn = fn;
	h->ctx = ctx;
	h->lo = mid;
	h->hi = n;
	pthread_mutex_lock(&h->mu);
	atomic_store_explicit(&h->posted, want, memory_order_release);
	pthread_cond_signal(&h->go);
	pthread_mutex_unlock(&h->mu);
	fn(ctx, 0, mid);
	if (!spin_while(&h->done, want - 1, NULL, CALLER_SPIN_NS)) {
		pthread_mutex_lock(&h->mu);
		while (atomic_load_explicit(&h->done, memory_order_acquire) != want)
			pthread_cond_wait(&h->fin, &h->mu);
		pthread_mutex_unlock(&h->mu);
	}
	return 1;
}
