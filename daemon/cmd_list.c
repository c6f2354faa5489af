/* cmd_list.c - "list": summaries of the processes this client may see; with
 * "all", every other running process it may inspect too. */
#include "cmd.h"

#include "anyproc.h"
#include "loop.h"

#include <dirent.h>
#include <stdlib.h>

/* The running processes scoped has not registered that the client may
 * inspect ("all": true): kernel threads (no executable) left out. */
static void plain_json(struct cmd_ctx *x, struct jbuf *b)
{
	DIR *dir = opendir("/proc");
	struct dirent *de;
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0 || pid > 0x7fffffff)
			continue;
		const struct proc *p = proc_find(x->d, (pid_t)pid);
		if (p && p->state != PROC_EXITED)
			continue;
		struct anyproc a;
		char why[256];
		if (anyproc_read((pid_t)pid, &a) < 0 || !a.exe[0] ||
		    !anyproc_may_inspect(&a, x->c->uid, why, sizeof why))
			continue;
		anyproc_summary_json(b, &a);
	}
	closedir(dir);
}

static int cmd_list(struct cmd_ctx *x)
{
	struct jbuf *b = reply_begin(x->c, x->id);
	int64_t now = loop_now_ns();
	jb_key(b, "processes");
	jb_arr(b);
	for (const struct proc *p = x->d->procs; p; p = p->next)
		if (cmd_may_see(x->c, p))
			proc_summary_json(b, p, now);
	if (json_is_true(json_object_get(x->req, "all")))
		plain_json(x, b);
	jb_arr_end(b);
	reply_end(x->c);
	return CMD_DONE;
}

const struct cmd_entry cmd_list_entry = {"list", cmd_list};
