/* test_dumplocks.c - the pthread mutexes of the daemon's stack entries in
 * the dump: waitingToLock and locksHeld in the JSON, the jstack form's
 * "- waiting to lock" and "Locked ownable synchronizers" lines, the text
 * form's -l lines; members of a wrong shape are left out, never trusted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../dump/jdkdump.h"
#include "../../dump/jstackdump.h"
#include "../../dump/textdump.h"

/* Thread 11 holds the mutex at 0x7f00 that 12 waits for; 13's member is
 * damaged in every way a peer could. */
static const char *reply =
    "{\"ok\":true,\"source\":\"proc\",\"capture_ns\":1,\"max_pause_ns\":0,"
    "\"process\":{\"pid\":10,\"name\":\"locky\",\"state\":\"live\",\"complete\":true,"
    " \"lost\":0,\"instrumented\":false},"
    "\"model\":{\"now_ms\":1764441605321.5,\"threads\":[],\"pools\":[],\"scopes\":[],"
    " \"tasks\":[]},"
    "\"stacks\":["
    " {\"tid\":11,\"name\":\"holder\",\"error\":null,\"state\":\"WAITING\","
    "  \"blocked_in\":\"read\",\"approximate\":false,"
    "  \"locks_held\":[{\"addr\":\"0x7f00\",\"class\":\"pthread_mutex_t\","
    "   \"waiters\":[12,\"x\",-3]},{\"addr\":\"zz\",\"class\":\"pthread_mutex_t\","
    "   \"waiters\":[]}],"
    "  \"frames\":[{\"addr\":\"0x1\",\"func\":\"read\",\"file\":null,\"line\":null,"
    "   \"module\":null,\"offset\":null,\"inlined\":false}]},"
    " {\"tid\":12,\"name\":\"waiter\",\"error\":null,\"state\":\"BLOCKED\","
    "  \"blocked_in\":\"mutex\",\"approximate\":false,"
    "  \"waiting_to_lock\":{\"addr\":\"0x7f00\",\"class\":\"pthread_mutex_t\",\"owner\":11,"
    "   \"owner_name\":\"hol<d>er\"},"
    "  \"frames\":[{\"addr\":\"0x2\",\"func\":\"__lll_lock_wait\",\"file\":null,\"line\":null,"
    "   \"module\":null,\"offset\":null,\"inlined\":false},"
    "   {\"addr\":\"0x3\",\"func\":\"work\",\"file\":\"w.c\",\"line\":9,"
    "   \"module\":null,\"offset\":null,\"inlined\":false}]},"
    " {\"tid\":13,\"name\":\"odd\",\"error\":null,\"state\":\"BLOCKED\","
    "  \"blocked_in\":\"mutex\",\"approximate\":false,"
    "  \"waiting_to_lock\":{\"addr\":\"0x7f00 (a x)\",\"class\":\"pthread_mutex_t\",\"owner\":11},"
    "  \"locks_held\":{\"addr\":\"0x1\"},"
    "  \"frames\":[]},"
    " {\"tid\":14,\"name\":\"odd2\",\"error\":null,\"state\":\"BLOCKED\","
    "  \"blocked_in\":\"mutex\",\"approximate\":false,"
    "  \"waiting_to_lock\":{\"addr\":\"0x7f08\",\"class\":\"sem_t\",\"owner\":-1},"
    "  \"frames\":[]}]}";

static const json_t *thread(const json_t *dump, long long tid)
{
	const json_t *cs = json_object_get(json_object_get(dump, "threadDump"), "threadContainers");
	for (size_t i = 0; i < json_array_size(cs); i++) {
		const json_t *ts = json_object_get(json_array_get(cs, i), "threads");
		for (size_t k = 0; k < json_array_size(ts); k++)
			if (json_integer_value(json_object_get(json_array_get(ts, k), "tid")) ==
			    tid)
				return json_array_get(ts, k);
	}
	return NULL;
}

static json_t *build(void)
{
	json_error_t je;
	json_t *r = json_loads(reply, 0, &je);
	assert_non_null(r);
	char err[128];
	json_t *d = jdkdump_build(r, err, sizeof err);
	json_decref(r);
	assert_non_null(d);
	return d;
}

static void test_json(void **state)
{
	(void)state;
	json_t *d = build();
	const json_t *w = json_object_get(thread(d, 12), "waitingToLock");
	assert_string_equal(json_string_value(json_object_get(w, "lock")), "0x7f00");
	assert_string_equal(json_string_value(json_object_get(w, "class")), "pthread_mutex_t");
	assert_int_equal(json_integer_value(json_object_get(w, "ownerTid")), 11);
	assert_string_equal(json_string_value(json_object_get(w, "ownerName")), "hol<d>er");
	const json_t *held = json_object_get(thread(d, 11), "locksHeld");
	assert_int_equal(json_array_size(held), 1); /* the "zz" address is dropped */
	const json_t *ws = json_object_get(json_array_get(held, 0), "waiters");
	assert_int_equal(json_array_size(ws), 1); /* so are "x" and -3 */
	assert_int_equal(json_integer_value(json_array_get(ws, 0)), 12);
	/* Damaged members: nothing rather than something wrong. */
	assert_null(json_object_get(thread(d, 13), "waitingToLock"));
	assert_null(json_object_get(thread(d, 13), "locksHeld"));
	assert_null(json_object_get(thread(d, 14), "waitingToLock"));
	assert_null(json_object_get(thread(d, 11), "waitingToLock"));
	json_decref(d);
}

static void test_jstack_and_text(void **state)
{
	(void)state;
	json_t *d = build();
	char *j = jstackdump_string(d, JSTACKDUMP_LOCKS);
	assert_non_null(j);
	/* Under the frame that waits, the owner's name without '<' or '>'. */
	assert_non_null(strstr(j,
			       "\tat __lll_lock_wait(0x2)\n"
			       "\t- waiting to lock <0x7f00> (a pthread_mutex_t) owned by tid 11 "
			       "\"hol?d?er\"\n\tat work(w.c:9)\n"));
	assert_non_null(strstr(j, "   Locked ownable synchronizers:\n"
				  "\t- <0x7f00> (a pthread_mutex_t)\n"));
	free(j);
	/* Without -l no section, the waiting line stays (as HotSpot's). */
	j = jstackdump_string(d, 0);
	assert_non_null(j);
	assert_null(strstr(j, "Locked ownable synchronizers"));
	assert_non_null(strstr(j, "- waiting to lock <0x7f00>"));
	free(j);
	char *t = textdump_string(d, TEXTDUMP_LOCKS);
	assert_non_null(t);
	assert_non_null(
	    strstr(t, "- waiting to lock <0x7f00> (a pthread_mutex_t) owned by tid 11"));
	assert_non_null(strstr(t, "- holds <0x7f00> (a pthread_mutex_t)\n"));
	free(t);
	t = textdump_string(d, 0);
	assert_non_null(t);
	assert_null(strstr(t, "waiting to lock"));
	free(t);
	json_decref(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_json),
	    cmocka_unit_test(test_jstack_and_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
