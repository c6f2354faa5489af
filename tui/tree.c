/* tree.c - flattens the model into display rows: parent links become sorted
 * sibling ranges, then one depth-first walk emits the rows that are expanded
 * and match the filter, folding identical subtasks when grouping is on. */
#include "tree.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct tr_edge {
	uint64_t parent;
	const char *name;
	void *ent;
	int64_t id;
	double t;
	uint8_t kind, state;
};

static const char *const state_names[DS_COUNT] = {
    [DS_NONE] = "",	      [DS_QUEUED] = "queued",	    [DS_RUNNING] = "running",
    [DS_BLOCKED] = "blocked", [DS_JOINING] = "joining",	    [DS_DONE] = "done",
    [DS_FAILED] = "failed",   [DS_CANCELLED] = "cancelled", [DS_EXITED] = "exited",
};
static const char *const sort_names[SORT_COUNT] = {
    [SORT_ID] = "fork order", [SORT_AGE] = "age", [SORT_NAME] = "name", [SORT_STATE] = "state"};

const char *tr_state_name(int s)
{
	return (s >= 0 && s < DS_COUNT) ? state_names[s] : "?";
}
const char *tr_sort_name(int s)
{
	return (s >= 0 && s < SORT_COUNT) ? sort_names[s] : "?";
}

uint64_t tr_key(int kind, int64_t id)
{
	return ((uint64_t)kind << 56) | ((uint64_t)id & ((1ull << 56) - 1));
}
uint64_t tr_row_key(const struct tr_row *r)
{
	return tr_key(r->kind, r->id);
}

void tr_init(struct tr_tree *t)
{
	memset(t, 0, sizeof *t);
}

void tr_free(struct tr_tree *t)
{
	free(t->rows);
	free(t->edges);
	tmap_free(&t->toggled);
	tmap_free(&t->first);
	tmap_free(&t->scratch);
	memset(t, 0, sizeof *t);
}

static bool default_expanded(int kind)
{
	return kind != TR_POOLS && kind != TR_POOL;
}

bool tr_is_expanded(const struct tr_tree *t, int kind, int64_t id)
{
	return default_expanded(kind) != (tmap_get(&t->toggled, (int64_t)tr_key(kind, id)) >= 0);
}

void tr_set_expanded(struct tr_tree *t, int kind, int64_t id, bool on)
{
	int64_t k = (int64_t)tr_key(kind, id);
	if (on == default_expanded(kind))
		tmap_del(&t->toggled, k);
	else
		tmap_put(&t->toggled, k, 1);
}

long tr_find(const struct tr_tree *t, uint64_t key)
{
	for (size_t i = 0; i < t->n; i++)
		if (tr_row_key(&t->rows[i]) == key)
			return (long)i;
	return -1;
}

const char *tr_task_name(const struct tm_model *m, const struct tm_task *t)
{
	if (t->func && t->func[0])
		return t->func;
	const struct tm_thread *th = t->worker ? tm_thread_get(m, t->worker) : NULL;
	return th && th->name && th->name[0] ? th->name : "task";
}

int tr_scope_state(const struct tm_scope *s)
{
	static const uint8_t map[] = {[SS_OPEN] = DS_RUNNING,
				      [SS_JOINING] = DS_JOINING,
				      [SS_JOINED] = DS_DONE,
				      [SS_CANCELLED] = DS_CANCELLED,
				      [SS_CLOSED] = DS_DONE};
	return (s->state >= 0 && (size_t)s->state < sizeof map) ? map[s->state] : DS_NONE;
}

int tr_task_state(const struct tm_model *m, const struct tm_task *t, bool joining)
{
	static const uint8_t map[] = {
	    [TK_FORKED] = DS_QUEUED,	   [TK_RUNNING] = DS_RUNNING,
	    [TK_SUCCESS] = DS_DONE,	   [TK_FAILED] = DS_FAILED,
	    [TK_CANCELLED] = DS_CANCELLED, [TK_UNAVAILABLE] = DS_CANCELLED};
	int s = (t->state >= 0 && (size_t)t->state < sizeof map) ? map[t->state] : DS_NONE;
	if (s != DS_RUNNING)
		return s;
	if (joining)
		return DS_JOINING;
	/* Only a stack we fetched can tell running from parked. */
	const struct tm_stack *st = t->worker ? tm_stack_get(m, t->worker) : NULL;
	if (st && st->state && strcmp(st->state, "RUNNABLE") != 0)
		return DS_BLOCKED;
	return DS_RUNNING;
}

/* ---- edges ------------------------------------------------------------------ */

/* The array v of n items of size, with room for one more: v itself, or v
 * moved to twice the capacity *cap (256 at first); NULL when memory runs out,
 * v and *cap untouched. */
static void *room_for_one(void *v, size_t n, size_t *cap, size_t size)
{
	if (n < *cap)
		return v;
	size_t ncap = *cap ? *cap * 2 : 256;
	void *nv = realloc(v, ncap * size);
	if (nv)
		*cap = ncap;
	return nv;
}

static int add_edge(struct tr_tree *t, struct tr_edge e)
{
	struct tr_edge *ne = room_for_one(t->edges, t->nedges, &t->capedges, sizeof *ne);
	if (!ne)
		return -ENOMEM;
	t->edges = ne;
	t->edges[t->nedges++] = e;
	return 0;
}

static int cmp_num(double a, double b)
{
	return (a > b) - (a < b);
}

static int cmp_edge(const void *pa, const void *pb, void *ctx)
{
	const struct tr_edge *a = pa, *b = pb;
	int sort = *(const int *)ctx, c = 0;
	if (a->parent != b->parent)
		return a->parent < b->parent ? -1 : 1;
	if (a->kind != b->kind) /* subtasks before the scopes nested beside them */
		return a->kind == TR_TASK ? -1 : (b->kind == TR_TASK ? 1 : (int)a->kind - b->kind);
	switch (sort) {
	case SORT_AGE:
		c = cmp_num(a->t, b->t);
		break;
	case SORT_NAME:
		c = strcmp(a->name ? a->name : "", b->name ? b->name : "");
		break;
	case SORT_STATE:
		c = (int)a->state - (int)b->state;
		break;
	default:
		break;
	}
	return c ? c : cmp_num((double)a->id, (double)b->id);
}

static int collect(struct tr_tree *t, const struct tm_model *m)
{
	int rc = 0;
	t->nedges = 0;
	tmap_clear(&t->scratch);
	/* Tasks whose body is joining a scope it opened show as joining. */
	for (size_t i = 0; i < m->scopes.n; i++) {
		const struct tm_scope *s = m->scopes.v[i];
		if (s->state == SS_JOINING && s->parent_task)
			tmap_put(&t->scratch, s->parent_task, 1);
	}
	for (size_t i = 0; i < m->scopes.n && !rc; i++) {
		struct tm_scope *s = m->scopes.v[i];
		uint64_t parent = tr_key(TR_ROOT, 0);
		if (s->parent_task && tm_task_get(m, s->parent_task))
			parent = tr_key(TR_TASK, s->parent_task);
		else if (s->parent && s->parent != s->id && tm_scope_get(m, s->parent))
			parent = tr_key(TR_SCOPE, s->parent);
		rc = add_edge(t, (struct tr_edge){parent, s->name, s, s->id, s->opened_ms, TR_SCOPE,
						  (uint8_t)tr_scope_state(s)});
	}
	for (size_t i = 0; i < m->tasks.n && !rc; i++) {
		struct tm_task *k = m->tasks.v[i];
		uint64_t parent =
		    tm_scope_get(m, k->scope) ? tr_key(TR_SCOPE, k->scope) : tr_key(TR_ROOT, 0);
		bool joining = tmap_get(&t->scratch, k->id) >= 0;
		double age = k->started_ms ? k->started_ms : k->forked_ms;
		rc = add_edge(t, (struct tr_edge){parent, tr_task_name(m, k), k, k->id, age,
						  TR_TASK, (uint8_t)tr_task_state(m, k, joining)});
	}
	for (size_t i = 0; i < m->pools.n && !rc; i++) {
		struct tm_pool *p = m->pools.v[i];
		rc = add_edge(t, (struct tr_edge){tr_key(TR_POOLS, 0), p->name, p, p->id, 0,
						  TR_POOL, DS_NONE});
	}
	if (!rc && m->pools.n)
		rc = add_edge(t, (struct tr_edge){tr_key(TR_ROOT, 0), "pools", NULL, 0, 1e300,
						  TR_POOLS, DS_NONE});
	if (rc)
		return rc;
	if (t->nedges) /* qsort_r wants a real array even for nothing */
		qsort_r(t->edges, t->nedges, sizeof *t->edges, cmp_edge, &t->sort);
	tmap_clear(&t->first);
	for (size_t i = 0; i < t->nedges; i++)
		if (i == 0 || t->edges[i].parent != t->edges[i - 1].parent)
			if (tmap_put(&t->first, (int64_t)t->edges[i].parent, (uint32_t)i))
				return -ENOMEM;
	return 0;
}

/* ---- walk ------------------------------------------------------------------ */

static bool has_ci(const char *hay, const char *needle)
{
	return hay && strcasestr(hay, needle);
}

struct walk {
	struct tr_tree *t;
	const struct tm_model *m;
	bool filtering;
	int rc;
};

static bool matches(const struct walk *w, const struct tr_edge *e)
{
	const char *f = w->t->filter;
	if (has_ci(e->name, f) || has_ci(tr_state_name(e->state), f))
		return true;
	const struct tm_site *site = NULL;
	const char *raw = NULL;
	if (e->kind == TR_SCOPE) {
		const struct tm_scope *s = e->ent;
		site = &s->site;
		raw = tm_scope_state_name(s->state);
	} else if (e->kind == TR_TASK) {
		const struct tm_task *k = e->ent;
		site = &k->site;
		raw = tm_task_state_name(k->state);
		/* The name shows the body once it is known; the worker's name
		 * still finds the row, as it did before. */
		const struct tm_thread *th = k->worker ? tm_thread_get(w->m, k->worker) : NULL;
		if (th && has_ci(th->name, f))
			return true;
	}
	if (has_ci(raw, f) || (site && has_ci(site->func, f)))
		return true;
	if (site && site->file) {
		char buf[TM_MAX_STR + 16];
		snprintf(buf, sizeof buf, "%s:%d", site->file, site->line);
		return has_ci(buf, f);
	}
	return false;
}

static int push_row(struct tr_tree *t, const struct tr_row *r)
{
	struct tr_row *nr = room_for_one(t->rows, t->n, &t->cap, sizeof *nr);
	if (!nr)
		return -ENOMEM;
	t->rows = nr;
	t->rows[t->n++] = *r;
	return 0;
}

static bool ended(const struct tr_edge *e)
{
	return e->state == DS_DONE || e->state == DS_FAILED ||
	       (e->state == DS_CANCELLED && e->kind == TR_TASK);
}

/* Identity of a groupable subtask: where it was forked, its state and, when
 * known, the stack its thread is parked in. */
static int64_t group_key(const struct tm_model *m, uint64_t parent, const struct tr_edge *e)
{
	const struct tm_task *k = e->ent;
	const struct tm_stack *st = k->worker ? tm_stack_get(m, k->worker) : NULL;
	uint64_t h = parent * 0x9E3779B97F4A7C15ull ^ (uint64_t)e->state;
	for (const char *s = k->site.func; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	for (const char *s = k->site.file; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	h = (h ^ (uint64_t)k->site.line) * 0x100000001b3ull;
	h ^= st ? st->hash : 0;
	return (int64_t)(h & 0x7fffffffffffffffull);
}

/* Emits e and what is shown below it; returns whether anything was kept. */
static bool emit(struct walk *w, const struct tr_edge *e, int depth)
{
	struct tr_tree *t = w->t;
	uint64_t key = tr_key(e->kind, e->id);
	long first = tmap_get(&t->first, (int64_t)key);
	bool kids = first >= 0;
	bool open = kids && (w->filtering || tr_is_expanded(t, e->kind, e->id));
	bool self = !w->filtering || matches(w, e);
	unsigned warn = e->kind == TR_SCOPE  ? ((struct tm_scope *)e->ent)->warn
			: e->kind == TR_TASK ? ((struct tm_task *)e->ent)->warn
					     : 0;
	struct tr_row r = {
	    .ent = e->ent,
	    .id = e->id,
	    .group_n = 1,
	    .kind = e->kind,
	    .depth = (uint8_t)depth,
	    .state = e->state,
	    .warn = warn,
	    .flags = (uint8_t)((kids ? TR_F_KIDS : 0) | (open ? TR_F_EXPANDED : 0) |
			       (ended(e) ? TR_F_DIM : 0) | (self && w->filtering ? TR_F_MATCH : 0)),
	};
	size_t mark = t->n;
	if ((w->rc = push_row(t, &r)))
		return false;
	bool any = false;
	if (open && depth + 1 < TR_MAX_DEPTH) {
		for (size_t i = (size_t)first; i < t->nedges && t->edges[i].parent == key; i++) {
			const struct tr_edge *c = &t->edges[i];
			if (t->hide_ended && ended(c)) {
				t->hidden++;
				continue;
			}
			if (t->group && c->kind == TR_TASK &&
			    tmap_get(&t->first, (int64_t)tr_key(TR_TASK, c->id)) < 0 &&
			    (!w->filtering || matches(w, c))) {
				int64_t gk = group_key(w->m, key, c);
				long at = tmap_get(&t->scratch, gk);
				if (at >= 0) {
					t->rows[at].group_n++;
					any = true;
					continue;
				}
				if (tmap_put(&t->scratch, gk, (uint32_t)t->n))
					w->rc = -ENOMEM;
			}
			any |= emit(w, c, depth + 1);
			if (w->rc)
				return true;
		}
	}
	if (w->filtering && !self && !any) {
		t->n = mark;
		return false;
	}
	return true;
}

/* Guides and last-sibling flags depend on which rows survived the filter,
 * so they are derived from the final rows, walking up from the bottom. */
static void fix_guides(struct tr_tree *t)
{
	bool more[TR_MAX_DEPTH + 1] = {0};
	int deepest = 0;
	for (size_t i = t->n; i-- > 0;) {
		struct tr_row *r = &t->rows[i];
		int d = r->depth;
		uint64_t g = 0;
		for (int j = 0; j < d; j++)
			if (more[j])
				g |= 1ull << j;
		r->guides = g;
		if (!more[d])
			r->flags |= TR_F_LAST;
		else
			r->flags &= (uint8_t)~TR_F_LAST;
		more[d] = true;
		for (int j = d + 1; j <= deepest; j++)
			more[j] = false;
		deepest = d;
	}
}

int tr_build(struct tr_tree *t, const struct tm_model *m)
{
	t->n = 0;
	t->hidden = 0;
	int rc = collect(t, m);
	if (rc)
		return rc;
	tmap_clear(&t->scratch);
	struct walk w = {.t = t, .m = m, .filtering = t->filter[0] != 0};
	struct tr_edge root = {.name = "<root>",
			       .kind = TR_ROOT,
			       .state = (uint8_t)(m->proc.exited ? DS_EXITED : DS_RUNNING)};
	if (!emit(&w, &root, 0) && !w.rc) {
		/* Keep the root even when nothing matches, so the view has an anchor. */
		root.state = (uint8_t)(m->proc.exited ? DS_EXITED : DS_RUNNING);
		struct tr_row r = {.kind = TR_ROOT, .state = root.state, .group_n = 1};
		w.rc = push_row(t, &r);
	}
	fix_guides(t);
	return w.rc;
}
