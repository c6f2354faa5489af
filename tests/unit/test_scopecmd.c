/* test_scopecmd.c - scopecmd's command table and command-line checks:
 * lookup, closest match by edit distance, per-command options, help. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../dumper/cli.h"

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
	static const char *names[] = {"help", "Thread.print", "Thread.dump_to_file", "Scope.tree",
				      "Runtime.info"};
	size_t n = 0;
	while (dcmd_table[n])
		n++;
	assert_int_equal(n, 5);
	for (size_t i = 0; i < 5; i++) {
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
	assert_non_null(strstr(err, "Thread.print: unknown option '-x'; usage: Thread.print [-l] [-e]"));
	assert_int_equal(check("Thread.dump_to_file", "-overwrite -format=json f", err, sizeof err),
			 CLI_OK);
	/* "-" is the standard-output file, not an option. */
	assert_int_equal(check("Thread.dump_to_file", "-format=text -", err, sizeof err), CLI_OK);
	assert_int_equal(check("Thread.dump_to_file", "-format json", err, sizeof err), CLI_USAGE);
	assert_int_equal(check("Scope.tree", "-l", err, sizeof err), CLI_USAGE);
	assert_int_equal(check("help", "", err, sizeof err), CLI_OK);
}

/* help runs without a daemon: the list, one command, an unknown one. */
static void test_help(void **state)
{
	(void)state;
	char out[4096], err[512];
	FILE *o = fmemopen(out, sizeof out, "w"), *e = fmemopen(err, sizeof err, "w");
	struct cli cli = {.out = o, .err = e};
	const struct dcmd *h = dcmd_find("help");
	assert_true(h->local);
	assert_int_equal(h->run(&cli, 0, 0, NULL), CLI_OK);
	char *one[] = {"Thread.dump_to_file"};
	assert_int_equal(h->run(&cli, 0, 1, one), CLI_OK);
	char *bad[] = {"Thread.dmp"};
	assert_int_equal(h->run(&cli, 0, 1, bad), CLI_FAIL);
	fclose(o);
	fclose(e);
	assert_non_null(strstr(out, "The following commands are available:\n"));
	for (size_t i = 0; dcmd_table[i]; i++)
		assert_non_null(strstr(out, dcmd_table[i]->name));
	assert_non_null(strstr(out, "Syntax : Thread.dump_to_file [-overwrite] [-format=json|text] <file>"));
	assert_non_null(strstr(out, "-overwrite"));
	assert_non_null(strstr(out, "Impact: "));
	assert_non_null(strstr(err, "unknown command 'Thread.dmp'; did you mean 'Thread.print'?"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_edit_distance),
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_help),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
