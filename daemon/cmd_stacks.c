/* cmd_stacks.c - "stacks": the threads' stacks of one process, symbolized. */
#include "cmd.h"

static int cmd_stacks(struct cmd_ctx *x)
{
	pid_t pid;
	if (stacks_plain_target(x, &pid))
		return stacks_start_plain(x, pid, false);
	struct proc *p = cmd_proc(x);
	return p ? stacks_start(x, p, false) : CMD_DONE;
}

const struct cmd_entry cmd_stacks_entry = {"stacks", cmd_stacks};
