/* cmd_advise.c - "advise": one process's pools as measured, each with the size
 * the measurement argues for (advisor.h). */
#include "cmd.h"

#include "advisor.h"
#include "loop.h"

static int cmd_advise(struct cmd_ctx *x)
{
	struct proc *p = cmd_proc(x);
	if (!p)
		return CMD_DONE;
	json_t *pool = json_object_get(x->req, "pool");
	if (pool && !json_is_string(pool)) {
		reply_error(x->c, x->id, "bad_request",
			    "\"pool\" must be a pool's name or id, as a string");
		return CMD_DONE;
	}
	struct jbuf *b = reply_begin(x->c, x->id);
	jb_key(b, "process");
	proc_summary_json(b, p, loop_now_ns());
	jb_key(b, "advice");
	advisor_render(&p->model, pool ? json_string_value(pool) : NULL, b);
	reply_end(x->c);
	return CMD_DONE;
}

const struct cmd_entry cmd_advise_entry = {"advise", cmd_advise};
