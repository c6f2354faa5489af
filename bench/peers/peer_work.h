/* peer_work.h - the scheduler workloads' sizes, shared by bench_sched and
 * its peers (TBB, OpenMP, GLib), so every runtime does the same work. */
#ifndef BENCH_PEER_WORK_H
#define BENCH_PEER_WORK_H

#include <stdio.h>

#define PEER_W2_TASKS 1000 /* W2: empty tasks per fan-out, one join */
#define PEER_W3_N 24	   /* W3: fib(24) */
#define PEER_W3_CUTOFF 8   /* serial at and below this */
/* Each load runs PEER_WARM_NS to warm up (threads started, memory touched,
 * caches and predictors trained), then at least PEER_MEASURE_NS timed: the
 * same time for every runtime, long against a scheduler tick. */
#define PEER_WARM_NS 10000000LL
#define PEER_MEASURE_NS 40000000LL

/* The empty task's body, the same call in every runtime: a compiler must
 * not find a task with nothing in it and drop it. */
static __attribute__((noinline, unused)) void peer_nothing(void)
{
	__asm__ __volatile__("" ::: "memory");
}

/* One workload of a peer: op does it once, timed per task (per ops). */
struct peer_load {
	const char *name;
	void (*op)(void);
	int per;
};

/* Runs each load PEER_WARM_NS to warm up, then in batches of about a
 * millisecond (the clock is read once a batch) for PEER_MEASURE_NS, and
 * prints "NAME ns-per-task" for bench_sched; now is the runtime's clock. */
static inline void peer_run(const struct peer_load *w, int nw, long long (*now)(void))
{
	for (int k = 0; k < nw; k++) {
		long long t0 = now(), t;
		long done = 0, ops = 0, batch;

		do {
			w[k].op();
			done++;
		} while ((t = now()) - t0 < PEER_WARM_NS);
		batch = (long)(done * 1000000LL / (t - t0)) + 1;
		t0 = now();
		do {
			for (long i = 0; i < batch; i++)
				w[k].op();
			ops += batch;
		} while ((t = now()) - t0 < PEER_MEASURE_NS);
		printf("%s %.3f\n", w[k].name, (double)(t - t0) / (double)ops / w[k].per);
	}
}

static inline long peer_fib_serial(int n)
{
	return n < 2 ? n : peer_fib_serial(n - 1) + peer_fib_serial(n - 2);
}

#endif
