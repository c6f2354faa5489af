/* test_scope.c - libscope's core: open, fork, join, close, every joiner, and
 * every structure rule with the violation it reports. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "event.h"
#include "scope.h"
#include "test_util.h"

#define SEC 1000000000LL
#define MS 1000000LL

/* Violations the observer saw, by kind. */
static _Atomic int violations[8];
static _Atomic uint64_t last_violation_scope;

static void observer(const struct sc_ev *ev)
{
	if (ev->kind == SC_EV_VIOLATION && ev->u < 8) {
		atomic_fetch_add(&violations[ev->u], 1);
		atomic_store(&last_violation_scope, ev->a);
	}
}

static int setup(void **state)
{
	(void)state;
	test_watchdog(5); /* a broken cancel fails here, not after its 10-30 s sleeps */
	for (int i = 0; i < 8; i++)
		atomic_store(&violations[i], 0);
	sc_observer_set(observer);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	test_watchdog(0);
	sc_observer_set(NULL);
	return 0;
}

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

/* Sleeps arg nanoseconds (cancellable), then succeeds with arg. */
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
		assert_int_equal(scope_task_error(t[i]), 0);
		assert_true(scope_task_id(t[i]) != 0);
	}
	assert_null(scope_task_at(s, 8));
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
	assert_string_equal(scope_name(s), "one-fails");
	for (int i = 0; i < 3; i++)
		assert_int_equal(scope_fork(s, sleep_then, (void *)(intptr_t)(10 * SEC), &slow[i]),
				 0);
	assert_int_equal(scope_fork(s, fail_with, (void *)(intptr_t)-EIO, &bad), 0);
	assert_int_equal(scope_join(s), SCOPE_EFAILED);
	assert_ptr_equal(scope_failure(s), bad);
	assert_int_equal(scope_task_error(bad), -EIO);
	assert_int_equal(scope_task_state(bad), SCOPE_TASK_FAILED);
	for (int i = 0; i < 3; i++)
		assert_int_not_equal(scope_task_state(slow[i]), SCOPE_TASK_SUCCESS);
	assert_int_equal(scope_close(s), 0);
	/* The sleepers were cancelled, not waited out. */
	assert_true(scope_now() - t0 < 5 * SEC);
}

static void any_successful_first_success_wins(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	scope_task_t *slow, *fast, *bad;
	int64_t t0 = scope_now();
	(void)state;

	cfg.joiner = SCOPE_JOIN_ANY_SUCCESSFUL;
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(scope_fork(s, fail_with, (void *)(intptr_t)-EIO, &bad), 0);
	assert_int_equal(scope_fork(s, sleep_then, (void *)(intptr_t)(10 * SEC), &slow), 0);
	assert_int_equal(scope_fork(s, sleep_then, (void *)(intptr_t)(1 * MS), &fast), 0);
	assert_int_equal(scope_join(s), 0);
	assert_ptr_equal(scope_winner(s), fast);
	assert_ptr_equal(scope_task_result(fast), (void *)(intptr_t)(1 * MS));
	assert_int_equal(scope_task_state(slow), SCOPE_TASK_UNAVAILABLE);
	assert_int_equal(scope_close(s), 0);
	assert_true(scope_now() - t0 < 5 * SEC);
}

static void any_successful_all_fail(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	(void)state;

	cfg.joiner = SCOPE_JOIN_ANY_SUCCESSFUL;
	assert_int_equal(scope_open(&s, &cfg), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(scope_fork(s, fail_with, (void *)(intptr_t) - (EIO + i), NULL), 0);
	assert_int_equal(scope_join(s), SCOPE_EFAILED);
	assert_null(scope_winner(s));
	assert_non_null(scope_failure(s));
	assert_int_equal(scope_task_state(scope_failure(s)), SCOPE_TASK_FAILED);
	assert_int_equal(scope_close(s), 0);
}

static void any_successful_no_forks(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	(void)state;

	cfg.joiner = SCOPE_JOIN_ANY_SUCCESSFUL;
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(scope_join(s), SCOPE_ENOFORKS);
	assert_int_equal(scope_close(s), 0);
}

/* Every fork refused (a shut-down pool): no winner, no failure, and join
 * says so with its own code rather than SCOPE_EFAILED. */
static void any_successful_every_fork_refused(void **state)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_pool_t *pool;
	scope_task_t *t;
	scope_t *s;
	(void)state;

	assert_int_equal(scope_pool_create(&pool, &pc), 0);
	assert_int_equal(scope_pool_shutdown(pool), 0);
	cfg.joiner = SCOPE_JOIN_ANY_SUCCESSFUL;
	cfg.pool = pool;
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(scope_fork(s, ret_arg, NULL, &t), SCOPE_ESHUTDOWN);
	assert_int_equal(scope_fork(s, ret_arg, NULL, NULL), SCOPE_ESHUTDOWN);
	assert_int_equal(scope_join(s), SCOPE_ENOFORKS);
	assert_null(scope_failure(s));
	assert_null(scope_winner(s));
	assert_int_equal(scope_task_state(t), SCOPE_TASK_FAILED);
	assert_int_equal(scope_task_error(t), SCOPE_ESHUTDOWN);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(scope_pool_destroy(pool), 0);
}

static void await_all_mixed_results(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	scope_task_t *t[6];
	(void)state;

	cfg.joiner = SCOPE_JOIN_AWAIT_ALL;
	assert_int_equal(scope_open(&s, &cfg), 0);
	for (intptr_t i = 0; i < 6; i++) {
		if (i % 2)
			assert_int_equal(scope_fork(s, fail_with, (void *)(-EIO - i), &t[i]), 0);
		else
			assert_int_equal(scope_fork(s, sleep_then, (void *)(i * MS), &t[i]), 0);
	}
	assert_int_equal(scope_join(s), 0);
	for (intptr_t i = 0; i < 6; i++) {
		if (i % 2) {
			assert_int_equal(scope_task_state(t[i]), SCOPE_TASK_FAILED);
			assert_int_equal(scope_task_error(t[i]), -EIO - i);
		} else {
			/* Never cancelled: every sleeper ran to its end. */
			assert_int_equal(scope_task_state(t[i]), SCOPE_TASK_SUCCESS);
			assert_ptr_equal(scope_task_result(t[i]), (void *)(i * MS));
		}
	}
	/* The first to fail in time, which may be any of the failing ones. */
	scope_task_t *f = scope_failure(s);
	assert_true(f == t[1] || f == t[3] || f == t[5]);
	assert_int_equal(scope_close(s), 0);
}

static _Atomic int until_seen;

static bool until_two_successes(void *ctx, scope_task_t *done)
{
	assert_ptr_equal(ctx, &until_seen);
	if (scope_task_state(done) != SCOPE_TASK_SUCCESS)
		return false;
	return atomic_fetch_add(&until_seen, 1) + 1 == 2;
}

static void until_predicate_stops(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	scope_task_t *slow;
	int64_t t0 = scope_now();
	(void)state;

	atomic_store(&until_seen, 0);
	cfg.joiner = SCOPE_JOIN_UNTIL;
	cfg.until = until_two_successes;
	cfg.until_ctx = &until_seen;
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(scope_fork(s, sleep_then, (void *)(intptr_t)(10 * SEC), &slow), 0);
	assert_int_equal(scope_fork(s, ret_arg, NULL, NULL), 0);
	assert_int_equal(scope_fork(s, fail_with, (void *)(intptr_t)-EIO, NULL), 0);
	assert_int_equal(scope_fork(s, ret_arg, NULL, NULL), 0);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(atomic_load(&until_seen), 2);
	assert_int_not_equal(scope_task_state(slow), SCOPE_TASK_SUCCESS);
	assert_int_equal(scope_close(s), 0);
	assert_true(scope_now() - t0 < 5 * SEC);
}

struct custom_ctx {
	_Atomic int forks, completes, results;
	scope_t *scope;
};

static int custom_on_fork(void *ctx, scope_task_t *task)
{
	struct custom_ctx *c = ctx;
	(void)task;
	/* The fourth fork is refused. */
	return atomic_fetch_add(&c->forks, 1) == 3 ? -ENOSPC : 0;
}

static bool custom_on_complete(void *ctx, scope_task_t *task)
{
	struct custom_ctx *c = ctx;
	(void)task;
	atomic_fetch_add(&c->completes, 1);
	return false;
}

static int custom_result(void *ctx, scope_t *scope)
{
	struct custom_ctx *c = ctx;
	atomic_fetch_add(&c->results, 1);
	c->scope = scope;
	return 42 + atomic_load(&c->completes);
}

static void custom_joiner_callbacks(void **state)
{
	struct custom_ctx c = {0};
	const struct scope_joiner_ops ops = {custom_on_fork, custom_on_complete, custom_result, &c};
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_task_t *refused;
	scope_t *s;
	(void)state;

	cfg.joiner = SCOPE_JOIN_CUSTOM;
	cfg.ops = &ops;
	assert_int_equal(scope_open(&s, &cfg), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(scope_fork(s, ret_arg, NULL, NULL), 0);
	assert_int_equal(scope_fork(s, ret_arg, NULL, &refused), -ENOSPC);
	assert_int_equal(scope_task_state(refused), SCOPE_TASK_FAILED);
	assert_int_equal(scope_join(s), 45);
	assert_int_equal(atomic_load(&c.forks), 4);
	assert_int_equal(atomic_load(&c.completes), 3);
	assert_int_equal(atomic_load(&c.results), 1);
	assert_ptr_equal(c.scope, s);
	assert_int_equal(scope_close(s), 0);
}

static _Atomic int ended_in_time;

static int quick_counted(void *arg, void **result)
{
	*result = arg;
	atomic_fetch_add(&ended_in_time, 1);
	return 0;
}

/* Partial results on timeout: on_timeout decides what join returns, from
 * the subtasks that completed. */
static int count_successes(void *ctx, scope_t *s)
{
	int n = 0;

	*(int *)ctx += 1;
	for (size_t i = 0; i < scope_task_count(s); i++)
		n += scope_task_state(scope_task_at(s, i)) == SCOPE_TASK_SUCCESS;
	return 1000 + n;
}

static void joiner_on_timeout(void **state)
{
	int calls = 0;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_task_t *t;
	scope_t *s;
	(void)state;

	atomic_store(&ended_in_time, 0);
	cfg.on_timeout = count_successes;
	cfg.on_timeout_ctx = &calls;
	cfg.timeout_ns = 300 * MS;
	assert_int_equal(scope_open(&s, &cfg), 0);
	int64_t deadline = scope_deadline();
	for (int i = 0; i < 2; i++)
		assert_int_equal(scope_fork(s, quick_counted, NULL, &t), 0);
	assert_int_equal(scope_fork(s, sleep_then, (void *)(intptr_t)(30 * SEC), &t), 0);
	while (atomic_load(&ended_in_time) < 2)
		sched_yield();
	bool in_time = scope_now() < deadline;
	int rc = scope_join(s);
	assert_int_equal(calls, 1);
	if (in_time)
		assert_int_equal(rc, 1002); /* the two that ended, not the sleeper */
	else
		assert_true(rc >= 1000 && rc <= 1002);
	assert_int_equal(scope_close(s), 0);

	/* Without on_timeout: -ETIMEDOUT, as before. */
	cfg.on_timeout = NULL;
	cfg.timeout_ns = 0;
	cfg.deadline_ns = scope_now() - 1;
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(scope_join(s), -ETIMEDOUT);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(calls, 1);
}

static void bad_configs_rejected(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s = NULL;
	(void)state;

	cfg.joiner = SCOPE_JOIN_UNTIL; /* without a predicate */
	assert_int_equal(scope_open(&s, &cfg), -EINVAL);
	cfg.joiner = SCOPE_JOIN_CUSTOM; /* without ops */
	assert_int_equal(scope_open(&s, &cfg), -EINVAL);
	cfg.joiner = (scope_joiner_kind_t)99;
	assert_int_equal(scope_open(&s, &cfg), -EINVAL);
	cfg.joiner = SCOPE_JOIN_ALL_SUCCESSFUL;
	cfg.timeout_ns = -1;
	assert_int_equal(scope_open(&s, &cfg), -EINVAL);
	cfg.timeout_ns = 0;
	cfg.deadline_ns = -1;
	assert_int_equal(scope_open(&s, &cfg), -EINVAL);
	cfg.deadline_ns = 0;
	cfg.flags = 0x80u; /* a flag this library does not know */
	assert_int_equal(scope_open(&s, &cfg), -EINVAL);
	cfg.flags = SCOPE_F_NO_INTERRUPT;
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(scope_close(s), 0);
	s = NULL;
	assert_int_equal(scope_sleep(-1), -EINVAL);
	assert_int_equal(scope_sleep_until(-1), -EINVAL);
	assert_int_equal(scope_sleep_until(0), 0); /* in the past: returns at once */
	assert_int_equal(scope_open(NULL, NULL), -EINVAL);
	assert_null(s);
	assert_int_equal(scope_fork(NULL, ret_arg, NULL, NULL), -EINVAL);
	assert_int_equal(scope_join(NULL), -EINVAL);
	assert_int_equal(scope_close(NULL), -EINVAL);
	assert_int_equal(scope_cancel(NULL), -EINVAL);
}

static void fork_after_cancel_is_unavailable(void **state)
{
	scope_t *s;
	scope_task_t *t;
	(void)state;

	assert_int_equal(scope_open(&s, NULL), 0);
	assert_int_equal(scope_cancel(s), 0);
	assert_int_equal(scope_cancel(s), 0); /* idempotent */
	assert_int_equal(scope_fork(s, ret_arg, (void *)1, &t), 0);
	assert_int_equal(scope_task_state(t), SCOPE_TASK_UNAVAILABLE);
	assert_int_equal(scope_join(s), -ECANCELED);
	assert_int_equal(scope_task_state(t), SCOPE_TASK_UNAVAILABLE);
	assert_null(scope_task_result(t));
	assert_int_equal(scope_close(s), 0);
}

struct foreign {
	scope_t *s;
	int fork_rc, join_rc, close_rc, bind_rc;
};

static void *foreign_thread(void *arg)
{
	struct foreign *f = arg;

	f->fork_rc = scope_fork(f->s, ret_arg, NULL, NULL);
	f->join_rc = scope_join(f->s);
	f->close_rc = scope_close(f->s);
	f->bind_rc = scope_value_bind(f->s, "k", "v");
	return NULL;
}

static void non_owner_gets_eperm(void **state)
{
	struct foreign f = {0};
	pthread_t th;
	(void)state;

	assert_int_equal(scope_open(&f.s, NULL), 0);
	assert_int_equal(pthread_create(&th, NULL, foreign_thread, &f), 0);
	pthread_join(th, NULL);
	assert_int_equal(f.fork_rc, -EPERM);
	assert_int_equal(f.join_rc, -EPERM);
	assert_int_equal(f.close_rc, -EPERM);
	assert_int_equal(f.bind_rc, -EPERM);
	assert_int_equal(atomic_load(&violations[SC_VIOL_NOT_OWNER]), 4);
	assert_int_equal(atomic_load(&last_violation_scope), scope_id(f.s));
	/* Nothing was freed or joined by the stranger. */
	assert_int_equal(scope_join(f.s), 0);
	assert_int_equal(scope_close(f.s), 0);
}

static void double_join_and_fork_after_join(void **state)
{
	scope_t *s;
	(void)state;

	assert_int_equal(scope_open(&s, NULL), 0);
	assert_int_equal(scope_fork(s, ret_arg, NULL, NULL), 0);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_join(s), SCOPE_EJOINED);
	assert_int_equal(atomic_load(&violations[SC_VIOL_DOUBLE_JOIN]), 1);
	assert_int_equal(scope_fork(s, ret_arg, NULL, NULL), SCOPE_EJOINED);
	assert_int_equal(atomic_load(&violations[SC_VIOL_FORK_AFTER_JOIN]), 1);
	assert_int_equal(scope_task_count(s), 0); /* only forks with a handle are listed */
	assert_int_equal(scope_close(s), 0);
}

static void close_outer_closes_inner_first(void **state)
{
	scope_t *outer, *mid, *inner, *after;
	scope_task_t *t;
	(void)state;

	assert_int_equal(scope_open(&outer, NULL), 0);
	assert_int_equal(scope_open(&mid, NULL), 0);
	assert_int_equal(scope_open(&inner, NULL), 0);
	assert_int_equal(scope_fork(inner, sleep_then, (void *)(intptr_t)(10 * SEC), &t), 0);
	assert_int_equal(scope_close(outer), SCOPE_ESTRUCTURE);
	assert_int_equal(atomic_load(&violations[SC_VIOL_INNER_OPEN]), 1);
	/* Nothing is left open on this thread: a new scope is a root. */
	assert_int_equal(scope_open(&after, NULL), 0);
	assert_int_equal(scope_deadline(), 0);
	assert_int_equal(scope_close(after), 0);
	assert_int_equal(scope_cancelled(), 0);
}

static void *exit_with_open_scope(void *arg)
{
	scope_t *s;

	if (scope_open(&s, NULL) == 0)
		(void)scope_fork(s, sleep_then, (void *)(intptr_t)(10 * SEC), NULL);
	*(scope_t **)arg = s;
	return NULL; /* without closing */
}

static void thread_exit_closes_scopes(void **state)
{
	scope_t *s = NULL;
	pthread_t th;
	int64_t t0 = scope_now();
	(void)state;

	assert_int_equal(pthread_create(&th, NULL, exit_with_open_scope, &s), 0);
	pthread_join(th, NULL);
	assert_non_null(s);
	assert_int_equal(atomic_load(&violations[SC_VIOL_THREAD_EXIT]), 1);
	/* The sleeping fork was cancelled by the close, not slept out. */
	assert_true(scope_now() - t0 < 5 * SEC);
}

static _Atomic uint64_t leaked_scope;

static int return_with_open_scope(void *arg, void **result)
{
	scope_t *s;
	int rc;
	(void)arg;
	(void)result;

	rc = scope_open(&s, NULL);
	if (rc == 0) {
		atomic_store(&leaked_scope, scope_id(s));
		rc = scope_fork(s, sleep_then, (void *)(intptr_t)(10 * SEC), NULL);
	}
	return rc; /* without closing s */
}

static void task_return_closes_its_scopes(void **state)
{
	scope_t *s;
	int64_t t0 = scope_now();
	(void)state;

	assert_int_equal(scope_open(&s, NULL), 0);
	assert_int_equal(scope_fork(s, return_with_open_scope, NULL, NULL), 0);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(atomic_load(&violations[SC_VIOL_THREAD_EXIT]), 1);
	assert_int_equal(atomic_load(&last_violation_scope), atomic_load(&leaked_scope));
	assert_int_equal(scope_close(s), 0);
	assert_true(scope_now() - t0 < 5 * SEC);
}

static void close_without_join_is_reported(void **state)
{
	scope_t *s;
	(void)state;

	assert_int_equal(scope_open(&s, NULL), 0);
	assert_int_equal(scope_fork(s, sleep_then, (void *)(intptr_t)(10 * SEC), NULL), 0);
	uint64_t id = scope_id(s);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(atomic_load(&violations[SC_VIOL_NO_JOIN]), 1);
	assert_int_equal(atomic_load(&last_violation_scope), id);
	/* No forks, no join: nothing to report. */
	assert_int_equal(scope_open(&s, NULL), 0);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(atomic_load(&violations[SC_VIOL_NO_JOIN]), 1);
}

static int count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static _Atomic int running_bodies;

static int counted_sleep(void *arg, void **result)
{
	int rc;

	atomic_fetch_add(&running_bodies, 1);
	rc = sleep_then(arg, result);
	atomic_fetch_sub(&running_bodies, 1);
	return rc;
}

static void no_thread_alive_after_close(void **state)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_pool_t *pool;
	scope_t *s;
	/* Threads earlier tests joined may still be leaving /proc: count once
	 * the number holds still. */
	int before = count_threads();
	for (int i = 0; i < 100; i++) {
		scope_sleep(10 * MS);
		int again = count_threads();
		if (again == before)
			break;
		before = again;
	}
	(void)state;

	pc.name = "gone";
	pc.core_size = 4;
	pc.max_size = 8;
	assert_int_equal(scope_pool_create(&pool, &pc), 0);
	cfg.pool = pool;
	assert_int_equal(scope_open(&s, &cfg), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(scope_fork(s, counted_sleep, (void *)(intptr_t)(10 * SEC), NULL),
				 0);
	while (atomic_load(&running_bodies) < 4)
		scope_sleep(MS);
	assert_true(count_threads() >= before + 4);
	assert_int_equal(scope_pool_destroy(pool), -EBUSY);
	assert_int_equal(scope_close(s), 0);
	/* Close waited: no body of the scope still runs. */
	assert_int_equal(atomic_load(&running_bodies), 0);
	assert_int_equal(scope_pool_destroy(pool), 0);
	/* pthread_join returns when the kernel clears the thread's tid, a
	 * moment before its /proc/self/task entry goes: allow that moment
	 * (bounded), never a thread that stays. */
	int now = count_threads();
	for (int i = 0; i < 200 && now != before; i++) {
		scope_sleep(5 * MS);
		now = count_threads();
	}
	assert_int_equal(now, before);
}

static void strerror_covers_codes(void **state)
{
	static const int codes[] = {SCOPE_EFAILED,    SCOPE_ENOFORKS,	SCOPE_EREJECTED,
				    SCOPE_EDISCARDED, SCOPE_ESTRUCTURE, SCOPE_EJOINED,
				    SCOPE_ESHUTDOWN,  SCOPE_EEXITED};
	(void)state;

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		const char *m = scope_strerror(codes[i]);
		assert_non_null(m);
		assert_string_not_equal(m, "unknown error");
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(m, scope_strerror(codes[j]));
	}
	assert_string_equal(scope_strerror(-ENOENT), "No such file or directory");
	assert_string_equal(scope_strerror(-SCOPE_EBASE - 99), "unknown error");
	assert_string_equal(scope_strerror(12345), "unknown error");
	/* The extremes, once undefined behaviour (UBSan aborts on it). */
	assert_string_equal(scope_strerror(INT_MAX), "unknown error");
	assert_string_equal(scope_strerror(INT_MIN), "unknown error");
	assert_string_equal(scope_strerror(-SCOPE_EBASE), "unknown error");
	assert_string_equal(scope_version(), SCOPE_VERSION_STRING);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(all_successful_results_in_fork_order, setup, teardown),
	    cmocka_unit_test_setup_teardown(all_successful_one_failure_cancels_others, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(any_successful_first_success_wins, setup, teardown),
	    cmocka_unit_test_setup_teardown(any_successful_all_fail, setup, teardown),
	    cmocka_unit_test_setup_teardown(any_successful_no_forks, setup, teardown),
	    cmocka_unit_test_setup_teardown(any_successful_every_fork_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(await_all_mixed_results, setup, teardown),
	    cmocka_unit_test_setup_teardown(until_predicate_stops, setup, teardown),
	    cmocka_unit_test_setup_teardown(custom_joiner_callbacks, setup, teardown),
	    cmocka_unit_test_setup_teardown(joiner_on_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(bad_configs_rejected, setup, teardown),
	    cmocka_unit_test_setup_teardown(fork_after_cancel_is_unavailable, setup, teardown),
	    cmocka_unit_test_setup_teardown(non_owner_gets_eperm, setup, teardown),
	    cmocka_unit_test_setup_teardown(double_join_and_fork_after_join, setup, teardown),
	    cmocka_unit_test_setup_teardown(close_outer_closes_inner_first, setup, teardown),
	    cmocka_unit_test_setup_teardown(thread_exit_closes_scopes, setup, teardown),
	    cmocka_unit_test_setup_teardown(task_return_closes_its_scopes, setup, teardown),
	    cmocka_unit_test_setup_teardown(close_without_join_is_reported, setup, teardown),
	    cmocka_unit_test_setup_teardown(no_thread_alive_after_close, setup, teardown),
	    cmocka_unit_test(strerror_covers_codes),
	};

	/* The reporting agent starts in a constructor; these tests install
	 * their own observer and count threads, so they run without it. */
	test_without_agent(argv);
	(void)argc;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
