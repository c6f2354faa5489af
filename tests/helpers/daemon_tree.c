/* daemon_tree.c - a libscope program with a known tree for scoped's e2e tests:
 * scope "outer" forks 3 workers; each opens "inner" and forks 2 leaves that
 * sleep.  Prints "ready PID" once all 6 leaves run, then, by mode:
 *   hold         wait to be killed
 *   abort        abort() from a leaf
 *   exit CODE    exit(CODE) from a leaf */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scope.h"

#define WORKERS 3
#define LEAVES 2

static scope_pool_t *pool;
static _Atomic int leaves_running, workers_running;
static const char *mode = "hold";
static int exit_code;

static void wait_for(_Atomic int *counter, int n)
{
	while (atomic_load(counter) < n)
		usleep(1000);
}

static int __attribute__((noinline)) leaf(void *arg, void **res)
{
	(void)arg, (void)res;
	if (atomic_fetch_add(&leaves_running, 1) + 1 == WORKERS * LEAVES) {
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		if (strcmp(mode, "hold") != 0) {
			usleep(300000); /* let the agent deliver the tree first */
			if (strcmp(mode, "abort") == 0)
				abort();
			exit(exit_code);
		}
	}
	return scope_sleep(3600LL * 1000000000);
}

static int worker(void *arg, void **res)
{
	(void)arg, (void)res;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	cfg.name = "inner";
	cfg.pool = pool;
	scope_t *s;
	int rc = scope_open(&s, &cfg);
	if (rc < 0)
		return rc;
	scope_value_bind(s, "request_id", "r-17");
	for (int i = 0; i < LEAVES; i++)
		scope_fork(s, leaf, NULL, NULL);
	atomic_fetch_add(&workers_running, 1);
	/* Joining only once every leaf runs keeps a queued leaf from running
	 * inline on this thread, so the tree has one thread per task. */
	wait_for(&leaves_running, WORKERS * LEAVES);
	rc = scope_join(s);
	scope_close(s);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		mode = argv[1];
	if (argc > 2)
		exit_code = atoi(argv[2]);
	scope_thread_name("tree-main");
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	pc.name = "tree";
	pc.core_size = pc.max_size = WORKERS * (LEAVES + 1) + 1;
	pc.prestart = true;
	if (scope_pool_create(&pool, &pc) < 0) {
		fprintf(stderr, "daemon_tree: cannot create the pool\n");
		return 1;
	}
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	cfg.name = "outer";
	cfg.pool = pool;
	scope_t *s;
	if (scope_open(&s, &cfg) < 0)
		return 1;
	for (int i = 0; i < WORKERS; i++)
		scope_fork(s, worker, NULL, NULL);
	wait_for(&workers_running, WORKERS);
	scope_join(s);
	scope_close(s);
	return 0;
}
