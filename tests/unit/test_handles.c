/* test_handles.c - what a scope keeps of its subtasks: forks with a handle
 * until close, in fork order; handle-less forks only while they live (and
 * the failure or winner the scope names), so a long-lived scope's memory is
 * bounded by what is live. */
#include <errno.h>
#include <malloc.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>

#include "rt.h"
#include "scope.h"
#include "test_util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif
#ifndef UNDER_SANITIZER
#define UNDER_SANITIZER 0
#endif

static _Atomic long done;

static int count_done(void *arg, void **result)
{
	*result = arg;
	atomic_fetch_add(&done, 1);
	return 0;
}

static int fail_with(void *arg, void **result)
{
	(void)result;
	atomic_fetch_add(&done, 1);
	return (int)(intptr_t)arg;
}

/* Tasks the scope holds: listed ones, and handle-less ones live or ended
 * and not yet reused (a fork sweeps those when their array is full). */
static size_t held(scope_t *s)
{
	size_t n;

	pthread_mutex_lock(&s->lock);
	n = s->ntasks + s->nanon;
	pthread_mutex_unlock(&s->lock);
	return n;
}

static void wait_done(long n)
{
	while (atomic_load(&done) < n)
		sched_yield();
}

/* The Trio nursery pattern: one scope open for a long time, forking
 * without handles.  What it holds stays bounded by what is live. */
static void long_lived_scope_memory_is_bounded(void **state)
{
	enum { BATCH = 500, BATCHES = 80 };
	scope_t *s;
	size_t most = 0, grown = 0;
	(void)state;

	test_watchdog(60);
	atomic_store(&done, 0);
	assert_int_equal(scope_open(&s, NULL), 0);
	for (int b = 0; b < BATCHES; b++) {
		struct mallinfo2 before = mallinfo2();
		for (int i = 0; i < BATCH; i++)
			assert_int_equal(scope_fork(s, count_done, NULL, NULL), 0);
		wait_done((long)(b + 1) * BATCH);
		size_t h = held(s);
		if (h > most)
			most = h;
		if (b >= 10) /* after warm-up: the heap stops growing */
			grown += mallinfo2().uordblks > before.uordblks
				     ? mallinfo2().uordblks - before.uordblks
				     : 0;
	}
	print_message("  most tasks held at a batch's end: %zu; heap growth after warm-up: %zu "
		      "bytes over %d forks\n",
		      most, grown, (BATCHES - 10) * BATCH);
	/* At a batch's end every task has ended: the scope lists none, and
	 * the handle-less array, swept when full and grown only when more
	 * than half of it is live, holds at most twice the most ever live. */
	assert_true(most <= 2 * BATCH);
	assert_int_equal(scope_task_count(s), 0);
	if (!UNDER_SANITIZER)			  /* their allocators do not report to mallinfo2 */
		assert_true(grown < 1024 * 1024); /* every task kept would be about 20 MB */
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_close(s), 0);
	test_watchdog(0);
}

/* Handle-less forks are not listed; forks with a handle are, in fork
 * order, whatever the others did. */
static void task_at_lists_forks_with_a_handle(void **state)
{
	scope_task_t *t[3];
	scope_t *s;
	(void)state;

	atomic_store(&done, 0);
	assert_int_equal(scope_open(&s, NULL), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(scope_fork(s, count_done, NULL, NULL), 0);
		assert_int_equal(scope_fork(s, count_done, (void *)(intptr_t)(i + 1), &t[i]), 0);
	}
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_task_count(s), 3);
	for (int i = 0; i < 3; i++) {
		assert_ptr_equal(scope_task_at(s, (size_t)i), t[i]);
		assert_ptr_equal(scope_task_result(t[i]), (void *)(intptr_t)(i + 1));
	}
	assert_null(scope_task_at(s, 3));
	assert_int_equal(scope_close(s), 0);
}

/* The failure and the winner stay readable until close even when their
 * forks asked for no handle. */
static void failure_and_winner_kept_without_handles(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	(void)state;

	atomic_store(&done, 0);
	assert_int_equal(scope_open(&s, NULL), 0);
	for (int i = 0; i < 20; i++)
		assert_int_equal(scope_fork(s, count_done, NULL, NULL), 0);
	assert_int_equal(scope_fork(s, fail_with, (void *)(intptr_t)-EIO, NULL), 0);
	assert_int_equal(scope_join(s), SCOPE_EFAILED);
	assert_non_null(scope_failure(s));
	assert_int_equal(scope_task_state(scope_failure(s)), SCOPE_TASK_FAILED);
	assert_int_equal(scope_task_error(scope_failure(s)), -EIO);
	assert_int_equal(scope_close(s), 0);

	cfg.joiner = SCOPE_JOIN_ANY_SUCCESSFUL;
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(scope_fork(s, fail_with, (void *)(intptr_t)-EIO, NULL), 0);
	assert_int_equal(scope_fork(s, count_done, (void *)0x77, NULL), 0);
	assert_int_equal(scope_join(s), 0);
	assert_non_null(scope_winner(s));
	assert_ptr_equal(scope_task_result(scope_winner(s)), (void *)0x77);
	assert_int_equal(scope_close(s), 0);
}

/* Close frees a listed failure along with the other listed tasks (past
 * the thread's cache of 256, with free()): nothing reads it afterwards
 * (ASan sees to that). */
static void close_frees_a_listed_failure_once(void **state)
{
	scope_task_t *t;
	scope_t *s;
	(void)state;

	atomic_store(&done, 0);
	assert_int_equal(scope_open(&s, NULL), 0);
	for (int i = 0; i < 300; i++)
		assert_int_equal(scope_fork(s, count_done, NULL, &t), 0);
	assert_int_equal(scope_fork(s, fail_with, (void *)(intptr_t)-EIO, &t), 0);
	assert_int_equal(scope_join(s), SCOPE_EFAILED);
	assert_ptr_equal(scope_failure(s), t);
	assert_int_equal(scope_close(s), 0);
}

static _Atomic int gates[3];

/* Waits (in the runtime) for its gate, then returns its number. */
static int gated(void *arg, void **result)
{
	int i = (int)(intptr_t)arg;

	*result = arg;
	while (!atomic_load(&gates[i]))
		if (scope_sleep(200000) == -ECANCELED)
			return -ECANCELED;
	return 0;
}

/* scope_next gives the subtasks in the order they end, whatever the fork
 * order; 0 once every one was given. */
static void next_in_completion_order(void **state)
{
	static const int order[3] = {1, 2, 0};
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_task_t *t[3], *got;
	scope_pool_t *pool;
	scope_t *s;
	(void)state;

	test_watchdog(20);
	pc.core_size = pc.max_size = 3;
	assert_int_equal(scope_pool_create(&pool, &pc), 0);
	cfg.pool = pool;
	cfg.joiner = SCOPE_JOIN_AWAIT_ALL;
	assert_int_equal(scope_open(&s, &cfg), 0);
	for (int i = 0; i < 3; i++) {
		atomic_store(&gates[i], 0);
		assert_int_equal(scope_fork(s, gated, (void *)(intptr_t)i, &t[i]), 0);
	}
	assert_int_equal(scope_next(s, NULL), -EINVAL);
	for (int k = 0; k < 3; k++) {
		atomic_store(&gates[order[k]], 1);
		assert_int_equal(scope_next(s, &got), 1);
		assert_ptr_equal(got, t[order[k]]);
		assert_int_equal(scope_task_state(got), SCOPE_TASK_SUCCESS);
		assert_ptr_equal(scope_task_result(got), (void *)(intptr_t)order[k]);
	}
	assert_int_equal(scope_next(s, &got), 0);
	assert_null(got);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_next(s, &got), 0);
	assert_int_equal(scope_close(s), 0);

	/* Refused forks come out too; handle-less ones never do. */
	assert_int_equal(scope_pool_shutdown(pool), 0);
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(scope_fork(s, count_done, NULL, NULL), SCOPE_ESHUTDOWN);
	assert_int_equal(scope_fork(s, count_done, NULL, &t[0]), SCOPE_ESHUTDOWN);
	assert_int_equal(scope_next(s, &got), 1);
	assert_ptr_equal(got, t[0]);
	assert_int_equal(scope_task_error(got), SCOPE_ESHUTDOWN);
	assert_int_equal(scope_next(s, &got), 0);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(scope_pool_destroy(pool), 0);
	test_watchdog(0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(long_lived_scope_memory_is_bounded),
	    cmocka_unit_test(task_at_lists_forks_with_a_handle),
	    cmocka_unit_test(failure_and_winner_kept_without_handles),
	    cmocka_unit_test(next_in_completion_order),
	    cmocka_unit_test(close_frees_a_listed_failure_once),
	};

	/* The agent starts in a constructor; these tests count the runtime's
	 * own memory, so they run without it. */
	test_without_agent(argv);
	(void)argc;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
