/* view_threads.c - every thread of the watched process, as htop lists
 * them: also those that run no task (the main thread, idle pool workers,
 * the agent, threads the program made itself), each with its role, pool,
 * task, state and where it is, from the last stacks fetched. */
#include <stdio.h>
#include <string.h>

#include "app.h"
#include "rowfmt.h"
#include "text.h"
#include "tree.h"

static const char *role_name(int role)
{
	static const char *const names[] = {
	    [RL_OTHER] = "other", [RL_MAIN] = "main", [RL_WORKER] = "worker", [RL_AGENT] = "agent"};
	return role >= 0 && role <= RL_AGENT ? names[role] : "?";
}

/* The thread at row i of the view, in the model's order, or NULL. */
static const struct tm_thread *thread_at(const struct app *a, long i)
{
	return i >= 0 && (size_t)i < a->model.threads.n ? a->model.threads.v[i] : NULL;
}

static void thread_line(const struct app *a, const struct tm_thread *t, char *buf, size_t len)
{
	const struct tm_model *m = &a->model;
	const struct tm_stack *st = tm_stack_get(m, t->tid);
	const struct tm_task *task = t->task ? tm_task_get(m, t->task) : NULL;
	const struct tm_pool *pool = t->pool ? tm_pool_get(m, t->pool) : NULL;
	char taskb[96] = "-", name[40] = "", where[256] = "";
	if (task)
		snprintf(taskb, sizeof taskb, "%lld %s", (long long)task->id,
			 tr_task_name(m, task));
	int used =
	    ttx_append(name, sizeof name, t->name && t->name[0] ? t->name : "?", 16, a->o.ascii);
	ttx_pad(name, sizeof name, used, 16);
	if (st && st->nframes)
		snprintf(where, sizeof where, "%s", st->frames[0]);
	else if (st && st->error)
		snprintf(where, sizeof where, "(%s)", st->error);
	snprintf(buf, len, " %8lld  %s %-6s %-10.10s %-13.13s %-8.8s %-22.22s %s",
		 (long long)t->tid, name, role_name(t->role), pool && pool->name ? pool->name : "-",
		 st && st->state ? st->state : (t->live ? "?" : "exited"),
		 st && st->blocked_in ? st->blocked_in : "-", taskb, where);
}

void threads_draw(struct app *a)
{
	long n = (long)a->model.threads.n;
	char b[1024];
	draw_header(a);
	draw_line(a, 1,
		  "      TID  NAME             ROLE   POOL       STATE         IN       TASK       "
		  "            TOP FRAME",
		  TA_TITLE);
	int h = a->scr.rows - 3;
	if (h < 1)
		h = 1;
	a->tree_h = h;
	if (a->tsel >= n)
		a->tsel = n ? n - 1 : 0;
	if (a->tsel < a->ttop)
		a->ttop = a->tsel;
	if (a->tsel >= a->ttop + h)
		a->ttop = a->tsel - h + 1;
	for (int i = 0; i < h; i++) {
		const struct tm_thread *t = thread_at(a, a->ttop + i);
		if (t) {
			thread_line(a, t, b, sizeof b);
			draw_line(a, 2 + i, b,
				  a->ttop + i == a->tsel ? TA_SELECTED
				  : t->live		 ? TA_NORMAL
							 : TA_DIM);
		} else {
			draw_line(a, 2 + i, i == 0 && !n ? " no threads known yet" : "", TA_DIM);
		}
	}
	draw_status(a);
}

void threads_move(struct app *a, long d)
{
	long n = (long)a->model.threads.n;
	a->tsel += d;
	if (a->tsel >= n)
		a->tsel = n - 1;
	if (a->tsel < 0)
		a->tsel = 0;
	a->dirty = true;
}

/* Enter: back to the tree, on the task the thread runs (when it shows). */
void threads_open(struct app *a)
{
	const struct tm_thread *t = thread_at(a, a->tsel);
	a->view = V_TREE;
	if (t && t->task) {
		a->sel_key = tr_key(TR_TASK, t->task);
		a->rows_stale = true;
		app_rebuild(a);
		if (tr_find(&a->tree, a->sel_key) < 0)
			app_status(a, "task %lld is not shown (a collapsed branch or the filter)",
				   (long long)t->task);
	} else if (t) {
		app_status(a, "thread %lld runs no task", (long long)t->tid);
	}
	scr_invalidate(&a->scr);
	a->dirty = true;
}
