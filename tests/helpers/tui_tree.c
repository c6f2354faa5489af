/* tui_tree.c - a program with a known, stable task tree for scopetop's
 * end-to-end tests: scope "server" (request_id=r-17) with a finished
 * tui_audit, a parked tui_fetch_user, a tui_handle whose nested scope
 * "handle" joins two identical tui_poll_peer subtasks, and a queued
 * tui_backlog.  Prints "ready" once everything is in place, then waits to
 * be killed. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "scope.h"

#define LONG_NS (3600LL * 1000000000LL)

static scope_pool_t *pool;

static int tui_audit(void *arg, void **result)
{
	(void)arg;
	(void)result;
	return 0;
}

static int tui_fetch_user(void *arg, void **result)
{
	(void)arg;
	(void)result;
	volatile int rc = scope_sleep(LONG_NS); /* no tail call: keep this frame on the stack */
	return rc;
}

static int tui_poll_peer(void *arg, void **result)
{
	(void)arg;
	(void)result;
	volatile int rc = scope_sleep(LONG_NS); /* no tail call: keep this frame on the stack */
	return rc;
}

static int tui_spare(void *arg, void **result)
{
	(void)arg;
	(void)result;
	volatile int rc = scope_sleep(LONG_NS); /* no tail call: keep this frame on the stack */
	return rc;
}

static int tui_backlog(void *arg, void **result)
{
	(void)arg;
	(void)result;
	return 0;
}

static int tui_handle(void *arg, void **result)
{
	(void)arg;
	(void)result;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	cfg.name = "handle";
	cfg.joiner = SCOPE_JOIN_AWAIT_ALL;
	cfg.timeout_ns = LONG_NS;
	cfg.pool = pool;
	scope_t *s;
	int rc = scope_open(&s, &cfg);
	if (rc)
		return rc;
	for (int i = 0; i < 2; i++) /* one fork site: the two are identical */
		scope_fork(s, tui_poll_peer, NULL, NULL);
	/* Join late: a joiner runs still-queued subtasks itself, and both
	 * pollers must be on pool threads with identical stacks. */
	usleep(300 * 1000);
	rc = scope_join(s);
	scope_close(s);
	return rc;
}

int main(void)
{
	/* Give the agent time to connect, so the subtask that ends first is
	 * reported as it ends rather than missing from the first snapshot. */
	usleep(300 * 1000);
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	pc.name = "io";
	pc.core_size = 4;
	pc.max_size = 4;
	pc.prestart = true;
	int rc = scope_pool_create(&pool, &pc);
	if (rc) {
		fprintf(stderr, "tui_tree: cannot create the pool: %s\n", scope_strerror(rc));
		return 1;
	}
	scope_thread_name("tui-main");
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	cfg.name = "server";
	cfg.pool = pool;
	scope_t *s;
	rc = scope_open(&s, &cfg);
	if (rc) {
		fprintf(stderr, "tui_tree: cannot open the scope: %s\n", scope_strerror(rc));
		return 1;
	}
	scope_value_bind(s, "request_id", "r-17");
	scope_fork(s, tui_audit, NULL, NULL);
	usleep(50 * 1000); /* let it end first, so it shows as done */
	scope_fork(s, tui_fetch_user, NULL, NULL);
	scope_fork(s, tui_handle, NULL, NULL);
	/* The pool's four threads are now all busy, and once tui_handle
	 * joins it lends its place (the pool goes past its maximum to run
	 * what is queued): a spare sleeper takes that place, so the backlog
	 * stays queued. */
	usleep(500 * 1000);
	scope_fork(s, tui_spare, NULL, NULL);
	usleep(50 * 1000);
	scope_fork(s, tui_backlog, NULL, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	/* No join here: a joining owner runs queued subtasks itself, and the
	 * test wants tui_backlog to stay queued. */
	for (;;)
		pause();
}
