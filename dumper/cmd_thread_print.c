/* cmd_thread_print.c - `Thread.print [-l] [-e]`: the text thread dump on
 * standard output. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "textdump.h"

static const char *const opts[] = {"-l", "-e", NULL};

static int run(struct cli *cli, pid_t pid, int argc, char **argv)
{
	unsigned flags = 0;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "-l"))
			flags |= TEXTDUMP_LOCKS;
		else if (!strcmp(argv[i], "-e"))
			flags |= TEXTDUMP_EXTENDED;
		else {
			cli_errorf(cli, "Thread.print: unexpected argument '%s'; usage: Thread.print "
					"[-l] [-e]", argv[i]);
			return CLI_USAGE;
		}
	}
	json_t *dump = cli_fetch_dump(cli, pid);
	if (!dump)
		return CLI_FAIL;
	int rc = textdump_write(cli->out, dump, flags);
	json_decref(dump);
	if (rc < 0) {
		cli_errorf(cli, "%s",
			   rc == -ENOMEM ? "out of memory while printing the dump"
					 : "writing the dump to standard output failed");
		return CLI_FAIL;
	}
	return CLI_OK;
}

const struct dcmd dcmd_thread_print = {
	.name = "Thread.print",
	.usage = "[-l] [-e]",
	.summary = "Print every thread with its stack, inside its scope containers.",
	.help = "Options:\n"
		"  -l  also print what each thread is blocked in (futex, poll, ...) and why a\n"
		"      stack is missing (BOOLEAN, false)\n"
		"  -e  also print each thread's task (id, state, fork site, fork time) and\n"
		"      scoped values, and each scope's open site and values (BOOLEAN, false)\n",
	.impact = "Low: every thread's stack is captured once (BPF: no stop at all; signal\n"
		  "mode: each thread pauses for microseconds, see maxPauseNs in the JSON dump)",
	.options = opts,
	.run = run,
};
