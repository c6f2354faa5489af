/* cmd_help.c - `help` and `help <command>`: the command list, and one
 * command's syntax, options, defaults and impact. */
#include <string.h>

#include "cli.h"

static const char *const opts[] = {NULL};

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
	if (argc > 1) {
		cli_errorf(cli, "help takes at most one command name; usage: help [<command>]");
		return CLI_USAGE;
	}
	if (argc == 1) {
		const struct dcmd *c = dcmd_find(argv[0]);
		if (c)
			return describe(cli, c);
		const struct dcmd *near = dcmd_closest(argv[0]);
		cli_errorf(cli, "unknown command '%s'; did you mean '%s'?", argv[0], near->name);
		return CLI_FAIL;
	}
	fprintf(cli->out, "The following commands are available:\n");
	for (size_t i = 0; dcmd_table[i]; i++)
		fprintf(cli->out, "%-20s %s\n", dcmd_table[i]->name, dcmd_table[i]->summary);
	fprintf(cli->out, "\nFor more information about a specific command use 'help <command>'.\n");
	return CLI_OK;
}

const struct dcmd dcmd_help = {
	.name = "help",
	.usage = "[<command>]",
	.summary = "List the commands, or describe one.",
	.help = "Arguments:\n"
		"  command  the command to describe (STRING, no default)\n",
	.impact = "None: answered by scopecmd itself",
	.options = opts,
	.run = run,
	.local = true,
};
