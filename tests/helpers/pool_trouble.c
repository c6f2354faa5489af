/* pool_trouble.c - a pool in trouble, for the tests of the advisor's
 * warnings (scopetop's header):
 *
 *   pool_trouble stuck      pool "jam", one thread, blocked in read() on a
 *                           pipe nobody writes; a task is forked behind it
 *                           every 50 ms, so the queue grows and nothing ends
 *   pool_trouble saturate   pool "burn", four threads computing 2 ms tasks
 *                           without pause on a process limited to two CPUs
 *                           (its affinity), so the CPUs are saturated
 *
 * Prints "ready POOL" once the pool works; runs until killed, at most
 * 120 s (a stray never outlives its test for long). */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "scope.h"

static int block_fd = -1;

static int64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Blocks in read() on the pipe: not a runtime wait, so it lends nothing. */
static int wedge(void *arg, void **result)
{
	(void)arg;
	(void)result;
	char c;
	while (read(block_fd, &c, 1) < 0 && errno == EINTR)
		;
	return 0;
}

static int nothing(void *arg, void **result)
{
	(void)arg;
	(void)result;
	return 0;
}

static int burn(void *arg, void **result)
{
	(void)arg;
	(void)result;
	int64_t until = thread_cpu_ns() + 2000000;
	volatile unsigned x = 1;
	while (thread_cpu_ns() < until)
		for (int i = 0; i < 1000; i++)
			x = x * 1664525u + 1013904223u;
	return 0;
}

static scope_pool_t *make_pool(const char *name, unsigned threads)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	pc.name = name;
	pc.core_size = threads;
	pc.max_size = threads;
	pc.prestart = true;
	scope_pool_t *pool;
	int rc = scope_pool_create(&pool, &pc);
	if (rc) {
		fprintf(stderr, "pool_trouble: scope_pool_create: %s\n", scope_strerror(rc));
		return NULL;
	}
	return pool;
}

static const struct scope_joiner_ops wait_all = {0};

static scope_t *open_on(scope_pool_t *pool)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	cfg.name = "trouble";
	cfg.pool = pool;
	/* A custom joiner never runs queued tasks on the joining thread. */
	cfg.joiner = SCOPE_JOIN_CUSTOM;
	cfg.ops = &wait_all;
	scope_t *s;
	return scope_open(&s, &cfg) == 0 ? s : NULL;
}

static int stuck(void)
{
	int fds[2];
	if (pipe(fds) < 0) {
		perror("pool_trouble: pipe");
		return 1;
	}
	block_fd = fds[0];
	scope_pool_t *pool = make_pool("jam", 1);
	scope_t *s = pool ? open_on(pool) : NULL;
	if (!s || scope_fork(s, wedge, NULL, NULL) != 0)
		return 1;
	printf("ready jam\n");
	fflush(stdout);
	for (;;) {
		(void)scope_fork(s, nothing, NULL, NULL);
		struct timespec ts = {0, 50000000};
		nanosleep(&ts, NULL);
	}
}

static int saturate(void)
{
	/* Two CPUs at most, whatever the host has: four threads saturate them. */
	cpu_set_t all, two;
	CPU_ZERO(&two);
	if (sched_getaffinity(0, sizeof all, &all) == 0)
		for (int c = 0, n = 0; c < CPU_SETSIZE && n < 2; c++)
			if (CPU_ISSET(c, &all)) {
				CPU_SET(c, &two);
				n++;
			}
	(void)sched_setaffinity(0, sizeof two, &two);
	scope_pool_t *pool = make_pool("burn", 4);
	if (!pool)
		return 1;
	printf("ready burn\n");
	fflush(stdout);
	for (;;) {
		scope_t *s = open_on(pool);
		if (!s)
			return 1;
		for (int i = 0; i < 64; i++)
			(void)scope_fork(s, burn, NULL, NULL);
		scope_join(s);
		scope_close(s);
	}
}

int main(int argc, char **argv)
{
	alarm(120);
	if (argc == 2 && !strcmp(argv[1], "stuck"))
		return stuck();
	if (argc == 2 && !strcmp(argv[1], "saturate"))
		return saturate();
	fprintf(stderr, "usage: pool_trouble stuck|saturate\n");
	return 2;
}
