/* otelctx_target.c - tasks that stay running while a test reads their
 * OpenTelemetry thread context from outside, as a profiler would
 * (tests/unit/test_otelctx.c).  Two trees, one after the other:
 *   "otel-req" binds traceparent TRACEPARENT and forks one task;
 *   "otel-own" binds nothing and forks one task.
 * For each the task prints "ready TID" and waits for a line on stdin; once
 * it runs (on a pool worker, not on the main thread, which waits for it to
 * start so that its join has nothing to help with) the main thread prints
 * "fork TASK_ID SCOPE_ID LINE" (the fork's line) and joins; after the join
 * it prints "joined" and waits for another line.  Then "done".
 *
 * With "nest": a task of "otel-outer", on a pool of one worker that runs
 * what it cannot hand off in the forking thread (direct hand-off, caller
 * runs), opens "otel-inner" and forks a task there, which its own thread
 * runs inside that fork: "fork OUTER_ID" from the main thread, "inner TID"
 * from the inner task, which waits for a line; then "innerfork INNER_ID"
 * and "back TID" from the outer task, which waits for a line.
 *
 * With "idle": prints "up", runs no task, waits for a line. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "scope.h"

#define TRACEPARENT "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static atomic_int started;

static void wait_line(void)
{
	char line[64];

	if (!fgets(line, sizeof line, stdin))
		_exit(3); /* the test went away: nothing to wait for */
}

static int task_wait(void *arg, void **res)
{
	(void)arg, (void)res;
	atomic_store(&started, 1);
	printf("ready %ld\n", (long)syscall(SYS_gettid));
	wait_line();
	return 0;
}

static int tree(const char *name, const char *traceparent)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_task_t *t;
	scope_t *s;
	int line, rc;

	cfg.name = name;
	rc = scope_open(&s, &cfg);
	if (rc < 0)
		return rc;
	if (traceparent && (rc = scope_value_bind(s, "traceparent", traceparent)) < 0)
		return rc;
	atomic_store(&started, 0);
	line = __LINE__ + 1;
	rc = scope_fork(s, task_wait, NULL, &t);
	if (rc < 0)
		return rc;
	for (int i = 0; i < 20000 && !atomic_load(&started); i++)
		scope_sleep(1000000);
	printf("fork %llu %llu %d\n", (unsigned long long)scope_task_id(t),
	       (unsigned long long)scope_id(s), line);
	rc = scope_join(s);
	scope_close(s);
	printf("joined\n");
	wait_line();
	return rc;
}

static int task_inner(void *arg, void **res)
{
	(void)arg, (void)res;
	printf("inner %ld\n", (long)syscall(SYS_gettid));
	wait_line();
	return 0;
}

static scope_pool_t *one;

static int task_outer(void *arg, void **res)
{
	(void)arg, (void)res;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_task_t *t;
	scope_t *s;
	int rc;

	atomic_store(&started, 1);
	cfg.name = "otel-inner";
	cfg.pool = one;
	if ((rc = scope_open(&s, &cfg)) < 0)
		return rc;
	if ((rc = scope_fork(s, task_inner, NULL, &t)) < 0)
		return rc;
	printf("innerfork %llu\n", (unsigned long long)scope_task_id(t));
	rc = scope_join(s);
	scope_close(s);
	printf("back %ld\n", (long)syscall(SYS_gettid));
	wait_line();
	return rc;
}

static int nest(void)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_task_t *t;
	scope_t *s;
	int rc;

	pc.name = "one";
	pc.core_size = 1;
	pc.max_size = 1;
	pc.queue = SCOPE_QUEUE_DIRECT;
	pc.policy = SCOPE_POLICY_CALLER_RUNS;
	if ((rc = scope_pool_create(&one, &pc)) < 0)
		return rc;
	cfg.name = "otel-outer";
	cfg.pool = one;
	if ((rc = scope_open(&s, &cfg)) < 0)
		return rc;
	if ((rc = scope_fork(s, task_outer, NULL, &t)) < 0)
		return rc;
	for (int i = 0; i < 20000 && !atomic_load(&started); i++)
		scope_sleep(1000000);
	printf("fork %llu\n", (unsigned long long)scope_task_id(t));
	rc = scope_join(s);
	scope_close(s);
	return rc;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && strcmp(argv[1], "nest") == 0)
		return nest() < 0;
	if (argc > 1 && strcmp(argv[1], "idle") == 0) {
		printf("up\n");
		wait_line();
		return 0;
	}
	if (tree("otel-req", TRACEPARENT) < 0 || tree("otel-own", NULL) < 0)
		return 1;
	printf("done\n");
	return 0;
}
