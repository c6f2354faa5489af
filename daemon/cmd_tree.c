/* cmd_tree.c - "tree": one process's summary and whole model. */
#include "cmd.h"

#include "loop.h"

static int cmd_tree(struct cmd_ctx *x)
{
	struct proc *p = cmd_proc(x);
	if (!p)
		return CMD_DONE;
	struct jbuf *b = reply_begin(x->c, x->id);
	jb_key(b, "process");
	proc_summary_json(b, p, loop_now_ns());
	jb_key(b, "model");
	model_render(&p->model, &p->clk, realtime_ns(), b);
	reply_end(x->c);
	return CMD_DONE;
}

const struct cmd_entry cmd_tree_entry = {"tree", cmd_tree};
