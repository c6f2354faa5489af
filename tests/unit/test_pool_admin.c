/* test_pool_admin.c - managing a pool after creating it, as
 * ThreadPoolExecutor allows: shutdown and termination states, waiting for
 * termination, setters, prestarting a core thread, the submitted count. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
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

static _Atomic int reader_tid, read_errno = 99;

static int blocking_read(void *arg, void **result)
{
	char c;
	(void)result;

	atomic_store(&reader_tid, (int)syscall(SYS_gettid));
	ssize_t n = read((int)(intptr_t)arg, &c, 1);
	atomic_store(&read_errno, n < 0 ? errno : 0);
	return n < 0 ? -errno : 0;
}

/* Until the reader sleeps in the kernel (state S), so the interrupt cannot
 * come before its read() does. */
static void wait_reader_blocked(void)
{
	char path[64], buf[256];

	while (!atomic_load(&reader_tid))
		scope_sleep(MS / 4);
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", atomic_load(&reader_tid));
	for (;;) {
		FILE *f = fopen(path, "r");
		char *p = NULL;

		if (f) {
			if (fgets(buf, sizeof(buf), f))
				p = strrchr(buf, ')');
			fclose(f);
		}
		if (p && p[1] == ' ' && p[2] == 'S')
			return;
		scope_sleep(MS / 2);
	}
}

/* shutdown_now: the queued subtasks end cancelled (their scope's join sees
 * them end), the running one is interrupted as Thread.interrupt does. */
static void shutdown_now_takes_queued_and_interrupts(void **state)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_task_t *q[3];
	scope_pool_t *pool;
	scope_t *s;
	int p[2];
	(void)state;

	test_watchdog(20);
	assert_int_equal(pipe(p), 0);
	atomic_store(&reader_tid, 0);
	pc.core_size = pc.max_size = 1;
	assert_int_equal(scope_pool_create(&pool, &pc), 0);
	cfg.pool = pool;
	cfg.joiner = SCOPE_JOIN_AWAIT_ALL;
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(scope_fork(s, blocking_read, (void *)(intptr_t)p[0], NULL), 0);
	wait_reader_blocked();
	for (int i = 0; i < 3; i++)
		assert_int_equal(scope_fork(s, nothing, NULL, &q[i]), 0);
	assert_int_equal(scope_pool_shutdown_now(pool), 3);
	assert_true(scope_pool_is_shutdown(pool));
	assert_int_equal(scope_join(s), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(scope_task_state(q[i]), SCOPE_TASK_UNAVAILABLE);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(atomic_load(&read_errno), EINTR);
	assert_int_equal(scope_pool_await_termination(pool, 10 * SEC), 0);
	assert_int_equal(scope_pool_shutdown_now(scope_pool_default()), -EBUSY);
	assert_int_equal(scope_pool_shutdown_now(NULL), -EINVAL);
	assert_int_equal(scope_pool_destroy(pool), 0);
	close(p[0]);
	close(p[1]);
	test_watchdog(0);
}

static _Atomic int waiting, stop_rc[4];
static int stop_pipe[2];

static int long_wait(void *arg, void **result)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	int kind = (int)(intptr_t)arg, rc;
	scope_t *s;

	(void)result;
	atomic_fetch_add(&waiting, 1);
	switch (kind) {
	case 0: /* a sleep */
		rc = scope_sleep(60 * SEC);
		break;
	case 1: /* an fd that never becomes readable */
		rc = scope_wait_fd(stop_pipe[0], POLLIN, 0);
		break;
	case 2: /* a join of a subtask (on the default pool) that sleeps */
		rc = scope_open(&s, &cfg);
		if (rc)
			break;
		(void)scope_fork(s, hold, NULL, NULL);
		rc = scope_join(s);
		(void)scope_close(s);
		break;
	default: /* busy, asking now and then, as CPU-bound code does */
		while ((rc = scope_cancelled()) == 0)
			sched_yield();
		break;
	}
	atomic_store(&stop_rc[kind], rc);
	return rc;
}

/* shutdown_now cancels the scopes of the subtasks running on the pool
 * (reason "shutdown"): one in a runtime wait (sleep, fd wait, join)
 * returns -ECANCELED at once, one that computes sees scope_cancelled()
 * say so.  The watchdog (far below the 60 s waits) is what fails a wait
 * that is not ended. */
static void shutdown_now_cancels_running(void **state)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_cancel_reason_t cause;
	scope_pool_t *pool;
	scope_t *s;
	(void)state;

	test_watchdog(20);
	atomic_store(&release, 0);
	atomic_store(&waiting, 0);
	assert_int_equal(pipe(stop_pipe), 0);
	pc.core_size = pc.max_size = 4;
	assert_int_equal(scope_pool_create(&pool, &pc), 0);
	cfg.pool = pool;
	cfg.joiner = SCOPE_JOIN_AWAIT_ALL;
	assert_int_equal(scope_open(&s, &cfg), 0);
	for (int k = 0; k < 4; k++) {
		atomic_store(&stop_rc[k], 1);
		assert_int_equal(scope_fork(s, long_wait, (void *)(intptr_t)k, NULL), 0);
	}
	while (atomic_load(&waiting) < 4)
		usleep(200);
	assert_int_equal(scope_pool_shutdown_now(pool), 0);
	assert_int_equal(scope_join(s), -ECANCELED);
	assert_int_equal(scope_cancel_reason(s, &cause), SCOPE_CANCEL_SHUTDOWN);
	assert_int_equal(cause, SCOPE_CANCEL_SHUTDOWN);
	assert_string_equal(scope_cancel_reason_name(SCOPE_CANCEL_SHUTDOWN), "shutdown");
	/* Close waits for every subtask: each has returned by then. */
	assert_int_equal(scope_close(s), 0);
	for (int k = 0; k < 4; k++)
		assert_int_equal(atomic_load(&stop_rc[k]), -ECANCELED);
	assert_int_equal(scope_pool_await_termination(pool, 10 * SEC), 0);
	assert_int_equal(scope_pool_destroy(pool), 0);
	close(stop_pipe[0]);
	close(stop_pipe[1]);
	test_watchdog(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(states_and_await_termination),
	    cmocka_unit_test(setters_and_prestart),
	    cmocka_unit_test(shutdown_now_takes_queued_and_interrupts),
	    cmocka_unit_test(shutdown_now_cancels_running),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
