/* view_tree.c - the live tree view: header with counts and warnings, the
 * column titles, the visible rows, the detail pane and the status line.
 * Each line goes through the screen's cache, so a frame writes only the
 * lines whose text or colours changed. */
#include <ctype.h>
#include <curses.h>
#include <stdio.h>
#include <string.h>

#include "app.h"
#include "rowfmt.h"
#include "text.h"

static int state_role(int s)
{
	static const int roles[DS_COUNT] = {
	    [DS_QUEUED] = TA_WAIT,	[DS_RUNNING] = TA_GOOD, [DS_BLOCKED] = TA_WAIT,
	    [DS_JOINING] = TA_JOIN,	[DS_DONE] = TA_DIM,	[DS_FAILED] = TA_BAD,
	    [DS_CANCELLED] = TA_CANCEL, [DS_EXITED] = TA_BAD,
	};
	return (s >= 0 && s < DS_COUNT) ? roles[s] : TA_NORMAL;
}

/* Fits text to the screen width, padding so the line cache sees the same
 * bytes for the same picture. */
void draw_span(struct app *a, int y, const char *text, int role, int hx, int hw, int hrole)
{
	char line[RF_LINE_MAX];
	line[0] = 0;
	int used = ttx_append_cut(line, sizeof line, text, a->scr.cols, a->o.ascii);
	ttx_pad(line, sizeof line, used, a->scr.cols);
	scr_line(&a->scr, y, line, scr_attr(&a->scr, role), hx, hw, scr_attr(&a->scr, hrole));
}

void draw_line(struct app *a, int y, const char *text, int role)
{
	draw_span(a, y, text, role, 0, 0, TA_NORMAL);
}

/* "live", "connecting", or how the process ended ("EXITED (code 3), last
 * tree kept"; the daemon may also say "detached" when an agent went away). */
static void proc_state(const struct app *a, char *buf, size_t len)
{
	const struct tm_proc *p = &a->model.proc;
	char why[64] = "", up[16];
	if (!p->exited && !a->exited) {
		snprintf(buf, len, "%s", a->subscribed ? "live" : "connecting");
		return;
	}
	if (p->has_exit_signal)
		snprintf(why, sizeof why, " (signal %d)", p->exit_signal);
	else if (p->has_exit_code)
		snprintf(why, sizeof why, " (code %d)", p->exit_code);
	else if (p->exit_cause[0])
		snprintf(why, sizeof why, " (%s)", p->exit_cause);
	snprintf(up, sizeof up, "%s",
		 p->state[0] && strcmp(p->state, "live") ? p->state : "exited");
	for (char *c = up; *c; c++)
		*c = (char)toupper((unsigned char)*c);
	snprintf(buf, len, "%s%s, last tree kept", up, why);
}

/* Appends the pools the advisor warns about (CPUs saturated, starvation, a
 * queue that grows with nothing ending) to the header's warnings. */
static void pool_warnings(const struct app *a, char *w, size_t len)
{
	const json_t *pools = json_object_get(a->advice, "pools");
	for (size_t i = 0; a->advice_pid == a->pid && i < json_array_size(pools); i++) {
		const json_t *p = json_array_get(pools, i);
		const char *v = json_string_value(json_object_get(p, "verdict"));
		const char *name = json_string_value(json_object_get(p, "name"));
		const char *what = json_is_true(json_object_get(p, "queue_growing")) ? "queue stuck"
				   : v && !strcmp(v, "starvation")		     ? "starvation"
				   : v && !strcmp(v, "saturated") ? "CPU saturated"
								  : NULL;
		size_t at = strlen(w);
		if (what)
			snprintf(w + at, len - at, "  %s pool %s: %s", a->o.ascii ? "!!" : "\u26a0",
				 name ? name : "?", what);
	}
}

void draw_header(struct app *a)
{
	char h[1024], w[256] = "";
	const struct tm_model *m = &a->model;
	const struct tm_proc *p = &m->proc;
	if (m->warn_total) {
		snprintf(w, sizeof w, "  %s %u warning%s:", a->o.ascii ? "!!" : "⚠", m->warn_total,
			 m->warn_total == 1 ? "" : "s");
		for (int b = 0; b < TM_W_KINDS; b++)
			if (m->warn_count[b]) {
				size_t at = strlen(w);
				snprintf(w + at, sizeof w - at, " %u %s", m->warn_count[b],
					 tm_warn_name(b));
			}
	}
	pool_warnings(a, w, sizeof w);
	char state[128];
	proc_state(a, state, sizeof state);
	char hid[48] = "";
	if (a->tree.hide_ended)
		snprintf(hid, sizeof hid, " | %zu finished hidden", a->tree.hidden);
	snprintf(h, sizeof h, " scopetop  %s [%lld] %s | %zu scopes %zu tasks %zu threads%s%s%s",
		 p->name[0] ? p->name : "?", (long long)a->pid, state, m->scopes.n, m->tasks.n,
		 m->threads.n, a->paused ? " | PAUSED" : "", a->tree.group ? " | grouped" : "",
		 hid);
	int hx = ttx_width(h, a->o.ascii), hw = ttx_width(w, a->o.ascii);
	if (hx + hw > a->scr.cols)
		hw = a->scr.cols > hx ? a->scr.cols - hx : 0;
	strncat(h, w, sizeof h - strlen(h) - 1);
	draw_span(a, 0, h, TA_HEADER, hx, hw, TA_WARN);
}

void draw_status(struct app *a)
{
	char s[1024];
	int y = a->scr.rows - 1;
	if (a->filter_edit) {
		snprintf(s, sizeof s,
			 "filter (name, file:line or state): %s_   Enter keeps, Esc clears",
			 a->tree.filter);
		draw_line(a, y, s, TA_TITLE);
		return;
	}
	if (a->status[0] && a->now_local < a->status_until) {
		draw_line(a, y, a->status, TA_TITLE);
		return;
	}
	if (a->conn_err[0]) {
		draw_line(a, y, a->conn_err, TA_WARN);
		return;
	}
	snprintf(
	    s, sizeof s,
	    " ?:help  Enter:expand/open  /:filter%s%s%s  s:sort(%s)  g:group  p:%s  d:dump  q:quit",
	    a->tree.filter[0] ? "[" : "", a->tree.filter, a->tree.filter[0] ? "]" : "",
	    tr_sort_name(a->tree.sort), a->paused ? "resume" : "pause");
	draw_line(a, y, s, TA_TITLE);
}

static void draw_rows(struct app *a, int y0, int h)
{
	struct rf_layout l;
	char line[RF_LINE_MAX], hdr[RF_LINE_MAX];
	rf_layout_hide(&l, a->scr.cols, a->o.ascii, a->o.hide_cols);
	rf_header(&l, hdr, sizeof hdr);
	draw_line(a, y0 - 1, hdr, TA_TITLE);
	a->tree_h = h;
	if (a->sel < a->top)
		a->top = a->sel;
	if (a->sel >= a->top + h)
		a->top = a->sel - h + 1;
	if (a->top > 0 && a->top + h > (long)a->tree.n) /* no empty space after a shrink */
		a->top = (long)a->tree.n > h ? (long)a->tree.n - h : 0;
	double now = tm_model_now(&a->model, a->now_local);
	int state_w = l.col[0] == RF_STATE ? l.width[0] : 0;
	for (int i = 0; i < h; i++) {
		long at = a->top + i;
		if (at >= (long)a->tree.n) {
			scr_line(&a->scr, y0 + i, "", 0, 0, 0, 0);
			continue;
		}
		const struct tr_row *r = &a->tree.rows[at];
		rf_line(&l, &a->model, r, now, line, sizeof line);
		int role = at == a->sel					    ? TA_SELECTED
			   : (r->flags & TR_F_DIM)			    ? TA_DIM
			   : r->warn					    ? TA_WARN
			   : (a->tree.filter[0] && (r->flags & TR_F_MATCH)) ? TA_MATCH
									    : TA_NORMAL;
		int hrole = at == a->sel ? TA_SELECTED : state_role(r->state);
		scr_line(&a->scr, y0 + i, line, scr_attr(&a->scr, role), 0, state_w,
			 scr_attr(&a->scr, hrole));
	}
}

void tree_draw(struct app *a)
{
	int rows = a->scr.rows;
	/* Below 16 lines the pane would squeeze the tree to nothing. */
	int pane = rows >= 16 ? (rows / 3 > 6 ? rows / 3 : 6) : 0;
	int tree_h = rows - 3 - pane;
	if (tree_h < 1)
		tree_h = 1;
	draw_header(a);
	draw_rows(a, 2, tree_h);
	if (pane)
		detail_draw(a, 2 + tree_h, pane);
	draw_status(a);
}

/* While the filter prompt is open, keys edit it; the tree follows live. */
bool tree_key(struct app *a, int ch)
{
	if (!a->filter_edit)
		return false;
	size_t n = strlen(a->tree.filter);
	if (ch == 27) {
		a->tree.filter[0] = 0;
		a->filter_edit = false;
	} else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
		a->filter_edit = false;
	} else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
		if (n)
			a->tree.filter[n - 1] = 0;
	} else if (ch >= 0x20 && ch < 0x7f && n + 1 < sizeof a->tree.filter) {
		a->tree.filter[n] = (char)ch;
		a->tree.filter[n + 1] = 0;
	} else {
		return true;
	}
	a->rows_stale = true;
	a->dirty = true;
	a->sel_changed = a->now_local;
	return true;
}

void detail_view_draw(struct app *a)
{
	draw_header(a);
	detail_draw(a, 1, a->scr.rows - 2);
	draw_status(a);
}
