/* test_sched.c - the scheduler's promises: no deadlock at any queue length,
 * nesting or saturation policy; a subtask run inline is not its scope's
 * owner; join returns when the joiner decides; the default pool stays near
 * the CPU count; queued tasks cost little memory.  Each case runs under a
 * watchdog, so a deadlock fails in seconds. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "pool_int.h"
#include "rt.h"
#include "scope.h"
#include "test_util.h"

#define MS 1000000LL
#define SEC 1000000000LL

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif
/* Seconds a case may take before the watchdog calls it a deadlock. */
#define WATCHDOG (SANITIZED ? 60 : 15)

static const char *running_case = "?";

static void on_alarm(int sig)
{
	static const char msg[] = "test_sched: watchdog: deadlock (no progress) in ";
	(void)sig;
	(void)!write(2, msg, sizeof(msg) - 1);
	(void)!write(2, running_case, strlen(running_case));
	(void)!write(2, "\n", 1);
	_exit(3);
}

static int arm(void **state)
{
	(void)state;
	alarm(WATCHDOG);
	return 0;
}

static int disarm(void **state)
{
	(void)state;
	alarm(0);
	return 0;
}

static scope_pool_t *pool_of(unsigned size, scope_queue_kind_t q, size_t cap, scope_policy_t pol)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	scope_pool_t *pool;

	pc.name = "sched";
	pc.core_size = pc.max_size = size;
	pc.queue = q;
	pc.queue_capacity = cap;
	pc.policy = pol;
	assert_int_equal(scope_pool_create(&pool, &pc), 0);
	return pool;
}

static scope_t *open_on(scope_pool_t *pool, scope_joiner_kind_t joiner)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;

	cfg.pool = pool;
	cfg.joiner = joiner;
	assert_int_equal(scope_open(&s, &cfg), 0);
	return s;
}

static int empty(void *arg, void **result)
{
	*result = arg;
	return 0;
}

/* A subtask that opens a scope of its own, forks one empty subtask into it
 * and joins it; arg is the joiner kind of that inner scope. */
struct inner {
	scope_pool_t *pool;
	scope_joiner_kind_t joiner;
	_Atomic int *ready; /* waited for before forking (NULL: not) */
};

static _Atomic int inner_done;

static int fork_and_join_inner(void *arg, void **result)
{
	struct inner *in = arg;
	scope_t *s;
	int rc;
	(void)result;

	while (in->ready && !atomic_load(in->ready))
		if (scope_sleep(MS / 10))
			return -ECANCELED;
	s = open_on(in->pool, in->joiner);
	rc = scope_fork(s, empty, NULL, NULL);
	if (rc == 0)
		rc = scope_join(s);
	(void)scope_close(s);
	if (rc == 0)
		atomic_fetch_add(&inner_done, 1);
	return rc;
}

/* 1-thread pool: a subtask's nested scope forks B behind 300 queued tasks
 * of an unrelated scope, then joins.  The joiner finds B in its own list. */
static void nested_behind_unrelated_queue(void **state)
{
	static const scope_joiner_kind_t kinds[] = {SCOPE_JOIN_ALL_SUCCESSFUL,
						    SCOPE_JOIN_ANY_SUCCESSFUL};
	(void)state;
	running_case = "nested_behind_unrelated_queue";

	for (size_t k = 0; k < 2; k++) {
		scope_pool_t *pool = pool_of(1, SCOPE_QUEUE_UNBOUNDED, 0, SCOPE_POLICY_ABORT);
		_Atomic int ready = 0;
		struct inner in = {pool, kinds[k], &ready};
		scope_t *s, *u;

		atomic_store(&inner_done, 0);
		s = open_on(pool, SCOPE_JOIN_ALL_SUCCESSFUL);
		assert_int_equal(scope_fork(s, fork_and_join_inner, &in, NULL), 0);
		u = open_on(pool, SCOPE_JOIN_AWAIT_ALL);
		for (int i = 0; i < 300; i++)
			assert_int_equal(scope_fork(u, empty, NULL, NULL), 0);
		atomic_store(&ready, 1);
		assert_int_equal(scope_join(u), 0);
		assert_int_equal(scope_close(u), 0);
		assert_int_equal(scope_join(s), 0);
		assert_int_equal(scope_close(s), 0);
		assert_int_equal(atomic_load(&inner_done), 1);
		assert_int_equal(scope_pool_destroy(pool), 0);
	}
}

/* Many tasks on a small pool, each joining a nested scope: every worker
 * ends up in a join, and the queue is long. */
static void many_nested_joins(void **state)
{
	static const scope_joiner_kind_t kinds[] = {SCOPE_JOIN_ALL_SUCCESSFUL,
						    SCOPE_JOIN_ANY_SUCCESSFUL};
	int n = SANITIZED ? 1000 : 5000;
	(void)state;
	running_case = "many_nested_joins";

	for (size_t k = 0; k < 2; k++) {
		scope_pool_t *pool = pool_of(2, SCOPE_QUEUE_UNBOUNDED, 0, SCOPE_POLICY_ABORT);
		struct inner in = {pool, kinds[k], NULL};
		struct scope_pool_stats st;
		scope_t *s;

		atomic_store(&inner_done, 0);
		s = open_on(pool, SCOPE_JOIN_ALL_SUCCESSFUL);
		for (int i = 0; i < n; i++)
			assert_int_equal(scope_fork(s, fork_and_join_inner, &in, NULL), 0);
		assert_int_equal(scope_join(s), 0);
		assert_int_equal(scope_close(s), 0);
		assert_int_equal(atomic_load(&inner_done), n);
		assert_int_equal(scope_pool_stats(pool, &st), 0);
		assert_int_equal(st.queued, 0);
		assert_int_equal(st.lent, 0);
		assert_int_equal(scope_pool_destroy(pool), 0);
	}
}

/* Recursive fan-out through nested scopes on one pool. */
struct nest {
	scope_pool_t *pool;
	int depth, width;
};

static _Atomic int leaves;

static int nested(void *arg, void **result)
{
	struct nest *n = arg, child;
	scope_t *s;
	int rc = 0;
	(void)result;

	if (n->depth == 0) {
		atomic_fetch_add(&leaves, 1);
		return 0;
	}
	child = *n;
	child.depth--;
	s = open_on(n->pool, SCOPE_JOIN_ALL_SUCCESSFUL);
	for (int i = 0; i < n->width && rc == 0; i++)
		rc = scope_fork(s, nested, &child, NULL);
	if (rc == 0)
		rc = scope_join(s);
	(void)scope_close(s);
	return rc;
}

/* BLOCK with a queue of 2: a worker blocked in fork lends its place, and
 * the pool goes past its maximum to run the queue (and says so). */
/* WARNING events the pool sent: that it went past its maximum. */
static _Atomic uint64_t warn_pool;
static _Atomic unsigned warn_count, warn_size;

static void warn_observer(const struct sc_ev *ev)
{
	if (ev->kind == SC_EV_WARNING && ev->u == SC_WARN_POOL_OVER_MAX &&
	    ev->a == atomic_load(&warn_pool)) {
		atomic_fetch_add(&warn_count, 1);
		atomic_store(&warn_size, (unsigned)ev->i);
	}
}

static void block_policy_nested_fanout(void **state)
{
	(void)state;
	running_case = "block_policy_nested_fanout";

	sc_observer_set(warn_observer);
	for (unsigned size = 1; size <= 2; size++) {
		scope_pool_t *pool = pool_of(size, SCOPE_QUEUE_BOUNDED, 2, SCOPE_POLICY_BLOCK);
		struct nest top = {pool, 4, 3};
		struct scope_pool_stats st;

		atomic_store(&warn_pool, sc_pool_id(pool));
		atomic_store(&warn_count, 0);
		atomic_store(&leaves, 0);
		assert_int_equal(nested(&top, NULL), 0);
		assert_int_equal(atomic_load(&leaves), 81);
		assert_int_equal(scope_pool_stats(pool, &st), 0);
		assert_int_equal(st.lent, 0);
		assert_int_equal(st.queued, 0);
		/* A one-thread pool whose only worker parks in a nested join
		 * goes on only past its maximum, and says so. */
		if (size == 1)
			assert_true(st.largest > st.max_size);
		assert_int_equal(atomic_load(&warn_count) > 0, st.largest > st.max_size);
		if (atomic_load(&warn_count))
			assert_true(atomic_load(&warn_size) > st.max_size);
		assert_int_equal(scope_pool_destroy(pool), 0);
	}
	sc_observer_set(NULL);
}

/* What a subtask running inline on its owner's thread may do to the scope
 * that forked it: nothing an owner may. */
struct probe {
	scope_t *parent;
	_Atomic int tid, fork_rc, bind_rc, join_rc;
};

static _Atomic int gate;

static int gated(void *arg, void **result)
{
	(void)arg;
	(void)result;
	while (!atomic_load(&gate))
		if (scope_sleep(MS / 5))
			return -ECANCELED;
	return 0;
}

static int probe_parent(void *arg, void **result)
{
	struct probe *p = arg;
	(void)result;

	atomic_store(&p->tid, (int)syscall(SYS_gettid));
	atomic_store(&p->fork_rc, scope_fork(p->parent, empty, NULL, NULL));
	atomic_store(&p->bind_rc, scope_value_bind(p->parent, "k", "v"));
	atomic_store(&p->join_rc, scope_join(p->parent));
	atomic_store(&gate, 1);
	return 0;
}

static void check_probe(struct probe *p)
{
	assert_int_equal(atomic_load(&p->tid), (int)syscall(SYS_gettid)); /* inline */
	assert_int_equal(atomic_load(&p->fork_rc), -EPERM);
	assert_int_equal(atomic_load(&p->bind_rc), -EPERM);
	assert_int_equal(atomic_load(&p->join_rc), -EPERM);
}

/* The joiner helping: the only worker is held by a gated task, so the
 * owner's await-all join runs the probe itself. */
static void inline_helped_subtask_is_not_owner(void **state)
{
	scope_pool_t *pool = pool_of(1, SCOPE_QUEUE_UNBOUNDED, 0, SCOPE_POLICY_ABORT);
	struct probe p = {0};
	scope_task_t *t;
	(void)state;
	running_case = "inline_helped_subtask_is_not_owner";

	atomic_store(&gate, 0);
	p.parent = open_on(pool, SCOPE_JOIN_AWAIT_ALL);
	assert_int_equal(scope_fork(p.parent, gated, NULL, NULL), 0);
	/* Until the worker holds the gated task, it could take the probe. */
	scope_sleep(20 * MS);
	assert_int_equal(scope_fork(p.parent, probe_parent, &p, &t), 0);
	assert_int_equal(scope_join(p.parent), 0);
	assert_int_equal(scope_task_state(t), SCOPE_TASK_SUCCESS);
	check_probe(&p);
	/* The owner itself still may: its rights came back with its frame. */
	assert_int_equal(scope_value_bind(p.parent, "k", "v"), SCOPE_EJOINED);
	assert_int_equal(scope_close(p.parent), 0);
	assert_int_equal(scope_pool_destroy(pool), 0);
}

/* Caller-runs: a saturated pool runs the fork inside scope_fork. */
static void caller_runs_subtask_is_not_owner(void **state)
{
	scope_pool_t *pool = pool_of(1, SCOPE_QUEUE_BOUNDED, 1, SCOPE_POLICY_CALLER_RUNS);
	struct probe p = {0};
	(void)state;
	running_case = "caller_runs_subtask_is_not_owner";

	atomic_store(&gate, 0);
	p.parent = open_on(pool, SCOPE_JOIN_AWAIT_ALL);
	assert_int_equal(scope_fork(p.parent, gated, NULL, NULL), 0);
	assert_int_equal(scope_fork(p.parent, gated, NULL, NULL), 0);
	assert_int_equal(scope_fork(p.parent, probe_parent, &p, NULL), 0);
	check_probe(&p);
	assert_int_equal(scope_join(p.parent), 0);
	assert_int_equal(scope_close(p.parent), 0);
	assert_int_equal(scope_pool_destroy(pool), 0);
}

/* Join latency: A decides at 50 ms, B spins 1.2 s without a cancellation
 * point.  On a 1-thread pool the owner must not pick B up. */
static _Atomic int stop_busy;

static int busy(void *arg, void **result)
{
	int64_t end = scope_now() + 1200 * MS;
	(void)arg;
	(void)result;

	while (scope_now() < end && !atomic_load(&stop_busy))
		;
	return 0;
}

static int sleep_ok(void *arg, void **result)
{
	(void)result;
	return scope_sleep((int64_t)(intptr_t)arg);
}

static bool stop_at_first(void *ctx, scope_task_t *done)
{
	(void)ctx;
	(void)done;
	return true;
}

static bool custom_first(void *ctx, scope_task_t *task)
{
	(void)ctx;
	(void)task;
	return true;
}

static const struct scope_joiner_ops first_ops = {NULL, custom_first, NULL, NULL};

static void *cancel_after_50ms(void *arg)
{
	scope_sleep(50 * MS);
	scope_cancel(arg);
	return NULL;
}

static void join_returns_when_joiner_decides(void **state)
{
	static const struct {
		const char *what;
		scope_joiner_kind_t joiner;
		int64_t a_ns, timeout;
		bool cancel;
		int rc;
	} cases[] = {
	    {"any: winner at 50 ms", SCOPE_JOIN_ANY_SUCCESSFUL, 50 * MS, 0, false, 0},
	    {"any: timeout 100 ms", SCOPE_JOIN_ANY_SUCCESSFUL, 5 * SEC, 100 * MS, false,
	     -ETIMEDOUT},
	    {"any: cancel at 50 ms", SCOPE_JOIN_ANY_SUCCESSFUL, 5 * SEC, 0, true, -ECANCELED},
	    {"until: stop at 50 ms", SCOPE_JOIN_UNTIL, 50 * MS, 0, false, 0},
	    {"custom: stop at 50 ms", SCOPE_JOIN_CUSTOM, 50 * MS, 0, false, 0},
	};
	(void)state;
	running_case = "join_returns_when_joiner_decides";

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		scope_pool_t *pool = pool_of(1, SCOPE_QUEUE_UNBOUNDED, 0, SCOPE_POLICY_ABORT);
		struct scope_config cfg = SCOPE_CONFIG_INIT;
		pthread_t th;
		scope_t *s;
		int64_t t0, took;

		atomic_store(&stop_busy, 0);
		cfg.pool = pool;
		cfg.joiner = cases[i].joiner;
		cfg.until = stop_at_first;
		cfg.ops = &first_ops;
		cfg.timeout_ns = cases[i].timeout;
		t0 = scope_now();
		assert_int_equal(scope_open(&s, &cfg), 0);
		assert_int_equal(scope_fork(s, sleep_ok, (void *)(intptr_t)cases[i].a_ns, NULL), 0);
		assert_int_equal(scope_fork(s, busy, NULL, NULL), 0);
		if (cases[i].cancel)
			assert_int_equal(pthread_create(&th, NULL, cancel_after_50ms, s), 0);
		assert_int_equal(scope_join(s), cases[i].rc);
		took = scope_now() - t0;
		atomic_store(&stop_busy, 1);
		if (cases[i].cancel)
			pthread_join(th, NULL);
		print_message("  %-24s join after %5.1f ms\n", cases[i].what, (double)took / MS);
		assert_true(took < 600 * MS);
		assert_int_equal(scope_close(s), 0);
		assert_int_equal(scope_pool_destroy(pool), 0);
	}
}

static int count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* 100k empty forks on the default pool: threads stay near the CPU count,
 * and no fork runs on the forking thread. */
static _Atomic int on_main;
static int main_tid;

static int empty_where(void *arg, void **result)
{
	(void)arg;
	(void)result;
	if ((int)syscall(SYS_gettid) == main_tid)
		atomic_fetch_add(&on_main, 1);
	return 0;
}

/* Every worker of the default pool blocked in read() on a pipe, outside
 * the runtime, and the task that writes to it queued behind them: the
 * monitor starts a worker for it.  The owner does not join before the
 * writer ran (a joiner would run it itself). */
static int pipe_fd[2];
static _Atomic int readers_in, writer_ran;

static int pipe_reader(void *arg, void **result)
{
	char c;
	(void)arg;
	(void)result;
	atomic_fetch_add(&readers_in, 1);
	return read(pipe_fd[0], &c, 1) == 1 ? 0 : -EIO;
}

static int pipe_writer(void *arg, void **result)
{
	unsigned n = (unsigned)(uintptr_t)arg;
	(void)result;
	atomic_store(&writer_ran, 1);
	for (unsigned i = 0; i < n; i++)
		if (write(pipe_fd[1], "x", 1) != 1)
			return -EIO;
	return 0;
}

static void monitor_runs_work_behind_blocked_workers(void **state)
{
	struct scope_pool_stats st;
	unsigned n;
	scope_t *s;
	(void)state;
	running_case = "monitor_runs_work_behind_blocked_workers";

	assert_int_equal(pipe(pipe_fd), 0);
	assert_int_equal(scope_pool_stats(scope_pool_default(), &st), 0);
	n = st.max_size;
	atomic_store(&readers_in, 0);
	atomic_store(&writer_ran, 0);
	assert_int_equal(scope_open(&s, NULL), 0);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(scope_fork(s, pipe_reader, NULL, NULL), 0);
	while (atomic_load(&readers_in) < (int)n)
		usleep(1000);
	assert_int_equal(scope_fork(s, pipe_writer, (void *)(uintptr_t)n, NULL), 0);
	for (int i = 0; i < 5000 && !atomic_load(&writer_ran); i++)
		usleep(1000);
	assert_true(atomic_load(&writer_ran));
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(scope_pool_stats(scope_pool_default(), &st), 0);
	assert_true(st.compensations >= 1);
	assert_true(st.largest > st.max_size);
	close(pipe_fd[0]);
	close(pipe_fd[1]);
}

static void default_pool_fanout_threads(void **state)
{
	unsigned ncpu = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	int n = SANITIZED ? 20000 : 100000, most = 0;
	struct scope_pool_stats st;
	scope_t *s;
	(void)state;
	running_case = "default_pool_fanout_threads";

	main_tid = (int)syscall(SYS_gettid);
	atomic_store(&on_main, 0);
	assert_int_equal(scope_open(&s, NULL), 0);
	for (int i = 0; i < n; i++) {
		assert_int_equal(scope_fork(s, empty_where, NULL, NULL), 0);
		if (i % 10000 == 0) {
			int now = count_threads();
			most = now > most ? now : most;
		}
	}
	/* Forks never ran on this thread: each was a push. */
	assert_int_equal(atomic_load(&on_main), 0);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(scope_pool_stats(scope_pool_default(), &st), 0);
	print_message("  %d forks: at most %d threads, pool largest %u, %u CPUs\n", n, most,
		      st.largest, ncpu);
	assert_true(st.largest <= ncpu + 2);
	assert_true(most <=
		    (int)ncpu + 3); /* the workers, this thread, the monitor, maybe one leaving */
}

/* Steal pacing's rule (pool_int.h): brief stolen work makes the thief
 * wait, longer each time only while the victim's owner is busy at its end
 * of the deque (forking, or running its own tasks); other work, or a forker
 * that has stopped there, keeps the wait at its shortest. */
static void steal_pace_rule(void **state)
{
	int64_t pace = 0;
	(void)state;

	/* Work that was not brief: no wait, whatever came before. */
	assert_int_equal(sc_steal_pace_next(0, false, false), 0);
	assert_int_equal(sc_steal_pace_next(STEAL_PACE_MAX_NS, false, true), 0);
	/* Brief: the shortest wait first. */
	assert_int_equal(sc_steal_pace_next(0, true, true), STEAL_PACE_MIN_NS);
	/* Doubling while the owner is busy at its end, up to the cap. */
	pace = STEAL_PACE_MIN_NS;
	for (int i = 0; i < 20; i++) {
		int64_t next = sc_steal_pace_next(pace, true, true);
		assert_true(next == pace * 2 || next == STEAL_PACE_MAX_NS);
		assert_true(next <= STEAL_PACE_MAX_NS);
		pace = next;
	}
	assert_int_equal(pace, STEAL_PACE_MAX_NS);
	/* An owner that left its end alone: back to the shortest. */
	assert_int_equal(sc_steal_pace_next(pace, true, false), STEAL_PACE_MIN_NS);
}

static atomic_long tiny_done;

static int tiny(void *arg, void **result)
{
	*result = arg;
	atomic_fetch_add(&tiny_done, 1);
	return 0;
}

/* A thread that forks many tiny tasks and then does not join (it waits
 * outside the runtime) still has every one of them run by the workers:
 * pacing leaves tasks to a forker only while that forker runs them. */
static void forker_that_never_helps(void **state)
{
	long n = SANITIZED ? 5000 : 50000;
	scope_t *s;
	(void)state;
	running_case = "forker_that_never_helps";

	atomic_store(&tiny_done, 0);
	assert_int_equal(scope_open(&s, NULL), 0);
	for (long i = 0; i < n; i++)
		assert_int_equal(scope_fork(s, tiny, NULL, NULL), 0);
	while (atomic_load(&tiny_done) < n) {
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_close(s), 0);
}

/* Queued tasks cost a bounded number of bytes each, returned at close. */
static void queued_task_memory(void **state)
{
	scope_pool_t *pool = pool_of(1, SCOPE_QUEUE_UNBOUNDED, 0, SCOPE_POLICY_ABORT);
	int n = 200000;
	size_t before, queued, after;
	scope_t *s;
	(void)state;
	running_case = "queued_task_memory";

	if (SANITIZED) {
		scope_pool_destroy(pool);
		print_message("skipped: the sanitizers' allocators keep their own books\n");
		skip();
	}
	atomic_store(&gate, 0);
	s = open_on(pool, SCOPE_JOIN_AWAIT_ALL);
	assert_int_equal(scope_fork(s, gated, NULL, NULL), 0);
	scope_sleep(10 * MS); /* the one worker holds the gate */
	before = mallinfo2().uordblks;
	for (int i = 0; i < n; i++)
		assert_int_equal(scope_fork(s, empty, NULL, NULL), 0);
	queued = mallinfo2().uordblks;
	atomic_store(&gate, 1);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_close(s), 0);
	after = mallinfo2().uordblks;
	print_message("  %zu bytes per queued task; %zd bytes kept after close\n",
		      (queued - before) / (size_t)n, (ssize_t)(after - before));
	assert_true((queued - before) / (size_t)n <= 256);
	assert_true(after < before + (size_t)n * 8); /* returned, but for noise */
	assert_int_equal(scope_pool_destroy(pool), 0);
}

/* A subtask whose thread calls pthread_exit() ends FAILED (SCOPE_EEXITED)
 * instead of hanging its scope, and the pool replaces the worker. */
static int exits_thread(void *arg, void **result)
{
	(void)arg;
	(void)result;
	pthread_exit(NULL);
}

static void pthread_exit_in_subtask(void **state)
{
	scope_pool_t *pool = pool_of(1, SCOPE_QUEUE_UNBOUNDED, 0, SCOPE_POLICY_ABORT);
	struct scope_pool_stats st;
	scope_task_t *t;
	scope_t *s;
	(void)state;
	running_case = "pthread_exit_in_subtask";

	for (int round = 0; round < 2; round++) {
		/* Any-successful: the owner never runs it (and exits) itself. */
		s = open_on(pool, SCOPE_JOIN_ANY_SUCCESSFUL);
		assert_int_equal(scope_fork(s, exits_thread, NULL, &t), 0);
		assert_int_equal(scope_join(s), SCOPE_EFAILED);
		assert_int_equal(scope_task_state(t), SCOPE_TASK_FAILED);
		assert_int_equal(scope_task_error(t), SCOPE_EEXITED);
		assert_int_equal(scope_close(s), 0);
	}
	/* The pool still runs work, on a new worker. */
	s = open_on(pool, SCOPE_JOIN_ANY_SUCCESSFUL);
	assert_int_equal(scope_fork(s, empty, NULL, &t), 0);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(scope_pool_stats(pool, &st), 0);
	assert_int_equal(st.active, 0);
	assert_true(st.size <= 1);
	assert_int_equal(scope_pool_destroy(pool), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    /* First: the default pool's size is measured before other cases
	     * park its workers. */
	    cmocka_unit_test_setup_teardown(default_pool_fanout_threads, arm, disarm),
	    cmocka_unit_test_setup_teardown(monitor_runs_work_behind_blocked_workers, arm, disarm),
	    cmocka_unit_test_setup_teardown(nested_behind_unrelated_queue, arm, disarm),
	    cmocka_unit_test_setup_teardown(many_nested_joins, arm, disarm),
	    cmocka_unit_test_setup_teardown(block_policy_nested_fanout, arm, disarm),
	    cmocka_unit_test_setup_teardown(inline_helped_subtask_is_not_owner, arm, disarm),
	    cmocka_unit_test_setup_teardown(caller_runs_subtask_is_not_owner, arm, disarm),
	    cmocka_unit_test_setup_teardown(join_returns_when_joiner_decides, arm, disarm),
	    cmocka_unit_test_setup_teardown(queued_task_memory, arm, disarm),
	    cmocka_unit_test(steal_pace_rule),
	    cmocka_unit_test_setup_teardown(forker_that_never_helps, arm, disarm),
	    cmocka_unit_test_setup_teardown(pthread_exit_in_subtask, arm, disarm),
	};

	/* Thread counts are the runtime's alone: no agent. */
	test_without_agent(argv);
	(void)argc;
	signal(SIGALRM, on_alarm);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
