/* peer_omp.c - OpenMP tasks on the scheduler workloads W1-W3, one round:
 * prints "W1 ns", "W2 ns", "W3 ns" for bench_sched to compare. */
#include <omp.h>
#include <stdio.h>

#include "bench.h"
#include "peer_work.h"

static void w1(void)
{
#pragma omp task
	peer_nothing();
#pragma omp taskwait
}

static void w2(void)
{
	for (int i = 0; i < PEER_W2_TASKS; i++) {
#pragma omp task
		peer_nothing();
	}
#pragma omp taskwait
}

static long fib(int n)
{
	long a, b;

	if (n <= PEER_W3_CUTOFF)
		return peer_fib_serial(n);
#pragma omp task shared(a)
	a = fib(n - 1);
#pragma omp task shared(b)
	b = fib(n - 2);
#pragma omp taskwait
	return a + b;
}

static volatile long sink;

static void w3(void)
{
	sink = fib(PEER_W3_N);
}

static long long now(void)
{
	return bench_now_ns();
}

int main(void)
{
	static const struct peer_load w[] = {
	    {"W1", w1, 1},
	    {"W2", w2, PEER_W2_TASKS},
	    {"W3", w3, 1},
	};

#pragma omp parallel
#pragma omp single
	peer_run(w, 3, now);
	return 0;
}
