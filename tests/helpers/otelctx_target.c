/* otelctx_target.c - tasks that stay running while a test reads their
 * OpenTelemetry thread context from outside, as a profiler would
 * (tests/unit/test_otelctx.c).  Two trees, one after the other:
 *   "otel-req" binds traceparent TRACEPARENT and forks one task;
 *   "otel-own" binds nothing and forks one task.
 * For each the task prints "ready TID TRACEPARENT" (the one it would send
 * on to another process, made from its own thread context) and waits for
 * a line on stdin; once
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
 * With "switch": one pool worker runs, in turn, tasks of SW_SCOPES scopes
 * "sw-J" (each with a traceparent of its own, forked from a line of its
 * own), SW_TASKS each a round, every task busy for SW_SPIN_NS; new scopes
 * every round, until a line comes in.  Prints "line J LINE" for each scope
 * and "worker TID" once the worker ran a round, "t J TASK_ID" for every
 * task of a round once it is joined, and "done" at the end.
 *
 * With "idle": prints "up", runs no task, waits for a line. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
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

/* The head of OTEP 4947's record, as a program reads its own thread's. */
struct otel_rec_head {
	uint8_t trace_id[16], span_id[8], valid, trace_flags;
};
extern _Thread_local struct otel_rec_head *otel_thread_ctx_v1;

/* The traceparent a task sends on to another process (NULL: none): its
 * own thread context, as the running task's trace, span and flags. */
static const char *outgoing_traceparent(char out[56])
{
	const struct otel_rec_head *r = otel_thread_ctx_v1;
	int n;

	if (!r || r->valid != 1)
		return NULL;
	n = sprintf(out, "00-");
	for (int i = 0; i < 16; i++)
		n += sprintf(out + n, "%02x", r->trace_id[i]);
	n += sprintf(out + n, "-");
	for (int i = 0; i < 8; i++)
		n += sprintf(out + n, "%02x", r->span_id[i]);
	sprintf(out + n, "-%02x", r->trace_flags);
	return out;
}

static int task_wait(void *arg, void **res)
{
	char tp[56];
	const char *out = outgoing_traceparent(tp);

	(void)arg, (void)res;
	atomic_store(&started, 1);
	printf("ready %ld %s\n", (long)syscall(SYS_gettid), out ? out : "-");
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

#define SW_SCOPES 3
#define SW_TASKS 8
#define SW_SPIN_NS 20000

static atomic_int sw_stop, sw_done;
static atomic_long sw_worker;

static void *sw_watch(void *arg)
{
	(void)arg;
	wait_line();
	atomic_store(&sw_stop, 1);
	return NULL;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int task_spin(void *arg, void **res)
{
	int64_t until = mono_ns() + SW_SPIN_NS;

	(void)arg, (void)res;
	long none = 0;
	atomic_compare_exchange_strong(&sw_worker, &none, (long)syscall(SYS_gettid));
	while (mono_ns() < until)
		;
	atomic_fetch_add(&sw_done, 1);
	return 0;
}

/* Forks into scope j from a line of j's own (so that each scope's records
 * name another fork site); *line is that line. */
static int sw_fork(int j, scope_t *s, scope_task_t **t, int *line)
{
	switch (j) {
	case 0:
		*line = __LINE__ + 1;
		return scope_fork(s, task_spin, NULL, t);
	case 1:
		*line = __LINE__ + 1;
		return scope_fork(s, task_spin, NULL, t);
	default:
		*line = __LINE__ + 1;
		return scope_fork(s, task_spin, NULL, t);
	}
}

static int switcher(void)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	scope_task_t *t[SW_SCOPES][SW_TASKS];
	scope_t *s[SW_SCOPES];
	pthread_t watch;
	char tp[64];
	bool said = false;
	int rc, line[SW_SCOPES];

	pc.name = "one";
	pc.core_size = 1;
	pc.max_size = 1;
	if ((rc = scope_pool_create(&one, &pc)) < 0)
		return rc;
	if (pthread_create(&watch, NULL, sw_watch, NULL) != 0)
		return -1;
	while (!atomic_load(&sw_stop)) {
		atomic_store(&sw_done, 0);
		for (int j = 0; j < SW_SCOPES; j++) {
			struct scope_config cfg = SCOPE_CONFIG_INIT;
			char name[16];
			snprintf(name, sizeof name, "sw-%d", j);
			cfg.name = name;
			cfg.pool = one;
			if ((rc = scope_open(&s[j], &cfg)) < 0)
				return rc;
			snprintf(tp, sizeof tp, "00-%032x-00f067aa0ba902b7-01", 0x5100 + j);
			if ((rc = scope_value_bind(s[j], "traceparent", tp)) < 0)
				return rc;
		}
		for (int i = 0; i < SW_TASKS; i++)
			for (int j = 0; j < SW_SCOPES; j++)
				if ((rc = sw_fork(j, s[j], &t[j][i], &line[j])) < 0)
					return rc;
		/* The worker runs them all, in turn: the joins find nothing
		 * left to run themselves. */
		while (atomic_load(&sw_done) < SW_SCOPES * SW_TASKS)
			scope_sleep(100000);
		if (!said) {
			for (int j = 0; j < SW_SCOPES; j++)
				printf("line %d %d\n", j, line[j]);
			printf("worker %ld\n", atomic_load(&sw_worker));
			said = true;
		}
		/* Each scope opened inside the one before: joined, then
		 * closed innermost first. */
		for (int j = SW_SCOPES - 1; j >= 0; j--) {
			if ((rc = scope_join(s[j])) < 0)
				return rc;
			for (int i = 0; i < SW_TASKS; i++)
				printf("t %d %llu\n", j,
				       (unsigned long long)scope_task_id(t[j][i]));
			scope_close(s[j]);
		}
	}
	pthread_join(watch, NULL);
	printf("done\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && strcmp(argv[1], "nest") == 0)
		return nest() < 0;
	if (argc > 1 && strcmp(argv[1], "switch") == 0) {
		int rc = switcher();
		if (rc < 0)
			fprintf(stderr, "otelctx_target: switch: %s\n", scope_strerror(rc));
		return rc < 0;
	}
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
