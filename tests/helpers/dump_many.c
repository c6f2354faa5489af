/* dump_many.c - a libscope program with about a thousand threads blocked in
 * nested scopes (10 x 10 x 9 tasks, one thread each), for bench_dump.sh.
 * Prints "ready <pid> <threads>" once every task sits in its wait.  With -b
 * (busy), a thread then forks and joins a short task every 2 ms, so that
 * the process's tree changes between any two dumps. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "scope.h"

#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

static scope_pool_t *pool;
static _Atomic int started;
static int total; /* tasks in the whole tree */
static int fan[3] = {10, 10, 9};

struct level {
	int depth;
	_Atomic int *siblings_started;
};

static int __attribute__((noinline)) many_leaf_wait(void)
{
	int rc = scope_sleep(3600LL * 1000000000);
	KEEP_FRAME();
	return rc;
}

static int task(void *arg, void **res);

/* Opens a scope at depth, forks its fan-out and joins once every task of
 * the tree runs on a thread of its own: a join that found a task still
 * queued would run it inline, and the process is to hold one thread per
 * task. */
static int __attribute__((noinline)) many_open_level(int depth)
{
	static const char *const names[] = {"top", "mid", "leaf"};
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	_Atomic int up = 0;
	struct level *lv = malloc(sizeof *lv);
	if (!lv)
		return -1;
	lv->depth = depth;
	lv->siblings_started = &up;
	cfg.name = names[depth];
	cfg.pool = pool;
	int rc = scope_open(&s, &cfg);
	if (rc < 0) {
		free(lv);
		return rc;
	}
	for (int i = 0; i < fan[depth] && rc == 0; i++)
		rc = scope_fork(s, task, lv, NULL);
	while (rc == 0 && (up < fan[depth] || started < total))
		usleep(1000);
	rc = scope_join(s);
	KEEP_FRAME();
	scope_close(s);
	free(lv);
	return rc;
}

static int task(void *arg, void **res)
{
	(void)res;
	struct level *lv = arg;
	(*lv->siblings_started)++;
	started++;
	int rc = lv->depth + 1 < 3 ? many_open_level(lv->depth + 1) : many_leaf_wait();
	KEEP_FRAME();
	return rc;
}

static int nap(void *arg, void **res)
{
	(void)arg, (void)res;
	struct timespec ts = {0, 200000};
	nanosleep(&ts, NULL);
	return 0;
}

/* -b: a scope with one short task every 2 ms, on the default pool. */
static void *busy(void *arg)
{
	(void)arg;
	scope_thread_name("many-busy");
	for (;;) {
		scope_t *s;
		if (scope_open(&s, NULL) == 0) {
			(void)scope_fork(s, nap, NULL, NULL);
			(void)scope_join(s);
			scope_close(s);
		}
		usleep(2000);
	}
	return NULL;
}

static void *report(void *arg)
{
	(void)arg;
	while (started < total)
		usleep(1000);
	usleep(50000); /* let the last ones reach their waits */
	if (arg) {
		pthread_t b;
		if (pthread_create(&b, NULL, busy, NULL) == 0)
			pthread_detach(b);
	}
	printf("ready %d %d\n", (int)getpid(), total + 1);
	fflush(stdout);
	return NULL;
}

int main(int argc, char **argv)
{
	bool busy_mode = argc > 1 && strcmp(argv[1], "-b") == 0;
	total = fan[0] + fan[0] * fan[1] + fan[0] * fan[1] * fan[2];
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	pc.name = "many";
	pc.core_size = (unsigned)total;
	pc.max_size = (unsigned)total + 8;
	pc.prestart = true;
	int rc = scope_pool_create(&pool, &pc);
	if (rc < 0) {
		fprintf(stderr, "dump_many: cannot create a pool of %d threads: %s\n", total,
			scope_strerror(rc));
		return 1;
	}
	scope_thread_name("many-main");
	pthread_t th;
	pthread_create(&th, NULL, report, busy_mode ? (void *)&busy_mode : NULL);
	pthread_detach(th);
	return many_open_level(0) == 0 ? 0 : 1;
}
