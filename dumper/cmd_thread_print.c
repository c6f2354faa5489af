/* cmd_thread_print.c - `Thread.print [-l] [-e] [-format=text|jstack]`: the
 * text thread dump on standard output, scoped's layout or HotSpot's. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "jstackdump.h"
#include "textdump.h"

static const char *const opts[] = {"-l", "-e", "-format=", NULL};

extern const struct dcmd dcmd_thread_print;

static int run(struct cli *cli, pid_t pid, int argc, char **argv)
{
	unsigned flags = 0;
	bool jstack = false;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "-l")) {
			flags |= TEXTDUMP_LOCKS;
		} else if (!strcmp(argv[i], "-e")) {
			flags |= TEXTDUMP_EXTENDED;
		} else if (!strncmp(argv[i], "-format=", 8)) {
			const char *f = argv[i] + 8;
			if (!strcmp(f, "jstack") || !strcmp(f, "hotspot")) {
				jstack = true;
			} else if (!strcmp(f, "text") || !strcmp(f, "plain")) {
				jstack = false;
			} else {
				cli_errorf(
				    cli, "Thread.print: -format takes text or jstack, not '%s'", f);
				return CLI_USAGE;
			}
		} else {
			cli_errorf(cli,
				   "Thread.print: unexpected argument '%s'; usage: Thread.print "
				   "%s",
				   argv[i], dcmd_thread_print.usage);
			return CLI_USAGE;
		}
	}
	json_t *dump = cli_fetch_dump(cli, pid);
	if (!dump)
		return CLI_FAIL;
	int rc =
	    jstack ? jstackdump_write(cli->out, dump, flags & TEXTDUMP_LOCKS ? JSTACKDUMP_LOCKS : 0)
		   : textdump_write(cli->out, dump, flags);
	json_decref(dump);
	/* A write error is reported once, by main, with its cause. */
	if (rc == -ENOMEM) {
		cli_errorf(cli, "out of memory while printing the dump");
		return CLI_FAIL;
	}
	return rc < 0 ? CLI_FAIL : CLI_OK;
}

const struct dcmd dcmd_thread_print = {
    .name = "Thread.print",
    .usage = "[-l] [-e] [-format=text|jstack]",
    .summary = "Print every thread with its stack, inside its scope containers.",
    .help = "Options:\n"
	    "  -l  also print the pthread mutex each thread waits to lock and its owner,\n"
	    "      the mutexes it holds, what it is blocked in (futex, poll, ...) and why\n"
	    "      a stack is missing (BOOLEAN, false)\n"
	    "  -e  also print each thread's task (id, state, fork site, fork time) and\n"
	    "      scoped values, and each scope's open site and values (BOOLEAN, false)\n"
	    "  -format  text: scoped's layout, threads inside their scope containers;\n"
	    "      jstack (or hotspot): HotSpot's jstack layout, which thread-dump\n"
	    "      analysers read, the containers listed before the threads; with -l each\n"
	    "      thread's \"Locked ownable synchronizers\" are the mutexes it holds\n"
	    "      and the scopes it owns\n"
	    "      (STRING, text)\n"
	    "Flags take jcmd's <key>=<value> form too: -l=true, -e=false.\n",
    .impact = "Low: every thread's stack is captured once (BPF: no stop at all; signal\n"
	      "mode: each thread pauses for microseconds, see maxPauseNs in the JSON dump)",
    .options = opts,
    .run = run,
};
