/* peer_work.h - the scheduler workloads' sizes, shared by bench_sched and
 * its peers (TBB, OpenMP, GLib), so every runtime does the same work. */
#ifndef BENCH_PEER_WORK_H
#define BENCH_PEER_WORK_H

#include <stdio.h>

#define PEER_W1_OPS 20000  /* W1: fork + join of one empty task, per round */
#define PEER_W2_TASKS 1000 /* W2: empty tasks per fan-out, one join */
#define PEER_W2_OPS 100	   /* fan-outs per round */
#define PEER_W3_N 24	   /* W3: fib(24) */
#define PEER_W3_CUTOFF 8   /* serial at and below this */
#define PEER_W3_OPS 20	   /* fibs per round */

/* The empty task's body, the same call in every runtime: a compiler must
 * not find a task with nothing in it and drop it. */
static __attribute__((noinline, unused)) void peer_nothing(void)
{
	__asm__ __volatile__("" ::: "memory");
}

/* One workload of a peer: op does n of it per call, timed per task. */
struct peer_load {
	const char *name;
	void (*op)(void);
	int n, per;
};

/* Runs each load a tenth of its count to warm up, then n times timed, and
 * prints "NAME ns-per-task" for bench_sched; now is the peer's clock. */
static inline void peer_run(const struct peer_load *w, int nw, long long (*now)(void))
{
	for (int k = 0; k < nw; k++) {
		for (int i = 0; i < w[k].n / 10 + 1; i++)
			w[k].op();
		long long t0 = now();
		for (int i = 0; i < w[k].n; i++)
			w[k].op();
		printf("%s %.3f\n", w[k].name, (double)(now() - t0) / w[k].n / w[k].per);
	}
}

static inline long peer_fib_serial(int n)
{
	return n < 2 ? n : peer_fib_serial(n - 1) + peer_fib_serial(n - 2);
}

#endif
