/* otlp_load.c - scope trees of known shape for the OTLP e2e test.  Once its
 * agent is connected ("pool PID" printed, a line read from stdin):
 *   10 trees "fine": a scope forking 3 tasks that succeed;
 *   "request" (await_all, bound traceparent TRACEPARENT): task "a" opens
 *     "inner" and forks one task that succeeds; task "b" fails with -EIO;
 *   "late" (20 ms timeout): one task that sleeps, cancelled by the deadline;
 *   "twice": joined twice (a double_join violation).
 * Then prints "ready PID" and waits for EOF on stdin. */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "scope.h"

#define MS 1000000LL
#define TRACEPARENT "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

static scope_pool_t *pool;

static int ok(void *arg, void **res)
{
	(void)arg, (void)res;
	return 0;
}

static int fails(void *arg, void **res)
{
	(void)arg, (void)res;
	return -EIO;
}

static int sleeper(void *arg, void **res)
{
	(void)arg, (void)res;
	return scope_sleep(3600LL * 1000 * MS);
}

static int open_as(scope_t **s, const char *name, int64_t timeout)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	cfg.name = name;
	cfg.pool = pool;
	cfg.joiner = SCOPE_JOIN_AWAIT_ALL;
	cfg.timeout_ns = timeout;
	return scope_open(s, &cfg);
}

static int task_a(void *arg, void **res)
{
	(void)arg, (void)res;
	scope_t *s;
	int rc = open_as(&s, "inner", 0);
	if (rc < 0)
		return rc;
	scope_fork(s, ok, NULL, NULL);
	rc = scope_join(s);
	scope_close(s);
	return rc;
}

int main(void)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	pc.name = "otlp";
	pc.core_size = pc.max_size = 4;
	if (scope_pool_create(&pool, &pc) < 0)
		return 1;
	printf("pool %d\n", (int)getpid());
	fflush(stdout);
	char buf[64];
	if (read(0, buf, sizeof buf) <= 0)
		return 0;
	scope_t *s;
	for (int i = 0; i < 10; i++) {
		if (open_as(&s, "fine", 0) < 0)
			return 1;
		for (int k = 0; k < 3; k++)
			scope_fork(s, ok, NULL, NULL);
		scope_join(s);
		scope_close(s);
	}
	if (open_as(&s, "request", 0) < 0)
		return 1;
	scope_value_bind(s, "traceparent", TRACEPARENT);
	scope_fork(s, task_a, NULL, NULL);
	scope_fork(s, fails, NULL, NULL);
	scope_join(s);
	scope_close(s);
	if (open_as(&s, "late", 20 * MS) < 0)
		return 1;
	scope_fork(s, sleeper, NULL, NULL);
	scope_join(s);
	scope_close(s);
	if (open_as(&s, "twice", 0) < 0)
		return 1;
	scope_join(s);
	scope_join(s);
	scope_close(s);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (read(0, buf, sizeof buf) > 0)
		;
	return 0;
}
