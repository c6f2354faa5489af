/* test_scopecmd.c - scopecmd's command table and command-line checks:
 * lookup, closest match by edit distance, per-command options (jcmd's
 * <key>=<value> form included), help, and the jstack text layout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../dumper/cli.h"
#include "../../dump/jstackdump.h"

static void test_edit_distance(void **state)
{
	(void)state;
	assert_int_equal(cli_edit_distance("", ""), 0);
	assert_int_equal(cli_edit_distance("abc", ""), 3);
	assert_int_equal(cli_edit_distance("kitten", "sitting"), 3);
	assert_int_equal(cli_edit_distance("Thread.print", "thread.PRINT"), 0);
	assert_int_equal(cli_edit_distance("Thread.prnt", "Thread.print"), 1);
	/* Past 64 characters the rest is ignored, so the cost stays bounded. */
	char a[300], b[300];
	memset(a, 'a', 299);
	a[299] = 0;
	memset(b, 'b', 299);
	b[299] = 0;
	assert_int_equal(cli_edit_distance(a, b), 64);
}

static void test_lookup(void **state)
{
	(void)state;
	static const char *names[] = {"help",	    "Thread.print", "Thread.dump_to_file",
				      "Scope.tree", "Runtime.info", "Pool.advise"};
	size_t n = 0;
	while (dcmd_table[n])
		n++;
	assert_int_equal(n, 6);
	for (size_t i = 0; i < 6; i++) {
		const struct dcmd *c = dcmd_find(names[i]);
		assert_non_null(c);
		assert_string_equal(c->name, names[i]);
		assert_non_null(c->run);
		assert_non_null(c->summary);
		assert_non_null(c->impact);
	}
	assert_null(dcmd_find("thread.print"));
	assert_string_equal(dcmd_closest("Thread.prnt")->name, "Thread.print");
	assert_string_equal(dcmd_closest("thread.dump")->name, "Thread.dump_to_file");
	assert_string_equal(dcmd_closest("Thread.")->name, "Thread.dump_to_file");
	assert_string_equal(dcmd_closest("Thread.dump_to")->name, "Thread.dump_to_file");
	assert_string_equal(dcmd_closest("scope.tre")->name, "Scope.tree");
	assert_string_equal(dcmd_closest("Runtime")->name, "Runtime.info");
	assert_string_equal(dcmd_closest("hlep")->name, "help");
	assert_string_equal(dcmd_closest("pool.adv")->name, "Pool.advise");
}

static int check(const char *cmd, const char *args, char *err, size_t errlen)
{
	char buf[256], *argv[8];
	int argc = 0;
	snprintf(buf, sizeof buf, "%s", args);
	for (char *t = strtok(buf, " "); t && argc < 8; t = strtok(NULL, " "))
		argv[argc++] = t;
	FILE *f = fmemopen(err, errlen, "w");
	struct cli cli = {.out = f, .err = f};
	int rc = cli_check_options(&cli, dcmd_find(cmd), argc, argv);
	fclose(f);
	return rc;
}

static void test_options(void **state)
{
	(void)state;
	char err[512];
	assert_int_equal(check("Thread.print", "-l -e", err, sizeof err), CLI_OK);
	assert_int_equal(check("Thread.print", "-l -x", err, sizeof err), CLI_USAGE);
	assert_non_null(
	    strstr(err, "Thread.print: unknown option '-x'; usage: Thread.print [-l] [-e]"));
	assert_int_equal(check("Thread.dump_to_file", "-overwrite -format=json f", err, sizeof err),
			 CLI_OK);
	/* "-" is the standard-output file, not an option. */
	assert_int_equal(check("Thread.dump_to_file", "-format=text -", err, sizeof err), CLI_OK);
	assert_int_equal(check("Thread.dump_to_file", "-format json", err, sizeof err), CLI_USAGE);
	assert_int_equal(check("Scope.tree", "-l", err, sizeof err), CLI_USAGE);
	assert_int_equal(check("help", "", err, sizeof err), CLI_OK);
	assert_int_equal(check("help", "-all", err, sizeof err), CLI_OK);
}

/* jcmd's <key>=<value> form of flags: true and false in any case, nothing
 * else; values of valued options are the command's business. */
static void test_key_value(void **state)
{
	(void)state;
	char err[512];
	const struct dcmd *tp = dcmd_find("Thread.print"), *df = dcmd_find("Thread.dump_to_file");
	assert_int_equal(check("Thread.print", "-l=true -e=FALSE", err, sizeof err), CLI_OK);
	assert_int_equal(check("Thread.print", "-l=yes", err, sizeof err), CLI_USAGE);
	assert_non_null(strstr(err, "Thread.print: option '-l' is true or false, not 'yes'"));
	assert_int_equal(check("Thread.print", "-lx", err, sizeof err), CLI_USAGE);
	assert_int_equal(
	    check("Thread.dump_to_file", "-overwrite=true -format=json f", err, sizeof err),
	    CLI_OK);

	char a1[] = "-l=true", a2[] = "-e=false", a3[] = "-format=jstack";
	char *argv[] = {a1, a2, a3};
	assert_true(cli_options_valid(tp, 3, argv));
	int n = cli_flags_normalize(tp, 3, argv);
	assert_int_equal(n, 2);
	assert_string_equal(argv[0], "-l");
	assert_string_equal(argv[1], "-format=jstack");

	char b1[] = "-overwrite=True", b2[] = "-", b3[] = "-overwrite=false";
	char *bv[] = {b1, b2, b3};
	n = cli_flags_normalize(df, 3, bv);
	assert_int_equal(n, 2);
	assert_string_equal(bv[0], "-overwrite");
	assert_string_equal(bv[1], "-");

	char c1[] = "-overwrite=maybe";
	char *cv[] = {c1};
	assert_false(cli_options_valid(df, 1, cv));
	char d1[] = "-x";
	char *dv[] = {d1};
	assert_false(cli_options_valid(tp, 1, dv));
}

/* The HotSpot layout: header, the thread line that parsers match, the
 * state line right after it, tab-indented frames without the space. */
static void test_jstack(void **state)
{
	(void)state;
	char buf[256];
	assert_string_equal(jstackdump_frame("fetch (a.c:42)", buf, sizeof buf), "fetch(a.c:42)");
	assert_string_equal(jstackdump_frame("0x7f001234", buf, sizeof buf),
			    "0x7f001234(Unknown Source)");
	assert_string_equal(jstackdump_frame("f (lib.so+0x10)", buf, sizeof buf), "f(lib.so+0x10)");
	/* A C++ name (TSan's interceptors have such frames) keeps the
	 * layout: no space or parenthesis in the method, none in the place. */
	assert_string_equal(
	    jstackdump_frame("w<i(void*, int)>::<lambda()> > (t.cpp:12)", buf, sizeof buf),
	    "w<i[void*,_int]>::<lambda[]>_>(t.cpp:12)");
	assert_string_equal(jstackdump_frame("g (odd(name).c:3)", buf, sizeof buf),
			    "g(odd[name].c:3)");
	assert_string_equal(jstackdump_frame("h x", buf, sizeof buf), "h_x(Unknown Source)");
	char tiny[6];
	assert_string_equal(jstackdump_frame("fetch (a.c:42)", tiny, sizeof tiny), "fetch");

	json_error_t je;
	json_t *dump = json_loads(
	    "{\"threadDump\":{\"processId\":42,\"time\":\"2026-12-01T10:11:12.345Z\","
	    "\"runtimeVersion\":\"libscope 9\",\"processName\":\"demo\",\"stackSource\":\"signal\","
	    "\"threadContainers\":[{\"container\":\"<root>\",\"parent\":null,\"threads\":["
	    "{\"tid\":42,\"name\":\"main\",\"state\":\"WAITING\",\"blockedIn\":\"futex\","
	    "\"stack\":[\"scope_join (scope.c:5)\",\"main (m.c:9)\"]}]},"
	    "{\"container\":\"outer@1\",\"parent\":\"<root>\",\"kind\":\"scope\","
	    "\"joiner\":\"all_successful\",\"state\":\"joining\",\"owner\":42,\"threads\":["
	    "{\"tid\":43,\"name\":\"w-1\",\"state\":\"RUNNABLE\",\"stack\":[],"
	    "\"task\":{\"id\":7,\"function\":\"leaf\",\"state\":\"running\"}}]},"
	    "{\"container\":\"inner@2\",\"parent\":\"outer@1\",\"kind\":\"scope\",\"threads\":["
	    "{\"tid\":44,\"name\":\"w-2\",\"state\":\"TIMED_WAITING\",\"blockedIn\":\"sleep\","
	    "\"stack\":[\"0xdead\"]}]}]}}",
	    0, &je);
	assert_non_null(dump);
	char *s = jstackdump_string(dump, 0);
	assert_non_null(s);
	assert_non_null(strstr(s, "2026-12-01 10:11:12\nFull thread dump libscope 9 (demo, pid 42, "
				  "stacks from signal):\n"));
	assert_non_null(strstr(s, "\n\"main\" #42 prio=0 tid=0x2a nid=0x2a waiting on condition\n"
				  "   java.lang.Thread.State: WAITING (parking)\n"
				  "\tat scope_join(scope.c:5)\n\tat main(m.c:9)\n"));
	assert_non_null(strstr(s, "\"w-1\" #43 prio=0 tid=0x2b nid=0x2b runnable\n"
				  "   java.lang.Thread.State: RUNNABLE\n\n"
				  "   Container: outer@1 in <root>\n   Task: 7 leaf() running"));
	assert_non_null(strstr(s,
			       "   java.lang.Thread.State: TIMED_WAITING (sleeping)\n"
			       "\tat 0xdead(Unknown Source)\n\n   Container: inner@2 in outer@1 in "
			       "<root>\n"));
	assert_non_null(strstr(s, "  outer@1 in <root>: scope, all_successful, joining, owner #42, "
				  "1 thread\n"));
	assert_null(strstr(s, "Locked ownable synchronizers"));
	free(s);
	/* -l: the scopes a thread owns are its ownable synchronizers. */
	s = jstackdump_string(dump, JSTACKDUMP_LOCKS);
	assert_non_null(s);
	assert_non_null(strstr(s, "\tat main(m.c:9)\n\n   Container: <root>\n\n"
				  "   Locked ownable synchronizers:\n"
				  "\t- <0x0> (a scope outer@1, all_successful, joining)\n"));
	assert_non_null(strstr(s, "Container: outer@1 in <root>\n   Task: 7 leaf() running, forked "
				  "by ?\n\n   Locked ownable synchronizers:\n\t- None\n"));
	free(s);
	json_decref(dump);

	/* Any shape of input prints something and never crashes. */
	json_t *odd =
	    json_loads("{\"threadDump\":{\"threadContainers\":[1,{\"threads\":[2,{}]}]}}", 0, &je);
	s = jstackdump_string(odd, JSTACKDUMP_LOCKS);
	assert_non_null(s);
	assert_non_null(strstr(s, "\"\" #0 prio=0 tid=0x0 nid=0x0 unknown\n"));
	free(s);
	json_decref(odd);
}

/* help runs without a daemon: the list, one command, an unknown one. */
static void test_help(void **state)
{
	(void)state;
	char out[8192], err[512];
	FILE *o = fmemopen(out, sizeof out, "w"), *e = fmemopen(err, sizeof err, "w");
	struct cli cli = {.out = o, .err = e};
	const struct dcmd *h = dcmd_find("help");
	assert_true(h->local);
	assert_int_equal(h->run(&cli, 0, 0, NULL), CLI_OK);
	char *one[] = {"Thread.dump_to_file"};
	assert_int_equal(h->run(&cli, 0, 1, one), CLI_OK);
	char *bad[] = {"Thread.dmp"};
	assert_int_equal(h->run(&cli, 0, 1, bad), CLI_FAIL);
	char *all[] = {"-all"};
	assert_int_equal(h->run(&cli, 0, 1, all), CLI_OK);
	fclose(o);
	fclose(e);
	assert_non_null(strstr(out, "The following commands are available:\n"));
	for (size_t i = 0; dcmd_table[i]; i++)
		assert_non_null(strstr(out, dcmd_table[i]->name));
	assert_non_null(strstr(
	    out, "Syntax : Thread.dump_to_file [-overwrite] [-format=json|text|jstack] <file>"));
	assert_non_null(strstr(out, "-overwrite"));
	assert_non_null(strstr(out, "Impact: "));
	assert_non_null(strstr(err, "unknown command 'Thread.dmp'; did you mean 'Thread.print'?"));
	assert_non_null(strstr(out, "Thread.print\n\tPrint every thread"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_edit_distance), cmocka_unit_test(test_lookup),
	    cmocka_unit_test(test_options),	  cmocka_unit_test(test_help),
	    cmocka_unit_test(test_key_value),	  cmocka_unit_test(test_jstack),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
