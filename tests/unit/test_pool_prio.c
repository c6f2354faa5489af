/* test_pool_prio.c - pools with a priority queue (ThreadPoolExecutor over a
 * PriorityBlockingQueue): queued subtasks run highest fork priority first,
 * in fork order among equals, for the pool's workers and for a joiner that
 * runs its own queued subtasks; bounded queues keep their saturation
 * policies; nested joins on such a pool finish. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "scope.h"
#include "test_util.h"

#define MS 1000000LL
#define NREC 128

static _Atomic int release;
static _Atomic int nrec;
static int rec[NREC];

static int hold(void *arg, void **result)
{
	(void)arg;
	(void)result;
	while (!atomic_load(&release))
		if (scope_sleep(MS / 2) == -ECANCELED)
			return -ECANCELED;
	return 0;
}

/* Records its argument in the order the tasks ran. */
static int note(void *arg, void **result)
{
	int i = atomic_fetch_add(&nrec, 1);

	(void)result;
	if (i < NREC)
		rec[i] = (int)(intptr_t)arg;
	return 0;
}

static bool never(void *ctx, scope_task_t *done)
{
	(void)ctx;
	(void)done;
	return false;
}

static scope_pool_t *prio_pool(scope_queue_kind_t q, size_t cap)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	scope_pool_t *pool;

	pc.core_size = pc.max_size = 1;
	pc.queue = q;
	pc.queue_capacity = cap;
	pc.priority_queue = true;
	assert_int_equal(scope_pool_create(&pool, &pc), 0);
	return pool;
}

/* Opens a scope on pool whose only subtask holds the pool's one thread
 * until release. */
static scope_t *occupy(scope_pool_t *pool)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	struct scope_pool_stats st;
	scope_t *s;

	atomic_store(&release, 0);
	atomic_store(&nrec, 0);
	cfg.pool = pool;
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(scope_fork(s, hold, NULL, NULL), 0);
	while (scope_pool_stats(pool, &st) == 0 && st.active < 1)
		scope_sleep(MS / 4);
	return s;
}

/* A scope on pool whose join waits for every subtask without running any
 * itself (an until-joiner that never stops), so the pool's order shows. */
static scope_t *open_watching(scope_pool_t *pool)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;

	cfg.pool = pool;
	cfg.joiner = SCOPE_JOIN_UNTIL;
	cfg.until = never;
	assert_int_equal(scope_open(&s, &cfg), 0);
	return s;
}

static int fork_prio(scope_t *s, int prio, int tag, scope_task_t **out)
{
	struct scope_fork_options o = SCOPE_FORK_OPTIONS_INIT;

	o.priority = prio;
	return scope_fork_with(s, note, (void *)(intptr_t)tag, out, &o);
}

static void assert_order(const int *want, int n)
{
	assert_int_equal(atomic_load(&nrec), n);
	for (int i = 0; i < n; i++)
		if (rec[i] != want[i]) {
			fprintf(stderr, "position %d: ran %d, expected %d\n", i, rec[i], want[i]);
			fail();
		}
}

static const int prios[] = {1, 5, 3, 5, -2, 3, 0, 2147483647, -2147483647 - 1};
/* Indexes into prios, in the order they must run. */
static const int by_prio[] = {7, 1, 3, 2, 5, 0, 6, 4, 8};
#define NPRIO (int)(sizeof(prios) / sizeof(prios[0]))

/* The pool's one worker takes the queued subtasks by priority, equal ones
 * in fork order. */
static void worker_runs_by_priority(void **state)
{
	scope_pool_t *pool;
	scope_t *a, *b;
	(void)state;

	test_watchdog(20);
	pool = prio_pool(SCOPE_QUEUE_UNBOUNDED, 0);
	a = occupy(pool);
	b = open_watching(pool);
	for (int i = 0; i < NPRIO; i++)
		assert_int_equal(fork_prio(b, prios[i], i, NULL), 0);
	atomic_store(&release, 1);
	assert_int_equal(scope_join(b), 0);
	assert_order(by_prio, NPRIO);
	assert_int_equal(scope_close(b), 0);
	assert_int_equal(scope_join(a), 0);
	assert_int_equal(scope_close(a), 0);
	assert_int_equal(scope_pool_destroy(pool), 0);
	test_watchdog(0);
}

/* A joiner that runs its own queued subtasks (all-successful) takes them
 * in the pool's order too, while the worker is held elsewhere. */
static void helping_joiner_runs_by_priority(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_pool_t *pool;
	scope_t *a, *b;
	(void)state;

	test_watchdog(20);
	pool = prio_pool(SCOPE_QUEUE_UNBOUNDED, 0);
	a = occupy(pool);
	cfg.pool = pool;
	assert_int_equal(scope_open(&b, &cfg), 0);
	for (int i = 0; i < NPRIO; i++)
		assert_int_equal(fork_prio(b, prios[i], i, NULL), 0);
	assert_int_equal(scope_join(b), 0); /* ran here: the worker holds */
	assert_order(by_prio, NPRIO);
	assert_int_equal(scope_close(b), 0);
	atomic_store(&release, 1);
	assert_int_equal(scope_join(a), 0);
	assert_int_equal(scope_close(a), 0);
	assert_int_equal(scope_pool_destroy(pool), 0);
	test_watchdog(0);
}

/* Equal priorities (scope_fork's default 0 among them) run in fork order,
 * across scopes; a priority on a pool without the option is ignored. */
static void equal_priorities_fifo(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_pool_t *pool, *plain;
	scope_t *a, *b, *c;
	int want[60];
	(void)state;

	test_watchdog(20);
	pool = prio_pool(SCOPE_QUEUE_UNBOUNDED, 0);
	a = occupy(pool);
	b = open_watching(pool);
	for (int i = 0; i < 60; i++) {
		want[i] = i;
		if (i % 3 == 0)
			assert_int_equal(scope_fork(b, note, (void *)(intptr_t)i, NULL), 0);
		else
			assert_int_equal(fork_prio(b, 0, i, NULL), 0);
	}
	atomic_store(&release, 1);
	assert_int_equal(scope_join(b), 0);
	assert_order(want, 60);
	assert_int_equal(scope_close(b), 0);
	assert_int_equal(scope_join(a), 0);
	assert_int_equal(scope_close(a), 0);
	assert_int_equal(scope_pool_destroy(pool), 0);

	/* Options on a plain pool, and NULL options. */
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	assert_int_equal(scope_pool_create(&plain, &pc), 0);
	cfg.pool = plain;
	assert_int_equal(scope_open(&c, &cfg), 0);
	atomic_store(&nrec, 0);
	assert_int_equal(fork_prio(c, 9, 1, NULL), 0);
	assert_int_equal(scope_fork_with(c, note, (void *)2, NULL, NULL), 0);
	assert_int_equal(scope_join(c), 0);
	assert_int_equal(atomic_load(&nrec), 2);
	assert_int_equal(scope_close(c), 0);
	assert_int_equal(scope_pool_destroy(plain), 0);

	/* A hand-off has no queue to order. */
	pc.queue = SCOPE_QUEUE_DIRECT;
	pc.priority_queue = true;
	assert_int_equal(scope_pool_create(&plain, &pc), -EINVAL);
	test_watchdog(0);
}

/* A bounded priority queue saturates as a bounded queue does: abort
 * refuses, DISCARD_OLDEST drops the queued task that would run last (or
 * the new one, when it ranks below them all), caller-runs runs it here. */
static void bounded_queue_policies(void **state)
{
	struct scope_pool_stats st;
	scope_task_t *t[8];
	scope_pool_t *pool;
	scope_t *a, *b;
	(void)state;

	test_watchdog(20);
	pool = prio_pool(SCOPE_QUEUE_BOUNDED, 3);
	a = occupy(pool);
	b = open_watching(pool);
	assert_int_equal(fork_prio(b, 1, 1, &t[0]), 0);
	assert_int_equal(fork_prio(b, 2, 2, &t[1]), 0);
	assert_int_equal(fork_prio(b, 3, 3, &t[2]), 0);
	/* Full: abort refuses even the highest priority. */
	assert_int_equal(fork_prio(b, 9, 9, &t[3]), SCOPE_EREJECTED);
	assert_int_equal(scope_task_error(t[3]), SCOPE_EREJECTED);
	assert_int_equal(scope_pool_set_policy(pool, SCOPE_POLICY_DISCARD_OLDEST), 0);
	/* Drops priority 1, the task that would run last. */
	assert_int_equal(fork_prio(b, 5, 5, &t[4]), 0);
	/* Below every queued one: this fork is the one dropped. */
	assert_int_equal(fork_prio(b, 0, 100, &t[5]), 0);
	/* Equal to the lowest queued (2): the older 2 goes. */
	assert_int_equal(fork_prio(b, 2, 22, &t[6]), 0);
	assert_int_equal(scope_pool_set_policy(pool, SCOPE_POLICY_CALLER_RUNS), 0);
	assert_int_equal(fork_prio(b, 7, 7, &t[7]), 0); /* runs here, now */
	assert_int_equal(atomic_load(&nrec), 1);
	assert_int_equal(scope_pool_stats(pool, &st), 0);
	assert_int_equal(st.queued, 3);
	assert_int_equal(st.rejected, 4);
	atomic_store(&release, 1);
	/* The until-joiner's join waits for every subtask. */
	assert_int_equal(scope_join(b), 0);
	static const int want[] = {7, 5, 3, 22};
	assert_order(want, 4);
	assert_int_equal(scope_task_error(t[0]), SCOPE_EDISCARDED);
	assert_int_equal(scope_task_error(t[5]), SCOPE_EDISCARDED);
	assert_int_equal(scope_task_error(t[1]), SCOPE_EDISCARDED);
	assert_int_equal(scope_task_state(t[2]), SCOPE_TASK_SUCCESS);
	assert_int_equal(scope_task_state(t[6]), SCOPE_TASK_SUCCESS);
	assert_int_equal(scope_close(b), 0);
	assert_int_equal(scope_join(a), 0);
	assert_int_equal(scope_close(a), 0);
	assert_int_equal(scope_pool_destroy(pool), 0);
	test_watchdog(0);
}

static scope_pool_t *nest_pool;
static _Atomic int leaves;

/* Depth d: forks three subtasks of rising priority into the same
 * one-thread pool and joins them; odd depths join without running them
 * (the worker parks, lending its place), even ones run their own. */
static int nest(void *arg, void **result)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	int d = (int)(intptr_t)arg;
	scope_t *s;
	int rc;

	(void)result;
	if (d == 0) {
		atomic_fetch_add(&leaves, 1);
		return 0;
	}
	cfg.pool = nest_pool;
	if (d % 2) {
		cfg.joiner = SCOPE_JOIN_UNTIL;
		cfg.until = never;
	}
	rc = scope_open(&s, &cfg);
	if (rc)
		return rc;
	for (int i = 0; i < 3 && !rc; i++) {
		struct scope_fork_options o = SCOPE_FORK_OPTIONS_INIT;
		o.priority = i - d;
		rc = scope_fork_with(s, nest, (void *)(intptr_t)(d - 1), NULL, &o);
	}
	int jr = scope_join(s);
	int cr = scope_close(s);
	return rc ? rc : jr ? jr : cr;
}

/* Nested joins on a one-thread priority pool finish: a joiner runs its
 * own queued subtasks or lends its place while it waits. */
static void nested_joins_finish(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	(void)state;

	test_watchdog(30);
	nest_pool = prio_pool(SCOPE_QUEUE_UNBOUNDED, 0);
	atomic_store(&leaves, 0);
	for (int joiner = 0; joiner < 2; joiner++) {
		cfg.pool = nest_pool;
		cfg.joiner = joiner ? SCOPE_JOIN_UNTIL : SCOPE_JOIN_ALL_SUCCESSFUL;
		cfg.until = never;
		assert_int_equal(scope_open(&s, &cfg), 0);
		for (int i = 0; i < 2; i++)
			assert_int_equal(scope_fork(s, nest, (void *)(intptr_t)4, NULL), 0);
		assert_int_equal(scope_join(s), 0);
		assert_int_equal(scope_close(s), 0);
	}
	assert_int_equal(atomic_load(&leaves), 2 * 2 * 81);
	assert_int_equal(scope_pool_destroy(nest_pool), 0);
	test_watchdog(0);
}

/* shutdown_now takes a priority pool's queued subtasks off its heap. */
static void shutdown_now_drains_heap(void **state)
{
	scope_task_t *t[5];
	scope_pool_t *pool;
	scope_t *a, *b;
	(void)state;

	test_watchdog(20);
	pool = prio_pool(SCOPE_QUEUE_UNBOUNDED, 0);
	a = occupy(pool);
	b = open_watching(pool);
	for (int i = 0; i < 5; i++)
		assert_int_equal(fork_prio(b, i % 3, i, &t[i]), 0);
	assert_int_equal(scope_pool_shutdown_now(pool), 5);
	atomic_store(&release, 1);
	(void)scope_join(b);
	for (int i = 0; i < 5; i++)
		assert_int_equal(scope_task_state(t[i]), SCOPE_TASK_UNAVAILABLE);
	assert_int_equal(atomic_load(&nrec), 0);
	assert_int_equal(scope_close(b), 0);
	(void)scope_join(a);
	assert_int_equal(scope_close(a), 0);
	assert_int_equal(scope_pool_destroy(pool), 0);
	test_watchdog(0);
}

/* A close with subtasks still queued takes them off both heaps: the pool
 * queues nothing afterwards and runs what comes next in order. */
static void close_reclaims_queued(void **state)
{
	struct scope_pool_stats st;
	scope_pool_t *pool;
	scope_t *a, *b;
	(void)state;

	test_watchdog(20);
	pool = prio_pool(SCOPE_QUEUE_UNBOUNDED, 0);
	a = occupy(pool);
	b = open_watching(pool);
	for (int i = 0; i < 5; i++)
		assert_int_equal(fork_prio(b, i, i, NULL), 0);
	(void)scope_close(b); /* no join: a structure violation, reclaimed all the same */
	assert_int_equal(scope_pool_stats(pool, &st), 0);
	assert_int_equal(st.queued, 0);
	b = open_watching(pool);
	for (int i = 0; i < 3; i++)
		assert_int_equal(fork_prio(b, i, 10 + i, NULL), 0);
	atomic_store(&release, 1);
	assert_int_equal(scope_join(b), 0);
	static const int want[] = {12, 11, 10};
	assert_order(want, 3);
	assert_int_equal(scope_close(b), 0);
	assert_int_equal(scope_join(a), 0);
	assert_int_equal(scope_close(a), 0);
	assert_int_equal(scope_pool_destroy(pool), 0);
	test_watchdog(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(worker_runs_by_priority),
	    cmocka_unit_test(helping_joiner_runs_by_priority),
	    cmocka_unit_test(equal_priorities_fifo),
	    cmocka_unit_test(bounded_queue_policies),
	    cmocka_unit_test(nested_joins_finish),
	    cmocka_unit_test(shutdown_now_drains_heap),
	    cmocka_unit_test(close_reclaims_queued),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
