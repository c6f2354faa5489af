/* inline_target.c - a libscope program whose threads park inside chains of
 * inlined functions, so that the daemon's inline frames can be compared with
 * what eu-stack -i and gdb show for the same threads.  Prints "ready" once
 * every thread is parked, then runs until killed. */
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "scope.h"

#define KEEP_FRAME() __asm__ volatile("" ::: "memory")
#define INLINE static inline __attribute__((always_inline))
#define HOUR (3600LL * 1000000000)

static _Atomic int parked;

/* Two levels of inlining above the runtime's sleep. */
INLINE int park_inner(long n)
{
	int rc = scope_sleep(HOUR + n);
	KEEP_FRAME();
	return rc;
}

INLINE int park_middle(long n)
{
	int rc = park_inner(n + 1);
	KEEP_FRAME();
	return rc;
}

static int __attribute__((noinline)) deep_body(void *arg, void **res)
{
	(void)res;
	parked++;
	int rc = park_middle((long)arg);
	KEEP_FRAME();
	return rc;
}

static int __attribute__((noinline)) flat_body(void *arg, void **res)
{
	(void)res;
	parked++;
	int rc = park_inner((long)arg);
	KEEP_FRAME();
	return rc;
}

/* Joins s and closes it, inlined into main as the demo's join_close is. */
INLINE int join_close(scope_t *s)
{
	int rc = scope_join(s);
	KEEP_FRAME();
	scope_close(s);
	return rc;
}

int main(void)
{
	scope_thread_name("inline-main");
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	scope_pool_t *pool;
	pc.name = "ip";
	pc.core_size = 4;
	pc.max_size = 4;
	if (scope_pool_create(&pool, &pc) < 0)
		return 1;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	cfg.name = "inlines";
	cfg.joiner = SCOPE_JOIN_AWAIT_ALL;
	cfg.pool = pool;
	if (scope_open(&s, &cfg) < 0)
		return 1;
	for (long i = 0; i < 2; i++) {
		scope_fork(s, deep_body, (void *)i, NULL);
		scope_fork(s, flat_body, (void *)(i + 10), NULL);
	}
	while (parked < 4)
		usleep(1000);
	usleep(50000); /* the last ones reach their sleep */
	printf("ready\n");
	fflush(stdout);
	int rc = join_close(s);
	KEEP_FRAME();
	return rc < 0;
}
