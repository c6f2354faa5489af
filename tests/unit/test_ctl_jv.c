/* test_ctl_jv.c - the fast JSON reader of common/jv.h: values, escapes,
 * access by key and index, and a table of malformed documents that must be
 * refused without crashing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../common/jv.h"

static struct jv_doc *parse_ok(const char *s)
{
	struct jv_doc *d = NULL;
	char err[128];
	int rc = jv_parse(s, strlen(s), &d, err, sizeof err);
	if (rc != 0)
		fail_msg("'%s' did not parse: %s", s, err);
	return d;
}

static void test_values(void **state)
{
	(void)state;
	struct jv_doc *d =
	    parse_ok(" {\"a\":1,\"b\":-2.5e3,\"c\":\"x\\\"y\\\\z\\n\\u00e9\\ud83d\\ude00\","
		     "\"d\":[true,false,null,[],{}],\"e\":{\"f\":9223372036854775807},"
		     "\"a\":7, \"big\":123456789012345678901234} ");
	const jv *r = jv_root(d);
	assert_true(jv_is_object(r));
	assert_int_equal(jv_size(r), 7);
	/* A repeated key: the last one wins, as in jansson. */
	assert_int_equal(jv_integer(jv_get(r, "a")), 7);
	assert_true(jv_is_number(jv_get(r, "b")));
	assert_false(jv_is_integer(jv_get(r, "b")));
	assert_true(jv_number(jv_get(r, "b")) == -2500.0);
	assert_string_equal(jv_string(jv_get(r, "c")), "x\"y\\z\n\xc3\xa9\xf0\x9f\x98\x80");
	assert_int_equal(jv_get(r, "c")->n, strlen("x\"y\\z\n\xc3\xa9\xf0\x9f\x98\x80"));
	const jv *arr = jv_get(r, "d");
	assert_int_equal(jv_size(arr), 5);
	assert_true(jv_is_true(jv_at(arr, 0)));
	assert_true(jv_is_false(jv_at(arr, 1)));
	assert_true(jv_is(jv_at(arr, 2), JV_NULL));
	assert_int_equal(jv_size(jv_at(arr, 3)), 0);
	assert_true(jv_is_object(jv_at(arr, 4)));
	assert_null(jv_at(arr, 5));
	assert_int_equal(jv_integer(jv_get(jv_get(r, "e"), "f")), 9223372036854775807LL);
	/* Past u64: kept as a real, not wrapped. */
	assert_false(jv_is_integer(jv_get(r, "big")));
	assert_true(jv_number(jv_get(r, "big")) > 1e23);
	/* Wrong types and NULL are answered quietly. */
	assert_null(jv_get(arr, "x"));
	assert_null(jv_get(NULL, "x"));
	assert_null(jv_string(jv_get(r, "a")));
	assert_int_equal(jv_integer(jv_get(r, "c")), 0);
	assert_int_equal(jv_size(jv_get(r, "a")), 0);
	assert_null(jv_at(NULL, 0));
	jv_free(d);

	d = parse_ok("42");
	assert_int_equal(jv_integer(jv_root(d)), 42);
	jv_free(d);
	/* Text need not be terminated: only len bytes count. */
	struct jv_doc *d2;
	char err[64];
	assert_int_equal(jv_parse("[1,2]garbage", 5, &d2, err, sizeof err), 0);
	assert_int_equal(jv_size(jv_root(d2)), 2);
	jv_free(d2);
}

/* Ids are u64 on the wire: one past INT64_MAX is an integer, exact, told
 * apart from a negative one; a negative number is never taken for one. */
static void test_u64_ids(void **state)
{
	(void)state;
	struct jv_doc *d = parse_ok("[9223372036854775808,18446744073709551615,"
				    "18446744073709551616,-9223372036854775808,-1,"
				    "9223372036854775807]");
	const jv *r = jv_root(d);
	assert_true(jv_is_integer(jv_at(r, 0)));
	assert_true(jv_is_big(jv_at(r, 0)));
	assert_true((uint64_t)jv_integer(jv_at(r, 0)) == (uint64_t)1 << 63);
	assert_true(jv_number(jv_at(r, 0)) > 9.2e18);
	assert_true(jv_is_big(jv_at(r, 1)));
	assert_true((uint64_t)jv_integer(jv_at(r, 1)) == UINT64_MAX);
	assert_false(jv_is_integer(jv_at(r, 2))); /* past u64: a real */
	assert_true(jv_is_integer(jv_at(r, 3)));
	assert_false(jv_is_big(jv_at(r, 3)));
	assert_true(jv_integer(jv_at(r, 3)) == INT64_MIN);
	assert_true(jv_number(jv_at(r, 3)) < 0);
	assert_false(jv_is_big(jv_at(r, 4)));
	assert_false(jv_is_big(jv_at(r, 5)));
	jv_free(d);
}

static void test_malformed(void **state)
{
	(void)state;
	static const char *bad[] = {
	    "",
	    " ",
	    "{",
	    "}",
	    "[1,]",
	    "{\"a\":}",
	    "{\"a\"1}",
	    "{a:1}",
	    "[1 2]",
	    "\"abc",
	    "\"a\\x\"",
	    "\"\\u12\"",
	    "\"\\u0000\"",
	    "\"\\udc00\"",
	    "tru",
	    "nul",
	    "-",
	    "1.2.3",
	    "[1]]",
	    "{}{}",
	    "[\"a\nb\"]",
	    "{\"a\":1,}",
	    "[}",
	    "{]",
	    "01234567890123456789012345678901234567890123456789012345678901234567890",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		struct jv_doc *d = (struct jv_doc *)1;
		char err[128] = "";
		int rc = jv_parse(bad[i], strlen(bad[i]), &d, err, sizeof err);
		if (rc != -EINVAL)
			fail_msg("'%s' gave %d, not -EINVAL", bad[i], rc);
		assert_null(d);
		assert_non_null(strstr(err, "malformed JSON at byte "));
	}
}

static void test_depth_and_size(void **state)
{
	(void)state;
	char *deep = malloc(2 * JV_MAX_DEPTH + 8);
	size_t n = 0;
	for (int i = 0; i < JV_MAX_DEPTH; i++)
		deep[n++] = '[';
	for (int i = 0; i < JV_MAX_DEPTH; i++)
		deep[n++] = ']';
	struct jv_doc *d;
	char err[128];
	assert_int_equal(jv_parse(deep, n, &d, err, sizeof err), 0);
	jv_free(d);
	/* One level more is refused, not recursed into. */
	memmove(deep + 1, deep, n);
	deep[0] = '[';
	deep[n + 1] = ']';
	assert_int_equal(jv_parse(deep, n + 2, &d, err, sizeof err), -EINVAL);
	assert_non_null(strstr(err, "nested too deep"));
	free(deep);

	/* 200,000 items in one array, all reachable by index. */
	size_t cap = 200000 * 8 + 16, len = 0;
	char *big = malloc(cap);
	big[len++] = '[';
	for (int i = 0; i < 200000; i++)
		len += (size_t)sprintf(big + len, "%s%d", i ? "," : "", i);
	big[len++] = ']';
	assert_int_equal(jv_parse(big, len, &d, err, sizeof err), 0);
	assert_int_equal(jv_size(jv_root(d)), 200000);
	assert_int_equal(jv_integer(jv_at(jv_root(d), 123456)), 123456);
	jv_free(d);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_values),
	    cmocka_unit_test(test_u64_ids),
	    cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_depth_and_size),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
