/* test_jdkdump.c - the JDK JSON and text dump builders on canned daemon
 * replies: structure, ordering, every thread once, extras, and odd input. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../dump/jdkdump.h"
#include "../../dump/jstackdump.h"
#include "../../dump/textdump.h"
#include "../../common/jtext.h"

/* main 100 owns request@3; io workers 101 and 102 run its tasks 10 and 11;
 * 101 owns fetch@5 (task 10's scope) where 103 runs task 12; 104 idles in
 * the pool; 105 only the stacks know; 106 exited; 107 is the agent's own
 * thread; closed scope 4 has an open child 6 that must hang under request@3.
 * Task 10's body is named, 11's is unknown, 12's is not a string. */
static const char *canned =
    "{\"ok\":true,\"source\":\"signal\",\"capture_ns\":1500,\"max_pause_ns\":900,"
    "\"process\":{\"pid\":4242,\"name\":\"demo\",\"runtime_version\":\"0.1.0\","
    " \"state\":\"live\",\"complete\":true,\"lost\":3},"
    "\"model\":{\"now_ms\":1764441605321.5,"
    " \"threads\":["
    "  "
    "{\"tid\":100,\"name\":\"demo\",\"role\":\"main\",\"pool\":null,\"task\":null,\"state\":"
    "\"live\"},"
    "  "
    "{\"tid\":101,\"name\":\"io-1\",\"role\":\"worker\",\"pool\":1,\"task\":10,\"state\":\"live\"},"
    "  "
    "{\"tid\":102,\"name\":\"io-2\",\"role\":\"worker\",\"pool\":1,\"task\":11,\"state\":\"live\"},"
    "  "
    "{\"tid\":103,\"name\":\"io-3\",\"role\":\"worker\",\"pool\":1,\"task\":12,\"state\":\"live\"},"
    "  "
    "{\"tid\":104,\"name\":\"io-4\",\"role\":\"worker\",\"pool\":1,\"task\":null,\"state\":"
    "\"live\"},"
    "  "
    "{\"tid\":106,\"name\":\"gone\",\"role\":\"other\",\"pool\":null,\"task\":null,\"state\":"
    "\"exited\"},"
    "  "
    "{\"tid\":107,\"name\":\"scoped-agent\",\"role\":\"agent\",\"pool\":null,\"task\":null,"
    "\"state\":\"live\"}],"
    " \"pools\":[{\"id\":1,\"name\":\"io\",\"core\":4,\"max\":8,\"size\":4,\"active\":3,"
    "   \"largest\":4,\"queued\":0,\"completed\":7,\"rejected\":0,\"queue\":\"bounded\","
    "   \"policy\":\"caller_runs\"}],"
    " \"scopes\":["
    "  "
    "{\"id\":6,\"name\":\"orphan\",\"parent\":4,\"owner\":102,\"joiner\":\"await_all\",\"state\":"
    "\"open\"},"
    "  {\"id\":3,\"name\":\"request\",\"parent\":null,\"owner\":100,\"joiner\":\"all_successful\","
    "   \"state\":\"joining\",\"deadline_ms\":1764441606000,\"opened_ms\":1764441605000,"
    "   \"cancel_reason\":null,\"site\":{\"file\":\"/src/demo.c\",\"line\":42,\"func\":\"handle\"},"
    "   \"values\":{\"request_id\":\"r-17\"}},"
    "  {\"id\":4,\"name\":\"old\",\"parent\":3,\"owner\":102,\"state\":\"closed\"},"
    "  {\"id\":5,\"name\":\"fetch\",\"parent\":3,\"parent_task\":10,\"owner\":101,"
    "   \"joiner\":\"any_successful\",\"state\":\"cancelled\",\"cancel_reason\":\"joiner\","
    "   \"values\":{\"user\":\"u1\",\"request_id\":\"inner\"}}],"
    " \"tasks\":["
    "  {\"id\":10,\"scope\":3,\"state\":\"running\",\"worker\":101,"
    "   \"site\":{\"file\":\"demo.c\",\"line\":50,\"func\":\"handle\"},\"func\":\"load_profile\","
    "   \"forked_ms\":1764441605100},"
    "  {\"id\":11,\"scope\":3,\"state\":\"running\",\"worker\":102,\"func\":null},"
    "  {\"id\":12,\"scope\":5,\"state\":\"running\",\"worker\":103,\"func\":17}]},"
    "\"stacks\":["
    " {\"tid\":101,\"state\":\"WAITING\",\"blocked_in\":\"futex\",\"frames\":["
    "   {\"addr\":\"0x1\",\"func\":\"fetch_user\",\"file\":\"/src/server.c\",\"line\":42},"
    "   "
    "{\"addr\":\"0x2\",\"func\":\"__GI_poll\",\"module\":\"/lib/libc.so.6\",\"offset\":\"0x10\"},"
    "   {\"addr\":\"0x3\",\"func\":\"lonely\"},"
    "   {\"addr\":\"0x4\",\"module\":\"/lib/x.so\",\"offset\":\"0x20\"},"
    "   {\"addr\":\"0x5\"}]},"
    " {\"tid\":100,\"state\":\"RUNNABLE\",\"frames\":[]},"
    " {\"tid\":105,\"name\":\"stray\",\"state\":\"SLEEPY\",\"frames\":[]}]}";

static json_t *load(const char *s)
{
	json_error_t e;
	json_t *j = json_loads(s, 0, &e);
	if (!j)
		fail_msg("canned JSON broken at %d: %s", e.line, e.text);
	return j;
}

/* Every dump built here is saved and, at the end, run through the real
 * validator (tests/validate_dump.py) in one batch. */
static char saved_dir[] = "/tmp/test_jdkdump_dumps.XXXXXX";
static int nsaved;

static void save(const json_t *d)
{
	char path[128];
	if (!nsaved && !mkdtemp(saved_dir))
		fail_msg("mkdtemp %s failed", saved_dir);
	snprintf(path, sizeof path, "%s/dump%03d.json", saved_dir, nsaved++);
	assert_int_equal(json_dump_file(d, path, JSON_COMPACT), 0);
}

/* The JSON text scopecmd writes straight from reply, without a tree, is
 * byte for byte jansson's print of the tree d built from it.  (Without
 * model.now_ms both read the clock, which may tick in between.) */
static void same_as_written(const json_t *reply, const json_t *d)
{
	if (!json_is_number(json_object_get(json_object_get(reply, "model"), "now_ms")))
		return;
	char err[256];
	size_t len, tlen;
	char *text = jtext_dump(reply, JSON_COMPACT, false, &len);
	struct jv_doc *doc = NULL;
	assert_non_null(text);
	assert_int_equal(jv_parse(text, len, &doc, err, sizeof err), 0);
	char *streamed = jdkdump_json_doc(jv_root(doc), &len, err, sizeof err);
	char *tree = jtext_dump(d, JSON_INDENT(2) | JSON_PRESERVE_ORDER, true, &tlen);
	assert_non_null(streamed);
	assert_non_null(tree);
	assert_int_equal(len, tlen);
	assert_string_equal(streamed, tree);
	free(streamed);
	free(tree);
	free(text);
	jv_free(doc);
}

static json_t *build(const char *s)
{
	char err[256];
	json_t *r = load(s);
	json_t *d = jdkdump_build(r, err, sizeof err);
	if (d)
		same_as_written(r, d);
	json_decref(r);
	assert_non_null(d);
	save(d);
	return d;
}

static const json_t *containers(const json_t *d)
{
	return json_object_get(json_object_get(d, "threadDump"), "threadContainers");
}

static const json_t *container(const json_t *d, const char *name)
{
	const json_t *cs = containers(d);
	for (size_t i = 0; i < json_array_size(cs); i++)
		if (!strcmp(json_string_value(json_object_get(json_array_get(cs, i), "container")),
			    name))
			return json_array_get(cs, i);
	fail_msg("no container %s", name);
	return NULL;
}

static const char *str(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* The rules a schema cannot state: names unique, parents before children,
 * each tid once, counts right, owners resolve.  Returns the thread count. */
static size_t check_consistent(const json_t *d)
{
	const json_t *cs = containers(d);
	json_t *names = json_object(), *tids = json_object();
	assert_true(json_array_size(cs) >= 1);
	assert_string_equal(str(json_array_get(cs, 0), "container"), "<root>");
	assert_true(json_is_null(json_object_get(json_array_get(cs, 0), "parent")));
	size_t total = 0;
	for (size_t i = 0; i < json_array_size(cs); i++) {
		const json_t *c = json_array_get(cs, i);
		const char *name = str(c, "container");
		assert_non_null(name);
		assert_null(json_object_get(names, name));
		if (i > 0)
			assert_non_null(json_object_get(names, str(c, "parent")));
		json_object_set_new(names, name, json_true());
		const json_t *th = json_object_get(c, "threads");
		assert_int_equal(json_integer_value(json_object_get(c, "threadCount")),
				 json_array_size(th));
		for (size_t k = 0; k < json_array_size(th); k++) {
			char key[32];
			snprintf(key, sizeof key, "%lld",
				 (long long)json_integer_value(
				     json_object_get(json_array_get(th, k), "tid")));
			assert_null(json_object_get(tids, key));
			json_object_set_new(tids, key, json_true());
			total++;
		}
	}
	for (size_t i = 0; i < json_array_size(cs); i++) {
		const json_t *o = json_object_get(json_array_get(cs, i), "owner");
		if (json_is_integer(o)) {
			char key[32];
			snprintf(key, sizeof key, "%lld", (long long)json_integer_value(o));
			assert_non_null(json_object_get(tids, key));
		} else {
			assert_true(json_is_null(o));
		}
	}
	json_decref(names);
	json_decref(tids);
	return total;
}

static int tids_in(const json_t *c, long long *out, int max)
{
	const json_t *th = json_object_get(c, "threads");
	int n = 0;
	for (size_t k = 0; k < json_array_size(th) && n < max; k++)
		out[n++] = json_integer_value(json_object_get(json_array_get(th, k), "tid"));
	return n;
}

static void test_structure(void **state)
{
	(void)state;
	json_t *d = build(canned);
	const json_t *td = json_object_get(d, "threadDump");
	assert_int_equal(json_integer_value(json_object_get(td, "formatVersion")), 2);
	assert_int_equal(json_integer_value(json_object_get(td, "processId")), 4242);
	assert_string_equal(str(td, "time"), "2025-11-29T18:40:05.321Z");
	assert_string_equal(str(td, "runtimeVersion"), "0.1.0");
	assert_string_equal(str(td, "runtimeName"), "libscope");

	const json_t *cs = containers(d);
	const char *order[] = {"<root>", "pool:io@1", "request@3", "fetch@5", "orphan@6"};
	assert_int_equal(json_array_size(cs), 5);
	for (size_t i = 0; i < 5; i++)
		assert_string_equal(str(json_array_get(cs, i), "container"), order[i]);
	assert_string_equal(str(container(d, "request@3"), "parent"), "<root>");
	assert_string_equal(str(container(d, "fetch@5"), "parent"), "request@3");
	/* Closed scope 4 is no container; its open child hangs on the next open ancestor. */
	assert_string_equal(str(container(d, "orphan@6"), "parent"), "request@3");
	assert_int_equal(json_integer_value(json_object_get(container(d, "request@3"), "owner")),
			 100);
	assert_int_equal(json_integer_value(json_object_get(container(d, "fetch@5"), "owner")),
			 101);

	long long t[8];
	/* The agent's thread sits in <root> under its own name. */
	assert_int_equal(tids_in(container(d, "<root>"), t, 8), 3);
	assert_int_equal(t[0], 100);
	assert_int_equal(t[1], 105);
	assert_int_equal(t[2], 107);
	assert_int_equal(tids_in(container(d, "pool:io@1"), t, 8), 1);
	assert_int_equal(t[0], 104);
	/* 101 owns fetch@5 but appears once, in the scope of the task it runs. */
	assert_int_equal(tids_in(container(d, "request@3"), t, 8), 2);
	assert_int_equal(t[0], 101);
	assert_int_equal(t[1], 102);
	assert_int_equal(tids_in(container(d, "fetch@5"), t, 8), 1);
	assert_int_equal(t[0], 103);
	assert_int_equal(tids_in(container(d, "orphan@6"), t, 8), 0);
	assert_int_equal(check_consistent(d), 7);
	json_decref(d);
}

static const json_t *thread(const json_t *d, long long tid)
{
	const json_t *cs = containers(d);
	for (size_t i = 0; i < json_array_size(cs); i++) {
		const json_t *th = json_object_get(json_array_get(cs, i), "threads");
		for (size_t k = 0; k < json_array_size(th); k++)
			if (json_integer_value(json_object_get(json_array_get(th, k), "tid")) ==
			    tid)
				return json_array_get(th, k);
	}
	fail_msg("no thread %lld", tid);
	return NULL;
}

static void test_extras_and_frames(void **state)
{
	(void)state;
	json_t *d = build(canned);
	const json_t *td = json_object_get(d, "threadDump");
	assert_true(json_is_true(json_object_get(td, "complete")));
	assert_int_equal(json_integer_value(json_object_get(td, "eventsLost")), 3);
	assert_string_equal(str(td, "stackSource"), "signal");
	assert_int_equal(json_integer_value(json_object_get(td, "maxPauseNs")), 900);

	const json_t *rq = container(d, "request@3");
	assert_string_equal(str(rq, "joiner"), "all_successful");
	assert_string_equal(str(rq, "state"), "joining");
	assert_string_equal(str(rq, "deadline"), "2025-11-29T18:40:06.000Z");
	assert_string_equal(str(rq, "openSite"), "handle (demo.c:42)");
	assert_string_equal(str(json_object_get(rq, "values"), "request_id"), "r-17");
	assert_string_equal(str(container(d, "fetch@5"), "cancelReason"), "joiner");
	assert_string_equal(str(json_object_get(container(d, "pool:io@1"), "pool"), "policy"),
			    "caller_runs");

	const json_t *w = thread(d, 101);
	assert_string_equal(str(w, "name"), "io-1");
	assert_string_equal(str(w, "state"), "WAITING");
	assert_string_equal(str(w, "blockedIn"), "futex");
	const json_t *task = json_object_get(w, "task");
	assert_int_equal(json_integer_value(json_object_get(task, "id")), 10);
	assert_string_equal(str(task, "state"), "running");
	assert_string_equal(str(task, "function"), "load_profile");
	assert_string_equal(str(task, "forkSite"), "handle (demo.c:50)");
	assert_string_equal(str(task, "forkedAt"), "2025-11-29T18:40:05.100Z");
	for (long long tid = 102; tid <= 103; tid++) {
		const json_t *other = json_object_get(thread(d, tid), "task");
		assert_non_null(json_object_get(other, "function"));
		assert_true(json_is_null(json_object_get(other, "function")));
	}
	assert_string_equal(str(thread(d, 107), "name"), "scoped-agent");
	assert_string_equal(str(thread(d, 107), "role"), "agent");
	assert_true(json_is_null(json_object_get(thread(d, 107), "task")));
	/* 101 owns fetch@5: inner bindings win over request@3's. */
	const json_t *sv = json_object_get(w, "scopedValues");
	assert_string_equal(str(sv, "request_id"), "inner");
	assert_string_equal(str(sv, "user"), "u1");
	assert_string_equal(str(json_object_get(thread(d, 102), "scopedValues"), "request_id"),
			    "r-17");

	const json_t *st = json_object_get(w, "stack");
	const char *want[] = {"fetch_user (server.c:42)", "__GI_poll (libc.so.6+0x10)",
			      "lonely (0x3)", "0x4 (x.so+0x20)", "0x5"};
	assert_int_equal(json_array_size(st), 5);
	for (size_t i = 0; i < 5; i++)
		assert_string_equal(json_string_value(json_array_get(st, i)), want[i]);
	/* No stack captured, and a state the JDK does not know: a JDK state
	 * still, and what is not known beside it. */
	assert_string_equal(str(thread(d, 104), "state"), "RUNNABLE");
	assert_true(json_is_false(json_object_get(thread(d, 104), "stateKnown")));
	assert_non_null(str(thread(d, 104), "stackError"));
	assert_string_equal(str(thread(d, 105), "state"), "RUNNABLE");
	assert_true(json_is_false(json_object_get(thread(d, 105), "stateKnown")));
	assert_string_equal(str(thread(d, 105), "name"), "stray");
	assert_null(json_object_get(thread(d, 101), "stateKnown"));
	json_decref(d);
}

static void test_text(void **state)
{
	(void)state;
	json_t *d = build(canned);
	char *s = textdump_string(d, 0);
	assert_non_null(s);
	assert_non_null(
	    strstr(s, "Thread dump of process 4242 (demo) at 2025-11-29T18:40:05.321Z\n"));
	assert_non_null(strstr(s, "libscope 0.1.0, stacks from signal, 3 events lost\n"));
	assert_non_null(strstr(s, "\n<root>\n  #100 \"demo\" RUNNABLE\n"));
	assert_non_null(strstr(s, "\n  request@3  all_successful, joining, deadline "
				  "2025-11-29T18:40:06.000Z, owner #100\n"
				  "    #101 \"io-1\" WAITING\n"
				  "        at fetch_user (server.c:42)\n"));
	assert_non_null(strstr(
	    s, "\n    fetch@5  any_successful, cancelled, deadline none, "
	       "owner #101, cancelled (joiner)\n      #103 \"io-3\" RUNNABLE (state not known)\n"));
	assert_non_null(
	    strstr(s, "\n  pool:io@1  pool io: 4 of max 8 threads, 3 active, 0 queued\n"));
	assert_null(strstr(s, "blocked in"));
	assert_null(strstr(s, "task 10"));
	free(s);

	s = textdump_string(d, TEXTDUMP_LOCKS | TEXTDUMP_EXTENDED);
	assert_non_null(
	    strstr(s, "    #101 \"io-1\" WAITING\n      task 10 load_profile() running, forked at "
		      "2025-11-29T18:40:05.100Z by handle (demo.c:50)\n"
		      "      scoped values: "));
	assert_non_null(strstr(s, "    #102 \"io-2\" RUNNABLE (state not known)\n      task 11 "
				  "running, forked at ? by ?\n"));
	assert_non_null(strstr(s, "\n  #107 \"scoped-agent\" RUNNABLE (state not known)\n"));
	assert_non_null(strstr(s, "      - blocked in futex\n"));
	assert_non_null(strstr(
	    s, "opened at 2025-11-29T18:40:05.000Z by handle (demo.c:42), values request_id=r-17"));
	free(s);
	json_decref(d);
}

/* A hostile program: names, values and source files with terminal escapes,
 * newlines, C1 controls and bytes that are not UTF-8; scope and task ids
 * past INT64_MAX (u64 on the wire).  The JSON keeps every id exact (big ones
 * as digit strings) and validates; the text renderers print no control
 * byte but the line ends, so nothing reaches the terminal raw and no name
 * starts a line of its own. */
static const char *hostile =
    "{\"ok\":true,\"source\":\"signal\","
    "\"process\":{\"pid\":4243,\"name\":\"ev\\u001b[2Jil\",\"runtime_version\":\"0.1.0\","
    " \"state\":\"live\",\"complete\":true,\"lost\":0},"
    "\"model\":{\"now_ms\":1764441605321.5,"
    " \"threads\":[{\"tid\":100,\"name\":\"t\\u001b]0;x\\u0007\\n#999 fake\",\"role\":\"main\","
    "  \"pool\":null,\"task\":18446744073709551615,\"state\":\"live\"}],"
    " \"pools\":[],"
    " \"scopes\":[{\"id\":9223372036854775809,\"name\":\"a\\u001b[31mb\",\"parent\":null,\"owner\":"
    "100,"
    "  \"joiner\":\"all_successful\",\"state\":\"open\",\"values\":{\"k\\u009b\":\"v\\r\\nx\"},"
    "  \"site\":{\"file\":\"s\\u001b.c\",\"line\":4,\"func\":\"open\\u0085\"}},"
    "  {\"id\":18446744073709551614,\"name\":\"inner\",\"parent\":9223372036854775809,"
    "  "
    "\"parent_task\":18446744073709551615,\"owner\":100,\"joiner\":\"await_all\",\"state\":"
    "\"open\"}],"
    " \"tasks\":[{\"id\":18446744073709551615,\"scope\":9223372036854775809,\"state\":\"running\","
    "  "
    "\"worker\":100,\"func\":\"f\\nx\",\"site\":{\"file\":\"t.c\",\"line\":5,\"func\":\"g\\u007f\"}"
    "}]},"
    "\"stacks\":[{\"tid\":100,\"state\":\"RUNNABLE\",\"frames\":["
    " {\"addr\":\"0x1\",\"func\":\"evil\\u001b]0;t\\u0007\",\"file\":\"x\\n.c\",\"line\":3}]},"
    " {\"tid\":18446744073709551615,\"state\":\"RUNNABLE\",\"frames\":[]},"
    " {\"tid\":-3,\"state\":\"RUNNABLE\",\"frames\":[]}]}";

/* No byte of s is a control but '\n' (and the layout's tabs when tabs),
 * nor a C1 control in UTF-8. */
static void no_controls(const char *s, bool tabs)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p < 0x20 && *p != '\n' && !(tabs && *p == '\t')) || *p == 0x7f ||
		    (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0))
			fail_msg("control byte 0x%02x at %zu in:\n%s", *p,
				 (size_t)(p - (const unsigned char *)s), s);
	}
}

static void test_hostile_text(void **state)
{
	(void)state;
	struct jv_doc *doc;
	char err[256];
	assert_int_equal(jv_parse(hostile, strlen(hostile), &doc, err, sizeof err), 0);
	json_t *d = jdkdump_build_doc(jv_root(doc), err, sizeof err);
	jv_free(doc);
	assert_non_null(d);
	save(d);
	const json_t *c = container(d, "a\x1b[31mb@9223372036854775809");
	assert_non_null(c);
	assert_string_equal(json_string_value(json_object_get(c, "scopeId")),
			    "9223372036854775809");
	const json_t *in = container(d, "inner@18446744073709551614");
	assert_non_null(in);
	assert_string_equal(json_string_value(json_object_get(in, "parent")),
			    "a\x1b[31mb@9223372036854775809");
	assert_string_equal(json_string_value(json_object_get(in, "parentTask")),
			    "18446744073709551615");
	/* A tid that is negative or past INT64_MAX is a damaged reply's: left out. */
	assert_int_equal(json_array_size(json_object_get(container(d, "<root>"), "threads")), 1);
	/* The owner runs its own scope's task while it joins (issue 19). */
	const json_t *t = thread(d, 100);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(t, "runsWhileJoining"), "id")),
	    "18446744073709551615");
	assert_string_equal(json_string_value(json_object_get(c, "ownerRunsTask")),
			    "18446744073709551615");

	char *s = textdump_string(d, TEXTDUMP_LOCKS | TEXTDUMP_EXTENDED);
	assert_non_null(s);
	no_controls(s, false);
	assert_non_null(strstr(s, "Thread dump of process 4243 (ev\\x1b[2Jil) at "));
	assert_non_null(strstr(s, "\n  a\\x1b[31mb@9223372036854775809  all_successful, open, "));
	assert_non_null(strstr(s, "by open\\u0085 (s\\x1b.c:4), values k\\u009b=v\\r\\nx\n"));
	assert_non_null(strstr(s, "\n  #100 \"t\\x1b]0;x\\x07\\n#999 fake\" RUNNABLE\n"
				  "    joins a\\x1b[31mb@9223372036854775809, running its task "
				  "18446744073709551615 f\\nx() meanwhile\n"));
	assert_non_null(strstr(s, "\n      at evil\\x1b]0;t\\x07 (x\\n.c:3)\n"));
	assert_null(strstr(s, "\n#999"));
	free(s);
	s = jstackdump_string(d, JSTACKDUMP_LOCKS);
	assert_non_null(s);
	no_controls(s, true);
	assert_non_null(strstr(s, "\n\"t\\x1b]0;x\\x07\\n#999 fake\" #100 "));
	assert_non_null(strstr(s, "\tat evil\\x1b]0;t\\x07(x\\n.c:3)\n"));
	assert_non_null(
	    strstr(s, "\t- <0x8000000000000001> (a scope a\\x1b[31mb@9223372036854775809, "));
	free(s);
	json_decref(d);
}

/* Inlined functions are frames of their own, listed in inlinedFrames and
 * marked in the text; one address formats per place in its inline chain,
 * so a second thread at the same address gets the same frames. */
static void test_inlined_frames(void **state)
{
	(void)state;
	static const char *reply =
	    "{\"ok\":true,\"source\":\"bpf\",\"events_during_capture\":5,"
	    "\"process\":{\"pid\":7,\"state\":\"live\"},"
	    "\"model\":{\"threads\":[],\"pools\":[],\"scopes\":[],\"tasks\":[]},"
	    "\"stacks\":["
	    " {\"tid\":1,\"state\":\"WAITING\",\"frames\":["
	    "  {\"addr\":\"0x10\",\"func\":\"syscall\",\"file\":\"syscall.S\",\"line\":38},"
	    "  "
	    "{\"addr\":\"0x20\",\"func\":\"join_close\",\"file\":\"d.c\",\"line\":80,\"inlined\":"
	    "true},"
	    "  "
	    "{\"addr\":\"0x20\",\"func\":\"handle\",\"file\":\"d.c\",\"line\":170,\"inlined\":"
	    "false}]},"
	    " {\"tid\":2,\"state\":\"WAITING\",\"frames\":["
	    "  "
	    "{\"addr\":\"0x20\",\"func\":\"join_close\",\"file\":\"d.c\",\"line\":80,\"inlined\":"
	    "true},"
	    "  {\"addr\":\"0x20\",\"func\":\"handle\",\"file\":\"d.c\",\"line\":170}]},"
	    " {\"tid\":3,\"state\":\"TERMINATED\",\"exited\":true,\"frames\":[],"
	    "  \"error\":\"the thread exited during the capture\"}]}";
	json_t *d = build(reply);
	/* The tree took 5 events in while the stacks were taken: said. */
	assert_int_equal(json_integer_value(json_object_get(json_object_get(d, "threadDump"),
							    "eventsDuringCapture")),
			 5);
	/* No version reported: still one that parses. */
	assert_string_equal(str(json_object_get(d, "threadDump"), "runtimeVersion"), "0");
	/* A thread that exited during the capture: the JDK's state for it. */
	assert_string_equal(str(thread(d, 3), "state"), "TERMINATED");
	assert_true(json_is_true(json_object_get(thread(d, 3), "exitedDuringCapture")));
	assert_null(json_object_get(thread(d, 3), "stateKnown"));
	const char *want1[] = {"syscall (syscall.S:38)", "join_close (d.c:80)", "handle (d.c:170)"};
	const json_t *st = json_object_get(thread(d, 1), "stack");
	assert_int_equal(json_array_size(st), 3);
	for (size_t i = 0; i < 3; i++)
		assert_string_equal(json_string_value(json_array_get(st, i)), want1[i]);
	const json_t *inl = json_object_get(thread(d, 1), "inlinedFrames");
	assert_int_equal(json_array_size(inl), 1);
	assert_int_equal(json_integer_value(json_array_get(inl, 0)), 1);
	st = json_object_get(thread(d, 2), "stack");
	assert_string_equal(json_string_value(json_array_get(st, 0)), "join_close (d.c:80)");
	assert_string_equal(json_string_value(json_array_get(st, 1)), "handle (d.c:170)");
	inl = json_object_get(thread(d, 2), "inlinedFrames");
	assert_int_equal(json_integer_value(json_array_get(inl, 0)), 0);
	char *s = textdump_string(d, 0);
	assert_non_null(strstr(s, "stacks from bpf, tree 5 events newer than the stacks\n"));
	assert_non_null(
	    strstr(s, "      at syscall (syscall.S:38)\n      at join_close (d.c:80) (inlined)\n"
		      "      at handle (d.c:170)\n"));
	free(s);
	json_decref(d);
}

/* Threads that share a stack ("same_stack_as") show its frames, in the
 * tree and in the text (which writes each shared stack once and copies
 * it): the same bytes either way; a chain or a missing target leaves the
 * thread its own (empty) frames. */
static void test_shared_stacks(void **state)
{
	(void)state;
	static const char *reply =
	    "{\"ok\":true,\"source\":\"bpf\",\"capture_ns\":10,\"max_pause_ns\":0,"
	    "\"process\":{\"pid\":7,\"state\":\"live\",\"crash\":{\"tid\":5,\"signal\":11}},"
	    "\"model\":{\"now_ms\":1764441605321.5,"
	    " \"threads\":[{\"tid\":1,\"name\":\"a\",\"task\":null,\"state\":\"live\"},"
	    "  {\"tid\":6,\"name\":\"w\",\"task\":10,\"state\":\"live\"}],"
	    " \"pools\":[],"
	    " \"scopes\":[{\"id\":3,\"name\":\"s\",\"parent\":null,\"owner\":1,"
	    "  \"state\":\"joining\"}],"
	    " \"tasks\":[{\"id\":10,\"scope\":3,\"state\":\"running\",\"worker\":6}]},"
	    "\"stacks\":["
	    " {\"tid\":1,\"state\":\"WAITING\",\"frames\":["
	    "  {\"addr\":\"0x10\",\"func\":\"syscall\",\"file\":\"syscall.S\",\"line\":38},"
	    "  {\"addr\":\"0x20\",\"func\":\"inner\",\"file\":\"d.c\",\"line\":8,\"inlined\":true},"
	    "  {\"addr\":\"0x20\",\"func\":\"outer\",\"file\":\"d.c\",\"line\":17}]},"
	    " {\"tid\":2,\"state\":\"WAITING\",\"same_stack_as\":1,\"frames\":[]},"
	    " {\"tid\":3,\"state\":\"WAITING\",\"same_stack_as\":2,\"frames\":[]},"
	    " {\"tid\":4,\"state\":\"WAITING\",\"same_stack_as\":99,\"frames\":[]},"
	    " {\"tid\":5,\"state\":\"RUNNABLE\",\"same_stack_as\":1,\"frames\":[]},"
	    " {\"tid\":6,\"state\":\"WAITING\",\"same_stack_as\":1,\"frames\":[]},"
	    " {\"tid\":8,\"state\":\"WAITING\",\"same_stack_as\":1,\"frames\":[]}]}";
	json_t *d = build(reply); /* text and tree compared there */
	const json_t *want = json_object_get(thread(d, 1), "stack");
	assert_int_equal(json_array_size(want), 3);
	static const json_int_t alike[] = {2, 5, 6, 8};
	for (size_t i = 0; i < sizeof alike / sizeof *alike; i++) {
		const json_t *t = thread(d, alike[i]);
		assert_true(json_equal(json_object_get(t, "stack"), want));
		assert_true(json_equal(json_object_get(t, "inlinedFrames"),
				       json_object_get(thread(d, 1), "inlinedFrames")));
	}
	assert_int_equal(json_array_size(json_object_get(thread(d, 3), "stack")), 0);
	assert_int_equal(json_array_size(json_object_get(thread(d, 4), "stack")), 0);
	assert_null(json_object_get(thread(d, 3), "inlinedFrames"));
	json_decref(d);
}

/* Renders reply (jansson) as text with its marks. */
static char *render_marked(const json_t *reply, size_t *len, struct jdkdump_marks *marks)
{
	char err[256];
	size_t tlen;
	char *text = jtext_dump(reply, JSON_COMPACT, false, &tlen);
	struct jv_doc *doc = NULL;
	assert_non_null(text);
	assert_int_equal(jv_parse(text, tlen, &doc, err, sizeof err), 0);
	char *out = jdkdump_json_doc_marked(jv_root(doc), len, marks, err, sizeof err);
	assert_non_null(out);
	assert_false(marks->failed);
	free(text);
	jv_free(doc);
	return out;
}

/* A dump re-made from the last one's text with another time, captureNs
 * and maxPauseNs (what the daemon does when nothing else moved) is byte for
 * byte the dump rendered afresh, with the same marks; and back again. */
static void test_remark(void **state)
{
	(void)state;
	static const struct {
		double now_ms;
		json_int_t capture, pause;
	} moments[] = {{1764441605321.5, 1500, 900},
		       {1764441699999.9, 123456789, -1},
		       {1764441700000.25, 0, 77},
		       {1764441700001.5, 5, 12},
		       {1764441605321.5, 1500, 900}};
	json_t *reply = load(canned);
	struct jdkdump_marks prev = {0}, fresh = {0}, again = {0};
	size_t plen = 0;
	char *ptext = NULL;
	for (size_t i = 0; i < sizeof moments / sizeof *moments; i++) {
		json_object_set_new(json_object_get(reply, "model"), "now_ms",
				    json_real(moments[i].now_ms));
		json_object_set_new(reply, "capture_ns", json_integer(moments[i].capture));
		json_object_set_new(reply, "max_pause_ns", json_integer(moments[i].pause));
		size_t flen;
		char *ftext = render_marked(reply, &flen, &fresh);
		/* Every thread's time, the document's, captureNs and maxPauseNs. */
		size_t times = 0;
		for (const char *p = ftext; (p = strstr(p, "\"time\": ")) != NULL; p++)
			times++;
		assert_true(times > 5);
		size_t moments_n = 0;
		for (size_t k = 0; k < fresh.n; k++)
			moments_n += fresh.m[k].kind <= JDKDUMP_MARK_MAX_PAUSE_NS;
		assert_int_equal(moments_n, times + 2);
		if (ptext) {
			struct jdkdump_moment now = {moments[i].now_ms, moments[i].capture,
						     moments[i].pause};
			size_t rlen;
			/* In place: the same bytes when every value keeps its
			 * length, else refused with the text untouched. */
			char *copy = malloc(plen);
			assert_non_null(copy);
			memcpy(copy, ptext, plen);
			bool same_len = plen == flen;
			for (size_t k = 0; same_len && k < prev.n; k++)
				same_len = prev.m[k].len == fresh.m[k].len;
			assert_int_equal(jdkdump_json_remark_inplace(copy, plen, &prev, &now),
					 same_len);
			if (same_len)
				assert_memory_equal(copy, ftext, flen);
			else
				assert_memory_equal(copy, ptext, plen);
			free(copy);
			char *r = jdkdump_json_remark(ptext, plen, &prev, &now, &rlen, &again);
			assert_non_null(r);
			assert_int_equal(rlen, flen);
			assert_memory_equal(r, ftext, flen);
			assert_int_equal(again.n, fresh.n);
			for (size_t k = 0; k < fresh.n; k++) {
				assert_int_equal(again.m[k].at, fresh.m[k].at);
				assert_int_equal(again.m[k].len, fresh.m[k].len);
				assert_int_equal(again.m[k].kind, fresh.m[k].kind);
				assert_int_equal(again.m[k].tid, fresh.m[k].tid);
			}
			/* The next one is re-made from this one, as the daemon
			 * does in a row. */
			free(ftext);
			ftext = r;
			struct jdkdump_marks t = fresh;
			fresh = again;
			again = t;
		}
		free(ptext);
		ptext = ftext;
		plen = flen;
		struct jdkdump_marks t = prev;
		prev = fresh;
		fresh = t;
	}
	/* Marks that do not fit the text are refused. */
	struct jdkdump_moment now = {0, 0, 0};
	size_t rlen;
	prev.m[0].at = plen + 1;
	assert_null(jdkdump_json_remark(ptext, plen, &prev, &now, &rlen, &again));
	free(ptext);
	jdkdump_marks_free(&prev);
	jdkdump_marks_free(&fresh);
	jdkdump_marks_free(&again);
	json_decref(reply);
}

/* Sets stacks[] entry i's member key to v (stolen) in reply; returns the
 * value's JSON text as the reply has it (free()). */
static char *set_stack(json_t *reply, size_t i, const char *key, json_t *v)
{
	json_object_set_new(json_array_get(json_object_get(reply, "stacks"), i), key, v);
	char *raw = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	assert_non_null(raw);
	return raw;
}

/* A dump in which some threads' state or blocked_in moved, re-made from
 * the last one's text with those values replaced: byte for byte the text
 * rendered afresh, with the same marks; the last text served as it was
 * (a moved thread's stale state) differs; what a mark cannot stand for is
 * refused. */
static void test_remark_moved(void **state)
{
	(void)state;
	json_t *a = load(canned);
	struct jdkdump_marks ma = {0}, mb = {0}, mr = {0};
	size_t alen, blen, rlen;
	char *atext = render_marked(a, &alen, &ma);
	struct jdkdump_moment now = {1764441605999.5, 2500, -1};

	json_t *b = json_deep_copy(a);
	json_object_set_new(json_object_get(b, "model"), "now_ms", json_real(now.now_ms));
	json_object_set_new(b, "capture_ns", json_integer(now.capture_ns));
	json_object_set_new(b, "max_pause_ns", json_integer(now.max_pause_ns));
	/* 101 ran (WAITING in futex -> RUNNABLE, blocked in nothing); 100
	 * went to sleep in a call whose name needs escapes. */
	char *r1 = set_stack(b, 0, "state", json_string("RUNNABLE"));
	char *r2 = set_stack(b, 0, "blocked_in", json_null());
	char *r3 = set_stack(b, 1, "state", json_string("TIMED_WAITING"));
	char *r4 = set_stack(b, 1, "blocked_in", json_string("clock_\"nano\"sleep\n"));
	struct jdkdump_moved mv[] = {{101, JDKDUMP_MARK_STATE, r1, strlen(r1)},
				     {101, JDKDUMP_MARK_BLOCKED_IN, r2, strlen(r2)},
				     {100, JDKDUMP_MARK_STATE, r3, strlen(r3)},
				     {100, JDKDUMP_MARK_BLOCKED_IN, r4, strlen(r4)}};
	char *btext = render_marked(b, &blen, &mb);
	assert_true(blen != alen || memcmp(atext, btext, alen) != 0);
	char *re = jdkdump_json_remark_moved(atext, alen, &ma, &now, mv, 4, &rlen, &mr);
	assert_non_null(re);
	assert_int_equal(rlen, blen);
	assert_memory_equal(re, btext, blen);
	assert_int_equal(mr.n, mb.n);
	for (size_t k = 0; k < mb.n; k++) {
		assert_int_equal(mr.m[k].at, mb.m[k].at);
		assert_int_equal(mr.m[k].len, mb.m[k].len);
		assert_int_equal(mr.m[k].kind, mb.m[k].kind);
		assert_int_equal(mr.m[k].tid, mb.m[k].tid);
	}
	free(re);

	/* Stale: the moved threads' old text served (only the times new),
	 * or one of the moved values left out, is not the dump. */
	re = jdkdump_json_remark(atext, alen, &ma, &now, &rlen, &mr);
	assert_non_null(re);
	assert_false(rlen == blen && memcmp(re, btext, blen) == 0);
	free(re);
	re = jdkdump_json_remark_moved(atext, alen, &ma, &now, mv, 3, &rlen, &mr);
	assert_non_null(re);
	assert_false(rlen == blen && memcmp(re, btext, blen) == 0);
	free(re);
	/* In place leaves the threads' values as they were: not for moves. */

	/* Refused: a state the JDK does not have ("stateKnown" would come), a
	 * thread whose state has no mark (105's SLEEPY), a tid not in the
	 * dump, the same value twice, too many. */
	const char *sleepy = "\"SLEEPY\"", *waiting = "\"WAITING\"";
	struct jdkdump_moved bad[][2] = {{{101, JDKDUMP_MARK_STATE, sleepy, strlen(sleepy)}},
					 {{105, JDKDUMP_MARK_STATE, waiting, strlen(waiting)}},
					 {{999, JDKDUMP_MARK_BLOCKED_IN, r2, strlen(r2)}},
					 {{101, JDKDUMP_MARK_STATE, waiting, strlen(waiting)},
					  {101, JDKDUMP_MARK_STATE, waiting, strlen(waiting)}},
					 {{101, JDKDUMP_MARK_TIME, waiting, strlen(waiting)}},
					 {{101, JDKDUMP_MARK_STATE, "\"RUNN", 5}}};
	size_t nbad[] = {1, 1, 1, 2, 1, 1};
	for (size_t i = 0; i < sizeof nbad / sizeof *nbad; i++)
		assert_null(
		    jdkdump_json_remark_moved(atext, alen, &ma, &now, bad[i], nbad[i], &rlen, &mr));
	struct jdkdump_moved many[JDKDUMP_MAX_MOVED + 1];
	for (size_t i = 0; i < JDKDUMP_MAX_MOVED + 1; i++)
		many[i] = mv[0];
	assert_null(jdkdump_json_remark_moved(atext, alen, &ma, &now, many, JDKDUMP_MAX_MOVED + 1,
					      &rlen, &mr));
	/* 105 has a blockedIn mark (its state has none): it may move. */
	char *r5 = set_stack(b, 2, "blocked_in", json_string("read"));
	struct jdkdump_moved mv5[] = {{105, JDKDUMP_MARK_BLOCKED_IN, r5, strlen(r5)}};
	free(btext);
	jdkdump_marks_free(&mb);
	btext = render_marked(b, &blen, &mb);
	char *re2 = jdkdump_json_remark_moved(atext, alen, &ma, &now, mv, 4, &rlen, &mr);
	assert_non_null(re2);
	struct jdkdump_marks m2 = {0};
	re = jdkdump_json_remark_moved(re2, rlen, &mr, &now, mv5, 1, &rlen, &m2);
	assert_non_null(re);
	assert_int_equal(rlen, blen);
	assert_memory_equal(re, btext, blen);
	free(re);
	free(re2);
	jdkdump_marks_free(&m2);

	free(r1), free(r2), free(r3), free(r4), free(r5);
	free(atext), free(btext);
	jdkdump_marks_free(&ma), jdkdump_marks_free(&mb), jdkdump_marks_free(&mr);
	json_decref(a), json_decref(b);
}

/* A worker that runs, inline while joining, a task of an inner scope is in
 * that inner scope's container, once. */
static void test_inline_task(void **state)
{
	(void)state;
	json_t *d =
	    build("{\"model\":{\"threads\":[{\"tid\":7,\"task\":1,\"pool\":1},{\"tid\":6}],"
		  "\"pools\":[{\"id\":1,\"name\":\"p\"}],"
		  "\"scopes\":[{\"id\":1,\"name\":\"outer\",\"owner\":6,\"state\":\"open\"},"
		  "{\"id\":2,\"name\":\"inner\",\"parent\":1,\"owner\":7,\"state\":\"joining\"}],"
		  "\"tasks\":[{\"id\":1,\"scope\":1,\"state\":\"running\",\"worker\":7},"
		  "{\"id\":2,\"scope\":2,\"state\":\"running\",\"worker\":7}]}}");
	assert_int_equal(check_consistent(d), 2);
	long long t[2];
	/* 7 owns inner@2 and runs its task 2 while joining it: it stays with
	 * its own task 1 in outer@1, and says what it runs for the join. */
	assert_int_equal(tids_in(container(d, "inner@2"), t, 2), 0);
	assert_int_equal(tids_in(container(d, "outer@1"), t, 2), 1);
	assert_int_equal(t[0], 7);
	const json_t *th = thread(d, 7);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(th, "task"), "id")), 1);
	assert_string_equal(str(th, "joins"), "inner@2");
	const json_t *h = json_object_get(th, "runsWhileJoining");
	assert_int_equal(json_integer_value(json_object_get(h, "id")), 2);
	assert_string_equal(str(h, "container"), "inner@2");
	assert_int_equal(
	    json_integer_value(json_object_get(container(d, "inner@2"), "ownerRunsTask")), 2);
	assert_int_equal(json_integer_value(json_object_get(container(d, "inner@2"), "owner")), 7);
	char *text = textdump_string(d, 0);
	assert_non_null(strstr(text, "joins inner@2, running its task 2 meanwhile"));
	free(text);
	json_decref(d);
}

/* Replies with parts missing, wrong types, unknown references and loops
 * still give a consistent dump. */
static void test_odd_input(void **state)
{
	(void)state;
	char err[256];
	json_t *n = json_integer(3);
	assert_null(jdkdump_build(n, err, sizeof err));
	assert_non_null(strstr(err, "not a JSON object"));
	json_decref(n);

	static const char *cases[] = {
	    "{}",
	    "{\"process\":7,\"model\":[],\"stacks\":{}}",
	    "{\"model\":{\"threads\":[1,\"x\",{\"tid\":\"9\"},{\"tid\":5},{\"tid\":5,\"name\":7}],"
	    " \"scopes\":[{\"id\":1,\"parent\":99,\"owner\":777},{\"id\":1,\"name\":\"dup\"},{"
	    "\"name\":\"noid\"}],"
	    " \"tasks\":[{\"id\":1,\"scope\":42,\"worker\":5}],\"pools\":[{\"name\":\"p\"},{\"id\":"
	    "2,\"name\":null}]},"
	    " \"stacks\":[{\"tid\":5,\"frames\":[7,{\"func\":null},\"raw\"]},{\"tid\":6,\"frames\":"
	    "\"no\"}]}",
	    /* A parent cycle and a self-parent. */
	    "{\"model\":{\"scopes\":[{\"id\":7,\"parent\":8,\"name\":\"a\"},{\"id\":8,\"parent\":7,"
	    "\"name\":\"b\"},"
	    " {\"id\":9,\"parent\":9,\"name\":\"self\"},{\"id\":10,\"parent\":8,\"name\":\"c\"}],"
	    " \"threads\":[{\"tid\":1,\"task\":3}],\"tasks\":[{\"id\":3,\"scope\":10,\"state\":"
	    "\"running\"}]}}",
	    /* Names that collide with a pool's and with <root>. */
	    "{\"model\":{\"pools\":[{\"id\":1,\"name\":\"io\"}],"
	    " \"scopes\":[{\"id\":1,\"name\":\"pool:io\"},{\"id\":2,\"name\":\"<root>\"}]}}",
	    /* Enum values no schema allows become null. */
	    "{\"source\":\"gpu\",\"process\":{\"state\":\"zombie\",\"pid\":-4},\"model\":{"
	    " \"pools\":[{\"id\":1,\"queue\":\"lifo\",\"policy\":3}],"
	    " \"threads\":[{\"tid\":2,\"role\":\"king\",\"task\":1}],"
	    " \"tasks\":[{\"id\":1,\"scope\":1,\"state\":\"sleeping\"}],"
	    " \"scopes\":[{\"id\":1,\"joiner\":\"weird\",\"state\":\"odd\",\"cancel_reason\":7,"
	    "  \"deadline_ms\":\"soon\",\"values\":{\"k\":1,\"v\":\"ok\"}}]},"
	    " \"stacks\":[{\"tid\":2,\"state\":\"BLOCKED\",\"frames\":[{\"func\":\"f\",\"file\":"
	    "\"\",\"line\":\"x\"}]}]}",
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		json_t *d = build(cases[i]);
		check_consistent(d);
		char *s = textdump_string(d, TEXTDUMP_LOCKS | TEXTDUMP_EXTENDED);
		assert_non_null(s);
		free(s);
		json_decref(d);
	}
	json_t *d = build(cases[3]);
	assert_int_equal(json_array_size(containers(d)), 5);
	assert_false(json_is_true(json_object_get(json_object_get(d, "threadDump"), "complete")));
	/* Thread 1 runs a task of scope c@10, which hangs below the cycle. */
	long long t[2];
	assert_int_equal(tids_in(container(d, "c@10"), t, 2), 1);
	json_decref(d);
	d = build(cases[2]);
	/* Owner 777 is not in the dump: owner null, tid beside it. */
	assert_int_equal(json_integer_value(json_object_get(container(d, "scope@1"), "ownerTid")),
			 777);
	json_decref(d);
	/* Post-mortem: every thread of an exited process is TERMINATED, the
	 * exited ones included. */
	d = build("{\"process\":{\"pid\":9,\"state\":\"exited\"},\"model\":{\"threads\":["
		  "{\"tid\":9,\"state\":\"live\"},{\"tid\":10,\"state\":\"exited\"}]}}");
	assert_int_equal(check_consistent(d), 2);
	assert_string_equal(str(thread(d, 9), "state"), "TERMINATED");
	assert_string_equal(str(thread(d, 10), "state"), "TERMINATED");
	assert_string_equal(str(json_object_get(d, "threadDump"), "processState"), "exited");
	json_decref(d);
	/* Text from a non-dump tolerates it. */
	json_t *junk = load("{\"threadDump\":{\"threadContainers\":[1,{\"threads\":[2,{}]}]}}");
	char *s = textdump_string(junk, 3);
	assert_non_null(s);
	free(s);
	json_decref(junk);
}

/* A chain 20,000 scopes deep and long strings neither overflow a stack nor
 * pass the caps. */
static void test_deep_and_long(void **state)
{
	(void)state;
	json_t *scopes = json_array();
	for (int i = 1; i <= 20000; i++)
		json_array_append_new(
		    scopes, json_pack("{s:i,s:i,s:s}", "id", i, "parent", i - 1, "name", "n"));
	char *big = malloc(5000);
	memset(big, 'x', 4999);
	big[4999] = 0;
	/* A multi-byte character straddling the cut must not be split. */
	memcpy(big + 1023, "\xc3\xa9", 2);
	json_t *frames = json_array();
	for (int i = 0; i < 2000; i++)
		json_array_append_new(
		    frames, json_pack("{s:s,s:s,s:i}", "func", big, "file", "f.c", "line", i));
	json_t *threads = json_pack("[{s:i,s:s,s:i}]", "tid", 1, "name", big, "task", 1);
	json_t *tasks = json_pack("[{s:i,s:i,s:s}]", "id", 1, "scope", 20000, "state", "running");
	json_t *stacks = json_pack("[{s:i,s:o}]", "tid", 1, "frames", frames);
	json_t *r = json_pack("{s:{s:o,s:o,s:o},s:o}", "model", "scopes", scopes, "threads",
			      threads, "tasks", tasks, "stacks", stacks);
	assert_non_null(r);
	char err[256];
	json_t *d = jdkdump_build(r, err, sizeof err);
	assert_non_null(d);
	/* Not saved for the validator: jsonschema needs half a minute for
	 * 20,000 containers; check_consistent() covers the rules here. */
	assert_int_equal(json_array_size(containers(d)), 20001);
	assert_int_equal(check_consistent(d), 1);
	const json_t *last = json_array_get(containers(d), 20000);
	assert_string_equal(str(last, "container"), "n@20000");
	const json_t *th = json_array_get(json_object_get(last, "threads"), 0);
	assert_int_equal(strlen(str(th, "name")), 1023);
	assert_int_equal(json_array_size(json_object_get(th, "stack")), JDKDUMP_MAX_FRAMES);
	char *s = textdump_string(d, 0);
	assert_non_null(s);
	free(s);
	json_decref(d);
	json_decref(r);
	free(big);
}

/* Replaces a random member or item somewhere inside j with a value of a
 * random kind; returns how many containers it walked through. */
static void mutate(json_t *j, unsigned *seed, int depth)
{
	size_t n = json_is_object(j) ? json_object_size(j) : json_array_size(j);
	if (!n || depth > 12)
		return;
	size_t pick = (size_t)rand_r(seed) % n, i = 0;
	json_t *child = NULL;
	const char *key = NULL;
	if (json_is_object(j)) {
		const char *k;
		json_t *v;
		json_object_foreach(j, k, v)
		{
			if (i++ == pick) {
				key = k;
				child = v;
				break;
			}
		}
	} else {
		child = json_array_get(j, pick);
	}
	if ((json_is_object(child) || json_is_array(child)) && rand_r(seed) % 4) {
		mutate(child, seed, depth + 1);
		return;
	}
	json_t *repl;
	switch (rand_r(seed) % 9) {
	case 0:
		repl = json_null();
		break;
	case 1:
		repl = json_integer(rand_r(seed) % 12);
		break;
	case 2:
		repl = json_integer(-1);
		break;
	case 3:
		repl = json_string("closed");
		break;
	case 4:
		repl = json_array();
		break;
	case 5:
		repl = json_object();
		break;
	case 6:
		repl = json_real(1e300);
		break;
	case 7:
		repl = json_true();
		break;
	default:
		repl = json_integer(3);
		break;
	}
	if (key)
		json_object_set_new(j, key, repl);
	else
		json_array_set_new(j, pick, repl);
}

/* Thousands of randomly damaged replies (values of the wrong kind, ids
 * pointing anywhere, members gone) all give consistent dumps; and damaged
 * bytes never crash the reader. */
static void test_random_damage(void **state)
{
	(void)state;
	unsigned seed = 12345;
	json_t *base = load(canned);
	char err[256];
	for (int round = 0; round < 2000; round++) {
		json_t *r = json_deep_copy(base);
		int edits = 1 + rand_r(&seed) % 6;
		for (int e = 0; e < edits; e++)
			mutate(r, &seed, 0);
		json_t *d = jdkdump_build(r, err, sizeof err);
		if (!d)
			fail_msg("round %d: %s", round, err);
		check_consistent(d);
		same_as_written(r, d);
		if (round % 100 == 0)
			save(d);
		char *text = textdump_string(d, TEXTDUMP_LOCKS | TEXTDUMP_EXTENDED);
		assert_non_null(text);
		free(text);
		json_decref(d);
		json_decref(r);
	}
	json_decref(base);

	size_t len = strlen(canned);
	char *buf = malloc(len);
	for (int round = 0; round < 2000; round++) {
		memcpy(buf, canned, len);
		for (int e = 0; e < 1 + rand_r(&seed) % 4; e++)
			buf[(size_t)rand_r(&seed) % len] = "{}[]\",:0\\ax\x80"[rand_r(&seed) % 13];
		struct jv_doc *doc = NULL;
		if (jv_parse(buf, len, &doc, err, sizeof err) == 0) {
			json_t *d = jdkdump_build_doc(jv_root(doc), err, sizeof err);
			if (jv_is_object(jv_root(doc))) {
				assert_non_null(d);
				check_consistent(d);
			}
			json_decref(d);
			jv_free(doc);
		}
	}
	free(buf);
}

static int run_validator(const char *args)
{
	const char *top = getenv("TOP") ? getenv("TOP") : ".";
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/validate_dump.py %s >/dev/null 2>&1",
		 top, args);
	int rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Runs last: every dump the other tests built validates, and the validator
 * rejects dumps that break the schema or the consistency rules. */
/* The dump reply's pool advice lands in the pool's container (and the text
 * dump's pool line); advice that is malformed or names no pool is left out. */
static void test_pool_advice(void **state)
{
	(void)state;
	static const char *reply =
	    "{\"ok\":true,\"process\":{\"pid\":7,\"name\":\"p\",\"complete\":true},"
	    "\"model\":{\"now_ms\":1764441605321,\"threads\":[],\"scopes\":[],\"tasks\":[],"
	    " \"pools\":[{\"id\":1,\"name\":\"io\",\"core\":4,\"max\":4,\"size\":4},"
	    "           {\"id\":2,\"name\":\"cpu\",\"core\":2,\"max\":2,\"size\":2}]},"
	    "\"advice\":{\"enabled\":true,\"ncpu\":2,\"pools\":["
	    " {\"id\":1,\"name\":\"io\",\"verdict\":\"grow\",\"recommended\":10,"
	    "  \"confidence\":\"high\",\"reason\":\"because\",\"wait_compute_ratio\":4,"
	    "  \"n_formula\":10,\"queue_wait_p50_ms\":9.5,\"queue_growing\":false,"
	    "  \"resource\":{\"name\":\"db\",\"limit\":20},\"capped\":false},"
	    " {\"id\":9,\"verdict\":\"shrink\"},"
	    " {\"id\":2,\"verdict\":\"explode\",\"recommended\":\"many\",\"n_formula\":\"x\"},"
	    " 17]}}";
	json_t *d = build(reply);
	const json_t *a = json_object_get(container(d, "pool:io@1"), "advice");
	assert_non_null(a);
	assert_string_equal(str(a, "verdict"), "grow");
	assert_int_equal(json_integer_value(json_object_get(a, "recommended")), 10);
	assert_true(json_number_value(json_object_get(a, "waitComputeRatio")) == 4);
	assert_true(json_number_value(json_object_get(a, "queueWaitP50Ms")) == 9.5);
	assert_true(json_number_value(json_object_get(a, "ncpu")) == 2);
	assert_true(json_is_false(json_object_get(a, "queueGrowing")));
	assert_string_equal(str(json_object_get(a, "resource"), "name"), "db");
	/* Values outside what the schema allows become null. */
	const json_t *b = json_object_get(container(d, "pool:cpu@2"), "advice");
	assert_true(json_is_null(json_object_get(b, "verdict")));
	assert_true(json_is_null(json_object_get(b, "recommended")));
	assert_true(json_is_null(json_object_get(b, "nFormula")));
	assert_true(json_is_null(json_object_get(b, "resource")));
	char *t = textdump_string(d, 0);
	assert_non_null(strstr(t, "pool io: 4 of max 4 threads, -1 active, -1 queued; advice: grow "
				  "to 10 threads (W/C 4, N 10)\n"));
	free(t);
	json_decref(d);

	/* No advice, or advice of the wrong type: containers without it. */
	static const char *const odd[] = {"5", "{\"pools\":\"x\"}", "{\"pools\":[{\"id\":\"1\"}]}"};
	for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
		char buf[1024];
		snprintf(buf, sizeof buf,
			 "{\"ok\":true,\"process\":{\"pid\":7},\"model\":{\"pools\":[{\"id\":1,"
			 "\"name\":\"io\"}]},\"advice\":%s}",
			 odd[i]);
		d = build(buf);
		assert_null(json_object_get(container(d, "pool:io@1"), "advice"));
		json_decref(d);
	}
}

static void test_validate_saved(void **state)
{
	(void)state;
	if (run_validator("--help") != 0) /* a missing dependency fails, never skips */
		fail_msg("the dump validator does not run: python3-jsonschema missing? "
			 "'make deps' installs it");
	char args[256];
	snprintf(args, sizeof args, "%s/*.json", saved_dir);
	assert_true(nsaved >= 8);
	assert_int_equal(run_validator(args), 0);

	static const char *bad[] = {
	    /* a tid twice */
	    "{\"threadDump\":{\"formatVersion\":2,\"processId\":1,\"time\":\"2025-01-01T00:00:00."
	    "000Z\","
	    "\"runtimeVersion\":\"0.1.0\",\"complete\":true,\"eventsLost\":0,\"stackSource\":null,"
	    "\"threadContainers\":[{\"container\":\"<root>\",\"parent\":null,\"owner\":null,"
	    "\"kind\":\"root\","
	    "\"threadCount\":2,\"threads\":[%s,%s]}]}}",
	    /* a count that lies */
	    "{\"threadDump\":{\"formatVersion\":2,\"processId\":1,\"time\":\"2025-01-01T00:00:00."
	    "000Z\","
	    "\"runtimeVersion\":\"0.1.0\",\"complete\":true,\"eventsLost\":0,\"stackSource\":null,"
	    "\"threadContainers\":[{\"container\":\"<root>\",\"parent\":null,\"owner\":null,"
	    "\"kind\":\"root\","
	    "\"threadCount\":3,\"threads\":[%s]}]}}",
	    /* formatVersion 1 and a string pid */
	    "{\"threadDump\":{\"formatVersion\":1,\"processId\":\"1\",\"time\":\"2025-01-01T00:00:"
	    "00.000Z\","
	    "\"runtimeVersion\":\"0.1.0\",\"complete\":true,\"eventsLost\":0,\"stackSource\":null,"
	    "\"threadContainers\":[{\"container\":\"<root>\",\"parent\":null,\"owner\":null,"
	    "\"kind\":\"root\","
	    "\"threadCount\":1,\"threads\":[%s]}]}}",
	};
	const char *t = "{\"tid\":5,\"time\":\"2025-01-01T00:00:00.000Z\",\"name\":\"a\",\"state\":"
			"\"RUNNABLE\","
			"\"stack\":[],\"task\":null,\"scopedValues\":{},\"blockedIn\":null}";
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char path[128], doc[2048];
		snprintf(path, sizeof path, "%s/bad%zu.json", saved_dir, i);
		snprintf(doc, sizeof doc, bad[i], t, t);
		FILE *f = fopen(path, "w");
		fputs(doc, f);
		fclose(f);
		assert_int_equal(run_validator(path), 1);
		unlink(path);
	}
	/* A parent that comes after its child. */
	json_t *d = build(canned);
	json_t *cs = json_object_get(json_object_get(d, "threadDump"), "threadContainers");
	json_t *fetch = json_incref(json_array_get(cs, 3));
	json_array_remove(cs, 3);
	json_array_insert_new(cs, 2, fetch);
	char path[128];
	snprintf(path, sizeof path, "%s/order.json", saved_dir);
	json_dump_file(d, path, 0);
	assert_int_equal(run_validator(path), 1);
	json_decref(d);

	snprintf(args, sizeof args, "rm -rf %s", saved_dir);
	assert_int_equal(system(args), 0);
}

/* 20,000 closed scopes in a chain above open ones: each open scope hangs on
 * the nearest open ancestor, found in linear time. */
static void test_closed_chain(void **state)
{
	(void)state;
	json_t *scopes = json_array();
	for (int i = 1; i <= 20000; i++)
		json_array_append_new(scopes, json_pack("{s:i,s:i,s:s,s:s}", "id", i, "parent",
							i - 1, "name", "c", "state",
							i == 1 || i % 5000 ? "closed" : "open"));
	json_t *r = json_pack("{s:{s:o}}", "model", "scopes", scopes);
	char err[256];
	json_t *d = jdkdump_build(r, err, sizeof err);
	assert_non_null(d);
	/* <root>, then c@5000, c@10000, c@15000, c@20000 each under the last. */
	assert_int_equal(json_array_size(containers(d)), 5);
	assert_string_equal(str(container(d, "c@5000"), "parent"), "<root>");
	assert_string_equal(str(container(d, "c@10000"), "parent"), "c@5000");
	assert_string_equal(str(container(d, "c@20000"), "parent"), "c@15000");
	json_decref(d);
	json_decref(r);
}

static void test_iso_time(void **state)
{
	(void)state;
	char b[40];
	assert_string_equal(jdkdump_iso_time(0, b, sizeof b), "1970-01-01T00:00:00.000Z");
	assert_string_equal(jdkdump_iso_time(1764441605999.9, b, sizeof b),
			    "2025-11-29T18:40:05.999Z");
	assert_string_equal(jdkdump_iso_time(-5, b, sizeof b), "1970-01-01T00:00:00.000Z");
	assert_string_equal(jdkdump_iso_time(1e300, b, sizeof b), "1970-01-01T00:00:00.000Z");
}

static void test_write_file(void **state)
{
	(void)state;
	char dir[] = "/tmp/test_jdkdump.XXXXXX", path[64], err[256], buf[16];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/d.json", dir);
	assert_int_equal(jdkdump_write_file(path, "one", 3, false, err, sizeof err), 0);
	assert_int_equal(jdkdump_write_file(path, "two", 3, false, err, sizeof err), -EEXIST);
	char want[128];
	snprintf(want, sizeof want, "%s exists, use -overwrite to overwrite", path);
	assert_string_equal(err, want);
	chmod(path, 0640);
	assert_int_equal(jdkdump_write_file(path, "three", 5, true, err, sizeof err), 0);
	FILE *f = fopen(path, "r");
	size_t n = fread(buf, 1, sizeof buf, f);
	fclose(f);
	assert_int_equal(n, 5);
	assert_memory_equal(buf, "three", 5);
	struct stat st;
	stat(path, &st);
	assert_int_equal(st.st_mode & 0777, 0640);
	unlink(path);
	snprintf(path, sizeof path, "%s/missing/d.json", dir);
	assert_int_equal(jdkdump_write_file(path, "x", 1, false, err, sizeof err), -ENOENT);
	assert_non_null(strstr(err, "cannot create"));
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_structure),	   cmocka_unit_test(test_extras_and_frames),
	    cmocka_unit_test(test_inlined_frames), cmocka_unit_test(test_text),
	    cmocka_unit_test(test_hostile_text),   cmocka_unit_test(test_odd_input),
	    cmocka_unit_test(test_inline_task),	   cmocka_unit_test(test_shared_stacks),
	    cmocka_unit_test(test_remark),	   cmocka_unit_test(test_remark_moved),
	    cmocka_unit_test(test_closed_chain),   cmocka_unit_test(test_deep_and_long),
	    cmocka_unit_test(test_iso_time),	   cmocka_unit_test(test_write_file),
	    cmocka_unit_test(test_random_damage),  cmocka_unit_test(test_pool_advice),
	    cmocka_unit_test(test_validate_saved),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
