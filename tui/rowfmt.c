/* rowfmt.c - column table and cell formatters for tree rows. */
#include "rowfmt.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "text.h"

struct glyph {
	const char *utf, *ascii;
};

static const struct glyph glyphs[DS_COUNT] = {
    [DS_NONE] = {" ", " "},    [DS_QUEUED] = {"○", "o"},    [DS_RUNNING] = {"●", "*"},
    [DS_BLOCKED] = {"◐", "~"}, [DS_JOINING] = {"◎", "J"},   [DS_DONE] = {"✓", "+"},
    [DS_FAILED] = {"✗", "x"},  [DS_CANCELLED] = {"⊘", "-"}, [DS_EXITED] = {"■", "#"},
};

/* Tree drawing pieces: vertical guide, tee, elbow, open, closed, leaf. */
static const struct glyph g_vert = {"│ ", "| "}, g_tee = {"├─", "|-"}, g_elbow = {"└─", "`-"};
static const struct glyph g_open = {"▾ ", "v "}, g_closed = {"▸ ", "> "}, g_leaf = {"─ ", "- "};

#define G(g, ascii) ((ascii) ? (g).ascii : (g).utf)

const char *rf_glyph(int state, bool ascii)
{
	return (state >= 0 && state < DS_COUNT) ? G(glyphs[state], ascii) : "?";
}

struct coldef {
	const char *title;
	int width;  /* 0: flexible (the name) */
	int drop;   /* dropped in increasing order when the terminal is narrow */
	bool right; /* right-aligned */
};

static const struct coldef cols[RF_NCOLS] = {
    [RF_STATE] = {"STATE", 11, 99, false},
    [RF_NAME] = {"NAME", 0, 99, false},
    [RF_ID] = {"ID", 7, 7, true},
    [RF_AGE] = {"AGE", 7, 6, true},
    [RF_JOINER] = {"JOINER", 6, 3, false},
    [RF_DEADLINE] = {"DEADLN", 7, 5, true},
    [RF_SITE] = {"SITE", 18, 4, false},
    [RF_WORKER] = {"WORKER", 7, 2, true},
    /* Dropped first, together: the tree without them is what 80 columns
     * showed before they came. */
    [RF_BUSY] = {"BUSY", 6, 1, true},
    [RF_SCHED] = {"SCHED", 6, 1, true},
    [RF_IDLE] = {"IDLE", 6, 1, true},
};

#define NAME_MIN 22

void rf_layout(struct rf_layout *l, int total, bool ascii)
{
	rf_layout_hide(l, total, ascii, 0);
}

int rf_col_parse(const char *name)
{
	for (int c = 0; c < RF_NCOLS; c++)
		if (!strcasecmp(name, cols[c].title) ||
		    (c == RF_DEADLINE && !strcasecmp(name, "deadline")))
			return c;
	return -1;
}

const char *rf_col_title(int c)
{
	return c >= 0 && c < RF_NCOLS ? cols[c].title : "?";
}

void rf_layout_hide(struct rf_layout *l, int total, bool ascii, unsigned hide)
{
	bool on[RF_NCOLS];
	int fixed = 0;
	for (int c = 0; c < RF_NCOLS; c++) {
		/* The state and the name are what a row is; they always show. */
		on[c] = c == RF_STATE || c == RF_NAME || !(hide & (1u << c));
		if (on[c])
			fixed += cols[c].width + 1;
	}
	/* Drop the least useful columns until the name gets its minimum. */
	for (int level = 1; fixed + NAME_MIN > total && level < 99; level++)
		for (int c = 0; c < RF_NCOLS; c++)
			if (on[c] && cols[c].drop == level) {
				on[c] = false;
				fixed -= cols[c].width + 1;
			}
	int name_w = total - fixed;
	if (name_w < 8)
		name_w = 8;
	l->n = 0;
	l->ascii = ascii;
	int x = 0;
	for (int c = 0; c < RF_NCOLS; c++) {
		if (!on[c])
			continue;
		int w = cols[c].width ? cols[c].width : name_w;
		l->col[l->n] = c;
		l->x[l->n] = x;
		l->width[l->n] = w;
		l->n++;
		x += w + 1;
	}
}

static void put_cell(char *buf, size_t len, const char *text, int w, bool right, bool ascii)
{
	int tw = ttx_width(text, ascii);
	if (right && tw < w)
		ttx_pad(buf, len, 0, w - tw);
	int used = ttx_append_cut(buf, len, text, right && tw < w ? tw : w, ascii);
	if (!(right && tw < w))
		ttx_pad(buf, len, used, w);
}

void rf_header(const struct rf_layout *l, char *buf, size_t len)
{
	buf[0] = 0;
	for (int i = 0; i < l->n; i++) {
		const struct coldef *c = &cols[l->col[i]];
		put_cell(buf, len, c->title, l->width[i], c->right, l->ascii);
		if (i + 1 < l->n)
			ttx_pad(buf, len, 0, 1);
	}
}

void rf_task_times(const struct tm_model *m, const struct tm_task *t, double now,
		   struct rf_times *o)
{
	memset(o, 0, sizeof *o);
	o->started = t->started_ms > 0;
	if (!o->started) {
		o->queued = t->forked_ms > 0 ? now - t->forked_ms : 0;
		return;
	}
	double end = t->ended_ms > 0 ? t->ended_ms : now;
	o->queued =
	    t->forked_ms > 0 && t->started_ms > t->forked_ms ? t->started_ms - t->forked_ms : 0;
	o->ran = end > t->started_ms ? end - t->started_ms : 0;
	for (size_t i = 0; i < m->scopes.n; i++) {
		const struct tm_scope *s = m->scopes.v[i];
		if (s->parent_task != t->id || s->join_began_ms <= 0)
			continue;
		double from = s->join_began_ms > t->started_ms ? s->join_began_ms : t->started_ms;
		double to = s->closed_ms > 0 ? s->closed_ms : end;
		if (to > end)
			to = end;
		if (to > from)
			o->joining += to - from;
	}
	if (o->joining > o->ran) /* overlapping joins (nested scopes) cannot exceed the run */
		o->joining = o->ran;
	o->busy = o->ran - o->joining;
}

static const char *base(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;
	return s ? s + 1 : path;
}

void rf_badges(unsigned warn, bool ascii, char *buf, size_t len)
{
	buf[0] = 0;
	for (int b = 0; b < TM_W_KINDS; b++) {
		if (!(warn & (1u << b)))
			continue;
		size_t at = strlen(buf);
		snprintf(buf + at, len - at, " %s%s", ascii ? "!" : "⚠", tm_warn_name(b));
	}
}

void rf_label(const struct tm_model *m, const struct tr_row *r, bool ascii, char *buf, size_t len)
{
	char badges[128];
	rf_badges(r->warn, ascii, badges, sizeof badges);
	switch (r->kind) {
	case TR_ROOT:
		snprintf(buf, len, "<root> %s [%lld]%s", m->proc.name, (long long)m->proc.pid,
			 m->proc.exited ? " (exited)" : "");
		return;
	case TR_POOLS:
		snprintf(buf, len, "pools (%zu)", m->pools.n);
		return;
	case TR_POOL: {
		const struct tm_pool *p = r->ent;
		snprintf(buf, len, "%s size %lld/%lld active %lld queued %lld rejected %lld",
			 p->name ? p->name : "pool", (long long)p->size, (long long)p->max,
			 (long long)p->active, (long long)p->queued, (long long)p->rejected);
		return;
	}
	case TR_SCOPE: {
		const struct tm_scope *s = r->ent;
		snprintf(buf, len, "%s%s", s->name ? s->name : "scope", badges);
		return;
	}
	case TR_TASK: {
		const struct tm_task *t = r->ent;
		char times[16] = "";
		if (r->group_n > 1)
			snprintf(times, sizeof times, " %s%u", ascii ? "x" : "×", r->group_n);
		/* A group stands for several threads: name none of them, but
		 * the body the group's subtasks run (one fork site, one body). */
		const char *name = r->group_n <= 1	   ? tr_task_name(m, t)
				   : t->func && t->func[0] ? t->func
							   : "task";
		snprintf(buf, len, "%s%s%s", name, times, badges);
		return;
	}
	}
	buf[0] = 0;
}

/* Guides, connector and expander in front of the label. */
static void tree_prefix(const struct tr_row *r, bool ascii, char *buf, size_t len)
{
	buf[0] = 0;
	for (int d = 1; d < r->depth; d++)
		strncat(buf, (r->guides & (1ull << d)) ? G(g_vert, ascii) : "  ",
			len - strlen(buf) - 1);
	if (r->depth > 0)
		strncat(buf, (r->flags & TR_F_LAST) ? G(g_elbow, ascii) : G(g_tee, ascii),
			len - strlen(buf) - 1);
	const struct glyph *e = !(r->flags & TR_F_KIDS)	     ? &g_leaf
				: (r->flags & TR_F_EXPANDED) ? &g_open
							     : &g_closed;
	strncat(buf, r->depth > 0 || (r->flags & TR_F_KIDS) ? G(*e, ascii) : "",
		len - strlen(buf) - 1);
}

double rf_deadline(const struct tm_model *m, const struct tm_scope *s)
{
	double dl = 0;
	for (int depth = 0; s && depth < TR_MAX_DEPTH; depth++) {
		if (s->deadline_ms > 0 && (dl == 0 || s->deadline_ms < dl))
			dl = s->deadline_ms;
		const struct tm_task *opener =
		    s->parent_task ? tm_task_get(m, s->parent_task) : NULL;
		int64_t up = opener ? opener->scope : s->parent;
		s = up && up != s->id ? tm_scope_get(m, up) : NULL;
	}
	return dl;
}

void rf_cell(const struct tm_model *m, const struct tr_row *r, int col, double now, bool ascii,
	     char *out, size_t len)
{
	const struct tm_scope *s = r->kind == TR_SCOPE ? r->ent : NULL;
	const struct tm_task *t = r->kind == TR_TASK ? r->ent : NULL;
	out[0] = 0;
	switch (col) {
	case RF_STATE:
		if (r->state != DS_NONE)
			snprintf(out, len, "%s %s", rf_glyph(r->state, ascii),
				 tr_state_name(r->state));
		break;
	case RF_NAME: {
		char pre[TR_MAX_DEPTH * 8], label[512];
		tree_prefix(r, ascii, pre, sizeof pre);
		rf_label(m, r, ascii, label, sizeof label);
		snprintf(out, len, "%s%s", pre, label);
		break;
	}
	case RF_ID:
		/* Ids are u64 in the runtime (tm_model keeps their bits). */
		if (s || t || r->kind == TR_POOL)
			snprintf(out, len, "%llu", (unsigned long long)(uint64_t)r->id);
		break;
	case RF_AGE: {
		double from = s	  ? s->opened_ms
			      : t ? (t->started_ms ? t->started_ms : t->forked_ms)
				  : 0;
		double to = s ? s->closed_ms : t ? t->ended_ms : 0;
		if (from > 0)
			ttx_duration(out, len, (to > 0 ? to : now) - from);
		break;
	}
	case RF_JOINER:
		if (s) {
			static const char *const short_names[] = {"",	   "all",   "any",
								  "await", "until", "custom"};
			snprintf(out, len, "%s",
				 (s->joiner >= 0 && s->joiner <= JN_CUSTOM) ? short_names[s->joiner]
									    : "?");
		}
		break;
	case RF_DEADLINE: {
		const struct tm_scope *ds = s ? s : t ? tm_scope_get(m, t->scope) : NULL;
		bool live = s ? (s->state == SS_OPEN || s->state == SS_JOINING)
			      : t && (t->state == TK_RUNNING || t->state == TK_FORKED);
		double dl = ds ? rf_deadline(m, ds) : 0;
		if (dl > 0 && live)
			ttx_duration(out, len, dl - now);
		break;
	}
	case RF_SITE: {
		const struct tm_site *site = s ? &s->site : t ? &t->site : NULL;
		if (site && site->file)
			snprintf(out, len, "%s:%d", base(site->file), site->line);
		break;
	}
	case RF_WORKER: {
		int64_t tid = s ? s->owner : t ? t->worker : 0;
		if (tid)
			snprintf(out, len, "%lld", (long long)tid);
		break;
	}
	case RF_BUSY:
	case RF_SCHED:
	case RF_IDLE: {
		/* A group's row stands for several subtasks: no one's time. */
		if (!t || r->group_n > 1)
			break;
		struct rf_times tt;
		rf_task_times(m, t, now, &tt);
		if (col == RF_SCHED && t->forked_ms > 0)
			ttx_duration(out, len, tt.queued);
		else if (col == RF_BUSY && tt.started)
			ttx_duration(out, len, tt.busy);
		else if (col == RF_IDLE && tt.started)
			ttx_duration(out, len, tt.joining);
		break;
	}
	}
}

void rf_line(const struct rf_layout *l, const struct tm_model *m, const struct tr_row *r,
	     double now, char *buf, size_t len)
{
	char c[1024];
	buf[0] = 0;
	for (int i = 0; i < l->n; i++) {
		rf_cell(m, r, l->col[i], now, l->ascii, c, sizeof c);
		put_cell(buf, len, c, l->width[i], cols[l->col[i]].right, l->ascii);
		if (i + 1 < l->n)
			ttx_pad(buf, len, 0, 1);
	}
}
