// peer_tbb.cc - TBB's task_group on the scheduler workloads W1-W3, one
// round: prints "W1 ns", "W2 ns", "W3 ns" for bench_sched to compare.
#include <tbb/task_group.h>

#include <chrono>

#include "peer_work.h"

static long long now_ns()
{
	using namespace std::chrono;
	return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count();
}

static void w1()
{
	tbb::task_group g;
	g.run([] { peer_nothing(); });
	g.wait();
}

static void w2()
{
	tbb::task_group g;
	for (int i = 0; i < PEER_W2_TASKS; i++)
		g.run([] { peer_nothing(); });
	g.wait();
}

static long fib(int n)
{
	if (n <= PEER_W3_CUTOFF)
		return peer_fib_serial(n);
	long a = 0, b = 0;
	tbb::task_group g;
	g.run([&] { a = fib(n - 1); });
	g.run([&] { b = fib(n - 2); });
	g.wait();
	return a + b;
}

static volatile long sink;

static void w3()
{
	sink = fib(PEER_W3_N);
}

int main()
{
	static const struct peer_load w[] = {
	    {"W1", w1, 1},
	    {"W2", w2, PEER_W2_TASKS},
	    {"W3", w3, 1},
	};

	peer_run(w, 3, now_ns);
	return 0;
}
