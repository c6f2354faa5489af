/* churn.c - a libscope program whose threads come and go all the time:
 * short-lived threads that register, open a scope, fork into a pool whose
 * idle workers retire at once, join and exit.  Dumps taken of it meet
 * threads that start and exit during the capture.  Prints "ready", then
 * churns until killed. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "scope.h"

#define MS 1000000LL

static scope_pool_t *pool;

static int nap(void *arg, void **res)
{
	(void)arg, (void)res;
	return scope_sleep((1 + (long)arg % 3) * MS);
}

static void *short_life(void *arg)
{
	scope_thread_name("churn");
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	cfg.name = "burst";
	cfg.pool = pool;
	if (scope_open(&s, &cfg) == 0) {
		for (long i = 0; i < 3; i++)
			scope_fork(s, nap, (void *)(i + (long)arg), NULL);
		scope_join(s);
		scope_close(s);
	}
	return NULL;
}

int main(void)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	pc.name = "churn";
	pc.core_size = 0;
	pc.max_size = 32;
	pc.keep_alive_ns = 1 * MS;
	if (scope_pool_create(&pool, &pc) < 0)
		return 1;
	printf("ready\n");
	fflush(stdout);
	for (long n = 0;; n++) {
		pthread_t t[4];
		for (int i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, short_life, (void *)n);
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
	}
}
