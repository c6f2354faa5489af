/* app.c - selection, rebuilding and status handling shared by the views. */
#include "app.h"

#include <stdarg.h>
#include <stdio.h>

#define STATUS_MS 6000

void app_status(struct app *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(a->status, sizeof a->status, fmt, ap);
	va_end(ap);
	a->status_until = a->now_local + STATUS_MS;
	a->dirty = true;
}

const struct tr_row *app_selected(const struct app *a)
{
	if (a->sel < 0 || (size_t)a->sel >= a->tree.n)
		return NULL;
	return &a->tree.rows[a->sel];
}

void app_rebuild(struct app *a)
{
	if (a->model.gen == a->built_gen && !a->rows_stale)
		return;
	tm_model_warnings(&a->model, tm_model_now(&a->model, a->now_local));
	tr_build(&a->tree, &a->model);
	a->built_gen = a->model.gen;
	a->rows_stale = false;
	a->last_build = a->now_local;
	/* The cursor follows its node; if the node left, it stays put. */
	long at = a->sel_key ? tr_find(&a->tree, a->sel_key) : -1;
	if (at >= 0)
		a->sel = at;
	if (a->sel >= (long)a->tree.n)
		a->sel = (long)a->tree.n - 1;
	if (a->sel < 0)
		a->sel = 0;
	if (a->tree.n)
		a->sel_key = tr_row_key(&a->tree.rows[a->sel]);
	a->dirty = true;
}

void app_move(struct app *a, long delta)
{
	long n = (long)a->tree.n;
	long s = a->sel + delta;
	if (s >= n)
		s = n - 1;
	if (s < 0)
		s = 0;
	if (s != a->sel) {
		a->sel = s;
		a->sel_changed = a->now_local;
	}
	if (n)
		a->sel_key = tr_row_key(&a->tree.rows[a->sel]);
	a->dirty = true;
}

const struct view app_views[V_COUNT] = {
    [V_PICKER] = {"picker", picker_draw, NULL},	     [V_TREE] = {"tree", tree_draw, tree_key},
    [V_DETAIL] = {"detail", detail_view_draw, NULL}, [V_HELP] = {"help", help_draw, help_key},
    [V_THREADS] = {"threads", threads_draw, NULL},
};
