/* pool-mix.c - a workload whose wait/compute ratio is known: tasks that
 * compute c ms (CPU time of their own thread) and wait w ms (sleeping, as on
 * I/O), forked onto a pool of a chosen size, for the pool advisor's tests
 * and its sweep (docs/advisor.md).
 *
 *   pool-mix [-w WAIT_MS] [-c COMPUTE_MS] [-n THREADS] [-s SECONDS] [-b BATCH]
 *            [-r RESOURCE:LIMIT] [-q]
 *
 * -r declares that each task holds one of LIMIT units of RESOURCE
 * (scope_pool_set_resource_limit): the advisor's ceiling.
 *
 * Runs for SECONDS (0: until killed), then prints "tasks N seconds S
 * throughput T" (tasks ended per second).  Prints "ready POOL" once the
 * pool exists.  The main thread forks BATCH tasks (default 4 x THREADS) into
 * one scope, waits for them (never running one itself), and repeats. */
#include <scope.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double wait_ms = 4, compute_ms = 1;

static int64_t now_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Burns compute_ms of this thread's CPU time, then sleeps wait_ms. */
static int task(void *arg, void **result)
{
	(void)arg;
	(void)result;
	int64_t until = now_ns(CLOCK_THREAD_CPUTIME_ID) + (int64_t)(compute_ms * 1e6);
	volatile unsigned x = 1;
	while (now_ns(CLOCK_THREAD_CPUTIME_ID) < until)
		for (int i = 0; i < 2000; i++)
			x = x * 1664525u + 1013904223u;
	if (wait_ms > 0) {
		struct timespec ts = {
		    (time_t)(wait_ms / 1000),
		    (long)((wait_ms - (double)(time_t)(wait_ms / 1000) * 1000) * 1e6)};
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	return 0;
}

static const struct scope_joiner_ops wait_all = {0};

static double arg_num(const char *s, const char *what)
{
	char *end;
	double v = strtod(s, &end);
	if (!*s || *end || v < 0 || v > 1e6) {
		fprintf(stderr, "pool-mix: %s must be a number from 0 to 1e6, not '%s'\n", what, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	unsigned threads = 2, batch = 0;
	double seconds = 10;
	bool quiet = false;
	char resource[64] = "";
	unsigned limit = 0;
	for (int o; (o = getopt(argc, argv, "w:c:n:s:b:r:q")) != -1;) {
		switch (o) {
		case 'w':
			wait_ms = arg_num(optarg, "-w");
			break;
		case 'c':
			compute_ms = arg_num(optarg, "-c");
			break;
		case 'n':
			threads = (unsigned)arg_num(optarg, "-n");
			break;
		case 's':
			seconds = arg_num(optarg, "-s");
			break;
		case 'b':
			batch = (unsigned)arg_num(optarg, "-b");
			break;
		case 'r': {
			const char *colon = strrchr(optarg, ':');
			if (!colon || colon == optarg ||
			    (size_t)(colon - optarg) >= sizeof resource) {
				fprintf(stderr, "pool-mix: -r wants RESOURCE:LIMIT, not '%s'\n",
					optarg);
				return 2;
			}
			memcpy(resource, optarg, (size_t)(colon - optarg));
			resource[colon - optarg] = 0;
			limit = (unsigned)arg_num(colon + 1, "-r's LIMIT");
			break;
		}
		case 'q':
			quiet = true;
			break;
		default:
			fprintf(stderr, "usage: pool-mix [-w WAIT_MS] [-c COMPUTE_MS] [-n THREADS] "
					"[-s SECONDS] [-b BATCH] [-r RESOURCE:LIMIT] [-q]\n");
			return 2;
		}
	}
	if (threads < 1)
		threads = 1;
	if (!batch)
		batch = 4 * threads;
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	pc.name = "mix";
	pc.core_size = threads;
	pc.max_size = threads;
	pc.prestart = true;
	scope_pool_t *pool;
	int rc = scope_pool_create(&pool, &pc);
	if (rc) {
		fprintf(stderr, "pool-mix: scope_pool_create: %s\n", scope_strerror(rc));
		return 1;
	}
	if (limit && (rc = scope_pool_set_resource_limit(pool, resource, limit)) != 0) {
		fprintf(stderr, "pool-mix: scope_pool_set_resource_limit: %s\n",
			scope_strerror(rc));
		return 1;
	}
	if (!quiet) {
		printf("ready mix\n");
		fflush(stdout);
	}
	int64_t start = now_ns(CLOCK_MONOTONIC), end = start + (int64_t)(seconds * 1e9);
	uint64_t done = 0;
	while (seconds == 0 || now_ns(CLOCK_MONOTONIC) < end) {
		struct scope_config cfg = SCOPE_CONFIG_INIT;
		cfg.name = "batch";
		cfg.pool = pool;
		/* A custom joiner waits for every task without running queued
		 * ones itself: the pool's threads alone do the work. */
		cfg.joiner = SCOPE_JOIN_CUSTOM;
		cfg.ops = &wait_all;
		scope_t *s;
		if ((rc = scope_open(&s, &cfg)) != 0)
			break;
		for (unsigned i = 0; i < batch; i++)
			if (scope_fork(s, task, NULL, NULL) == 0)
				done++;
		scope_join(s);
		scope_close(s);
	}
	double took = (double)(now_ns(CLOCK_MONOTONIC) - start) / 1e9;
	printf("tasks %llu seconds %.3f throughput %.1f\n", (unsigned long long)done, took,
	       (double)done / took);
	scope_pool_destroy(pool);
	return rc ? 1 : 0;
}
