/* storm_rest.c - a libscope program that storms, then rests in a known tree,
 * for e2e/storm_rest: two threads open random trees of scopes and tasks as
 * fast as they can (nested scopes, failures, short deadlines, cancels) on a
 * pool of 2 workers, so that the agent drops events and repairs with
 * snapshots while the tree moves, and a daemon restarted meanwhile gets its
 * snapshot mid-storm.  Prints "ready PID", storms until a line arrives on
 * standard input, then stops the storm, opens scope "rest" with one task
 * that waits, prints "quiet" and waits for end of input.  Whatever the
 * daemon saw of the storm, its live tree must then be that scope and that
 * task alone. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "scope.h"

#define MS 1000000LL
#define STORMERS 2

static scope_pool_t *pool;
static _Atomic int stop;
static _Atomic long forked;
static int rest_pipe[2];

static int leaf(void *arg, void **res)
{
	(void)res;
	switch ((uintptr_t)arg % 4) {
	case 0:
		return -5; /* fails: all-successful scopes cancel the rest */
	case 1:
		return scope_sleep(MS / 2);
	default:
		return 0;
	}
}

static void storm_scope(unsigned *seed, int depth);

static int subtree(void *arg, void **res)
{
	(void)res;
	unsigned seed = (unsigned)(uintptr_t)arg;
	storm_scope(&seed, 1);
	return 0;
}

/* One scope: a random joiner, maybe a 1 ms deadline, 1-4 children (leaves,
 * or at the top a subtree), maybe a cancel, then join and close. */
static void storm_scope(unsigned *seed, int depth)
{
	static const scope_joiner_kind_t joiners[] = {
	    SCOPE_JOIN_ALL_SUCCESSFUL, SCOPE_JOIN_ANY_SUCCESSFUL, SCOPE_JOIN_AWAIT_ALL};
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	cfg.name = depth ? "inner" : "storm";
	cfg.pool = pool;
	cfg.joiner = joiners[rand_r(seed) % 3];
	if (rand_r(seed) % 4 == 0)
		cfg.timeout_ns = MS;
	scope_t *s;
	if (scope_open(&s, &cfg) != 0)
		return;
	int n = 1 + rand_r(seed) % 4;
	for (int i = 0; i < n; i++) {
		atomic_fetch_add(&forked, 1);
		if (depth == 0 && rand_r(seed) % 3 == 0)
			scope_fork(s, subtree, (void *)(uintptr_t)rand_r(seed), NULL);
		else
			scope_fork(s, leaf, (void *)(uintptr_t)rand_r(seed), NULL);
	}
	if (rand_r(seed) % 8 == 0)
		scope_cancel(s);
	scope_join(s);
	scope_close(s);
}

static void *stormer(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	scope_thread_name("stormer");
	while (!atomic_load(&stop))
		storm_scope(&seed, 0);
	return NULL;
}

static int rest_task(void *arg, void **res)
{
	(void)arg, (void)res;
	char c;
	/* Outside the runtime: the test ends it by closing our input. */
	while (read(rest_pipe[0], &c, 1) < 0)
		;
	return 0;
}

int main(void)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	pc.name = "storm";
	pc.core_size = 2;
	pc.max_size = 2;
	if (scope_pool_create(&pool, &pc) != 0 || pipe(rest_pipe) != 0) {
		fprintf(stderr, "storm_rest: setup failed\n");
		return 1;
	}
	pthread_t th[STORMERS];
	for (uintptr_t i = 0; i < STORMERS; i++)
		pthread_create(&th[i], NULL, stormer, (void *)(i + 1));
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		line[0] = '\0';
	atomic_store(&stop, 1);
	for (int i = 0; i < STORMERS; i++)
		pthread_join(th[i], NULL);

	struct scope_config cfg = SCOPE_CONFIG_INIT;
	cfg.name = "rest";
	cfg.pool = pool;
	scope_t *s;
	if (scope_open(&s, &cfg) != 0 || scope_fork(s, rest_task, NULL, NULL) != 0) {
		fprintf(stderr, "storm_rest: the rest scope failed\n");
		return 1;
	}
	printf("quiet %ld\n", atomic_load(&forked));
	fflush(stdout);
	while (fgets(line, sizeof line, stdin))
		;
	if (write(rest_pipe[1], "x", 1) != 1)
		return 1;
	scope_join(s);
	scope_close(s);
	scope_pool_destroy(pool);
	return 0;
}
