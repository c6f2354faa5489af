/* test_values.c - scoped values: inheritance into forks and the scopes they
 * open, shadowing, read-only below the binder, and bad input. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "scope.h"

struct seen {
	const char *key;
	char value[64];
};

static void copy_value(struct seen *s)
{
	const char *v = scope_value_get(s->key);

	if (v)
		snprintf(s->value, sizeof(s->value), "%s", v);
	else
		strcpy(s->value, "(unbound)");
}

static int read_value(void *arg, void **result)
{
	(void)result;
	copy_value(arg);
	return 0;
}

/* A fork that opens its own scope, binds nothing, and forks the reader:
 * the reader two levels down still sees the owner's binding. */
static int read_in_nested_scope(void *arg, void **result)
{
	scope_t *s;
	int rc;
	(void)result;

	rc = scope_open(&s, NULL);
	if (rc)
		return rc;
	rc = scope_fork(s, read_value, arg, NULL);
	if (rc == 0)
		rc = scope_join(s);
	scope_close(s);
	return rc;
}

/* A fork that binds the same key in its own scope: shadows for its
 * subtree only. */
static int shadow_then_read(void *arg, void **result)
{
	struct seen *seen = arg;
	scope_t *s;
	int rc;
	(void)result;

	rc = scope_open(&s, NULL);
	if (rc)
		return rc;
	rc = scope_value_bind(s, seen->key, "inner");
	if (rc == 0)
		rc = scope_fork(s, read_value, seen, NULL);
	if (rc == 0)
		rc = scope_join(s);
	scope_close(s);
	return rc;
}

static void inherited_by_forks_and_nested_scopes(void **state)
{
	struct seen direct = {.key = "request.id"}, nested = {.key = "request.id"},
		    missing = {.key = "nope"};
	struct seen shadowed = {.key = "request.id"};
	scope_t *s;
	(void)state;

	assert_null(scope_value_get("request.id")); /* no scope at all */
	assert_int_equal(scope_open(&s, NULL), 0);
	assert_int_equal(scope_value_bind(s, "request.id", "r-4242"), 0);
	assert_int_equal(scope_fork(s, read_value, &direct, NULL), 0);
	assert_int_equal(scope_fork(s, read_in_nested_scope, &nested, NULL), 0);
	assert_int_equal(scope_fork(s, read_value, &missing, NULL), 0);
	assert_int_equal(scope_fork(s, shadow_then_read, &shadowed, NULL), 0);
	assert_int_equal(scope_join(s), 0);
	assert_string_equal(direct.value, "r-4242");
	assert_string_equal(nested.value, "r-4242");
	assert_string_equal(missing.value, "(unbound)");
	assert_string_equal(shadowed.value, "inner");
	/* The shadowing stayed below its binder. */
	assert_string_equal(scope_value_get("request.id"), "r-4242");
	assert_int_equal(scope_close(s), 0);
	assert_null(scope_value_get("request.id"));
}

static void rebinding_and_inner_scopes(void **state)
{
	scope_t *outer, *inner;
	(void)state;

	assert_int_equal(scope_open(&outer, NULL), 0);
	assert_int_equal(scope_value_bind(outer, "user", "alice"), 0);
	assert_int_equal(scope_value_bind(outer, "user", "bob"), 0);
	assert_string_equal(scope_value_get("user"), "bob");
	assert_int_equal(scope_open(&inner, NULL), 0);
	assert_string_equal(scope_value_get("user"), "bob");
	assert_int_equal(scope_value_bind(inner, "user", "carol"), 0);
	assert_string_equal(scope_value_get("user"), "carol");
	assert_int_equal(scope_close(inner), 0);
	assert_string_equal(scope_value_get("user"), "bob");
	assert_int_equal(scope_join(outer), 0);
	assert_int_equal(scope_value_bind(outer, "late", "x"), SCOPE_EJOINED);
	assert_null(scope_value_get("late"));
	assert_int_equal(scope_close(outer), 0);
}

static int nap(void *arg, void **result)
{
	(void)arg;
	(void)result;
	return 0;
}

/* Bindings are frozen at the first fork: no bind after it (Java fixes them
 * at fork), so no running subtask sees a value come or change. */
static void bindings_frozen_at_first_fork(void **state)
{
	struct seen seen = {.key = "user"};
	scope_t *s, *inner;
	(void)state;

	assert_int_equal(scope_open(&s, NULL), 0);
	assert_int_equal(scope_value_bind(s, "user", "alice"), 0);
	assert_int_equal(scope_fork(s, read_value, &seen, NULL), 0);
	assert_int_equal(scope_value_bind(s, "user", "bob"), -EBUSY);
	assert_int_equal(scope_value_bind(s, "other", "x"), -EBUSY);
	assert_string_equal(scope_value_get("user"), "alice");
	/* A scope opened below still binds before its own forks. */
	assert_int_equal(scope_open(&inner, NULL), 0);
	assert_int_equal(scope_value_bind(inner, "user", "carol"), 0);
	assert_int_equal(scope_fork(inner, nap, NULL, NULL), 0);
	assert_int_equal(scope_value_bind(inner, "user", "dave"), -EBUSY);
	assert_int_equal(scope_join(inner), 0);
	assert_int_equal(scope_close(inner), 0);
	assert_int_equal(scope_join(s), 0);
	assert_string_equal(seen.value, "alice");
	assert_int_equal(scope_close(s), 0);
}

/* Values reach any depth (the dump's walk stops at 1024, lookups do not). */
static void values_below_depth_1024(void **state)
{
	enum { DEPTH = 1500 };
	static scope_t *s[DEPTH];
	(void)state;

	for (int i = 0; i < DEPTH; i++) {
		assert_int_equal(scope_open(&s[i], NULL), 0);
		if (i == 0)
			assert_int_equal(scope_value_bind(s[0], "root", "r"), 0);
	}
	assert_string_equal(scope_value_get("root"), "r");
	assert_int_equal(scope_value_bind(s[DEPTH - 1], "leaf", "l"), 0);
	assert_string_equal(scope_value_get("leaf"), "l");
	assert_int_equal(scope_close(s[0]), SCOPE_ESTRUCTURE); /* closes the rest first */
	assert_null(scope_value_get("root"));
}

static void bad_bindings_refused(void **state)
{
	char *big = malloc(4096);
	scope_t *s;
	(void)state;

	assert_non_null(big);
	memset(big, 'v', 4095);
	big[4095] = '\0';
	assert_int_equal(scope_open(&s, NULL), 0);
	assert_int_equal(scope_value_bind(s, "", "x"), -EINVAL);
	assert_int_equal(scope_value_bind(s, NULL, "x"), -EINVAL);
	assert_int_equal(scope_value_bind(s, "k", NULL), -EINVAL);
	assert_int_equal(scope_value_bind(NULL, "k", "v"), -EINVAL);
	assert_int_equal(scope_value_bind(s, "k", big), -EINVAL);
	assert_int_equal(scope_value_bind(s, big, "v"), -EINVAL);
	assert_null(scope_value_get(NULL));
	assert_null(scope_value_get("k"));
	assert_int_equal(scope_close(s), 0);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(inherited_by_forks_and_nested_scopes),
	    cmocka_unit_test(rebinding_and_inner_scopes),
	    cmocka_unit_test(bad_bindings_refused),
	    cmocka_unit_test(bindings_frozen_at_first_fork),
	    cmocka_unit_test(values_below_depth_1024),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
