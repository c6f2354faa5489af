/* test_pool_admin.c - managing a pool after creating it, as
 * ThreadPoolExecutor allows: shutdown and termination states, waiting for
 * termination, setters, prestarting a core thread, the submitted count. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "scope.h"
#include "test_util.h"

#define SEC 1000000000LL
#define MS 1000000LL

static _Atomic int release;

static int hold(void *arg, void **result)
{
	(void)arg;
	(void)result;
	while (!atomic_load(&release))
		if (scope_sleep(MS / 2) == -ECANCELED)
			return -ECANCELED;
	return 0;
}

static int nothing(void *arg, void **result)
{
	(void)arg;
	(void)result;
	return 0;
}

static void states_and_await_termination(void **state)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	struct scope_pool_stats st;
	scope_pool_t *pool;
	scope_t *s;
	(void)state;

	test_watchdog(20);
	atomic_store(&release, 0);
	pc.core_size = pc.max_size = 2;
	assert_int_equal(scope_pool_create(&pool, &pc), 0);
	assert_false(scope_pool_is_shutdown(pool));
	assert_false(scope_pool_is_terminated(pool));
	assert_false(scope_pool_is_shutdown(NULL));
	cfg.pool = pool;
	assert_int_equal(scope_open(&s, &cfg), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(scope_fork(s, i == 0 ? hold : nothing, NULL, NULL), 0);
	assert_int_equal(scope_pool_shutdown(pool), 0);
	assert_true(scope_pool_is_shutdown(pool));
	assert_false(scope_pool_is_terminated(pool)); /* a task still runs */
	assert_int_equal(scope_pool_await_termination(pool, 20 * MS), -ETIMEDOUT);
	assert_int_equal(scope_pool_await_termination(pool, -1), -EINVAL);
	atomic_store(&release, 1);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(scope_pool_await_termination(pool, 10 * SEC), 0);
	assert_true(scope_pool_is_terminated(pool));
	assert_int_equal(scope_pool_stats(pool, &st), 0);
	assert_int_equal(st.submitted, 4);
	assert_int_equal(st.completed, 4);
	assert_int_equal(scope_pool_prestart_core(pool), SCOPE_ESHUTDOWN);
	assert_int_equal(scope_pool_destroy(pool), 0);
	test_watchdog(0);
}

static void setters_and_prestart(void **state)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	struct scope_pool_stats st;
	scope_pool_t *pool;
	scope_task_t *t;
	scope_t *s;
	(void)state;

	test_watchdog(20);
	pc.core_size = pc.max_size = 1;
	pc.queue = SCOPE_QUEUE_BOUNDED;
	pc.queue_capacity = 1;
	assert_int_equal(scope_pool_create(&pool, &pc), 0);
	assert_int_equal(scope_pool_prestart_core(pool), 1);
	assert_int_equal(scope_pool_prestart_core(pool), 0); /* core is full */
	assert_int_equal(scope_pool_stats(pool, &st), 0);
	assert_int_equal(st.size, 1);

	/* Saturate (one holder running, one queued), then change the policy. */
	atomic_store(&release, 0);
	cfg.pool = pool;
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(scope_fork(s, hold, NULL, NULL), 0);
	while (scope_pool_stats(pool, &st) == 0 && st.active < 1)
		scope_sleep(MS / 2);
	assert_int_equal(scope_fork(s, hold, NULL, NULL), 0);
	assert_int_equal(scope_fork(s, nothing, NULL, &t), SCOPE_EREJECTED);
	assert_int_equal(scope_pool_set_policy(pool, SCOPE_POLICY_DISCARD), 0);
	assert_int_equal(scope_fork(s, nothing, NULL, &t), 0);
	assert_int_equal(scope_task_error(t), SCOPE_EDISCARDED);
	assert_int_equal(scope_pool_set_policy(pool, (scope_policy_t)99), -EINVAL);
	atomic_store(&release, 1);
	(void)scope_join(s);
	assert_int_equal(scope_close(s), 0);

	/* Core threads time out once allowed, with a short keep-alive. */
	assert_int_equal(scope_pool_set_keep_alive(pool, 0), -EINVAL);
	assert_int_equal(scope_pool_set_keep_alive(pool, 20 * MS), 0);
	assert_int_equal(scope_pool_set_core_timeout(pool, true), 0);
	int64_t give_up = scope_now() + 10 * SEC;
	while (scope_pool_stats(pool, &st) == 0 && st.size > 0 && scope_now() < give_up)
		scope_sleep(5 * MS);
	assert_int_equal(st.size, 0);
	assert_int_equal(scope_pool_set_core_timeout(NULL, true), -EINVAL);
	assert_int_equal(scope_pool_prestart_core(NULL), -EINVAL);
	assert_int_equal(scope_pool_destroy(pool), 0);
	test_watchdog(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(states_and_await_termination),
	    cmocka_unit_test(setters_and_prestart),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
