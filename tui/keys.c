/* keys.c - every key scopetop understands, in one table that both the
 * dispatcher and the help screen read. */
#include <curses.h>
#include <stddef.h>
#include <string.h>

#include "app.h"
#include "rowfmt.h"

#define VP (1u << V_PICKER)
#define VT (1u << V_TREE)
#define VD (1u << V_DETAIL)
#define VH (1u << V_HELP)
#define VR (1u << V_THREADS)
#define VALL (VP | VT | VD | VH | VR)

static void picker_move(struct app *a, long d)
{
	long n = (long)json_array_size(a->procs);
	a->psel += d;
	if (a->psel >= n)
		a->psel = n - 1;
	if (a->psel < 0)
		a->psel = 0;
	a->dirty = true;
}

static void move_by(struct app *a, long d)
{
	if (a->view == V_PICKER)
		picker_move(a, d);
	else if (a->view == V_THREADS)
		threads_move(a, d);
	else
		app_move(a, d);
}

static long page(const struct app *a)
{
	return a->tree_h > 2 ? a->tree_h - 1 : 1;
}

static void act_up(struct app *a)
{
	move_by(a, -1);
}
static void act_down(struct app *a)
{
	move_by(a, 1);
}
static void act_pgup(struct app *a)
{
	move_by(a, -page(a));
}
static void act_pgdn(struct app *a)
{
	move_by(a, page(a));
}
static void act_home(struct app *a)
{
	move_by(a, -(1L << 40));
}
static void act_end(struct app *a)
{
	move_by(a, 1L << 40);
}

static void open_detail(struct app *a)
{
	a->view = V_DETAIL;
	a->stack_next = 0; /* fetch a fresh stack now */
	a->sel_changed = 0;
	scr_invalidate(&a->scr);
}

static void open_process(struct app *a)
{
	json_t *p = json_array_get(a->procs, (size_t)a->psel);
	json_t *pid = json_object_get(p, "pid");
	if (!json_is_integer(pid))
		return;
	tm_model_free(&a->model);
	tm_model_init(&a->model);
	a->model.join_threshold_ms = a->o.join_threshold_ms;
	a->pid = json_integer_value(pid);
	a->exited = false;
	a->sel = a->top = 0;
	a->sel_key = 0;
	a->built_gen = (uint64_t)-1;
	if (src_subscribe(a, a->pid))
		app_status(a, "cannot watch %lld: %s", (long long)a->pid, a->conn_err);
	a->view = V_TREE;
	scr_invalidate(&a->scr);
}

static void set_expanded(struct app *a, const struct tr_row *r, bool on)
{
	tr_set_expanded(&a->tree, r->kind, r->id, on);
	a->rows_stale = true;
	a->dirty = true;
}

static void act_toggle(struct app *a)
{
	const struct tr_row *r = app_selected(a);
	if (r && (r->flags & TR_F_KIDS))
		set_expanded(a, r, !(r->flags & TR_F_EXPANDED));
}

static void act_enter(struct app *a)
{
	if (a->view == V_PICKER) {
		open_process(a);
		return;
	}
	if (a->view == V_THREADS) {
		threads_open(a);
		return;
	}
	const struct tr_row *r = app_selected(a);
	if (r && (r->flags & TR_F_KIDS) && a->view == V_TREE)
		act_toggle(a);
	else if (r)
		open_detail(a);
}

static void act_expand(struct app *a)
{
	const struct tr_row *r = app_selected(a);
	if (r && (r->flags & TR_F_KIDS) && !(r->flags & TR_F_EXPANDED))
		set_expanded(a, r, true);
	else if (r && !(r->flags & TR_F_KIDS))
		open_detail(a);
}

static void act_collapse(struct app *a)
{
	const struct tr_row *r = app_selected(a);
	if (!r)
		return;
	if ((r->flags & TR_F_KIDS) && (r->flags & TR_F_EXPANDED)) {
		set_expanded(a, r, false);
		return;
	}
	for (long i = a->sel - 1; i >= 0; i--) /* to the parent row */
		if (a->tree.rows[i].depth < r->depth) {
			app_move(a, i - a->sel);
			return;
		}
}

static void act_filter(struct app *a)
{
	a->filter_edit = true;
	a->dirty = true;
}

static void act_sort(struct app *a)
{
	a->tree.sort = (a->tree.sort + 1) % SORT_COUNT;
	a->rows_stale = true;
	app_status(a, "sorted by %s", tr_sort_name(a->tree.sort));
}

static void act_group(struct app *a)
{
	a->tree.group = !a->tree.group;
	a->rows_stale = true;
	a->stack_next = 0; /* grouping by stack wants every thread's stack */
	app_status(a, "%s",
		   a->tree.group ? "grouping identical subtasks (same site, state and stack)"
				 : "grouping off");
}

static void act_threads(struct app *a)
{
	a->view = a->view == V_THREADS ? V_TREE : V_THREADS;
	a->stack_next = 0; /* the thread view wants every thread's stack now */
	scr_invalidate(&a->scr);
}

/* Keys 1..9 show or hide the optional columns, in the order they appear. */
static void toggle_col(struct app *a, int col)
{
	a->o.hide_cols ^= 1u << col;
	scr_invalidate(&a->scr);
	app_status(a, "column %s %s", rf_col_title(col),
		   a->o.hide_cols & (1u << col) ? "hidden" : "shown (when it fits)");
}
static void act_col_id(struct app *a)
{
	toggle_col(a, RF_ID);
}
static void act_col_age(struct app *a)
{
	toggle_col(a, RF_AGE);
}
static void act_col_joiner(struct app *a)
{
	toggle_col(a, RF_JOINER);
}
static void act_col_deadline(struct app *a)
{
	toggle_col(a, RF_DEADLINE);
}
static void act_col_site(struct app *a)
{
	toggle_col(a, RF_SITE);
}
static void act_col_worker(struct app *a)
{
	toggle_col(a, RF_WORKER);
}
static void act_col_busy(struct app *a)
{
	toggle_col(a, RF_BUSY);
}
static void act_col_sched(struct app *a)
{
	toggle_col(a, RF_SCHED);
}
static void act_col_idle(struct app *a)
{
	toggle_col(a, RF_IDLE);
}

/* n and N: the next (previous) row that matches the filter itself. */
static void jump_match(struct app *a, long dir)
{
	app_rebuild(a); /* keys typed together: the filter may be newer than the rows */
	long n = (long)a->tree.n;
	if (!a->tree.filter[0]) {
		app_status(a, "no filter to search for: / sets one");
		return;
	}
	for (long k = 1; k <= n; k++) {
		long i = ((a->sel + dir * k) % n + n) % n;
		if (a->tree.rows[i].flags & TR_F_MATCH) {
			app_move(a, i - a->sel);
			return;
		}
	}
	app_status(a, "no row matches '%s'", a->tree.filter);
}
static void act_next_match(struct app *a)
{
	jump_match(a, 1);
}
static void act_prev_match(struct app *a)
{
	jump_match(a, -1);
}

static void act_hide_ended(struct app *a)
{
	a->tree.hide_ended = !a->tree.hide_ended;
	a->rows_stale = true;
	app_status(a, "%s",
		   a->tree.hide_ended ? "finished subtasks and scopes hidden (f shows them)"
				      : "finished subtasks and scopes shown");
}

static void act_pause(struct app *a)
{
	a->paused = !a->paused;
	if (a->paused) {
		tm_model_freeze(&a->model, a->now_local); /* ages stand still too */
	} else {
		if (!a->model.proc.exited)
			a->model.frozen_ms = 0;
		src_resume(a);
		app_rebuild(a); /* held deltas changed the model the rows point into */
	}
	app_status(a, "%s",
		   a->paused ? "paused: updates are held until you press p again" : "live again");
}

static void act_dump(struct app *a)
{
	src_request_dump(a);
}

static void act_help(struct app *a)
{
	if (a->view == V_HELP) {
		a->view = a->back_view;
	} else {
		a->back_view = a->view;
		a->view = V_HELP;
	}
	scr_invalidate(&a->scr);
	a->dirty = true;
}

static void act_back(struct app *a)
{
	if (a->view == V_HELP || a->view == V_DETAIL || a->view == V_THREADS) {
		a->view = a->view == V_HELP ? a->back_view : V_TREE;
	} else if (a->view == V_TREE && a->tree.filter[0]) {
		a->tree.filter[0] = 0;
		a->rows_stale = true;
	} else if (a->view == V_TREE) {
		src_disconnect(a); /* the subscription ends with its connection */
		src_connect(a);
		a->pid = 0;
		a->view = V_PICKER;
		a->list_next = 0;
	}
	scr_invalidate(&a->scr);
	a->dirty = true;
}

static void act_quit(struct app *a)
{
	a->quit = true;
}

struct binding {
	int key;
	const char *label; /* NULL: an alias, not listed separately in help */
	unsigned views;
	void (*fn)(struct app *a);
	const char *help;
};

static const struct binding table[] = {
    {KEY_UP, "Up k", VP | VT | VD | VR, act_up, "move up"},
    {'k', NULL, VP | VT | VD | VR, act_up, NULL},
    {KEY_DOWN, "Down j", VP | VT | VD | VR, act_down, "move down"},
    {'j', NULL, VP | VT | VD | VR, act_down, NULL},
    {KEY_PPAGE, "PgUp", VP | VT | VR, act_pgup, "page up"},
    {KEY_NPAGE, "PgDn", VP | VT | VR, act_pgdn, "page down"},
    {KEY_HOME, "Home", VP | VT | VR, act_home, "first row"},
    {KEY_END, "End", VP | VT | VR, act_end, "last row"},
    {'\n', "Enter", VP | VT | VD | VR, act_enter,
     "open the process; expand/collapse; on a leaf, open its detail and stack; in the "
     "thread view, go to the thread's task"},
    {'\r', NULL, VP | VT | VD | VR, act_enter, NULL},
    {KEY_ENTER, NULL, VP | VT | VD | VR, act_enter, NULL},
    {' ', "Space", VT, act_toggle, "expand or collapse"},
    {KEY_RIGHT, "Right l", VT, act_expand, "expand; on a leaf, open its detail"},
    {'l', NULL, VT, act_expand, NULL},
    {KEY_LEFT, "Left h", VT, act_collapse, "collapse, or go to the parent"},
    {'h', NULL, VT, act_collapse, NULL},
    {'/', "/", VT, act_filter, "filter by name, fork site (file:line) or state"},
    {'n', "n N", VT, act_next_match, "next / previous row matching the filter itself"},
    {'N', NULL, VT, act_prev_match, NULL},
    {'s', "s", VT, act_sort, "sort: fork order, age, name, state"},
    {'g', "g", VT, act_group, "group identical subtasks and stacks (xN)"},
    {'f', "f", VT, act_hide_ended, "hide or show finished subtasks and scopes"},
    {'1', "1..9", VT, act_col_id,
     "show or hide the columns ID, AGE, JOINER, DEADLN, SITE, WORKER, BUSY, SCHED, IDLE"},
    {'2', NULL, VT, act_col_age, NULL},
    {'3', NULL, VT, act_col_joiner, NULL},
    {'4', NULL, VT, act_col_deadline, NULL},
    {'5', NULL, VT, act_col_site, NULL},
    {'6', NULL, VT, act_col_worker, NULL},
    {'7', NULL, VT, act_col_busy, NULL},
    {'8', NULL, VT, act_col_sched, NULL},
    {'9', NULL, VT, act_col_idle, NULL},
    {'t', "t", VT | VD | VR, act_threads,
     "thread view: every thread (also those running no task), its role, pool, state, "
     "task and top frame; t again for the tree"},
    {'p', "p", VT | VD | VR, act_pause, "pause or resume live updates"},
    {'d', "d", VT | VD, act_dump,
     "write a JSON thread dump into --dump-dir (default: the directory scopetop started in); "
     "the status line shows its absolute path"},
    {'?', "?", VALL, act_help, "show or hide this help"},
    {27, "Esc", VALL, act_back,
     "back: close detail or help, clear the filter, or return to the process list"},
    {'q', "q", VALL, act_quit, "quit"},
};

bool keys_dispatch(struct app *a, int ch)
{
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
		if (table[i].key == ch && (table[i].views & (1u << a->view))) {
			table[i].fn(a);
			a->dirty = true;
			return true;
		}
	}
	return false;
}

const char *keys_help(int i, const char **label)
{
	int seen = 0;
	for (size_t k = 0; k < sizeof table / sizeof table[0]; k++) {
		if (!table[k].label)
			continue;
		if (seen++ == i) {
			*label = table[k].label;
			return table[k].help;
		}
	}
	return NULL;
}
