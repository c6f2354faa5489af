/* metrics_load.c - a libscope program with a known workload, for the metrics
 * e2e test.  On pool "mload" (4 threads):
 *   scope "batch" (await_all) forks 40 tasks: 30 succeed, 10 fail (-EIO),
 *     each after 2 ms;
 *   scope "stopped" forks 3 tasks that sleep; once all run, scope_cancel()
 *     (reason explicit: 3 tasks cancelled);
 *   scope "late" (500 ms timeout: time for both to start even on a busy
 *     host) forks 2 tasks that sleep (reason timeout: 2 tasks cancelled);
 *   scope "twice" is joined twice (one double_join violation).
 * It creates the pool (which starts the agent), prints "pool PID" and waits
 * for a line on stdin, so that the test can see it registered first (events
 * before the agent connects are not sent).  After the workload the pool's
 * maximum becomes 5 (which sends its figures at once); it prints "ready PID"
 * and waits for EOF on stdin. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "scope.h"

#define MS 1000000LL
#define FOREVER (3600LL * 1000 * MS)

static _Atomic int running;

static int quick(void *arg, void **res)
{
	(void)res;
	scope_sleep(2 * MS);
	return arg ? -EIO : 0;
}

static int sleeper(void *arg, void **res)
{
	(void)arg, (void)res;
	running++;
	return scope_sleep(FOREVER);
}

static int die(const char *what, int rc)
{
	fprintf(stderr, "metrics_load: %s: %s\n", what, scope_strerror(rc));
	return 1;
}

static int open_on(scope_t **s, scope_pool_t *pool, const char *name, scope_joiner_kind_t joiner,
		   int64_t timeout_ns)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	cfg.name = name;
	cfg.pool = pool;
	cfg.joiner = joiner;
	cfg.timeout_ns = timeout_ns;
	return scope_open(s, &cfg);
}

/* Forks n sleepers into s and waits until all of them run, or (so that a
 * scope whose deadline came first cannot hang the program) for 5 s at most. */
static int fork_sleepers(scope_t *s, int n)
{
	int want = running + n;
	for (int i = 0; i < n; i++) {
		int rc = scope_fork(s, sleeper, NULL, NULL);
		if (rc < 0)
			return rc;
	}
	for (int ms = 0; running < want && ms < 5000; ms++)
		usleep(1000);
	return 0;
}

int main(void)
{
	scope_pool_t *pool;
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	pc.name = "mload";
	pc.core_size = pc.max_size = 4;
	int rc = scope_pool_create(&pool, &pc);
	if (rc < 0)
		return die("pool", rc);
	printf("pool %d\n", (int)getpid());
	fflush(stdout);
	char buf[64];
	if (read(0, buf, sizeof buf) <= 0)
		return 0;

	scope_t *s;
	if ((rc = open_on(&s, pool, "batch", SCOPE_JOIN_AWAIT_ALL, 0)) < 0)
		return die("batch", rc);
	for (int i = 0; i < 40; i++)
		if ((rc = scope_fork(s, quick, i < 10 ? (void *)1 : NULL, NULL)) < 0)
			return die("fork", rc);
	scope_join(s);
	scope_close(s);

	if ((rc = open_on(&s, pool, "stopped", SCOPE_JOIN_AWAIT_ALL, 0)) < 0 ||
	    (rc = fork_sleepers(s, 3)) < 0)
		return die("stopped", rc);
	scope_cancel(s);
	scope_join(s);
	scope_close(s);

	if ((rc = open_on(&s, pool, "late", SCOPE_JOIN_AWAIT_ALL, 500 * MS)) < 0 ||
	    (rc = fork_sleepers(s, 2)) < 0)
		return die("late", rc);
	scope_join(s);
	scope_close(s);

	if ((rc = open_on(&s, pool, "twice", SCOPE_JOIN_AWAIT_ALL, 0)) < 0)
		return die("twice", rc);
	scope_join(s);
	scope_join(s); /* the violation */
	scope_close(s);

	if ((rc = scope_pool_set_size(pool, 4, 5)) < 0)
		return die("set_size", rc);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (read(0, buf, sizeof buf) > 0)
		;
	return 0;
}
