/* test_scope.c - libscope's core: open, fork, join, close, the joiners, and
 * the structure rules. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdatomic.h>

#include "scope.h"

static int ret_arg(void *arg, void **result)
{
	*result = arg;
	return 0;
}

static int fail_with(void *arg, void **result)
{
	(void)result;
	return (int)(intptr_t)arg;
}

static int sleep_then(void *arg, void **result)
{
	int rc = scope_sleep((int64_t)(intptr_t)arg);
	*result = arg;
	return rc;
}

static void all_successful_results_in_fork_order(void **state)
{
	scope_t *s;
	scope_task_t *t[8];
	(void)state;

	assert_int_equal(scope_open(&s, NULL), 0);
	for (intptr_t i = 0; i < 8; i++)
		assert_int_equal(scope_fork(s, ret_arg, (void *)(i + 100), &t[i]), 0);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_task_count(s), 8);
	for (intptr_t i = 0; i < 8; i++) {
		assert_ptr_equal(scope_task_at(s, (size_t)i), t[i]);
		assert_int_equal(scope_task_state(t[i]), SCOPE_TASK_SUCCESS);
		assert_ptr_equal(scope_task_result(t[i]), (void *)(i + 100));
	}
	assert_null(scope_failure(s));
	assert_int_equal(scope_close(s), 0);
}

static void all_successful_one_failure_cancels_others(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	scope_task_t *slow[3], *bad;
	int64_t t0 = scope_now();
	(void)state;

	cfg.name = "one-fails";
	assert_int_equal(scope_open(&s, &cfg), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(scope_fork(s, sleep_then, (void *)(intptr_t)10000000000LL, &slow[i]), 0);
	assert_int_equal(scope_fork(s, fail_with, (void *)(intptr_t)-EIO, &bad), 0);
	assert_int_equal(scope_join(s), SCOPE_EFAILED);
	assert_ptr_equal(scope_failure(s), bad);
	assert_int_equal(scope_task_error(bad), -EIO);
	assert_int_equal(scope_task_state(bad), SCOPE_TASK_FAILED);
	assert_int_equal(scope_close(s), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(scope_task_state(slow[i]) == SCOPE_TASK_SUCCESS, 0);
	assert_true(scope_now() - t0 < 5000000000LL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(all_successful_results_in_fork_order),
		cmocka_unit_test(all_successful_one_failure_cancels_others),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
