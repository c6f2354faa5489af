/* cmd_dump.c - "dump": tree and stacks of one process at one moment (the last
 * tree alone for a process that has exited). */
#include "cmd.h"

static int cmd_dump(struct cmd_ctx *x)
{
	struct proc *p = cmd_proc(x);
	return p ? stacks_start(x, p, true) : CMD_DONE;
}

const struct cmd_entry cmd_dump_entry = {"dump", cmd_dump};
