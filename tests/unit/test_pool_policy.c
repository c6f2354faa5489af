/* test_pool_policy.c - the discard-oldest saturation policy with a queue
 * that holds several tasks, so that the oldest queued task, the newest one
 * and the one being forked are all different: only the oldest may go. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "scope.h"
#include "test_util.h"

#define MS 1000000LL
#define QUEUED 3

static _Atomic int gate;

/* Waits until the gate opens (or its scope is cancelled). */
static int gated(void *arg, void **result)
{
	*result = arg;
	while (!atomic_load(&gate))
		if (scope_sleep(MS / 5))
			return -ECANCELED;
	return 0;
}

/* Waits (at most 5 s) until the pool runs one task and queues n. */
static void wait_for_queue(scope_pool_t *pool, size_t n)
{
	struct scope_pool_stats st;
	int64_t give_up = scope_now() + 5000 * MS;

	for (;;) {
		assert_int_equal(scope_pool_stats(pool, &st), 0);
		if (st.active == 1 && st.queued == n)
			return;
		if (scope_now() > give_up)
			fail_msg("the pool runs %u and queues %zu tasks, not 1 and %zu", st.active,
				 st.queued, n);
		scope_sleep(MS);
	}
}

static int setup(void **state)
{
	(void)state;
	test_watchdog(10);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	test_watchdog(0);
	return 0;
}

/* One thread runs task 0; tasks 1..3 fill the queue.  Each further fork
 * discards the oldest task still queued: first 1, then 2; the newest queued
 * task and the new one are kept, and every kept task runs. */
static void discard_oldest_drops_the_oldest_of_several(void **state)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	struct scope_pool_stats st;
	scope_pool_t *pool;
	scope_task_t *t[QUEUED + 3];
	scope_t *s;
	(void)state;

	atomic_store(&gate, 0);
	pc.name = "oldest";
	pc.core_size = 1;
	pc.max_size = 1;
	pc.queue = SCOPE_QUEUE_BOUNDED;
	pc.queue_capacity = QUEUED;
	pc.policy = SCOPE_POLICY_DISCARD_OLDEST;
	assert_int_equal(scope_pool_create(&pool, &pc), 0);
	cfg.pool = pool;
	cfg.joiner = SCOPE_JOIN_AWAIT_ALL;
	assert_int_equal(scope_open(&s, &cfg), 0);

	assert_int_equal(scope_fork(s, gated, (void *)0, &t[0]), 0);
	wait_for_queue(pool, 0);
	for (intptr_t i = 1; i <= QUEUED; i++)
		assert_int_equal(scope_fork(s, gated, (void *)i, &t[i]), 0);
	wait_for_queue(pool, QUEUED);

	assert_int_equal(scope_fork(s, gated, (void *)4, &t[4]), 0);
	assert_int_equal(scope_task_state(t[1]), SCOPE_TASK_FAILED);
	assert_int_equal(scope_task_error(t[1]), SCOPE_EDISCARDED);
	for (int i = 2; i <= 4; i++)
		assert_int_not_equal(scope_task_state(t[i]), SCOPE_TASK_FAILED);
	assert_int_equal(scope_pool_stats(pool, &st), 0);
	assert_int_equal(st.queued, QUEUED);
	assert_int_equal(st.rejected, 1);

	assert_int_equal(scope_fork(s, gated, (void *)5, &t[5]), 0);
	assert_int_equal(scope_task_state(t[2]), SCOPE_TASK_FAILED);
	assert_int_equal(scope_task_error(t[2]), SCOPE_EDISCARDED);
	assert_int_equal(scope_pool_stats(pool, &st), 0);
	assert_int_equal(st.rejected, 2);

	atomic_store(&gate, 1);
	assert_int_equal(scope_join(s), 0);
	for (intptr_t i = 0; i <= QUEUED + 2; i++) {
		if (i == 1 || i == 2)
			continue;
		assert_int_equal(scope_task_state(t[i]), SCOPE_TASK_SUCCESS);
		assert_ptr_equal(scope_task_result(t[i]), (void *)i);
	}
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(scope_pool_destroy(pool), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(discard_oldest_drops_the_oldest_of_several, setup,
					    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
