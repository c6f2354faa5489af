/* test_pool_limit.c - scope_pool_set_resource_limit: its arguments, the
 * POOL_LIMIT event it emits, and the same event in a snapshot of the pool. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "event.h"
#include "scope.h"

/* The POOL_LIMIT events seen, strings copied. */
struct seen {
	uint64_t pool, limit;
	uint16_t snapshot;
	char resource[80];
};
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct seen seen[16];
static int nseen;

static void record(void *ctx, const struct sc_ev *ev)
{
	(void)ctx;
	if (ev->kind != SC_EV_POOL_LIMIT)
		return;
	pthread_mutex_lock(&lock);
	if (nseen < 16) {
		struct seen *s = &seen[nseen++];
		s->pool = ev->a;
		s->limit = ev->b;
		s->snapshot = ev->snapshot;
		snprintf(s->resource, sizeof s->resource, "%s", ev->s1 ? ev->s1 : "");
	}
	pthread_mutex_unlock(&lock);
}

static void observer(const struct sc_ev *ev)
{
	record(NULL, ev);
}

static scope_pool_t *new_pool(const char *name)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	scope_pool_t *pool;
	pc.name = name;
	pc.core_size = 1;
	pc.max_size = 1;
	assert_int_equal(scope_pool_create(&pool, &pc), 0);
	return pool;
}

static void test_arguments(void **state)
{
	(void)state;
	scope_pool_t *pool = new_pool("args");
	assert_int_equal(scope_pool_set_resource_limit(NULL, "db", 20), -EINVAL);
	assert_int_equal(scope_pool_set_resource_limit(pool, NULL, 20), -EINVAL);
	assert_int_equal(scope_pool_set_resource_limit(pool, "", 20), -EINVAL);
	/* Clearing needs no name. */
	assert_int_equal(scope_pool_set_resource_limit(pool, NULL, 0), 0);
	assert_int_equal(scope_pool_set_resource_limit(pool, "db", 20), 0);
	assert_int_equal(scope_pool_destroy(pool), 0);
}

static void test_event_and_snapshot(void **state)
{
	(void)state;
	scope_pool_t *pool = new_pool("limited");
	nseen = 0;
	sc_observer_set(observer);
	char longname[200];
	memset(longname, 'r', sizeof longname - 1);
	longname[sizeof longname - 1] = 0;
	assert_int_equal(scope_pool_set_resource_limit(pool, "db connections", 20), 0);
	assert_int_equal(scope_pool_set_resource_limit(pool, longname, 7), 0);
	sc_observer_set(NULL);
	assert_int_equal(nseen, 2);
	assert_int_equal(seen[0].limit, 20);
	assert_string_equal(seen[0].resource, "db connections");
	assert_int_equal(seen[0].snapshot, 0);
	assert_true(seen[0].pool != 0);
	/* Names are cut to 63 bytes, as pool names are. */
	assert_int_equal(strlen(seen[1].resource), 63);
	assert_int_equal(seen[1].limit, 7);

	/* A snapshot lists the limit after the pool. */
	nseen = 0;
	sc_registry_snapshot(record, NULL);
	int found = -1;
	for (int i = 0; i < nseen; i++)
		if (seen[i].pool == seen[0].pool)
			found = i;
	assert_true(found >= 0);
	assert_int_equal(seen[found].limit, 7);
	assert_int_equal(seen[found].snapshot, 1);

	/* Cleared: gone from the next snapshot, and the event says 0. */
	uint64_t id = seen[found].pool;
	nseen = 0;
	sc_observer_set(observer);
	assert_int_equal(scope_pool_set_resource_limit(pool, NULL, 0), 0);
	sc_observer_set(NULL);
	assert_int_equal(nseen, 1);
	assert_int_equal(seen[0].limit, 0);
	nseen = 0;
	sc_registry_snapshot(record, NULL);
	for (int i = 0; i < nseen; i++)
		assert_true(seen[i].pool != id);
	assert_int_equal(scope_pool_destroy(pool), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_arguments),
	    cmocka_unit_test(test_event_and_snapshot),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
