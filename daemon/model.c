/* model.c - applying wire events to a process model: state only moves forward,
 * unknown ids become placeholders, snapshots repair, ended entities expire. */
#include "model.h"
#include "utf8.h"

#include "advisor.h"
#include "tally.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What names_gen takes its values from, for every model. */
static _Atomic uint64_t names_clock;

static void names_moved(struct model *m)
{
	m->names_gen = atomic_fetch_add_explicit(&names_clock, 1, memory_order_relaxed) + 1;
}

void model_init(struct model *m, const struct model_limits *lim)
{
	memset(m, 0, sizeof *m);
	names_moved(m);
	m->lim = *lim;
	if (!m->lim.max_entities)
		m->lim.max_entities = 1000000;
	if (!m->lim.max_values)
		m->lim.max_values = 256;
	if (!m->lim.max_sites)
		m->lim.max_sites = MODEL_MAX_SITES;
	if (!m->lim.max_retained)
		m->lim.max_retained = MODEL_MAX_RETAINED;
	if (!m->lim.max_string_bytes)
		m->lim.max_string_bytes = 8u << 20;
	if (!m->lim.max_owned_bytes)
		m->lim.max_owned_bytes = MODEL_MAX_OWNED_BYTES;
	m->strings.max_bytes = m->lim.max_string_bytes;
	if (lim->tally)
		m->tally = tally_new();
}

/* Where each kind keeps the fields the generic code touches, so one path
 * serves all four kinds (name 0: the kind has no owned name). */
static const struct ent_layout {
	const char *what;
	size_t size, seen, flags, name, live_at;
} layout[ENT_KINDS] = {
    [ENT_THREAD] = {"thread", sizeof(struct m_thread), offsetof(struct m_thread, seen),
		    offsetof(struct m_thread, flags), offsetof(struct m_thread, name),
		    offsetof(struct m_thread, live_at)},
    [ENT_POOL] = {"pool", sizeof(struct m_pool), offsetof(struct m_pool, seen),
		  offsetof(struct m_pool, flags), offsetof(struct m_pool, name),
		  offsetof(struct m_pool, live_at)},
    [ENT_SCOPE] = {"scope", sizeof(struct m_scope), offsetof(struct m_scope, seen),
		   offsetof(struct m_scope, flags), offsetof(struct m_scope, name),
		   offsetof(struct m_scope, live_at)},
    [ENT_TASK] = {"task", sizeof(struct m_task), offsetof(struct m_task, seen),
		  offsetof(struct m_task, flags), 0, offsetof(struct m_task, live_at)},
};

static uint8_t *ent_flags(enum ent_kind k, const void *e)
{
	return (uint8_t *)((uintptr_t)e + layout[k].flags);
}

static uint32_t *ent_seen(enum ent_kind k, const void *e)
{
	return (uint32_t *)((uintptr_t)e + layout[k].seen);
}

static uint32_t *ent_live_at(enum ent_kind k, const void *e)
{
	return (uint32_t *)((uintptr_t)e + layout[k].live_at);
}

/* Puts e into the live set of its kind; 0, or -ENOMEM. */
static int live_add(struct model *m, enum ent_kind k, void *e)
{
	struct live_set *ls = &m->live[k];
	if (*ent_live_at(k, e))
		return 0;
	if (ls->n == ls->cap) {
		uint32_t cap = ls->cap ? ls->cap * 2 : 64;
		void **p = cap > ls->cap ? realloc(ls->e, (size_t)cap * sizeof *p) : NULL;
		if (!p)
			return -ENOMEM;
		ls->e = p;
		ls->cap = cap;
	}
	ls->e[ls->n++] = e;
	*ent_live_at(k, e) = ls->n;
	return 0;
}

/* Takes e out of the live set (the last one moves into its place). */
static void live_del(struct model *m, enum ent_kind k, void *e)
{
	struct live_set *ls = &m->live[k];
	uint32_t at = *ent_live_at(k, e);
	if (!at)
		return;
	void *last = ls->e[--ls->n];
	ls->e[at - 1] = last;
	*ent_live_at(k, last) = at;
	*ent_live_at(k, e) = 0;
}

/* Ended entities expire as fast as they come in a fork storm (the retention
 * cap is reached within milliseconds), so each new task would cost a calloc
 * and each expiry a free.  Up to SPARE_MAX freed entities of each kind are
 * kept for reuse instead, linked through their first word (the id, which
 * means nothing once the entity has left the map). */
#define SPARE_MAX 1024u

static void *ent_alloc(struct model *m, enum ent_kind k)
{
	void *e = m->spare[k].head;
	if (!e)
		return calloc(1, layout[k].size);
	m->spare[k].head = *(void **)e;
	m->spare[k].n--;
	memset(e, 0, layout[k].size);
	return e;
}

static void ent_release(struct model *m, enum ent_kind k, void *e)
{
	if (m->spare[k].n >= SPARE_MAX) {
		free(e);
		return;
	}
	*(void **)e = m->spare[k].head;
	m->spare[k].head = e;
	m->spare[k].n++;
}

/* Frees a string set_str made, giving its bytes back to the budget. */
static void free_str(struct model *m, char *c)
{
	if (c) {
		m->owned_bytes -= strlen(c) + 1;
		free(c);
	}
}

static void free_ent(struct model *m, enum ent_kind k, void *e)
{
	if (e == (void *)m->thread_hint)
		m->thread_hint = NULL;
	if (layout[k].name)
		free_str(m, *(char **)((char *)e + layout[k].name));
	if (k == ENT_SCOPE) {
		struct m_scope *s = e;
		for (size_t i = 0; i < s->nvalues; i++) {
			free_str(m, s->values[i].key);
			free_str(m, s->values[i].value);
		}
		free(s->values);
	}
	ent_release(m, k, e);
}

void model_free(struct model *m)
{
	for (int k = 0; k < ENT_KINDS; k++) {
		for (size_t i = 0; i < m->ents[k].cap; i++)
			if (m->ents[k].slots[i].e)
				free_ent(m, k, m->ents[k].slots[i].e);
		idmap_free(&m->ents[k]);
		free(m->live[k].e);
		for (void *e = m->spare[k].head, *next; e; e = next) {
			next = *(void **)e;
			free(e);
		}
	}
	for (size_t i = 0; i < m->sites.cap; i++)
		free(m->sites.slots[i].e);
	idmap_free(&m->sites);
	strtab_free(&m->strings);
	free(m->rm);
	free(m->exp);
	free(m->pend);
	tally_free(m->tally);
	advisor_free(m->adv);
	memset(m, 0, sizeof *m);
}

static int fail(struct model *m, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct model *m, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m->err, sizeof m->err, fmt, ap);
	va_end(ap);
	return err;
}

static size_t held(const struct model *m)
{
	size_t n = 0;
	for (int k = 0; k < ENT_KINDS; k++)
		n += m->ents[k].n;
	return n;
}

/* Offsets of the fields every entity kind shares. */
#define ENT_GEN(e) (((uint64_t *)(e))[1])

/* Marks e (of kind k) changed now, and seen by the snapshot in progress. */
static void touch(struct model *m, enum ent_kind k, void *e)
{
	ENT_GEN(e) = ++m->gen;
	if (m->in_snapshot)
		*ent_seen(k, e) = m->epoch;
}

/* The entity with id, created as a placeholder when absent (in the live
 * set when live).  NULL with the error in *err (the cap or memory). */
static void *get_as(struct model *m, enum ent_kind k, uint64_t id, bool live, int *err)
{
	size_t slot;
	void *e = idmap_get_slot(&m->ents[k], id, &slot);
	if (e)
		return e;
	if (held(m) >= m->lim.max_entities) {
		*err = fail(m, -ENOSPC,
			    "holds %zu scopes, tasks, threads and pools, the cap (--max-entities); "
			    "refusing %s %llu",
			    held(m), layout[k].what, (unsigned long long)id);
		return NULL;
	}
	e = ent_alloc(m, k);
	if (e)
		*(uint64_t *)e = id; /* the map hashes on it */
	if (!e || (live && live_add(m, k, e) < 0) || idmap_put_at(&m->ents[k], e, slot) < 0) {
		if (e)
			live_del(m, k, e);
		if (e)
			ent_release(m, k, e);
		*err = fail(m, -ENOMEM, "out of memory adding %s %llu", layout[k].what,
			    (unsigned long long)id);
		return NULL;
	}
	*ent_flags(k, e) = EF_PLACEHOLDER;
	if (k == ENT_THREAD)
		names_moved(m);
	return e;
}

static void *get(struct model *m, enum ent_kind k, uint64_t id, int *err)
{
	return get_as(m, k, id, true, err);
}

static void log_removal(struct model *m, enum ent_kind k, uint64_t id)
{
	uint64_t gen = ++m->gen;
	if (!m->track_removals) {
		m->rm_floor = gen;
		return;
	}
	if (m->nrm == m->rmcap) {
		size_t cap = m->rmcap ? m->rmcap * 2 : 256;
		struct m_removal *rm = cap <= (1u << 22) ? realloc(m->rm, cap * sizeof *rm) : NULL;
		if (!rm) {
			/* Subscribers behind this point get a fresh snapshot instead. */
			m->nrm = 0;
			m->rm_floor = gen;
			return;
		}
		m->rm = rm;
		m->rmcap = cap;
	}
	m->rm[m->nrm++] = (struct m_removal){gen, id, (uint8_t)k};
}

/* Frees e, which left the map of its kind. */
static void removed(struct model *m, enum ent_kind k, void *e, uint64_t id)
{
	if (k == ENT_THREAD)
		names_moved(m);
	live_del(m, k, e);
	free_ent(m, k, e);
	log_removal(m, k, id);
}

static void remove_ent(struct model *m, enum ent_kind k, uint64_t id)
{
	void *e = idmap_del(&m->ents[k], id);
	if (e)
		removed(m, k, e, id);
}

void model_trim_removals(struct model *m, uint64_t gen)
{
	size_t keep = 0;
	while (keep < m->nrm && m->rm[keep].gen <= gen)
		keep++;
	if (keep) {
		memmove(m->rm, m->rm + keep, (m->nrm - keep) * sizeof *m->rm);
		m->nrm -= keep;
		if (gen > m->rm_floor)
			m->rm_floor = gen;
	}
}

/* Expiry reaches the oldest entities, long out of the caches: at the cap
 * in a fork storm, the misses on the expiring entity and its map slot were
 * a third of the daemon's time.  So each expiry starts loading the one
 * EXPIRY_AHEAD places behind it, a few hundred events ahead of need. */
#define EXPIRY_AHEAD 6

/* Expires the oldest ended entity now (its retention cut short). */
static void expire_oldest(struct model *m)
{
	struct m_expiry x = m->exp[m->exp_head];
	m->exp_head = (m->exp_head + 1) & (m->exp_cap - 1);
	m->exp_n--;
	if (m->exp_n > EXPIRY_AHEAD) {
		const struct m_expiry *y = &m->exp[(m->exp_head + EXPIRY_AHEAD) & (m->exp_cap - 1)];
		idmap_prefetch(&m->ents[y->kind], y->id);
		__builtin_prefetch(y->hint);
		__builtin_prefetch(ent_flags(y->kind, y->hint));
	}
	/* One walk of the map for the look and the removal. */
	size_t slot;
	struct idmap *map = &m->ents[x.kind];
	void *e = idmap_get_slot(map, x.id, &slot);
	if (e && (*ent_flags(x.kind, e) & EF_ENDED)) {
		idmap_del_at(map, slot);
		removed(m, x.kind, e, x.id);
	}
}

/* The queue of expiries is a ring of a power of two entries (64, doubled
 * when full): positions wrap with a mask, not a division. */
static void expire_later(struct model *m, enum ent_kind k, const void *e, int64_t now)
{
	uint64_t id = *(const uint64_t *)e;
	if (m->exp_n == m->exp_cap) {
		size_t cap = m->exp_cap ? m->exp_cap * 2 : 64;
		struct m_expiry *e = malloc(cap * sizeof *e);
		if (!e)
			return; /* kept until the process goes: a leak of history, not of state */
		for (size_t i = 0; i < m->exp_n; i++)
			e[i] = m->exp[(m->exp_head + i) & (m->exp_cap - 1)];
		free(m->exp);
		m->exp = e;
		m->exp_head = 0;
		m->exp_cap = cap;
	}
	m->exp[(m->exp_head + m->exp_n) & (m->exp_cap - 1)] =
	    (struct m_expiry){now + m->lim.retain_ns, id, e, (uint8_t)k};
	m->exp_n++;
}

void model_sweep(struct model *m, int64_t now_ns)
{
	while (m->exp_n && m->exp[m->exp_head].when <= now_ns)
		expire_oldest(m);
}

/* A copy of a wire string; NULL (and -ENOMEM) only when memory runs out.
 * Text that is not valid UTF-8, or holds control characters, is kept with
 * those replaced (utf8.h): every viewer renders it. */
static int set_str(struct model *m, char **dst, const struct proto_str *s)
{
	const char *p = s->p ? s->p : "";
	size_t len = s->len;
	char *clean = NULL;
	if (!text_is_clean(p, len)) {
		clean = text_clean_dup(p, len, &len);
		if (!clean)
			return fail(m, -ENOMEM, "out of memory copying a name");
		p = clean;
	}
	if (*dst && strlen(*dst) == len && memcmp(*dst, p, len) == 0) {
		free(clean);
		return 0;
	}
	/* Bytes, not only entities, are bounded: values of 1 KiB in every
	 * scope reached hundreds of MiB within the entity cap. */
	size_t old = *dst ? strlen(*dst) + 1 : 0;
	if (m->owned_bytes - old + len + 1 > m->lim.max_owned_bytes) {
		free(clean);
		m->complete = false;
		return fail(m, -ENOSPC,
			    "names and values over %zu bytes, the cap for one process; its model "
			    "is incomplete",
			    m->lim.max_owned_bytes);
	}
	char *c = clean;
	if (!c) {
		c = malloc(len + 1);
		if (!c)
			return fail(m, -ENOMEM, "out of memory copying a name");
		memcpy(c, p, len);
		c[len] = '\0';
	}
	free_str(m, *dst);
	m->owned_bytes += len + 1;
	*dst = c;
	return 0;
}

static int intern(struct model *m, const char **dst, const struct proto_str *s)
{
	if (!s->len) {
		*dst = NULL;
		return 0;
	}
	const char *p = s->p;
	size_t len = s->len;
	char *clean = NULL;
	if (!text_is_clean(p, len)) {
		clean = text_clean_dup(p, len, &len);
		if (!clean)
			return fail(m, -ENOMEM, "out of memory copying a site name");
		p = clean;
	}
	const char *c = strtab_intern(&m->strings, p, len);
	free(clean);
	if (!c)
		return fail(m, -E2BIG,
			    "sent over %zu bytes of distinct file and function names, the cap",
			    m->strings.bytes);
	*dst = c;
	return 0;
}

/* Task states ordered by how far along they are: ended states share a rank. */
static int task_rank(unsigned state)
{
	return state >= PROTO_TASK_SUCCESS ? 2 : (int)state;
}

static void thread_set_task(struct model *m, uint32_t tid, uint64_t task, uint64_t only_if)
{
	struct m_thread *t = m->thread_hint;
	if (!t || t->id != tid) {
		t = idmap_get(&m->ents[ENT_THREAD], tid);
		/* A task started on a thread not heard of yet: a worker that
		 * registered after the snapshot's walk of the threads and ran
		 * the task before its walk of the scopes, its THREAD_START
		 * following the snapshot.  Made a placeholder, which that
		 * THREAD_START fills, so that the thread keeps its task (a
		 * START repeated later does not set it again: the task runs
		 * already).  Without it the thread ran nothing as far as the
		 * daemon knew, and a crash in that task named none. */
		if (!t && task && tid && !only_if) {
			int err = 0;
			t = get(m, ENT_THREAD, tid, &err);
		}
		m->thread_hint = t;
	}
	if (!t || (only_if && t->task != only_if) || t->task == task)
		return;
	t->task = task;
	touch(m, ENT_THREAD, t);
}

typedef int (*apply_fn)(struct model *m, const struct proto_msg *msg, int64_t now);

/* Every event about an entity marks it changed and seen, whatever it then
 * decides to keep. */
#define GET(var, kind, id)                                                                         \
	int err_ = 0;                                                                              \
	var = get(m, kind, id, &err_);                                                             \
	if (!var)                                                                                  \
		return err_;                                                                       \
	touch(m, kind, var)

/* The task an event names, as GET; and the scope it names, if the task had
 * none yet. */
#define GET_TASK(var)                                                                              \
	GET(var, ENT_TASK, msg->task);                                                             \
	if (!var->scope)                                                                           \
	var->scope = msg->scope

/* Ends e once: false when it had already ended; otherwise it expires after
 * the retention time. */
static bool end_once(struct model *m, enum ent_kind k, void *e, int64_t now)
{
	uint8_t *flags = ent_flags(k, e);
	if (*flags & EF_ENDED)
		return false;
	*flags |= EF_ENDED;
	live_del(m, k, e);
	expire_later(m, k, e, now);
	return true;
}

/* Gives a scope or task the call site numbered site: what its SITE defined,
 * or none when that number is not known (0, or its SITE was lost). */
static bool set_site(struct model *m, uint32_t site, const char **file, const char **func,
		     int32_t *line)
{
	const struct m_site *s = m->site_hint;
	if (!s || s->id != site) {
		s = site ? idmap_get(&m->sites, site) : NULL;
		m->site_hint = s;
	}
	*file = s ? s->file : NULL;
	*func = s ? s->func : NULL;
	*line = s ? s->line : 0;
	return s != NULL;
}

#define MODEL_PENDING_SITES 256

/* Gives entity id (kind k) site's file, func and line as set_site does;
 * a site not defined yet is remembered, and named when its SITE comes. */
static void name_site(struct model *m, enum ent_kind k, uint64_t id, uint32_t site,
		      const char **file, const char **func, int32_t *line)
{
	if (set_site(m, site, file, func, line) || !site)
		return;
	if (!m->pend && !(m->pend = malloc(MODEL_PENDING_SITES * sizeof *m->pend)))
		return;
	struct m_pending_site p = {id, site, (uint8_t)k};
	/* Full: one of them is forgotten, each in turn (a peer naming sites
	 * it never defines, event after event, costs a store each). */
	if (m->npend == MODEL_PENDING_SITES)
		m->pend[m->pend_turn++ % MODEL_PENDING_SITES] = p;
	else
		m->pend[m->npend++] = p;
}

/* SITE s came: the scopes and tasks waiting for it get it (unless they got
 * a site since). */
static void name_pending(struct model *m, const struct m_site *s)
{
	size_t keep = 0;
	for (size_t i = 0; i < m->npend; i++) {
		struct m_pending_site p = m->pend[i];
		if (p.site != s->id) {
			m->pend[keep++] = p;
			continue;
		}
		void *e = idmap_get(&m->ents[p.kind], p.id);
		const char **file = NULL, **func = NULL;
		int32_t *line = NULL;
		if (e && p.kind == ENT_TASK) {
			struct m_task *t = e;
			file = &t->file, func = &t->func, line = &t->line;
		} else if (e && p.kind == ENT_SCOPE) {
			struct m_scope *sc = e;
			file = &sc->file, func = &sc->func, line = &sc->line;
		}
		if (file && !*file && !*func && !*line) {
			*file = s->file;
			*func = s->func;
			*line = s->line;
			touch(m, p.kind, e);
		}
	}
	m->npend = keep;
}

/* A repeat of the event that opened or forked an entity names the site the
 * first one could not: its SITE was lost with the events the snapshot
 * after the loss repairs, and that snapshot sends it again first. */
static void repair_site(struct model *m, uint32_t site, const char **file, const char **func,
			int32_t *line)
{
	if (!*file && !*func && !*line)
		set_site(m, site, file, func, line);
}

static int ev_thread_start(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	struct m_thread *t;
	GET(t, ENT_THREAD, msg->tid);
	if (t->flags & EF_ENDED) {
		if (msg->flags & PROTO_F_SNAPSHOT)
			return 0;
		/* The kernel reused the tid for a new thread. */
		if (live_add(m, ENT_THREAD, t) < 0)
			return fail(m, -ENOMEM, "out of memory reviving thread %u", msg->tid);
		t->flags = 0;
		t->exited = 0;
		t->task = 0;
	}
	t->flags &= (uint8_t)~EF_PLACEHOLDER;
	t->pool = msg->pool_id;
	t->role = msg->role;
	if (!t->started)
		t->started = msg->ts;
	names_moved(m);
	return set_str(m, &t->name, &msg->name);
}

static int ev_thread_exit(struct model *m, const struct proto_msg *msg, int64_t now)
{
	struct m_thread *t;
	GET(t, ENT_THREAD, msg->tid);
	if (end_once(m, ENT_THREAD, t, now)) {
		t->exited = msg->ts;
		t->task = 0;
	}
	return 0;
}

static int ev_thread_name(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	struct m_thread *t;
	GET(t, ENT_THREAD, msg->tid);
	names_moved(m);
	return set_str(m, &t->name, &msg->name);
}

static int ev_process_exit(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	m->exit_how = msg->how;
	m->exit_code = msg->code;
	return 0;
}

static int ev_scope_open(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	struct m_scope *s;
	GET(s, ENT_SCOPE, msg->scope);
	if (!(s->flags & EF_PLACEHOLDER) && s->opened) {
		/* a repeat (snapshot racing the live stream) */
		repair_site(m, msg->site, &s->file, &s->func, &s->line);
		return 0;
	}
	s->flags &= (uint8_t)~EF_PLACEHOLDER;
	s->parent = msg->parent;
	s->parent_task = msg->parent_task;
	s->pool = msg->pool_id;
	s->deadline = msg->deadline;
	s->joiner = (uint8_t)msg->joiner;
	s->owner = msg->tid;
	s->opened = msg->ts;
	name_site(m, ENT_SCOPE, s->id, msg->site, &s->file, &s->func, &s->line);
	return set_str(m, &s->name, &msg->name);
}

static int ev_join_begin(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	struct m_scope *s;
	GET(s, ENT_SCOPE, msg->scope);
	s->flags |= EF_JOINING;
	if (!s->join_began)
		s->join_began = msg->ts; /* a snapshot's repeat carries the same */
	return 0;
}

static int ev_join_end(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	struct m_scope *s;
	GET(s, ENT_SCOPE, msg->scope);
	if (!(s->flags & EF_JOINED)) {
		s->flags |= EF_JOINING | EF_JOINED;
		s->join_result = msg->result;
	}
	return 0;
}

static int ev_scope_cancel(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	struct m_scope *s;
	GET(s, ENT_SCOPE, msg->scope);
	if (m->tally && !(s->flags & EF_CANCELLED))
		tally_scope_cancelled(m, s, msg->reason, msg->ts);
	s->flags |= EF_CANCELLED;
	if (!s->cancel_reason) {
		s->cancel_reason = (uint8_t)msg->reason;
		s->cancel_cause = (uint8_t)msg->cause;
	}
	return 0;
}

static int ev_scope_flags(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	struct m_scope *s;
	GET(s, ENT_SCOPE, msg->scope);
	s->scope_flags = (uint8_t)msg->scope_flags;
	return 0;
}

/* The latest counts win: each event carries both whole. */
static int ev_scope_handlers(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	struct m_scope *s;
	GET(s, ENT_SCOPE, msg->scope);
	s->handlers = msg->armed;
	if (msg->ran > s->handlers_ran)
		s->handlers_ran = msg->ran;
	return 0;
}

static int ev_scope_close(struct model *m, const struct proto_msg *msg, int64_t now)
{
	struct m_scope *s;
	GET(s, ENT_SCOPE, msg->scope);
	if (end_once(m, ENT_SCOPE, s, now)) {
		s->closed = msg->ts;
		if (m->tally)
			tally_scope_closed(m, s);
	}
	return 0;
}

/* The fork of t at ts in the given state (TASK_FORK's, or TASK_DONE's
 * FORKED), with its body fn and call site. */
static void task_forked(struct model *m, struct m_task *t, const struct proto_msg *msg,
			uint32_t state, int64_t now)
{
	if (!t->fn)
		t->fn = msg->fn;
	if (task_rank(state) > task_rank(t->state) && !(t->flags & EF_ENDED)) {
		t->state = (uint8_t)state;
		if (task_rank(state) == 2 && end_once(m, ENT_TASK, t, now)) {
			t->ended = msg->ts;
			if (m->tally)
				tally_task_ended(m, t);
		}
	}
	if (!(t->flags & EF_PLACEHOLDER) && t->forked) {
		repair_site(m, msg->site, &t->file, &t->func, &t->line);
		return;
	}
	t->flags &= (uint8_t)~EF_PLACEHOLDER;
	t->forked = msg->ts;
	if (m->adv && !m->in_snapshot)
		advisor_task_forked(m, t);
	name_site(m, ENT_TASK, t->id, msg->site, &t->file, &t->func, &t->line);
}

static int ev_task_fork(struct model *m, const struct proto_msg *msg, int64_t now)
{
	struct m_task *t;
	GET_TASK(t);
	task_forked(m, t, msg, msg->state, now);
	return 0;
}

static void task_started(struct model *m, struct m_task *t, int64_t ts, uint32_t tid)
{
	if (!t->started) {
		t->started = ts;
		t->worker = tid;
	}
	if (task_rank(t->state) < 1) {
		t->state = PROTO_TASK_RUNNING;
		thread_set_task(m, tid, t->id, 0);
	}
}

/* Ends t at ts, once: its state and error (msg's), time, and worker (tid,
 * unless it had one); false when it had ended already. */
static bool task_end(struct model *m, struct m_task *t, const struct proto_msg *msg, int64_t ts,
		     uint32_t tid, int64_t now)
{
	if (!end_once(m, ENT_TASK, t, now))
		return false;
	t->state = task_rank(msg->state) == 2 ? (uint8_t)msg->state : PROTO_TASK_FAILED;
	t->ended = ts;
	t->error = msg->error;
	if (!t->worker)
		t->worker = tid;
	if (m->tally)
		tally_task_ended(m, t);
	if (m->adv)
		advisor_task_ended(m, t);
	return true;
}

static void task_ended(struct model *m, struct m_task *t, const struct proto_msg *msg, int64_t ts,
		       int64_t now)
{
	if (task_end(m, t, msg, ts, msg->tid, now))
		thread_set_task(m, t->worker, 0, t->id);
}

static int ev_task_start(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	struct m_task *t;
	GET_TASK(t);
	task_started(m, t, msg->ts, msg->tid);
	return 0;
}

static int ev_task_end(struct model *m, const struct proto_msg *msg, int64_t now)
{
	struct m_task *t;
	GET_TASK(t);
	task_ended(m, t, msg, msg->ts, now);
	return 0;
}

/* A TASK_START at start_ts on thread tid and its TASK_END (msg's end_ts,
 * error and state), applied to t: both, with one lookup of the thread in
 * the storm's case. */
static void task_ran(struct model *m, struct m_task *t, const struct proto_msg *msg,
		     int64_t start_ts, uint32_t tid, int64_t now)
{
	if (task_rank(t->state) >= 1 || (t->started && t->worker != tid)) {
		/* Known to run already, or on another thread: as the two. */
		task_started(m, t, start_ts, tid);
		if (task_end(m, t, msg, msg->end_ts, tid, now))
			thread_set_task(m, t->worker, 0, t->id);
		return;
	}
	/* The storm's case: it started and ended in this frame, on the thread
	 * that sent it, which runs nothing now (a task it was said to run
	 * ended unseen).  The two would set that thread's task and clear it
	 * again, a lookup each; this clears it, with one. */
	if (!t->started) {
		t->started = start_ts;
		t->worker = tid;
	}
	t->state = PROTO_TASK_RUNNING;
	thread_set_task(m, tid, task_end(m, t, msg, msg->end_ts, tid, now) ? 0 : t->id, 0);
}

/* A TASK_START and its TASK_END in one frame: both, with one lookup of the
 * task. */
static int ev_task_ran(struct model *m, const struct proto_msg *msg, int64_t now)
{
	struct m_task *t;
	GET_TASK(t);
	task_ran(m, t, msg, msg->ts, msg->tid, now);
	return 0;
}

/* A TASK_FORK (state FORKED) and its TASK_RAN in one frame: the three, with
 * one lookup of the task.  A task the model has not seen is created
 * outside the live set, which it would leave again within this frame. */
static int ev_task_done(struct model *m, const struct proto_msg *msg, int64_t now)
{
	int err = 0;
	struct m_task *t = get_as(m, ENT_TASK, msg->task, false, &err);
	if (!t)
		return err;
	touch(m, ENT_TASK, t);
	if (!t->scope)
		t->scope = msg->scope;
	task_forked(m, t, msg, PROTO_TASK_FORKED, now);
	task_ran(m, t, msg, msg->start_ts, msg->worker, now);
	return 0;
}

static int ev_violation(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	if (m->tally)
		tally_violation(m, msg->scope, msg->kind, msg->ts);
	m->viol[m->nviol++ % MODEL_VIOLATIONS] =
	    (struct m_violation){msg->scope, msg->error, msg->ts, msg->kind, msg->tid};
	return 0;
}

static int ev_warning(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	m->warn[m->nwarn++ % MODEL_WARNINGS] =
	    (struct m_warning){msg->subject, msg->limit, msg->amount, msg->ts, msg->kind, msg->tid};
	return 0;
}

static int ev_value_bind(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	struct m_scope *s;
	GET(s, ENT_SCOPE, msg->scope);
	size_t i = 0;
	while (i < s->nvalues && !(strlen(s->values[i].key) == msg->key.len &&
				   memcmp(s->values[i].key, msg->key.p, msg->key.len) == 0))
		i++;
	if (i == s->nvalues) {
		if (s->nvalues >= m->lim.max_values)
			return fail(m, -ENOSPC, "bound over %zu values in scope %llu, the cap",
				    m->lim.max_values, (unsigned long long)s->id);
		/* The key first: a binding without one would break every
		 * later lookup and the rendering (found by test_alloc_fail). */
		char *key = NULL;
		int rc = set_str(m, &key, &msg->key);
		if (rc)
			return rc;
		struct m_value *v = realloc(s->values, (s->nvalues + 1) * sizeof *v);
		if (!v) {
			free_str(m, key);
			return fail(m, -ENOMEM, "out of memory binding a value");
		}
		s->values = v;
		v[i] = (struct m_value){key, NULL};
		s->nvalues++;
	}
	return set_str(m, &s->values[i].value, &msg->value);
}

static int ev_pool_create(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	struct m_pool *p;
	GET(p, ENT_POOL, msg->pool_id);
	p->flags &= (uint8_t)~EF_PLACEHOLDER;
	p->cfg = msg->pool;
	return set_str(m, &p->name, &msg->name);
}

static int ev_pool_stats(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	struct m_pool *p;
	GET(p, ENT_POOL, msg->pool_id);
	p->cfg = msg->pool;
	return 0;
}

static int ev_pool_limit(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	struct m_pool *p;
	GET(p, ENT_POOL, msg->pool_id);
	const char *name = NULL;
	int rc = msg->limit ? intern(m, &name, &msg->name) : 0;
	if (rc)
		return rc;
	p->resource = msg->limit ? name : NULL;
	p->resource_limit = msg->limit;
	return 0;
}

static int ev_pool_destroy(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	remove_ent(m, ENT_POOL, msg->pool_id);
	return 0;
}

/* Counts a SITE the model has no room for; m->err says why (for the one log
 * line the daemon writes about it).  Its events will have no site. */
static int refuse_site(struct model *m, uint32_t site)
{
	m->sites_refused++;
	/* The old definition is not this number's any more. */
	m->site_hint = NULL;
	free(idmap_del(&m->sites, site));
	return 0;
}

/* SITE: defines call site msg->site, or replaces its definition.  Refusing
 * one past a cap is not fatal: dropping the peer would only make it send
 * the same SITE again after its reconnect's snapshot. */
static int ev_site(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	if (!msg->site)
		return 0; /* 0 means "no site"; the decoder refuses it too */
	const char *file = NULL, *func = NULL;
	if (intern(m, &file, &msg->file) || intern(m, &func, &msg->func)) {
		size_t max = m->strings.max_bytes;
		if (m->strings.bytes + msg->file.len + msg->func.len + 2 > max)
			fail(m, 0,
			     "sent over %zu bytes of distinct file and function names, the cap; "
			     "refusing site %u",
			     max, msg->site);
		else
			fail(m, 0, "out of memory for the names of call site %u; refusing it",
			     msg->site);
		return refuse_site(m, msg->site);
	}
	struct m_site *s = idmap_get(&m->sites, msg->site);
	if (!s) {
		if (m->sites.n >= m->lim.max_sites) {
			fail(m, 0, "defined %zu call sites, the cap; refusing site %u", m->sites.n,
			     msg->site);
			return refuse_site(m, msg->site);
		}
		s = malloc(sizeof *s);
		if (s)
			s->id = msg->site;
		if (!s || idmap_put(&m->sites, s) < 0) {
			free(s);
			return fail(m, -ENOMEM, "out of memory adding call site %u", msg->site);
		}
	}
	s->file = file;
	s->func = func;
	s->line = msg->line;
	if (m->npend)
		name_pending(m, s);
	return 0;
}

static int ev_snapshot_begin(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	m->in_snapshot = true;
	m->complete = false;
	m->epoch++;
	m->snap_seq = msg->seq;
	return 0;
}

/* Whatever live entity the snapshot did not mention ended while we were not
 * looking (a loss, or a daemon restart): it leaves the model. */
static int ev_snapshot_end(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	if (!m->in_snapshot || msg->seq != m->snap_seq)
		return 0;
	for (int k = 0; k < ENT_KINDS; k++) {
		struct live_set *ls = &m->live[k];
		for (uint32_t i = 0; i < ls->n;) {
			void *e = ls->e[i];
			if (*ent_seen(k, e) != m->epoch)
				remove_ent(m, k, *(uint64_t *)e); /* moves the last one into i */
			else
				i++;
		}
	}
	m->in_snapshot = false;
	m->complete = true;
	if (m->had_loss) {
		m->repaired = true;
		m->had_loss = false;
	}
	return 0;
}

static int ev_lost(struct model *m, const struct proto_msg *msg, int64_t now)
{
	(void)now;
	if (msg->total_lost > m->lost)
		m->lost = msg->total_lost;
	else
		m->lost += msg->lost_since;
	m->complete = false;
	m->had_loss = true;
	return 0;
}

/* Lifecycle types index a direct table so dispatch is one load. */
#define EV_BASE 0x0100u
#define EV_SPAN 0x0100u
#define EV(t) [(t)-EV_BASE]

/* One handler per message the model applies, named ev_<name> after the
 * message's declaration in proto/wire.h: a MARK, EVENT or DERIVED message
 * without its handler does not compile. */
#define EV_ROW_EVENT(NAME, name) EV(PROTO_##NAME) = ev_##name,
#define EV_ROW_DERIVED(NAME, name) EV(PROTO_##NAME) = ev_##name,
#define EV_ROW_MARK(NAME, name)
#define EV_ROW_SESSION(NAME, name)
#define EV_ROW_STACK(NAME, name)
#define EV_ROW(NAME, name, number, class, array) EV_ROW_##class(NAME, name)
static const apply_fn ev_table[EV_SPAN] = {PROTO_MESSAGES(EV_ROW)};

#define SESSION_ROW_MARK(NAME, name) [PROTO_##NAME] = ev_##name,
#define SESSION_ROW_EVENT(NAME, name)
#define SESSION_ROW_DERIVED(NAME, name)
#define SESSION_ROW_SESSION(NAME, name)
#define SESSION_ROW_STACK(NAME, name)
#define SESSION_ROW(NAME, name, number, class, array) SESSION_ROW_##class(NAME, name)
static const apply_fn session_table[0x100] = {PROTO_MESSAGES(SESSION_ROW)};

int model_apply(struct model *m, const struct proto_msg *msg, int64_t now_ns)
{
	apply_fn fn = NULL;
	if (msg->type >= EV_BASE && msg->type < EV_BASE + EV_SPAN)
		fn = ev_table[msg->type - EV_BASE];
	else if (msg->type < 0x100)
		fn = session_table[msg->type];
	if (!fn)
		return 0;
	m->events++;
	int rc = fn(m, msg, now_ns);
	if (m->tally)
		tally_event(m, msg, now_ns);
	/* Past the cap on ended entities the oldest go now, not after their
	 * retention; here, once no handler holds an entity it could free. */
	while (m->exp_n > m->lim.max_retained)
		expire_oldest(m);
	return rc;
}
