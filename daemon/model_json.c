/* model_json.c - the model as the JSON of schemas/control.md, whole or as a delta. */
#include "model.h"

#include "jfield.h"
#include "symbolize.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The names of the wire's values (proto/wire.h): [PROTO_TASK_FAILED] =
 * "failed", ... */
#define NAME_OF(NAME, value, json) [value] = json,
#define NAME_OF_PUBLIC(NAME, value, json, public) [value] = json,
static const char *const task_states[] = {PROTO_TASK_STATES(NAME_OF)};
static const char *const joiners[] = {PROTO_JOINERS(NAME_OF_PUBLIC)};
static const char *const cancel_reasons[] = {PROTO_CANCEL_REASONS(NAME_OF)};
static const char *const roles[] = {PROTO_ROLES(NAME_OF)};
static const char *const queues[] = {PROTO_QUEUE_KINDS(NAME_OF_PUBLIC)};
static const char *const policies[] = {PROTO_POLICIES(NAME_OF_PUBLIC)};
static const char *const violations[] = {PROTO_VIOLATIONS(NAME_OF)};
static const char *const warnings[] = {PROTO_WARNINGS(NAME_OF)};

#define NAME(tab, i) ((size_t)(i) < sizeof(tab) / sizeof(tab[0]) ? tab[i] : NULL)

/* Task bodies named during one render.  A program forks few distinct bodies,
 * so a handful of entries spares the symbolizer a lookup per task (and an
 * unsymbolizable process a failed attach per task). */
#define FN_MEMO 16
/* Lookups that find no module at all (a process the symbolizer cannot read
 * retries its attach on each) after which a render stops asking. */
#define FN_MAX_UNMAPPED 8

struct render {
	const struct model *m;
	const struct clockref *clk;
	/* A live render (model_render_live): the ended scopes and tasks it
	 * shows, those that something live names; NULL: all. */
	const struct idmap *ended_kept;
	struct {
		uint64_t addr;
		char *name; /* NULL: no name for addr */
	} memo[FN_MEMO];
	unsigned nmemo, next, unmapped;
};

void model_set_symbolizer(struct model *m, struct symbolizer *sym, pid_t pid,
			  unsigned long long starttime)
{
	m->sym = sym;
	m->sym_pid = pid;
	m->sym_starttime = starttime;
}

/* The function at addr in the model's process, or NULL. */
static const char *fn_name(struct render *r, uint64_t addr)
{
	if (!addr || !r->m->sym || r->unmapped >= FN_MAX_UNMAPPED)
		return NULL;
	for (unsigned i = 0; i < r->nmemo; i++)
		if (r->memo[i].addr == addr)
			return r->memo[i].name;
	struct sym_frame f;
	if (!sym_lookup(r->m->sym, r->m->sym_pid, r->m->sym_starttime, addr, false, &f))
		r->unmapped++;
	/* The symbolizer's strings live only until its next miss: keep a copy. */
	char *name = f.func ? strdup(f.func) : NULL;
	unsigned slot = r->nmemo < FN_MEMO ? r->nmemo++ : r->next++ % FN_MEMO;
	free(r->memo[slot].name);
	r->memo[slot].addr = addr;
	r->memo[slot].name = name;
	return name;
}

static void render_done(struct render *r)
{
	for (unsigned i = 0; i < r->nmemo; i++)
		free(r->memo[i].name);
}

const char *model_task_state_name(unsigned state)
{
	return NAME(task_states, state);
}

/* The most advanced state wins; a cancelled scope still being joined says
 * "cancelled", since that is what the reader needs to know. */
const char *model_scope_state_name(const struct m_scope *s)
{
	if (s->flags & EF_ENDED)
		return "closed";
	if (s->flags & EF_CANCELLED)
		return "cancelled";
	if (s->flags & EF_JOINED)
		return "joined";
	if (s->flags & EF_JOINING)
		return "joining";
	return "open";
}

/* A monotonic ts of the agent as realtime ms; 0 (never happened) is null,
 * and so is a time that the peer's values take past int64 or before 1970. */
static void time_ms(struct jbuf *b, const char *key, const struct clockref *clk, int64_t ts)
{
	int64_t since, real = 0;
	bool ok = ts && !__builtin_sub_overflow(ts, clk->mono, &since) &&
		  !__builtin_add_overflow(since, clk->real, &real) && real >= 0;
	jf_ms_if(b, key, ok, real);
}

static void site(struct jbuf *b, const char *file, int32_t line, const char *func)
{
	jb_key(b, "site");
	if (!file && !func) {
		jb_null(b);
		return;
	}
	jb_obj(b);
	jf_str(b, "file", file);
	jf_i64(b, "line", line);
	jf_str(b, "func", func);
	jb_obj_end(b);
}

static void thread_json(struct jbuf *b, struct render *r, const void *ent)
{
	const struct clockref *clk = r->clk;
	const struct m_thread *t = ent;
	jb_obj(b);
	jf_u64(b, "tid", t->id);
	jf_str(b, "name", t->name);
	jf_str(b, "role", NAME(roles, t->role) ? NAME(roles, t->role) : "other");
	jf_id(b, "pool", t->pool);
	jf_id(b, "task", t->task);
	jf_str(b, "state", t->flags & EF_ENDED ? "exited" : "live");
	time_ms(b, "started_ms", clk, t->started);
	time_ms(b, "exited_ms", clk, t->exited);
	jb_obj_end(b);
}

static void pool_json(struct jbuf *b, struct render *r, const void *ent)
{
	(void)r;
	const struct m_pool *p = ent;
	const struct proto_pool *c = &p->cfg;
	jb_obj(b);
	jf_u64(b, "id", p->id);
	jf_str(b, "name", p->name);
	static const char *const counts[] = {"core", "max", "size", "active", "largest"};
	const uint32_t vals[] = {c->core, c->max, c->size, c->active, c->largest};
	for (size_t i = 0; i < 5; i++)
		jf_u64(b, counts[i], vals[i]);
	jf_u64(b, "queued", c->queued);
	jf_u64(b, "completed", c->completed);
	jf_u64(b, "rejected", c->rejected);
	jf_str(b, "queue", NAME(queues, c->queue_kind));
	jf_u64(b, "queue_capacity", c->queue_capacity);
	jf_str(b, "policy", NAME(policies, c->policy));
	jb_key(b, "keep_alive_ms");
	jb_ms(b, c->keep_alive_ns);
	if (p->resource_limit) {
		jb_key(b, "resource");
		jb_obj(b);
		jf_str(b, "name", p->resource);
		jf_u64(b, "limit", p->resource_limit);
		jb_obj_end(b);
	}
	jb_obj_end(b);
}

/* Ancestors a walk up the model's scopes follows at most (a peer's ids may
 * loop). */
#define MAX_WALK 4096

/* Where s's cancellation began: s itself for any reason but PARENT, else
 * the nearest ancestor cancelled for another reason (the cancellation
 * flows down, and stops at a scope already cancelled); NULL when not
 * cancelled or not in the model. */
static const struct m_scope *cancel_origin(const struct model *m, const struct m_scope *s)
{
	for (int i = 0; s && s->cancel_reason && i < MAX_WALK; i++) {
		if (s->cancel_reason != PROTO_CANCEL_PARENT)
			return s;
		s = s->parent ? idmap_get(&m->ents[ENT_SCOPE], s->parent) : NULL;
	}
	return NULL;
}

/* The nearest shield at or above s (what keeps ancestors' cancellation
 * away from it), or NULL. */
static const struct m_scope *shield_of(const struct model *m, const struct m_scope *s)
{
	for (int i = 0; s && i < MAX_WALK; i++) {
		if (s->scope_flags & PROTO_SCOPE_SHIELD)
			return s;
		s = s->parent ? idmap_get(&m->ents[ENT_SCOPE], s->parent) : NULL;
	}
	return NULL;
}

/* The cancellation's cause, origin, the scope's flags and shield, and its
 * handlers. */
static void scope_cancel_json(struct jbuf *b, struct render *r, const struct m_scope *s)
{
	const struct m_scope *origin = cancel_origin(r->m, s), *shield = shield_of(r->m, s);
	unsigned cause = s->cancel_cause;

	/* An older agent sends no cause: the origin's reason is it. */
	if (!cause && origin)
		cause = origin->cancel_reason;
	jf_str(b, "cancel_cause", s->cancel_reason ? NAME(cancel_reasons, cause) : NULL);
	jf_id(b, "cancel_origin", origin ? origin->id : 0);
	jb_key(b, "flags");
	jb_arr(b);
#define FLAG_NAME(N, v, json, pub)                                                                 \
	if (s->scope_flags & (v))                                                                  \
		jb_str(b, json);
	PROTO_SCOPE_FLAGS(FLAG_NAME)
#undef FLAG_NAME
	jb_arr_end(b);
	jf_id(b, "shielded_by", shield ? shield->id : 0);
	time_ms(b, "shield_deadline_ms", r->clk, shield ? shield->deadline : 0);
	jf_u64(b, "handlers", s->handlers);
	jf_u64(b, "handlers_ran", s->handlers_ran);
}

static void scope_json(struct jbuf *b, struct render *r, const void *ent)
{
	const struct clockref *clk = r->clk;
	const struct m_scope *s = ent;
	jb_obj(b);
	jf_u64(b, "id", s->id);
	jf_str(b, "name", s->name);
	jf_id(b, "parent", s->parent);
	jf_id(b, "parent_task", s->parent_task);
	jf_id(b, "owner", s->owner);
	jf_id(b, "pool", s->pool);
	jf_str(b, "joiner", s->flags & EF_PLACEHOLDER ? NULL : NAME(joiners, s->joiner));
	jf_str(b, "state", model_scope_state_name(s));
	time_ms(b, "deadline_ms", clk, s->deadline);
	time_ms(b, "opened_ms", clk, s->opened);
	time_ms(b, "closed_ms", clk, s->closed);
	time_ms(b, "join_began_ms", clk, s->join_began);
	jf_str(b, "cancel_reason", NAME(cancel_reasons, s->cancel_reason));
	scope_cancel_json(b, r, s);
	jf_i64_if(b, "join_result", s->flags & EF_JOINED, s->join_result);
	site(b, s->file, s->line, s->func);
	jb_key(b, "values");
	jb_obj(b);
	for (size_t i = 0; i < s->nvalues; i++) {
		jb_key(b, s->values[i].key);
		jb_str(b, s->values[i].value);
	}
	jb_obj_end(b);
	jb_obj_end(b);
}

static void task_json(struct jbuf *b, struct render *r, const void *ent)
{
	const struct clockref *clk = r->clk;
	const struct m_task *t = ent;
	jb_obj(b);
	jf_u64(b, "id", t->id);
	jf_id(b, "scope", t->scope);
	jf_str(b, "state", NAME(task_states, t->state));
	jf_id(b, "worker", t->worker);
	jf_i64_if(b, "error", t->flags & EF_ENDED && t->state == PROTO_TASK_FAILED, t->error);
	site(b, t->file, t->line, t->func);
	jf_str(b, "func", fn_name(r, t->fn));
	time_ms(b, "forked_ms", clk, t->forked);
	time_ms(b, "started_ms", clk, t->started);
	time_ms(b, "ended_ms", clk, t->ended);
	jb_obj_end(b);
}

typedef void (*ent_json_fn)(struct jbuf *b, struct render *r, const void *e);

static const struct {
	const char *key;
	ent_json_fn fn;
} kinds[ENT_KINDS] = {
    [ENT_THREAD] = {"threads", thread_json},
    [ENT_POOL] = {"pools", pool_json},
    [ENT_SCOPE] = {"scopes", scope_json},
    [ENT_TASK] = {"tasks", task_json},
};

static int by_id(const void *a, const void *b)
{
	uint64_t x = **(const uint64_t *const *)a, y = **(const uint64_t *const *)b;
	return x < y ? -1 : x > y;
}

/* Whether a render shows e, an entity of kind k. */
static bool shown(const struct render *r, enum ent_kind k, const void *e)
{
	if (!r->ended_kept)
		return true;
	if (k == ENT_SCOPE) {
		const struct m_scope *s = e;
		return !(s->flags & EF_ENDED) || idmap_get(&r->ended_kept[k], s->id);
	}
	if (k == ENT_TASK) {
		const struct m_task *t = e;
		/* An ended task's state is never "running" (model.c,
		 * task_end), so no ended one is any thread's running task. */
		return !(t->flags & EF_ENDED) || idmap_get(&r->ended_kept[k], t->id);
	}
	return true;
}

/* Writes key: [entities changed after since], in id order (parents, opened
 * first, come first). */
static void ent_array(struct jbuf *b, struct render *r, enum ent_kind k, uint64_t since)
{
	const struct idmap *map = &r->m->ents[k];
	jb_key(b, kinds[k].key);
	jb_arr(b);
	const void **list = malloc((map->n ? map->n : 1) * sizeof *list);
	if (!list) {
		b->oom = true;
		jb_arr_end(b);
		return;
	}
	size_t n = 0;
	for (size_t i = 0; i < map->cap; i++) {
		const uint64_t *e = map->slots[i].e;
		if (e && e[1] > since && shown(r, k, e))
			list[n++] = e;
	}
	qsort(list, n, sizeof *list, by_id);
	for (size_t i = 0; i < n; i++)
		kinds[k].fn(b, r, list[i]);
	free(list);
	jb_arr_end(b);
}

static void violations_json(struct jbuf *b, const struct model *m, const struct clockref *clk)
{
	jb_key(b, "violations");
	jb_arr(b);
	uint64_t first = m->nviol > MODEL_VIOLATIONS ? m->nviol - MODEL_VIOLATIONS : 0;
	for (uint64_t i = first; i < m->nviol; i++) {
		const struct m_violation *v = &m->viol[i % MODEL_VIOLATIONS];
		jb_obj(b);
		jf_id(b, "scope", v->scope);
		jf_str(b, "kind", NAME(violations, v->kind));
		jf_i64(b, "error", v->error);
		time_ms(b, "ts_ms", clk, v->ts);
		jf_u64(b, "tid", v->tid);
		jb_obj_end(b);
	}
	jb_arr_end(b);
}

static void warnings_json(struct jbuf *b, const struct model *m, const struct clockref *clk)
{
	jb_key(b, "warnings");
	jb_arr(b);
	uint64_t first = m->nwarn > MODEL_WARNINGS ? m->nwarn - MODEL_WARNINGS : 0;
	for (uint64_t i = first; i < m->nwarn; i++) {
		const struct m_warning *w = &m->warn[i % MODEL_WARNINGS];
		jb_obj(b);
		jf_str(b, "kind", NAME(warnings, w->kind));
		jf_u64(b, "subject", w->subject);
		jf_i64(b, "amount", w->amount);
		jf_u64(b, "limit", w->limit);
		time_ms(b, "ts_ms", clk, w->ts);
		jf_u64(b, "tid", w->tid);
		jb_obj_end(b);
	}
	jb_arr_end(b);
}

static void render(struct render *r, int64_t now_real_ns, struct jbuf *b)
{
	const struct model *m = r->m;
	jb_obj(b);
	jb_key(b, "now_ms");
	jb_ms(b, now_real_ns);
	for (int k = 0; k < ENT_KINDS; k++)
		ent_array(b, r, k, 0);
	violations_json(b, m, r->clk);
	warnings_json(b, m, r->clk);
	jb_obj_end(b);
	render_done(r);
}

void model_render(const struct model *m, const struct clockref *clk, int64_t now_real_ns,
		  struct jbuf *b)
{
	struct render r = {.m = m, .clk = clk};
	render(&r, now_real_ns, b);
}

/* Adds e, ended, to kept unless there: 1 added, 0 not ended or there
 * already, -ENOMEM. */
static int keep(struct idmap *kept, const void *e, uint8_t flags)
{
	if (!e || !(flags & EF_ENDED) || idmap_get(kept, *(const uint64_t *)e))
		return 0;
	return idmap_put(kept, (void *)e) == 0 ? 1 : -ENOMEM;
}

static int keep_task(const struct model *m, struct idmap kept[ENT_KINDS], uint64_t id)
{
	const struct m_task *t = id ? idmap_get(&m->ents[ENT_TASK], id) : NULL;
	return keep(&kept[ENT_TASK], t, t ? t->flags : 0);
}

/* The ended scopes and tasks that live ones name: a thread's task, an open
 * scope's parent task, the closed scopes between an open scope and the
 * nearest open one above it.  A dump needs these to place what is live
 * exactly as it would with every ended entity at hand; the rest (a busy
 * process ends thousands in the retention time) it never shows.
 * 0 or -ENOMEM. */
static int ended_named(const struct model *m, struct idmap kept[ENT_KINDS])
{
	const struct idmap *threads = &m->ents[ENT_THREAD], *scopes = &m->ents[ENT_SCOPE];
	for (size_t i = 0; i < threads->cap; i++) {
		const struct m_thread *t = threads->slots[i].e;
		if (t && keep_task(m, kept, t->task) < 0)
			return -ENOMEM;
	}
	for (size_t i = 0; i < scopes->cap; i++) {
		const struct m_scope *s = scopes->slots[i].e;
		if (!s || (s->flags & EF_ENDED))
			continue;
		if (keep_task(m, kept, s->parent_task) < 0)
			return -ENOMEM;
		/* Up through closed scopes, to an open one (which walks on
		 * itself) or one kept already. */
		int rc = 1;
		for (int d = 0; rc > 0 && s->parent && d < MAX_WALK; d++) {
			const struct m_scope *up = idmap_get(scopes, s->parent);
			if ((rc = keep(&kept[ENT_SCOPE], up, up ? up->flags : 0)) < 0)
				return -ENOMEM;
			s = up;
		}
	}
	return 0;
}

void model_render_live(const struct model *m, const struct clockref *clk, int64_t now_real_ns,
		       struct jbuf *b)
{
	struct idmap kept[ENT_KINDS] = {0};
	if (ended_named(m, kept) < 0) {
		b->oom = true;
	} else {
		struct render r = {.m = m, .clk = clk, .ended_kept = kept};
		render(&r, now_real_ns, b);
	}
	for (int k = 0; k < ENT_KINDS; k++)
		idmap_free(&kept[k]);
}

void model_render_delta(const struct model *m, const struct clockref *clk, uint64_t since,
			struct jbuf *b)
{
	struct render r = {.m = m, .clk = clk};
	jb_key(b, "upsert");
	jb_obj(b);
	for (int k = 0; k < ENT_KINDS; k++)
		ent_array(b, &r, k, since);
	jb_obj_end(b);
	render_done(&r);
	jb_key(b, "remove");
	jb_obj(b);
	for (int k = 0; k < ENT_KINDS; k++) {
		jb_key(b, kinds[k].key);
		jb_arr(b);
		for (size_t i = 0; i < m->nrm; i++)
			if (m->rm[i].kind == k && m->rm[i].gen > since)
				jb_u64(b, m->rm[i].id);
		jb_arr_end(b);
	}
	jb_obj_end(b);
}
