/* test_fork_registry.c - what a fork child's snapshot holds, in a process
 * that never made a pool (so only the runtime's own atfork handler prunes):
 * the forking thread alone, under the child's tid, and the scopes it owns
 * under that tid; not the parent's other threads nor their scopes.  And a
 * thread's eventfd is the child's own: its wake-ups never reach the parent.
 * The whole path through the real daemon is tests/e2e/agent_fork.sh. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "rt.h"
#include "scope.h"
#include "test_util.h"

static _Atomic int other_ready, other_go;

/* A thread of the parent with a scope of its own, open across the fork. */
static void *other_thread(void *arg)
{
	scope_t *s;
	struct scope_config cfg = SCOPE_CONFIG_INIT;

	(void)arg;
	cfg.name = "other-scope";
	if (scope_open(&s, &cfg) != 0)
		return NULL;
	atomic_store(&other_ready, 1);
	while (!atomic_load(&other_go))
		usleep(1000);
	scope_close(s);
	return NULL;
}

/* The child's snapshot, one line per event, written into a buffer. */
struct lines {
	char buf[4096];
	size_t len;
};

static void collect(void *ctx, const struct sc_ev *ev)
{
	struct lines *l = ctx;
	int n = 0;

	if (ev->kind == SC_EV_THREAD_START)
		n = snprintf(l->buf + l->len, sizeof l->buf - l->len, "thread %u role=%d\n",
			     ev->tid, (int)ev->i);
	else if (ev->kind == SC_EV_SCOPE_OPEN)
		n = snprintf(l->buf + l->len, sizeof l->buf - l->len, "scope %s owner=%u\n", ev->s1,
			     ev->tid);
	if (n > 0 && (size_t)n < sizeof l->buf - l->len)
		l->len += (size_t)n;
}

static void test_child_snapshot_is_its_own(void **state)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	char want[256], got[4096];
	pthread_t th;
	scope_t *s;
	int fds[2], status;
	ssize_t n;
	pid_t pid;

	(void)state;
	assert_int_equal(scope_thread_name("fork-main"), 0);
	cfg.name = "main-scope";
	assert_int_equal(scope_open(&s, &cfg), 0);
	assert_int_equal(pthread_create(&th, NULL, other_thread, NULL), 0);
	while (!atomic_load(&other_ready))
		usleep(1000);
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct lines l = {.len = 0};
		sc_registry_snapshot(collect, &l);
		(void)!write(fds[1], l.buf, l.len);
		_exit(0);
	}
	close(fds[1]);
	n = read(fds[0], got, sizeof got - 1);
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	atomic_store(&other_go, 1);
	pthread_join(th, NULL);
	assert_int_equal(scope_close(s), 0);

	assert_true(n > 0);
	got[n] = 0;
	snprintf(want, sizeof want, "thread %d role=%d\nscope main-scope owner=%d\n", (int)pid,
		 SC_ROLE_MAIN, (int)pid);
	assert_string_equal(got, want);
}

/* The eventfd scope_wait_fd() polls beside the caller's fd is the child's
 * own after fork(): a wake-up in the child (a canceller's, through
 * sc_wake) must not land in the parent's thread's eventfd, where it would
 * wake that thread for nothing, or be read there and lost to the child. */
static void test_child_evfd_is_its_own(void **state)
{
	struct sc_thread *t;
	int fds[2], status;
	uint64_t v;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	/* A wait on a pipe that stays empty makes this thread's eventfd. */
	assert_int_equal(scope_wait_fd(fds[0], POLLIN, scope_now() + 1000000), -ETIMEDOUT);
	t = sc_self();
	assert_true(t->evfd >= 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sc_thread *c = sc_self();
		int inherited = c->evfd >= 0;

		/* As in a canceller's wake-up of a thread in scope_wait_fd. */
		(void)scope_wait_fd(fds[0], POLLIN, scope_now() + 1000000);
		atomic_store(&c->polling, 1);
		sc_wake(c);
		atomic_store(&c->polling, 0);
		_exit(inherited ? 2 : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	close(fds[0]);
	close(fds[1]);
	/* Nothing of the child's reached this thread's eventfd. */
	if (read(t->evfd, &v, sizeof v) == (ssize_t)sizeof v)
		fail_msg("the child's wake-up (%llu) reached the parent's eventfd",
			 (unsigned long long)v);
	assert_int_equal(errno, EAGAIN);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0); /* 2: it kept the parent's eventfd */
}

int main(int argc, char **argv)
{
	(void)argc;
	/* No agent: the walk is called directly; nothing dials a daemon. */
	test_without_agent(argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_child_snapshot_is_its_own),
	    cmocka_unit_test(test_child_evfd_is_its_own),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
