/* test_cancel.c - cancellation: deadlines and timeouts, propagation down the
 * tree, waking blocked waiters, and interrupting system calls. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
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

#include "event.h"
#include "scope.h"
#include "test_util.h"

#define SEC 1000000000LL
#define MS 1000000LL

/* Cancel reasons seen per scope id (small ids only). */
#define MAX_IDS 4096
static _Atomic int cancel_reason[MAX_IDS];

static void observer(const struct sc_ev *ev)
{
	if (ev->kind == SC_EV_SCOPE_CANCEL && ev->a < MAX_IDS)
		atomic_store(&cancel_reason[ev->a], (int)ev->u);
}

static int setup(void **state)
{
	(void)state;
	test_watchdog(5); /* a broken cancel fails here, not after its 10-30 s sleeps */
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

static int reason_of(const scope_t *s)
{
	uint64_t id = scope_id(s);
	return id < MAX_IDS ? atomic_load(&cancel_reason[id]) : -1;
}

/* The reason the observer saw for s, once it saw one (up to 2 s).  A
 * scope's cancelled state is visible before the canceller, which may be
 * another thread (the deadline timer), has emitted its event: a join can
 * return in between. */
static int reason_seen(const scope_t *s)
{
	for (int i = 0; i < 2000 && reason_of(s) == 0; i++)
		usleep(1000);
	return reason_of(s);
}

static _Atomic int started, cancelled_returns;

/* Sleeps "forever"; counts how it ended. */
static int long_sleep(void *arg, void **result)
{
	int rc;
	(void)arg;
	(void)result;
	atomic_fetch_add(&started, 1);
	rc = scope_sleep(30 * SEC);
	if (rc == -ECANCELED)
		atomic_fetch_add(&cancelled_returns, 1);
	return rc;
}

static void wait_started(int n)
{
	int64_t give_up = scope_now() + 20 * SEC;

	while (atomic_load(&started) < n) {
		if (scope_now() > give_up)
			fail_msg("only %d of %d subtasks started", atomic_load(&started), n);
		/* Plain nanosleep: the caller's context may be cancelled. */
		struct timespec ts = {0, 250000};
		nanosleep(&ts, NULL);
	}
}

static _Atomic int forever_rc = 99;

static int sleep_forever(void *arg, void **result)
{
	(void)arg;
	(void)result;
	atomic_fetch_add(&started, 1);
	atomic_store(&forever_rc, scope_sleep(INT64_MAX));
	return 0;
}

/* Huge timeouts mean "never", not a deadline in the past. */
static void huge_timeouts_do_not_wrap(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	(void)state;

	atomic_store(&started, 0);
	cfg.timeout_ns = INT64_MAX;
	cfg.joiner = SCOPE_JOIN_AWAIT_ALL;
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_true(scope_deadline() > scope_now());
	assert_int_equal(scope_cancelled(), 0);
	assert_int_equal(scope_fork(s, sleep_forever, NULL, NULL), 0);
	wait_started(1);
	struct timespec ts = {0, 20000000};
	nanosleep(&ts, NULL);
	assert_int_equal(atomic_load(&forever_rc), 99); /* still asleep */
	assert_int_equal(scope_cancel(s), 0);
	assert_int_equal(scope_join(s), -ECANCELED);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(atomic_load(&forever_rc), -ECANCELED);
}

static void join_times_out(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	(void)state;

	atomic_store(&cancelled_returns, 0);
	atomic_store(&started, 0);
	cfg.timeout_ns = 50 * MS;
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_true(scope_deadline() > scope_now());
	assert_int_equal(scope_fork(s, long_sleep, NULL, NULL), 0);
	/* On a loaded machine the deadline could pass before the task even
	 * started; then it would (rightly) never run. */
	wait_started(1);
	assert_int_equal(scope_join(s), -ETIMEDOUT);
	assert_int_equal(reason_seen(s), SC_CANCEL_TIMEOUT);
	assert_int_equal(scope_cancelled(), -ECANCELED);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(atomic_load(&cancelled_returns), 1);
}

static int64_t seen_deadline;

static int read_deadline(void *arg, void **result)
{
	(void)arg;
	(void)result;
	seen_deadline = scope_deadline();
	return 0;
}

static void effective_deadline_is_earliest(void **state)
{
	struct scope_config outer_cfg = SCOPE_CONFIG_INIT, inner_cfg = SCOPE_CONFIG_INIT;
	scope_t *outer, *inner;
	int64_t d;
	(void)state;

	outer_cfg.timeout_ns = 300 * MS;
	assert_int_equal(scope_open(&outer, &outer_cfg), 0);
	d = scope_deadline();
	inner_cfg.deadline_ns = scope_now() + 60 * SEC; /* later: the outer one wins */
	assert_int_equal(scope_open(&inner, &inner_cfg), 0);
	assert_int_equal(scope_deadline(), d);
	assert_int_equal(scope_fork(inner, read_deadline, NULL, NULL), 0);
	assert_int_equal(scope_join(inner), 0);
	assert_int_equal(seen_deadline, d);
	assert_int_equal(scope_close(inner), 0);

	atomic_store(&cancelled_returns, 0);
	atomic_store(&started, 0);
	assert_int_equal(scope_open(&inner, NULL), 0);
	assert_int_equal(scope_fork(inner, long_sleep, NULL, NULL), 0);
	wait_started(1);
	/* The outer deadline cancels the outer scope, and through it this. */
	assert_int_equal(scope_join(inner), -ETIMEDOUT);
	assert_int_equal(reason_seen(outer), SC_CANCEL_TIMEOUT);
	assert_int_equal(reason_seen(inner), SC_CANCEL_PARENT);
	assert_int_equal(scope_close(inner), 0);
	assert_int_equal(atomic_load(&cancelled_returns), 1);
	assert_int_equal(scope_join(outer), -ETIMEDOUT);
	assert_int_equal(scope_close(outer), 0);
}

struct canceller {
	scope_t *s;
	int wait_for;
};

static void *cancel_when_started(void *arg)
{
	struct canceller *c = arg;

	wait_started(c->wait_for);
	scope_sleep(2 * MS); /* let them settle into their sleep */
	scope_cancel(c->s);
	return NULL;
}

static void cancel_wakes_64_blocked_subtasks(void **state)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	struct canceller c = {.wait_for = 64};
	scope_pool_t *pool;
	pthread_t th;
	int64_t t0;
	(void)state;

	atomic_store(&started, 0);
	atomic_store(&cancelled_returns, 0);
	pc.name = "blocked";
	pc.core_size = 64;
	assert_int_equal(scope_pool_create(&pool, &pc), 0);
	cfg.pool = pool;
	assert_int_equal(scope_open(&c.s, &cfg), 0);
	for (int i = 0; i < 64; i++)
		assert_int_equal(scope_fork(c.s, long_sleep, NULL, NULL), 0);
	t0 = scope_now();
	assert_int_equal(pthread_create(&th, NULL, cancel_when_started, &c), 0);
	assert_int_equal(scope_join(c.s), -ECANCELED);
	assert_int_equal(scope_close(c.s), 0);
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&cancelled_returns), 64);
	assert_true(scope_now() - t0 < 10 * SEC);
	assert_int_equal(scope_pool_destroy(pool), 0);
}

/* Level 3 sleeps; levels 1 and 2 open a scope, fork the next level and join. */
static _Atomic int level_rc[4];

static int level(void *arg, void **result)
{
	int n = (int)(intptr_t)arg;
	scope_t *s;
	int rc;
	(void)result;

	if (n == 3) {
		atomic_fetch_add(&started, 1);
		rc = scope_sleep(30 * SEC);
		atomic_store(&level_rc[3], rc);
		return rc;
	}
	rc = scope_open(&s, NULL);
	if (rc)
		return rc;
	rc = scope_fork(s, level, (void *)(intptr_t)(n + 1), NULL);
	if (rc == 0)
		rc = scope_join(s);
	atomic_store(&level_rc[n], rc);
	scope_close(s);
	return rc;
}

static void cancellation_three_levels_deep(void **state)
{
	struct canceller c = {.wait_for = 1};
	pthread_t th;
	(void)state;

	atomic_store(&started, 0);
	assert_int_equal(scope_open(&c.s, NULL), 0);
	assert_int_equal(scope_fork(c.s, level, (void *)(intptr_t)1, NULL), 0);
	assert_int_equal(pthread_create(&th, NULL, cancel_when_started, &c), 0);
	assert_int_equal(scope_join(c.s), -ECANCELED);
	assert_int_equal(reason_seen(c.s), SC_CANCEL_EXPLICIT);
	assert_int_equal(scope_close(c.s), 0);
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&level_rc[3]), -ECANCELED);
	assert_int_equal(atomic_load(&level_rc[2]), -ECANCELED);
	assert_int_equal(atomic_load(&level_rc[1]), -ECANCELED);
}

static _Atomic int blocked_read_rc, blocked_read_errno, reader_tid;

/* Waits until the reader thread sleeps in the kernel (state S), so the
 * signal cannot arrive before read() does. */
static void wait_reader_blocked(void)
{
	char path[64], buf[256];
	int64_t give_up = scope_now() + 20 * SEC;

	wait_started(1);
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
		if (scope_now() > give_up)
			fail_msg("the reader never blocked");
		struct timespec ts = {0, 500000};
		nanosleep(&ts, NULL);
	}
}

static int blocking_read(void *arg, void **result)
{
	int fd = (int)(intptr_t)arg;
	char c;
	ssize_t n;
	(void)result;

	atomic_store(&reader_tid, (int)syscall(SYS_gettid));
	atomic_fetch_add(&started, 1);
	n = read(fd, &c, 1); /* a system call the runtime knows nothing of */
	atomic_store(&blocked_read_errno, n < 0 ? errno : 0);
	atomic_store(&blocked_read_rc, (int)n);
	return n < 0 ? -errno : 0;
}

/* A scope (of joiner and flags) whose one subtask blocks in read() on a new
 * pipe p, cancelled once the read blocks, and joined. */
static scope_t *cancel_blocked_reader(scope_joiner_kind_t joiner, unsigned flags, int p[2])
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;

	assert_int_equal(pipe(p), 0);
	atomic_store(&started, 0);
	atomic_store(&blocked_read_rc, 99);
	cfg.joiner = joiner;
	cfg.flags = flags;
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(scope_fork(s, blocking_read, (void *)(intptr_t)p[0], NULL), 0);
	wait_reader_blocked();
	assert_int_equal(scope_cancel(s), 0);
	assert_int_equal(scope_join(s), -ECANCELED);
	return s;
}

static void interrupt_wakes_blocking_read(void **state)
{
	int p[2];
	scope_t *s = cancel_blocked_reader(SCOPE_JOIN_AWAIT_ALL, 0, p);
	(void)state;

	assert_int_equal(scope_close(s), 0);
	assert_int_equal(atomic_load(&blocked_read_rc), -1);
	assert_int_equal(atomic_load(&blocked_read_errno), EINTR);
	close(p[0]);
	close(p[1]);
}

static void no_interrupt_leaves_read_alone(void **state)
{
	int p[2];
	scope_t *s = cancel_blocked_reader(SCOPE_JOIN_ALL_SUCCESSFUL, SCOPE_F_NO_INTERRUPT, p);
	(void)state;

	scope_sleep(50 * MS);
	/* Still blocked: nobody interrupted it. */
	assert_int_equal(atomic_load(&blocked_read_rc), 99);
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(atomic_load(&blocked_read_rc), 1);
	close(p[0]);
	close(p[1]);
}

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

/* The joiner runs a queued subtask itself; the subtask blocks in read():
 * the joiner's deadline must still interrupt it. */
static void deadline_reaches_task_run_by_joiner(void **state)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	struct scope_config busy_cfg = SCOPE_CONFIG_INIT, cfg = SCOPE_CONFIG_INIT;
	scope_pool_t *pool;
	scope_t *busy, *s;
	int p[2];
	(void)state;

	assert_int_equal(pipe(p), 0);
	atomic_store(&gate, 0);
	atomic_store(&blocked_read_rc, 99);
	pc.core_size = pc.max_size = 1;
	assert_int_equal(scope_pool_create(&pool, &pc), 0);
	busy_cfg.pool = pool;
	assert_int_equal(scope_open(&busy, &busy_cfg), 0);
	assert_int_equal(scope_fork(busy, gated, NULL, NULL), 0); /* the only worker */
	cfg.pool = pool;
	cfg.timeout_ns = 50 * MS;
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(scope_fork(s, blocking_read, (void *)(intptr_t)p[0], NULL), 0);
	assert_int_equal(scope_join(s), -ETIMEDOUT);
	assert_int_equal(atomic_load(&reader_tid), (int)syscall(SYS_gettid));
	assert_int_equal(atomic_load(&blocked_read_rc), -1);
	assert_int_equal(atomic_load(&blocked_read_errno), EINTR);
	assert_int_equal(scope_close(s), 0);
	atomic_store(&gate, 1);
	assert_int_equal(scope_join(busy), 0);
	assert_int_equal(scope_close(busy), 0);
	assert_int_equal(scope_pool_destroy(pool), 0);
	close(p[0]);
	close(p[1]);
}

static int fails_now(void *arg, void **result)
{
	(void)arg;
	(void)result;
	return -EIO;
}

/* Waits outside the runtime (the owner is "busy") until *flag leaves 99,
 * for at most 4 s. */
static void busy_until_set(_Atomic int *flag)
{
	int64_t give_up = scope_now() + 4 * SEC;

	while (atomic_load(flag) == 99 && scope_now() < give_up) {
		struct timespec ts = {0, 500000};
		nanosleep(&ts, NULL);
	}
}

/* The deadline cancels the scope from the timer while the owner does
 * something else entirely: the subtask blocked in read() is interrupted
 * at the deadline, not when the owner comes to join. */
static void deadline_fires_while_owner_is_busy(void **state)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_pool_t *pool;
	scope_t *s;
	int p[2];
	(void)state;

	assert_int_equal(pipe(p), 0);
	atomic_store(&started, 0);
	atomic_store(&blocked_read_rc, 99);
	pc.core_size = pc.max_size = 2;
	pc.prestart = true;
	assert_int_equal(scope_pool_create(&pool, &pc), 0);
	cfg.pool = pool;
	cfg.timeout_ns = 400 * MS;
	assert_int_equal(scope_open(&s, &cfg), 0);
	int64_t deadline = scope_deadline();
	assert_int_equal(scope_fork(s, blocking_read, (void *)(intptr_t)p[0], NULL), 0);
	wait_reader_blocked();
	bool in_time = scope_now() < deadline;
	busy_until_set(&blocked_read_rc);
	int64_t noticed = scope_now();
	if (!in_time) {
		/* The signal may then have come before read() did. */
		assert_int_equal(write(p[1], "x", 1), 1);
		assert_int_equal(scope_join(s), -ETIMEDOUT);
		assert_int_equal(scope_close(s), 0);
		assert_int_equal(scope_pool_destroy(pool), 0);
		close(p[0]);
		close(p[1]);
		print_message("skip: the reader blocked only after the deadline (a loaded host)\n");
		skip();
	}
	/* Interrupted while the owner never called the runtime. */
	assert_int_equal(atomic_load(&blocked_read_rc), -1);
	assert_int_equal(atomic_load(&blocked_read_errno), EINTR);
	assert_true(noticed >= deadline);
	assert_int_equal(reason_seen(s), SC_CANCEL_TIMEOUT);
	assert_int_equal(scope_join(s), -ETIMEDOUT);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(scope_pool_destroy(pool), 0);
	close(p[0]);
	close(p[1]);
}

static _Atomic int nested_rc = 99;

/* Opens a scope of its own (no deadline) and joins a sleeper there. */
static int nested_sleeper(void *arg, void **result)
{
	scope_t *in;
	int rc;
	(void)arg;
	(void)result;

	if (scope_open(&in, NULL)) {
		atomic_store(&nested_rc, 1000); /* the deadline came first */
		return -1;
	}
	(void)scope_fork(in, long_sleep, NULL, NULL);
	rc = scope_join(in);
	(void)scope_close(in);
	atomic_store(&nested_rc, rc);
	return rc;
}

/* A subtask in a runtime wait (a join, a sleep) in a scope below the one
 * with the deadline ends at the deadline, the owner busy elsewhere. */
static void deadline_reaches_runtime_waits_below(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	(void)state;

	atomic_store(&started, 0);
	atomic_store(&cancelled_returns, 0);
	atomic_store(&nested_rc, 99);
	cfg.timeout_ns = 100 * MS;
	assert_int_equal(scope_open(&s, &cfg), 0);
	int64_t deadline = scope_deadline();
	assert_int_equal(scope_fork(s, nested_sleeper, NULL, NULL), 0);
	/* Until the subtask's join returns, or the deadline passed without
	 * the subtask ever starting (a loaded host). */
	while (atomic_load(&nested_rc) == 99 && reason_of(s) == 0) {
		struct timespec ts = {0, 500000};
		nanosleep(&ts, NULL);
	}
	busy_until_set(&nested_rc);
	assert_true(scope_now() >= deadline);
	assert_int_equal(reason_seen(s), SC_CANCEL_TIMEOUT);
	assert_int_equal(scope_join(s), -ETIMEDOUT);
	assert_int_equal(scope_close(s), 0);
	if (atomic_load(&nested_rc) == 99 || atomic_load(&nested_rc) == 1000) {
		print_message("skip: the deadline passed before the subtask opened its scope (a "
			      "loaded host)\n");
		skip();
	}
	/* The inner join's deadline is the inherited one. */
	assert_int_equal(atomic_load(&nested_rc), -ETIMEDOUT);
	assert_int_equal(atomic_load(&cancelled_returns), atomic_load(&started));
}

static int count_threads(void)
{
	char path[64];
	int n = -1;

	snprintf(path, sizeof(path), "/proc/self/status");
	FILE *f = fopen(path, "r");
	char line[256];
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

/* One timer thread serves every scope with a deadline. */
static void one_timer_thread_for_all_scopes(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s[40];
	(void)state;

	cfg.timeout_ns = 60 * SEC;
	assert_int_equal(scope_open(&s[0], &cfg), 0); /* the timer and the default pool start */
	assert_int_equal(scope_close(s[0]), 0);
	int before = count_threads();
	for (int i = 0; i < 40; i++) {
		cfg.timeout_ns = (60 - i) * SEC; /* each earlier than its parent's */
		assert_int_equal(scope_open(&s[i], &cfg), 0);
	}
	assert_int_equal(count_threads(), before);
	for (int i = 39; i >= 0; i--)
		assert_int_equal(scope_close(s[i]), 0);
}

/* What join returns once the deadline passed (whatever came first
 * decides): -ETIMEDOUT, even with no forks or with every subtask ended in
 * time; the joiner's result when it decided before the deadline. */
static _Atomic int quick_done;

static int quick(void *arg, void **result)
{
	*result = arg;
	atomic_store(&quick_done, 1);
	return 0;
}

static void sleep_past(int64_t t)
{
	while (scope_now() <= t) {
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
	}
}

static void join_after_deadline(void **state)
{
	static const scope_joiner_kind_t kinds[] = {
	    SCOPE_JOIN_ALL_SUCCESSFUL, SCOPE_JOIN_ANY_SUCCESSFUL, SCOPE_JOIN_AWAIT_ALL};
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_task_t *t;
	scope_t *s;
	(void)state;

	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		/* Passed at the open, nothing forked. */
		cfg = (struct scope_config)SCOPE_CONFIG_INIT;
		cfg.joiner = kinds[k];
		cfg.deadline_ns = scope_now() - 1;
		assert_int_equal(scope_open(&s, &cfg), 0);
		assert_int_equal(scope_join(s), -ETIMEDOUT);
		assert_int_equal(scope_close(s), 0);

		/* The subtask ends in time, the owner joins late. */
		cfg.deadline_ns = 0;
		cfg.timeout_ns = 50 * MS;
		atomic_store(&quick_done, 0);
		assert_int_equal(scope_open(&s, &cfg), 0);
		int64_t deadline = scope_deadline();
		assert_int_equal(scope_fork(s, quick, (void *)0x5, &t), 0);
		while (!atomic_load(&quick_done))
			sched_yield();
		sleep_past(deadline);
		int rc = scope_join(s);
		/* Any-successful decided (a winner) before the deadline. */
		if (kinds[k] == SCOPE_JOIN_ANY_SUCCESSFUL && scope_winner(s) &&
		    reason_of(s) == SC_CANCEL_JOINER) {
			assert_int_equal(rc, 0);
		} else {
			assert_int_equal(rc, -ETIMEDOUT);
		}
		assert_int_equal(scope_task_state(t), SCOPE_TASK_SUCCESS);
		assert_ptr_equal(scope_task_result(t), (void *)0x5);
		assert_int_equal(scope_close(s), 0);
	}
	/* A join that ended before the deadline keeps its result. */
	cfg = (struct scope_config)SCOPE_CONFIG_INIT;
	cfg.timeout_ns = 50 * MS;
	assert_int_equal(scope_open(&s, &cfg), 0);
	int64_t deadline = scope_deadline();
	assert_int_equal(scope_fork(s, quick, NULL, NULL), 0);
	int rc = scope_join(s);
	if (scope_now() < deadline)
		assert_int_equal(rc, 0);
	sleep_past(deadline);
	assert_int_equal(scope_close(s), 0);
}

/* An fd that is not open is an error, not a ready fd (POLLNVAL). */
static void wait_fd_on_closed_fd_is_an_error(void **state)
{
	int p[2];
	scope_t *s;
	(void)state;

	assert_int_equal(pipe(p), 0);
	close(p[0]);
	close(p[1]);
	assert_int_equal(scope_wait_fd(p[0], POLLIN, 0), -EBADF);
	assert_int_equal(scope_wait_fd(-1, POLLIN, 0), -EINVAL);
	assert_int_equal(scope_wait_fd(0, POLLIN, -1), -EINVAL);
	assert_int_equal(scope_open(&s, NULL), 0);
	assert_int_equal(scope_wait_fd(p[0], POLLIN, scope_now() + SEC), -EBADF);
	assert_int_equal(scope_close(s), 0);
}

static _Atomic int seen_reason = -1, seen_cause = -1;

/* Asks, from inside a subtask, why its context is cancelled. */
static int ask_why(void *arg, void **result)
{
	scope_cancel_reason_t cause;
	(void)arg;
	(void)result;

	atomic_fetch_add(&started, 1);
	(void)scope_sleep(30 * SEC);
	atomic_store(&seen_reason, (int)scope_cancel_reason(NULL, &cause));
	atomic_store(&seen_cause, (int)cause);
	return 0;
}

/* scope_cancel_reason tells whether a scope is cancelled and why, and where
 * the cancellation began. */
static void cancel_reason_is_queryable(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_cancel_reason_t cause;
	scope_t *outer, *inner, *s;
	(void)state;

	assert_int_equal(scope_cancel_reason(NULL, &cause), SCOPE_CANCEL_NONE); /* no scope */
	assert_int_equal(cause, SCOPE_CANCEL_NONE);
	assert_int_equal(scope_open(&outer, NULL), 0);
	assert_int_equal(scope_open(&inner, NULL), 0);
	assert_int_equal(scope_cancel_reason(outer, NULL), SCOPE_CANCEL_NONE);
	assert_int_equal(scope_cancel(outer), 0);
	assert_int_equal(scope_cancel_reason(outer, &cause), SCOPE_CANCEL_EXPLICIT);
	assert_int_equal(cause, SCOPE_CANCEL_EXPLICIT);
	assert_int_equal(scope_cancel_reason(inner, &cause), SCOPE_CANCEL_PARENT);
	assert_int_equal(cause, SCOPE_CANCEL_EXPLICIT);
	assert_int_equal(scope_cancel_reason(NULL, NULL), SCOPE_CANCEL_PARENT); /* inner */
	assert_int_equal(scope_close(inner), 0);
	assert_int_equal(scope_close(outer), 0);

	/* A deadline, seen from a subtask below it. */
	atomic_store(&started, 0);
	atomic_store(&seen_reason, 99);
	cfg.timeout_ns = 200 * MS;
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(scope_fork(s, ask_why, NULL, NULL), 0);
	assert_int_equal(scope_join(s), -ETIMEDOUT);
	assert_int_equal(scope_cancel_reason(s, &cause), SCOPE_CANCEL_TIMEOUT);
	assert_int_equal(scope_close(s), 0); /* waits for the subtask */
	/* Unless the deadline came before it could start (a loaded host). */
	if (atomic_load(&started)) {
		assert_int_equal(atomic_load(&seen_reason), SCOPE_CANCEL_TIMEOUT);
		assert_int_equal(atomic_load(&seen_cause), SCOPE_CANCEL_TIMEOUT);
	}

	/* The joiner: a failure. */
	assert_int_equal(scope_open(&s, NULL), 0);
	assert_int_equal(scope_fork(s, long_sleep, NULL, NULL), 0);
	assert_int_equal(scope_fork(s, fails_now, NULL, NULL), 0);
	assert_int_equal(scope_join(s), SCOPE_EFAILED);
	assert_int_equal(scope_cancel_reason(s, &cause), SCOPE_CANCEL_JOINER);
	assert_int_equal(cause, SCOPE_CANCEL_JOINER);
	assert_int_equal(scope_close(s), 0);

	assert_string_equal(scope_cancel_reason_name(SCOPE_CANCEL_TIMEOUT), "timeout");
	assert_string_equal(scope_cancel_reason_name(SCOPE_CANCEL_PARENT), "parent");
	assert_string_equal(scope_cancel_reason_name(SCOPE_CANCEL_NONE), "none");
	assert_string_equal(scope_cancel_reason_name((scope_cancel_reason_t)99), "unknown");
}

static _Atomic int shield_sleep_rc = 99, shield_join_rc = 99, shield_cancelled = 99,
		   shield_late_rc = 99, shield_open_rc = 99;

static int ok_now(void *arg, void **result)
{
	(void)arg;
	(void)result;
	return 0;
}

/* Cleanup after a cancel: a shield lets it wait and fork, for a bounded
 * time; past the shield's own deadline its waits end too. */
static int cleanup_in_shield(void *arg, void **result)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *sh;
	(void)arg;
	(void)result;

	atomic_fetch_add(&started, 1);
	if (scope_sleep(30 * SEC) != -ECANCELED)
		return -1;
	cfg.flags = SCOPE_F_SHIELD;
	cfg.timeout_ns = 5 * SEC;
	atomic_store(&shield_open_rc, scope_open(&sh, &cfg));
	if (atomic_load(&shield_open_rc))
		return -1;
	atomic_store(&shield_cancelled, scope_cancelled());
	atomic_store(&shield_sleep_rc, scope_sleep(MS));
	(void)scope_fork(sh, ok_now, NULL, NULL);
	atomic_store(&shield_join_rc, scope_join(sh));
	scope_close(sh);
	/* A shield whose cleanup overruns its own deadline. */
	cfg.timeout_ns = 50 * MS;
	if (scope_open(&sh, &cfg) == 0) {
		atomic_store(&shield_late_rc, scope_sleep(30 * SEC));
		scope_close(sh);
	}
	return scope_cancelled();
}

static void shield_lets_cleanup_run_bounded(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	(void)state;

	cfg.flags = SCOPE_F_SHIELD; /* no deadline of its own */
	assert_int_equal(scope_open(&s, &cfg), -EINVAL);
	atomic_store(&started, 0);
	assert_int_equal(scope_open(&s, NULL), 0);
	assert_int_equal(scope_fork(s, cleanup_in_shield, NULL, NULL), 0);
	wait_started(1);
	assert_int_equal(scope_cancel(s), 0);
	assert_int_equal(scope_join(s), -ECANCELED);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(atomic_load(&shield_open_rc), 0); /* below a cancelled scope */
	assert_int_equal(atomic_load(&shield_cancelled), 0);
	assert_int_equal(atomic_load(&shield_sleep_rc), 0);
	assert_int_equal(atomic_load(&shield_join_rc), 0);
	assert_int_equal(atomic_load(&shield_late_rc), -ECANCELED); /* its own deadline */
}

static _Atomic int wait_fd_rc;

static int wait_on_fd(void *arg, void **result)
{
	(void)result;
	atomic_fetch_add(&started, 1);
	atomic_store(&wait_fd_rc, scope_wait_fd((int)(intptr_t)arg, POLLIN, 0));
	return 0;
}

static void wait_fd_ready_timeout_and_cancel(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	int p[2];
	(void)state;

	assert_int_equal(pipe(p), 0);
	/* Outside any scope: a plain, deadline-bounded poll. */
	assert_int_equal(scope_wait_fd(p[0], POLLIN, scope_now() + 5 * MS), -ETIMEDOUT);
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(scope_wait_fd(p[0], POLLIN, 0), POLLIN);
	assert_int_equal(scope_wait_fd(-1, POLLIN, 0), -EINVAL);
	char c;
	assert_int_equal(read(p[0], &c, 1), 1);

	atomic_store(&started, 0);
	atomic_store(&wait_fd_rc, 99);
	cfg.flags = SCOPE_F_NO_INTERRUPT; /* the runtime's own wake-up, not the signal */
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(scope_fork(s, wait_on_fd, (void *)(intptr_t)p[0], NULL), 0);
	wait_started(1);
	scope_sleep(10 * MS);
	assert_int_equal(scope_cancel(s), 0);
	assert_int_equal(scope_join(s), -ECANCELED);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(atomic_load(&wait_fd_rc), -ECANCELED);
	close(p[0]);
	close(p[1]);
}

static _Atomic int level_checks[3];

static int check_levels(void *arg, void **result)
{
	scope_t *s;
	(void)arg;
	(void)result;

	atomic_store(&level_checks[0], scope_cancelled());
	atomic_store(&level_checks[1], scope_sleep(1));
	/* Nothing opens below a cancelled scope. */
	atomic_store(&level_checks[2], scope_open(&s, NULL));
	return 0;
}

static void cancellation_is_level_triggered(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s, *inner;
	(void)state;

	assert_int_equal(scope_sleep(MS), 0);
	assert_int_equal(scope_cancelled(), 0);
	cfg.joiner = SCOPE_JOIN_AWAIT_ALL;
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(scope_open(&inner, &cfg), 0);
	scope_cancel(s);
	assert_int_equal(reason_seen(inner), SC_CANCEL_PARENT);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(scope_cancelled(), -ECANCELED);
		assert_int_equal(scope_sleep(SEC), -ECANCELED);
		assert_int_equal(scope_sleep_until(scope_now() + SEC), -ECANCELED);
	}
	assert_int_equal(scope_close(inner), 0);
	assert_int_equal(scope_open(&inner, &cfg), -ECANCELED);
	assert_int_equal(scope_close(s), 0);

	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(scope_fork(s, check_levels, NULL, NULL), 0);
	assert_int_equal(scope_join(s), 0);
	assert_int_equal(atomic_load(&level_checks[0]), 0);
	assert_int_equal(atomic_load(&level_checks[1]), 0);
	assert_int_equal(atomic_load(&level_checks[2]), 0);
	assert_int_equal(scope_close(s), 0);
	assert_int_equal(scope_sleep(-1), -EINVAL);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(huge_timeouts_do_not_wrap, setup, teardown),
	    cmocka_unit_test_setup_teardown(join_times_out, setup, teardown),
	    cmocka_unit_test_setup_teardown(effective_deadline_is_earliest, setup, teardown),
	    cmocka_unit_test_setup_teardown(cancel_wakes_64_blocked_subtasks, setup, teardown),
	    cmocka_unit_test_setup_teardown(cancellation_three_levels_deep, setup, teardown),
	    cmocka_unit_test_setup_teardown(interrupt_wakes_blocking_read, setup, teardown),
	    cmocka_unit_test_setup_teardown(no_interrupt_leaves_read_alone, setup, teardown),
	    cmocka_unit_test_setup_teardown(deadline_reaches_task_run_by_joiner, setup, teardown),
	    cmocka_unit_test_setup_teardown(wait_fd_ready_timeout_and_cancel, setup, teardown),
	    cmocka_unit_test_setup_teardown(cancellation_is_level_triggered, setup, teardown),
	    cmocka_unit_test_setup_teardown(deadline_fires_while_owner_is_busy, setup, teardown),
	    cmocka_unit_test_setup_teardown(deadline_reaches_runtime_waits_below, setup, teardown),
	    cmocka_unit_test_setup_teardown(one_timer_thread_for_all_scopes, setup, teardown),
	    cmocka_unit_test_setup_teardown(join_after_deadline, setup, teardown),
	    cmocka_unit_test_setup_teardown(wait_fd_on_closed_fd_is_an_error, setup, teardown),
	    cmocka_unit_test_setup_teardown(cancel_reason_is_queryable, setup, teardown),
	    cmocka_unit_test_setup_teardown(shield_lets_cleanup_run_bounded, setup, teardown),
	};

	/* These tests install their own observer, so the agent stays off. */
	test_without_agent(argv);
	(void)argc;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
