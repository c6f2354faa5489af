/* cmd_list.c - "list": summaries of the processes this client may see. */
#include "cmd.h"

#include "loop.h"

static int cmd_list(struct cmd_ctx *x)
{
	struct jbuf *b = reply_begin(x->c, x->id);
	int64_t now = loop_now_ns();
	jb_key(b, "processes");
	jb_arr(b);
	for (const struct proc *p = x->d->procs; p; p = p->next)
		if (cmd_may_see(x->c, p))
			proc_summary_json(b, p, now);
	jb_arr_end(b);
	reply_end(x->c);
	return CMD_DONE;
}

const struct cmd_entry cmd_list_entry = {"list", cmd_list};
