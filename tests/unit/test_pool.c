/* test_pool.c - thread pools: every saturation policy, queue kinds, hooks,
 * statistics, sizing, keep-alive, thread names, and the nested-join case
 * that must not starve a bounded pool. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "scope.h"
#include "test_util.h"

#define SEC 1000000000LL
#define MS 1000000LL

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

static _Atomic int runner_tid;

static int record_tid(void *arg, void **result)
{
	*result = arg;
	atomic_store(&runner_tid, (int)syscall(SYS_gettid));
	return 0;
}

/* A scope on pool with joiner, owned by this thread. */
static scope_t *open_on(scope_pool_t *pool, scope_joiner_kind_t joiner)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;

	cfg.pool = pool;
	cfg.joiner = joiner;
	assert_int_equal(scope_open(&s, &cfg), 0);
	return s;
}

static void close_and_destroy(scope_t *s, scope_pool_t *pool)
{
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(scope_pool_destroy(pool), 0);
}

/* A pool of one thread and one queue slot, saturated by two gated forks:
 * the third fork meets the policy. */
static scope_pool_t *saturated(scope_policy_t policy, scope_t **s, scope_task_t *t[2])
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	scope_pool_t *pool;

	atomic_store(&gate, 0);
	pc.name = "sat";
	pc.core_size = 1;
	pc.max_size = 1;
	pc.queue = SCOPE_QUEUE_BOUNDED;
	pc.queue_capacity = 1;
	pc.policy = policy;
	assert_int_equal(scope_pool_create(&pool, &pc), 0);
	*s = open_on(pool, SCOPE_JOIN_AWAIT_ALL);
	assert_int_equal(scope_fork(*s, gated, (void *)1, &t[0]), 0);
	assert_int_equal(scope_fork(*s, gated, (void *)2, &t[1]), 0);
	return pool;
}

static void finish(scope_pool_t *pool, scope_t *s)
{
	atomic_store(&gate, 1);
	assert_int_equal(scope_join(s), 0);
	close_and_destroy(s, pool);
}

/* A pool of one core thread that grows to three by direct hand-off (its
 * keep-alive the default when keep_alive_ns is 0), and a scope on it whose
 * three gated tasks hold all three threads. */
static scope_t *three_on_direct(int64_t keep_alive_ns, scope_pool_t **pool)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;

	atomic_store(&gate, 0);
	pc.core_size = 1;
	pc.max_size = 3;
	pc.queue = SCOPE_QUEUE_DIRECT;
	if (keep_alive_ns)
		pc.keep_alive_ns = keep_alive_ns;
	assert_int_equal(scope_pool_create(pool, &pc), 0);
	scope_t *s = open_on(*pool, SCOPE_JOIN_ALL_SUCCESSFUL);
	for (int i = 0; i < 3; i++)
		assert_int_equal(scope_fork(s, gated, NULL, NULL), 0);
	return s;
}

static void policy_abort(void **state)
{
	struct scope_pool_stats st;
	scope_task_t *t[2], *third;
	scope_t *s;
	scope_pool_t *pool = saturated(SCOPE_POLICY_ABORT, &s, t);
	(void)state;

	assert_int_equal(scope_fork(s, gated, (void *)3, &third), SCOPE_EREJECTED);
	assert_int_equal(scope_task_state(third), SCOPE_TASK_FAILED);
	assert_int_equal(scope_task_error(third), SCOPE_EREJECTED);
	assert_int_equal(scope_pool_stats(pool, &st), 0);
	assert_int_equal(st.rejected, 1);
	assert_int_equal(st.queued, 1);
	assert_int_equal(st.size, 1);
	finish(pool, s);
}

static void policy_caller_runs(void **state)
{
	scope_task_t *t[2], *third;
	scope_t *s;
	scope_pool_t *pool = saturated(SCOPE_POLICY_CALLER_RUNS, &s, t);
	(void)state;

	atomic_store(&runner_tid, 0);
	assert_int_equal(scope_fork(s, record_tid, (void *)3, &third), 0);
	/* Ran to completion on this very thread, inside the fork call. */
	assert_int_equal(atomic_load(&runner_tid), (int)syscall(SYS_gettid));
	assert_int_equal(scope_task_state(third), SCOPE_TASK_SUCCESS);
	assert_ptr_equal(scope_task_result(third), (void *)3);
	finish(pool, s);
}

static void policy_discard(void **state)
{
	scope_task_t *t[2], *third;
	scope_t *s;
	scope_pool_t *pool = saturated(SCOPE_POLICY_DISCARD, &s, t);
	(void)state;

	assert_int_equal(scope_fork(s, gated, (void *)3, &third), 0);
	atomic_store(&gate, 1);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_task_state(third), SCOPE_TASK_FAILED);
	assert_int_equal(scope_task_error(third), SCOPE_EDISCARDED);
	assert_int_equal(scope_task_state(t[0]), SCOPE_TASK_SUCCESS);
	assert_int_equal(scope_task_state(t[1]), SCOPE_TASK_SUCCESS);
	close_and_destroy(s, pool);
}

static void policy_discard_oldest(void **state)
{
	scope_task_t *t[2], *third;
	scope_t *s;
	scope_pool_t *pool = saturated(SCOPE_POLICY_DISCARD_OLDEST, &s, t);
	(void)state;

	assert_int_equal(scope_fork(s, gated, (void *)3, &third), 0);
	atomic_store(&gate, 1);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_task_state(t[0]), SCOPE_TASK_SUCCESS);
	assert_int_equal(scope_task_state(t[1]), SCOPE_TASK_FAILED); /* the oldest queued */
	assert_int_equal(scope_task_error(t[1]), SCOPE_EDISCARDED);
	assert_int_equal(scope_task_state(third), SCOPE_TASK_SUCCESS);
	close_and_destroy(s, pool);
}

static void *open_gate_later(void *arg)
{
	(void)arg;
	scope_sleep(20 * MS);
	atomic_store(&gate, 1);
	return NULL;
}

static void policy_block_waits_for_room(void **state)
{
	scope_task_t *t[2], *third;
	scope_t *s;
	pthread_t th;
	scope_pool_t *pool = saturated(SCOPE_POLICY_BLOCK, &s, t);
	(void)state;

	assert_int_equal(pthread_create(&th, NULL, open_gate_later, NULL), 0);
	assert_int_equal(scope_fork(s, gated, (void *)3, &third), 0);
	/* It could only be placed once the gate let a task finish. */
	assert_int_equal(atomic_load(&gate), 1);
	pthread_join(th, NULL);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_task_state(third), SCOPE_TASK_SUCCESS);
	close_and_destroy(s, pool);
}

static void *cancel_later(void *arg)
{
	scope_sleep(20 * MS);
	scope_cancel(arg);
	return NULL;
}

static void policy_block_is_cancellable(void **state)
{
	scope_task_t *t[2], *third;
	scope_t *s;
	pthread_t th;
	scope_pool_t *pool = saturated(SCOPE_POLICY_BLOCK, &s, t);
	(void)state;

	assert_int_equal(pthread_create(&th, NULL, cancel_later, s), 0);
	assert_int_equal(scope_fork(s, gated, (void *)3, &third), -ECANCELED);
	assert_int_equal(scope_task_state(third), SCOPE_TASK_UNAVAILABLE);
	pthread_join(th, NULL);
	assert_int_equal(scope_join(s), -ECANCELED);
	close_and_destroy(s, pool);
}

static void direct_handoff_grows_then_rejects(void **state)
{
	struct scope_pool_stats st;
	scope_pool_t *pool;
	scope_t *s = three_on_direct(0, &pool);
	(void)state;

	assert_string_equal(scope_pool_name(pool), "pool");
	assert_int_equal(scope_fork(s, gated, NULL, NULL), SCOPE_EREJECTED);
	assert_int_equal(scope_pool_stats(pool, &st), 0);
	assert_int_equal(st.size, 3);
	assert_int_equal(st.largest, 3);
	assert_int_equal(st.queued, 0);
	finish(pool, s);
}

struct hooks_seen {
	_Atomic int factory, before, after, terminated, after_errors;
};

static int count_factory(void *ctx, pthread_t *th, void *(*start)(void *), void *arg)
{
	struct hooks_seen *h = ctx;
	atomic_fetch_add(&h->factory, 1);
	return -pthread_create(th, NULL, start, arg);
}

static void count_before(void *ctx, scope_task_t *task)
{
	struct hooks_seen *h = ctx;
	assert_non_null(task);
	atomic_fetch_add(&h->before, 1);
}

static void count_after(void *ctx, scope_task_t *task, int error)
{
	struct hooks_seen *h = ctx;
	(void)task;
	atomic_fetch_add(&h->after, 1);
	if (error)
		atomic_fetch_add(&h->after_errors, 1);
}

static void count_terminated(void *ctx, scope_pool_t *pool)
{
	struct hooks_seen *h = ctx;
	assert_non_null(pool);
	atomic_fetch_add(&h->terminated, 1);
}

static int maybe_fail(void *arg, void **result)
{
	(void)result;
	return (int)(intptr_t)arg;
}

static void hooks_and_statistics(void **state)
{
	struct hooks_seen h = {0};
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	struct scope_pool_stats st;
	scope_pool_t *pool;
	scope_t *s;
	(void)state;

	pc.name = "hooked";
	pc.core_size = 2;
	pc.max_size = 4;
	pc.prestart = true;
	pc.hooks = (struct scope_pool_hooks){count_factory, count_before, count_after,
					     count_terminated, &h};
	assert_int_equal(scope_pool_create(&pool, &pc), 0);
	assert_int_equal(scope_pool_stats(pool, &st), 0);
	assert_int_equal(st.size, 2); /* prestarted */
	assert_int_equal(st.core_size, 2);
	assert_int_equal(st.max_size, 4);
	assert_int_equal(atomic_load(&h.factory), 2);
	s = open_on(pool, SCOPE_JOIN_AWAIT_ALL);
	for (intptr_t i = 0; i < 10; i++)
		assert_int_equal(
		    scope_fork(s, maybe_fail, (void *)(intptr_t)(i < 3 ? -EIO : 0), NULL), 0);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(atomic_load(&h.before), 10);
	assert_int_equal(atomic_load(&h.after), 10);
	assert_int_equal(atomic_load(&h.after_errors), 3);
	assert_int_equal(scope_pool_stats(pool, &st), 0);
	assert_int_equal(st.completed, 10);
	assert_int_equal(st.active, 0);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.rejected, 0);
	assert_true(st.largest >= 2 && st.largest <= 4);
	assert_int_equal(atomic_load(&h.terminated), 0);
	assert_int_equal(scope_pool_shutdown(pool), 0);
	assert_int_equal(scope_pool_shutdown(pool), 0); /* idempotent */
	s = open_on(pool, SCOPE_JOIN_AWAIT_ALL);
	assert_int_equal(scope_fork(s, maybe_fail, NULL, NULL), SCOPE_ESHUTDOWN);
	close_and_destroy(s, pool);
	assert_int_equal(atomic_load(&h.terminated), 1);
}

static int failing_factory(void *ctx, pthread_t *th, void *(*start)(void *), void *arg)
{
	(void)ctx;
	(void)th;
	(void)start;
	(void)arg;
	return -EAGAIN;
}

static void factory_error_reported(void **state)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	scope_pool_t *pool = NULL;
	(void)state;

	pc.prestart = true;
	pc.hooks.thread_factory = failing_factory;
	assert_int_equal(scope_pool_create(&pool, &pc), -EAGAIN);
	assert_null(pool);
	pc.queue = (scope_queue_kind_t)7;
	assert_int_equal(scope_pool_create(&pool, &pc), -EINVAL);
	pc.queue = SCOPE_QUEUE_UNBOUNDED;
	pc.hooks.thread_factory = NULL;
	pc.core_size = 1000000; /* a mistake, not a pool */
	assert_int_equal(scope_pool_create(&pool, &pc), -EINVAL);
	pc.core_size = 1;
	pc.prestart = false;
	assert_int_equal(scope_pool_create(&pool, &pc), 0);
	assert_int_equal(scope_pool_set_size(pool, 1, 1000000), -EINVAL);
	assert_int_equal(scope_pool_destroy(pool), 0);
	assert_int_equal(scope_pool_destroy(scope_pool_default()), -EBUSY);
	/* Nor may anyone stop the shared pool for everyone else. */
	assert_int_equal(scope_pool_shutdown(scope_pool_default()), -EBUSY);
	scope_t *s = open_on(scope_pool_default(), SCOPE_JOIN_ALL_SUCCESSFUL);
	assert_int_equal(scope_fork(s, maybe_fail, NULL, NULL), 0);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_close(s), 0);
}

static char seen_name[32];

static int read_comm(void *arg, void **result)
{
	char path[64];
	FILE *f;
	(void)arg;
	(void)result;

	snprintf(path, sizeof(path), "/proc/self/task/%ld/comm", (long)syscall(SYS_gettid));
	f = fopen(path, "r");
	if (!f)
		return -errno;
	if (!fgets(seen_name, sizeof(seen_name), f))
		seen_name[0] = '\0';
	fclose(f);
	seen_name[strcspn(seen_name, "\n")] = '\0';
	return 0;
}

static void run_on(scope_pool_t *pool, scope_fn fn)
{
	scope_t *s = open_on(pool, SCOPE_JOIN_ALL_SUCCESSFUL);

	assert_int_equal(scope_fork(s, fn, NULL, NULL), 0);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_close(s), 0);
}

static void thread_names(void **state)
{
	static const struct {
		const char *pool, *worker;
	} cases[] = {
	    {"px", "px-1"},
	    {"averyveryverylongpoolname", "averyveryvery-1"}, /* the number survives */
	};
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	scope_pool_t *pool;
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pc.name = cases[i].pool;
		assert_int_equal(scope_pool_create(&pool, &pc), 0);
		run_on(pool, read_comm);
		assert_string_equal(seen_name, cases[i].worker);
		assert_int_equal(scope_pool_destroy(pool), 0);
	}
	assert_int_equal(scope_thread_name("renamed-main-thread"), 0);
	assert_int_equal(scope_thread_name(NULL), -EINVAL);
	seen_name[0] = '\0';
	assert_int_equal(read_comm(NULL, NULL), 0);
	assert_string_equal(seen_name, "renamed-main-th");
}

/* Opens a scope on the same pool at each level, forks `width` children of
 * the next level and joins: on a pool of one or two threads this only
 * finishes if joining workers run the queued subtasks themselves. */
struct nest {
	scope_pool_t *pool;
	int depth, width;
};

static _Atomic int leaves;

static int nested(void *arg, void **result)
{
	struct nest *n = arg, child;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	int rc;
	(void)result;

	if (n->depth == 0) {
		atomic_fetch_add(&leaves, 1);
		return 0;
	}
	child = *n;
	child.depth--;
	cfg.pool = n->pool;
	rc = scope_open(&s, &cfg);
	if (rc)
		return rc;
	for (int i = 0; i < n->width && rc == 0; i++)
		rc = scope_fork(s, nested, &child, NULL);
	if (rc == 0)
		rc = scope_join(s);
	scope_close(s);
	return rc;
}

static void nested_join_does_not_starve(void **state)
{
	static const struct {
		unsigned size;
		scope_queue_kind_t queue;
		int depth, width;
	} cases[] = {
	    {1, SCOPE_QUEUE_UNBOUNDED, 3, 3},
	    {2, SCOPE_QUEUE_BOUNDED, 4, 2},
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
		scope_pool_t *pool;
		int expect = 1;

		pc.core_size = pc.max_size = cases[i].size;
		pc.queue = cases[i].queue;
		pc.queue_capacity = 256;
		assert_int_equal(scope_pool_create(&pool, &pc), 0);
		struct nest top = {pool, cases[i].depth, cases[i].width};
		for (int d = 0; d < top.depth; d++)
			expect *= top.width;
		atomic_store(&leaves, 0);
		assert_int_equal(nested(&top, NULL), 0);
		assert_int_equal(atomic_load(&leaves), expect);
		assert_int_equal(scope_pool_destroy(pool), 0);
	}
}

static void keep_alive_and_resize(void **state)
{
	struct scope_pool_stats st;
	scope_pool_t *pool;
	scope_t *s = three_on_direct(10 * MS, &pool);
	(void)state;

	atomic_store(&gate, 1);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_close(s), 0);
	/* The two non-core threads leave after their keep-alive. */
	for (int i = 0; i < 2000; i++) {
		assert_int_equal(scope_pool_stats(pool, &st), 0);
		if (st.size == 1)
			break;
		scope_sleep(MS);
	}
	assert_int_equal(st.size, 1);
	assert_int_equal(st.largest, 3);
	assert_int_equal(scope_pool_set_size(pool, 2, 5), 0);
	assert_int_equal(scope_pool_stats(pool, &st), 0);
	assert_int_equal(st.core_size, 2);
	assert_int_equal(st.max_size, 5);
	assert_int_equal(scope_pool_set_size(pool, 0, 0), 0); /* 0 means 1 */
	assert_int_equal(scope_pool_stats(pool, &st), 0);
	assert_int_equal(st.core_size, 1);
	assert_int_equal(st.max_size, 1);
	assert_int_equal(scope_pool_destroy(pool), 0);
}

static _Atomic int child_workers;

static int note_worker(void *arg, void **result)
{
	(void)result;
	if ((pid_t)syscall(SYS_gettid) != (pid_t)(intptr_t)arg)
		atomic_fetch_add(&child_workers, 1);
	return scope_sleep(MS); /* so the owner cannot run them all itself */
}

/* A fork child gets pools without the parent's threads and queue, and
 * starts its own workers. */
static void fork_child_gets_fresh_pools(void **state)
{
	struct scope_pool_stats st;
	pid_t pid;
	int status;
	(void)state;

#if defined(__SANITIZE_THREAD__)
	print_message("skipped: ThreadSanitizer does not allow threads after a fork\n");
	skip();
#endif
	run_on(scope_pool_default(), read_comm); /* the parent's workers exist */
	assert_int_equal(scope_pool_stats(scope_pool_default(), &st), 0);
	assert_true(st.size > 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		scope_t *s;
		int rc;

		/* None of the parent's workers came along. */
		if (scope_pool_stats(scope_pool_default(), &st) != 0 || st.size != 0 ||
		    st.queued != 0 || st.active != 0)
			_exit(4);
		rc = scope_open(&s, NULL);
		for (int i = 0; i < 8 && rc == 0; i++)
			rc = scope_fork(s, note_worker, (void *)(intptr_t)getpid(), NULL);
		if (rc == 0)
			rc = scope_join(s);
		if (scope_close(s) != 0 || rc != 0)
			_exit(2);
		_exit(atomic_load(&child_workers) > 0 ? 0 : 3);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void size_for_formula(void **state)
{
	unsigned ncpu = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	(void)state;

	assert_int_equal(scope_pool_size_for(1.0, 0.0), ncpu);
	assert_int_equal(scope_pool_size_for(1.0, 3.0), 4 * ncpu);
	assert_int_equal(scope_pool_size_for(0.5, 1.0), ncpu);
	assert_int_equal(scope_pool_size_for(0.0001, 0.0), 1);
	assert_int_equal(scope_pool_size_for(-1.0, -5.0), ncpu); /* out of range: defaults */
	assert_non_null(scope_pool_default());
	assert_ptr_equal(scope_pool_default(), scope_pool_default());
}

/* The default pool's size in a fresh process whose environment sets
 * SCOPE_POOL_PARALLELISM to value (NULL: unset): this binary again, in its
 * child mode (main). */
static unsigned default_size_with(const char *value)
{
	int fd[2];
	char out[32] = {0};
	ssize_t n;
	int status;
	pid_t pid;

	assert_int_equal(pipe(fd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *argv[] = {"test_pool", NULL};
		dup2(fd[1], 1);
		setenv("TEST_POOL_DEFAULT_SIZE", "1", 1);
		if (value)
			setenv("SCOPE_POOL_PARALLELISM", value, 1);
		else
			unsetenv("SCOPE_POOL_PARALLELISM");
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(fd[1]);
	n = read(fd[0], out, sizeof(out) - 1);
	close(fd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(n > 0);
	return (unsigned)strtoul(out, NULL, 10);
}

static void default_parallelism_from_env(void **state)
{
	/* By default one thread per CPU but one (the forking thread helps in
	 * its joins), at least one. */
	unsigned ncpu = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	ncpu = ncpu > 1 ? ncpu - 1 : 1;
	(void)state;

	assert_int_equal(default_size_with(NULL), ncpu);
	assert_int_equal(default_size_with("3"), 3);
	assert_int_equal(default_size_with("1"), 1);
	/* Not a size: ignored, the default stays. */
	assert_int_equal(default_size_with("0"), ncpu);
	assert_int_equal(default_size_with("-2"), ncpu);
	assert_int_equal(default_size_with("4x"), ncpu);
	assert_int_equal(default_size_with("99999999999999999999"), ncpu);
	assert_int_equal(default_size_with("4097"), ncpu);
}

int main(int argc, char **argv)
{
	/* Child mode of default_parallelism_from_env: the size, then out. */
	if (getenv("TEST_POOL_DEFAULT_SIZE")) {
		struct scope_pool_stats st;
		if (scope_pool_stats(scope_pool_default(), &st))
			return 1;
		printf("%u\n", st.core_size);
		return 0;
	}

	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(policy_abort),
	    cmocka_unit_test(policy_caller_runs),
	    cmocka_unit_test(policy_discard),
	    cmocka_unit_test(policy_discard_oldest),
	    cmocka_unit_test(policy_block_waits_for_room),
	    cmocka_unit_test(policy_block_is_cancellable),
	    cmocka_unit_test(direct_handoff_grows_then_rejects),
	    cmocka_unit_test(hooks_and_statistics),
	    cmocka_unit_test(factory_error_reported),
	    cmocka_unit_test(thread_names),
	    cmocka_unit_test(nested_join_does_not_starve),
	    cmocka_unit_test(keep_alive_and_resize),
	    cmocka_unit_test(fork_child_gets_fresh_pools),
	    cmocka_unit_test(size_for_formula),
	    cmocka_unit_test(default_parallelism_from_env),
	};

	/* Thread counts and names here are the runtime's alone: no agent. */
	test_without_agent(argv);
	(void)argc;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
