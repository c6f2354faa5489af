/* cmd_dump.c - "dump": tree and stacks of one process at one moment (the last
 * tree alone for a process that has exited). */
#include "cmd.h"

static int cmd_dump(struct cmd_ctx *x)
{
	pid_t pid;
	if (stacks_plain_target(x, &pid))
		return stacks_start_plain(x, pid, true);
	struct proc *p = cmd_proc(x);
	if (!p)
		return CMD_DONE;
	/* The dump's tree names task bodies with the symbolizer its stacks use. */
	return stacks_start(x, p, true);
}

const struct cmd_entry cmd_dump_entry = {"dump", cmd_dump};
