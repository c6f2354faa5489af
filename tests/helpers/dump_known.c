/* dump_known.c - a libscope program of known structure for scopecmd's e2e
 * tests: three nested scopes on a named pool, every thread blocked in a
 * function of this file; prints one JSON line saying who is where. */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scope.h"

/* outer (all_successful, owner main) forks A and B; B opens middle
 * (any_successful, deadline in an hour) and forks C; C opens inner
 * (await_all) and forks D.  A and D sleep; B, C and main join. */
static scope_pool_t *pool;
static _Atomic int tid_a, tid_b, tid_c, tid_d, blocked;

#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

static int __attribute__((noinline)) known_wait_a(void)
{
	int rc = scope_sleep(3600LL * 1000000000);
	KEEP_FRAME();
	return rc;
}

/* A different duration from known_wait_a's keeps the compiler from folding
 * the two identical functions into one symbol. */
static int __attribute__((noinline)) known_wait_d(void)
{
	int rc = scope_sleep(3601LL * 1000000000);
	KEEP_FRAME();
	return rc;
}

static int task_a(void *arg, void **res)
{
	(void)arg, (void)res;
	tid_a = gettid();
	blocked++;
	return known_wait_a();
}

static int task_d(void *arg, void **res)
{
	(void)arg, (void)res;
	tid_d = gettid();
	blocked++;
	return known_wait_d();
}

/* Opens a scope, forks fn and joins once all four tasks run on threads of
 * their own: a join that found a task still queued would run it inline. */
static int open_fork_join(const char *name, scope_joiner_kind_t joiner, int64_t timeout,
			  scope_fn fn)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	cfg.name = name;
	cfg.joiner = joiner;
	cfg.pool = pool;
	cfg.timeout_ns = timeout;
	int rc = scope_open(&s, &cfg);
	if (rc < 0)
		return rc;
	scope_value_bind(s, "level", name);
	rc = scope_fork(s, fn, NULL, NULL);
	while (rc == 0 && blocked < 4)
		usleep(1000);
	if (rc == 0)
		rc = scope_join(s);
	scope_close(s);
	return rc;
}

static int __attribute__((noinline)) known_task_c(void *arg, void **res)
{
	(void)arg, (void)res;
	tid_c = gettid();
	blocked++;
	int rc = open_fork_join("inner", SCOPE_JOIN_AWAIT_ALL, 0, task_d);
	KEEP_FRAME();
	return rc;
}

static int __attribute__((noinline)) known_task_b(void *arg, void **res)
{
	(void)arg, (void)res;
	tid_b = gettid();
	blocked++;
	int rc =
	    open_fork_join("middle", SCOPE_JOIN_ANY_SUCCESSFUL, 3600LL * 1000000000, known_task_c);
	KEEP_FRAME();
	return rc;
}

static void *announce(void *arg)
{
	(void)arg;
	while (blocked < 4 || !tid_a || !tid_b || !tid_c || !tid_d)
		usleep(1000);
	usleep(20000); /* let the last ones reach their blocking calls */
	printf("{\"pid\":%d,\"main\":%d,\"a\":%d,\"b\":%d,\"c\":%d,\"d\":%d}\n", getpid(), getpid(),
	       tid_a, tid_b, tid_c, tid_d);
	fflush(stdout);
	return NULL;
}

int main(int argc, char **argv)
{
	(void)argv;
	if (argc > 1) {
		fprintf(stderr, "usage: dump_known (runs until killed; prints who is where)\n");
		return 2;
	}
	scope_thread_name("known-main");
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	pc.name = "kp";
	pc.core_size = 6;
	pc.max_size = 8;
	pc.prestart = true;
	if (scope_pool_create(&pool, &pc) < 0) {
		fprintf(stderr, "dump_known: cannot create the pool\n");
		return 1;
	}
	pthread_t th;
	pthread_create(&th, NULL, announce, NULL);
	pthread_detach(th);

	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *outer;
	cfg.name = "outer";
	cfg.pool = pool;
	if (scope_open(&outer, &cfg) < 0)
		return 1;
	scope_value_bind(outer, "request_id", "rq-1");
	scope_fork(outer, task_a, NULL, NULL);
	scope_fork(outer, known_task_b, NULL, NULL);
	/* Join only once every task runs on a pool thread: a joiner helps run
	 * queued tasks of the pool itself, and the test wants one thread per
	 * task, each where the structure puts it. */
	while (blocked < 4)
		usleep(1000);
	int rc = scope_join(outer);
	KEEP_FRAME();
	scope_close(outer);
	return rc == 0 ? 0 : 1;
}
