/* cmd_help.c - `help`, `help <command>` and `help -all`: the command list,
 * and one command's (or every command's) syntax, options, defaults, impact. */
#include <string.h>

#include "cli.h"

static const char *const opts[] = {"-all", NULL};

static int describe(struct cli *cli, const struct dcmd *c)
{
	fprintf(cli->out, "%s\n%s\n\nImpact: %s\n\nSyntax : %s%s%s\n", c->name, c->summary,
		c->impact, c->name, *c->usage ? " " : "", c->usage);
	if (c->help && *c->help)
		fprintf(cli->out, "\n%s", c->help);
	return CLI_OK;
}

static int run(struct cli *cli, pid_t pid, int argc, char **argv)
{
	(void)pid;
	const char *name = NULL;
	bool all = false;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "-all")) {
			all = true;
		} else if (!name) {
			name = argv[i];
		} else {
			cli_errorf(cli, "help takes at most one command name; usage: help [-all] "
					"[<command>]");
			return CLI_USAGE;
		}
	}
	if (name) {
		const struct dcmd *c = dcmd_find(name);
		if (c)
			return describe(cli, c);
		const struct dcmd *near = dcmd_closest(name);
		cli_errorf(cli, "unknown command '%s'; did you mean '%s'?", name, near->name);
		return CLI_FAIL;
	}
	if (all) {
		/* As jcmd's `help -all`: every command, its summary indented. */
		for (size_t i = 0; dcmd_table[i]; i++)
			fprintf(cli->out, "%s\n\t%s\n\n", dcmd_table[i]->name,
				dcmd_table[i]->summary);
		return CLI_OK;
	}
	fprintf(cli->out, "The following commands are available:\n");
	for (size_t i = 0; dcmd_table[i]; i++)
		fprintf(cli->out, "%-20s %s\n", dcmd_table[i]->name, dcmd_table[i]->summary);
	fprintf(cli->out,
		"\nFor more information about a specific command use 'help <command>'.\n");
	return CLI_OK;
}

const struct dcmd dcmd_help = {
    .name = "help",
    .usage = "[-all] [<command>]",
    .summary = "List the commands, or describe one.",
    .help = "Arguments:\n"
	    "  command  the command to describe (STRING, no default)\n"
	    "Options:\n"
	    "  -all     every command with its summary (BOOLEAN, false)\n",
    .impact = "None: answered by scopecmd itself",
    .options = opts,
    .run = run,
    .local = true,
};
