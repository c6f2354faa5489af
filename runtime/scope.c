/* scope.c - scopes and subtasks: open, fork, join, close, the structure rules
 * they enforce, and running a subtask on whichever thread picks it up. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "joiner.h"
#include "otelctx.h"
#include "rt.h"

#define SC_FREE_SCOPES 16  /* recycled scopes kept per thread */
#define SC_FREE_TASKS 1024 /* recycled task handles kept per thread */

static _Atomic uint64_t next_scope_id = 1;
static _Atomic uint64_t next_task_id = 1;

/* The next id from the calling thread's block, refilled from the shared
 * counter every SC_ID_BLOCK ids: unique in the process, increasing per
 * thread (a scope's tasks, forked by its owner, are in order). */
static uint64_t id_take(_Atomic uint64_t *shared, uint64_t *next, uint64_t *end)
{
	if (*next == *end) {
		*next = atomic_fetch_add_explicit(shared, SC_ID_BLOCK, memory_order_relaxed);
		*end = *next + SC_ID_BLOCK;
	}
	return (*next)++;
}

scope_t *sc_context(void)
{
	struct sc_thread *t = sc_self_peek();

	if (!t)
		return NULL;
	if (t->frame.top)
		return t->frame.top;
	return t->frame.task ? t->frame.task->scope : NULL;
}

void sc_emit_violation(uint64_t scope, int kind, int err)
{
	struct sc_ev ev;

	sc_ev_init(&ev, SC_EV_VIOLATION);
	ev.a = scope;
	ev.u = (uint32_t)kind;
	ev.i = err;
	if (sc_observed())
		sc_emit(&ev);
	else
		sc_keep_violation(&ev);
}

/* ts: the event's time when the caller has read it already, else 0. */
static void emit_scope_at(int kind, const scope_t *s, int64_t result, int64_t ts)
{
	struct sc_ev ev;

	if (!sc_observed())
		return;
	sc_ev_init(&ev, kind);
	ev.ts = ts;
	ev.a = s->id;
	ev.i = result;
	sc_emit(&ev);
}

static void emit_scope(int kind, const scope_t *s, int64_t result)
{
	emit_scope_at(kind, s, result, 0);
}

static void emit_task_slow(int kind, scope_task_t *task, int state, int err);

/* A task's event, and its times kept for snapshots: a load and a branch
 * when nobody observes. */
static inline void emit_task(int kind, scope_task_t *task, int state, int err)
{
	if (__builtin_expect(
		!sc_observed() && !atomic_load_explicit(&sc_keep_times, memory_order_relaxed), 1))
		return;
	emit_task_slow(kind, task, state, err);
}

static void emit_task_slow(int kind, scope_task_t *task, int state, int err)
{
	struct sc_ev ev;
	int64_t ts = 0;

	/* Kept for the snapshot after a late start, a restart or a loss,
	 * which then tells the original times. */
	if ((kind == SC_EV_TASK_FORK || kind == SC_EV_TASK_START) &&
	    (sc_observed() || atomic_load_explicit(&sc_keep_times, memory_order_relaxed))) {
		ts = sc_event_time();
		atomic_store_explicit(kind == SC_EV_TASK_FORK ? &task->fork_ts : &task->start_ts,
				      ts, memory_order_relaxed);
	}
	if (!sc_observed())
		return;
	sc_ev_init(&ev, kind);
	ev.ts = ts;
	ev.a = task->id;
	ev.b = task->scope->id;
	ev.u = (uint32_t)state;
	ev.i = err;
	if (kind == SC_EV_TASK_FORK) {
		ev.site = task->site;
		ev.d = (uint64_t)(uintptr_t)task->fn;
	}
	sc_emit(&ev);
}

/* SCOPE_FLAGS after the open of a scope opened with flags (a shield). */
static void emit_flags(const scope_t *s, int snapshot, int64_t ts,
		       void (*emit)(void *, const struct sc_ev *), void *ctx)
{
	struct sc_ev ev;

	sc_ev_init(&ev, SC_EV_SCOPE_FLAGS);
	ev.snapshot = (uint16_t)snapshot;
	ev.ts = ts;
	ev.tid = s->owner_tid;
	ev.a = s->id;
	ev.u = s->flags;
	if (emit)
		emit(ctx, &ev);
	else
		sc_emit(&ev);
}

void sc_emit_open(scope_t *s, int snapshot, void (*emit)(void *, const struct sc_ev *), void *ctx)
{
	struct sc_ev ev;

	sc_ev_init(&ev, SC_EV_SCOPE_OPEN);
	ev.snapshot = (uint16_t)snapshot;
	/* The open's time, kept for the snapshots that repeat it. */
	if (!snapshot)
		atomic_store_explicit(&s->open_ts, sc_event_time(), memory_order_relaxed);
	ev.ts = atomic_load_explicit(&s->open_ts, memory_order_relaxed);
	ev.tid = s->owner_tid;
	ev.a = s->id;
	ev.b = s->parent ? s->parent->id : 0;
	ev.c = s->parent_task ? s->parent_task->id : 0;
	ev.d = s->pool ? sc_pool_id(s->pool) : 0;
	ev.s1 = s->name;
	ev.i = s->eff_deadline;
	ev.u = (uint32_t)s->joiner;
	ev.site = s->site;
	if (emit)
		emit(ctx, &ev);
	else
		sc_emit(&ev);
	if (s->flags)
		emit_flags(s, snapshot, ev.ts, emit, ctx);
	/* A snapshot's scope may carry handlers already (its lock is held). */
	if (snapshot && (s->nhandlers || s->handlers_ran))
		sc_emit_handlers(s, snapshot, emit, ctx);
}

static scope_t *scope_alloc(struct sc_thread *t)
{
	scope_t *s = t->free_scopes;

	if (s) {
		t->free_scopes = s->free_next;
		t->nfree--;
#if SC_TSAN
		/* A fresh lock for a fresh scope: a recycled one may sit at
		 * another place in the tree, and TSan's lock-order checker
		 * would otherwise join its old life's order to the new one. */
		pthread_mutex_destroy(&s->lock);
		sc_mutex_init(&s->lock);
#endif
		return s;
	}
	s = malloc(sizeof(*s));
	if (s) {
		sc_mutex_init(&s->lock);
		s->tasks = s->anon = NULL;
		s->cap = s->anon_cap = 0;
	}
	return s;
}

_Static_assert(sizeof(scope_task_t) % 8 == 0 && sizeof(scope_t) % 8 == 0, "sc_zero's unit");

/* A zeroed task handle, from the owner's recycled ones when it has some. */
static scope_task_t *task_alloc(struct sc_thread *t)
{
	scope_task_t *task = t->free_tasks;

	if (!task)
		return calloc(1, sizeof(*task));
	t->free_tasks = task->qnext;
	t->ntfree--;
	sc_zero(task, sizeof(*task));
	return task;
}

static void task_free(struct sc_thread *t, scope_task_t *task)
{
	if (t->ntfree >= SC_FREE_TASKS) {
		free(task);
		return;
	}
	task->qnext = t->free_tasks;
	t->free_tasks = task;
	t->ntfree++;
}

static void scope_free(struct sc_thread *t, scope_t *s)
{
	/* A priority pool's heap of its queued tasks (empty by now). */
	free(s->pq.v);
	s->pq.v = NULL;
	s->pq.n = s->pq.cap = 0;
	if (s->cancel_efd) {
		close(s->cancel_efd - 1);
		s->cancel_efd = 0;
	}
	/* Every task, with a handle or not (the failure and the winner are
	 * among them: a sweep keeps them): close waited for each to end. */
	for (size_t i = 0; i < s->ntasks; i++)
		task_free(t, s->tasks[i]);
	atomic_store_explicit(&s->ntasks, 0, memory_order_relaxed);
	for (size_t i = 0; i < s->nanon; i++)
		task_free(t, s->anon[i]);
	atomic_store_explicit(&s->nanon, 0, memory_order_relaxed);
	for (struct sc_value *v = atomic_load(&s->values), *n; v; v = n) {
		n = v->next;
		free(v);
	}
	sc_otel_scope_free(s);
	if (t->nfree < SC_FREE_SCOPES) {
		/* Kept with its task array, unless a fan-out grew it large. */
		if (s->cap > 1024) {
			free(s->tasks);
			s->tasks = NULL;
			s->cap = 0;
		}
		if (s->anon_cap > 1024) {
			free(s->anon);
			s->anon = NULL;
			s->anon_cap = 0;
		}
		s->free_next = t->free_scopes;
		t->free_scopes = s;
		t->nfree++;
		return;
	}
	free(s->tasks);
	free(s->anon);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static int config_check(const struct scope_config *cfg)
{
	if ((unsigned)cfg->joiner > SCOPE_JOIN_CUSTOM)
		return -EINVAL;
	if (cfg->joiner == SCOPE_JOIN_UNTIL && !cfg->until)
		return -EINVAL;
	if (cfg->joiner == SCOPE_JOIN_CUSTOM && !cfg->ops)
		return -EINVAL;
	if (cfg->timeout_ns < 0 || cfg->deadline_ns < 0)
		return -EINVAL;
	if (cfg->flags & ~(unsigned)(SCOPE_F_NO_INTERRUPT | SCOPE_F_SHIELD))
		return -EINVAL; /* a bit from a newer header means what we cannot do */
	if ((cfg->flags & SCOPE_F_SHIELD) && !cfg->timeout_ns && !cfg->deadline_ns)
		return -EINVAL; /* a shield is bounded by a deadline of its own */
	return 0;
}

static void scope_init(scope_t *s, const struct scope_config *cfg, struct sc_thread *t,
		       scope_t *parent)
{
	const char *name = cfg->name ? cfg->name : "scope";
	size_t n = strnlen(name, SC_NAME_MAX - 1);
	pthread_mutex_t lock = s->lock;
	scope_task_t **tasks = s->tasks, **anon = s->anon;
	size_t cap = s->cap, anon_cap = s->anon_cap;

	sc_zero(s, sizeof(*s));
	s->lock = lock;
	s->tasks = tasks; /* a recycled scope's arrays, reused */
	s->cap = cap;
	s->anon = anon;
	s->anon_cap = anon_cap;
	s->id = id_take(&next_scope_id, &t->ids_scope, &t->ids_scope_end);
	memcpy(s->name, name, n);
	s->name[n] = '\0';
	s->name_key = cfg->name ? sc_name_key(s->name, n) : SC_NAME_KEY_DEFAULT;
	s->owner = t;
	s->owner_task = t->frame.task;
	s->owner_tid = t->tid;
	s->parent = parent;
	if (!t->frame.top && t->frame.task && parent == t->frame.task->scope)
		s->parent_task = t->frame.task;
	s->outer = t->frame.top;
	atomic_store_explicit(
	    &s->trace_src,
	    parent ? atomic_load_explicit(&parent->trace_src, memory_order_relaxed) : s->id,
	    memory_order_relaxed);
	s->otel_ix =
	    parent && parent->name_key == s->name_key ? parent->otel_ix : sc_otel_ix_of(s->id);
	/* Resolved now so the open event names the pool. */
	s->pool = cfg->pool ? cfg->pool : scope_pool_default();
	s->joiner = cfg->joiner;
	s->until = cfg->until;
	s->until_ctx = cfg->until_ctx;
	s->ops = cfg->ops;
	s->on_timeout = cfg->on_timeout;
	s->on_timeout_ctx = cfg->on_timeout_ctx;
	s->flags = cfg->flags;
	s->deadline = cfg->deadline_ns;
	if (cfg->timeout_ns > 0) {
		int64_t d = sc_after(cfg->timeout_ns);
		if (!s->deadline || d < s->deadline)
			s->deadline = d;
	}
	s->eff_deadline = s->deadline;
	if (parent && parent->eff_deadline && !(s->flags & SCOPE_F_SHIELD) &&
	    (!s->eff_deadline || parent->eff_deadline < s->eff_deadline))
		s->eff_deadline = parent->eff_deadline;
}

/* Links s under its parent (or among the owner's roots) so cancellation and
 * the snapshot reach it.  Fails when the parent was cancelled meanwhile. */
static void sib_push(scope_t **head, scope_t *s)
{
	s->sib_prev = NULL;
	s->sib_next = *head;
	if (*head)
		(*head)->sib_prev = s;
	*head = s;
}

static void sib_remove(scope_t **head, scope_t *s)
{
	if (s->sib_prev)
		s->sib_prev->sib_next = s->sib_next;
	else
		*head = s->sib_next;
	if (s->sib_next)
		s->sib_next->sib_prev = s->sib_prev;
}

/* A child scope goes on its parent's list under a spin lock (a pthread
 * mutex pair costs twice as much, and an open and a close took two): the
 * parent's cancellation and snapshots walk the children under it.  A root
 * goes on its thread's list, which only a snapshot reads: the owner takes
 * no lock there (sc_roots_enter). */
static int scope_link(scope_t *s, struct sc_thread *t)
{
	if (!s->parent) {
		bool fast = sc_roots_enter(t);
		sib_push(&t->roots, s);
		sc_roots_leave(t, fast);
		return 0;
	}
	/* A canceller flags the parent before it walks the children under
	 * this lock: either it finds s, or s sees the flag. */
	sc_spin_lock(&s->parent->kids);
	if (atomic_load(&s->parent->cancelled) && !(s->flags & SCOPE_F_SHIELD)) {
		sc_spin_unlock(&s->parent->kids);
		return -ECANCELED;
	}
	sib_push(&s->parent->children, s);
	sc_spin_unlock(&s->parent->kids);
	return 0;
}

static void trace_src_set(scope_t *s, uint64_t src, uint64_t old, int depth)
{
	atomic_store_explicit(&s->trace_src, src, memory_order_relaxed);
	if (depth >= SC_MAX_DEPTH)
		return;
	sc_spin_lock(&s->kids);
	for (scope_t *c = s->children; c; c = c->sib_next)
		if (atomic_load_explicit(&c->trace_src, memory_order_relaxed) == old)
			trace_src_set(c, src, old, depth + 1);
	sc_spin_unlock(&s->kids);
}

void sc_trace_src_bound(scope_t *s)
{
	uint64_t old = atomic_load_explicit(&s->trace_src, memory_order_relaxed);
	uint64_t src = s->id | SC_TRACE_SRC_BOUND;

	/* Its owner's call: the scopes below that took the old source from
	 * it (nested ones its owner opened, and theirs) take the new one. */
	if (old != src)
		trace_src_set(s, src, old, 0);
}

static void scope_unlink(scope_t *s)
{
	if (!s->parent) {
		bool fast = sc_roots_enter(s->owner);
		sib_remove(&s->owner->roots, s);
		sc_roots_leave(s->owner, fast);
		return;
	}
	sc_spin_lock(&s->parent->kids);
	sib_remove(&s->parent->children, s);
	sc_spin_unlock(&s->parent->kids);
}

/* A deadline of its own earlier than the inherited one goes to the timer,
 * which cancels s when it passes; an inherited one cancels s through the
 * ancestor it comes from.  Unlinks s when the timer cannot take it. */
static int scope_arm_deadline(scope_t *s, scope_t *parent)
{
	int rc;

	if (!s->deadline || (parent && parent->eff_deadline && !(s->flags & SCOPE_F_SHIELD) &&
			     parent->eff_deadline <= s->deadline))
		return 0;
	rc = sc_deadline_add(s);
	if (rc)
		scope_unlink(s);
	return rc;
}

int scope_open_at(scope_t **out, const struct scope_config *cfg, const char *file, int line,
		  const char *func)
{
	static const struct scope_config defaults = SCOPE_CONFIG_INIT;
	struct sc_thread *t;
	scope_t *s, *parent;
	int rc;

	if (!out)
		return -EINVAL;
	if (!cfg)
		cfg = &defaults;
	rc = config_check(cfg);
	if (rc)
		return rc;
	t = sc_self();
	if (!t)
		return -ENOMEM;
	parent = sc_context();
	if (parent && !(cfg->flags & SCOPE_F_SHIELD) && sc_check(parent))
		return -ECANCELED;
	s = scope_alloc(t);
	if (!s)
		return -ENOMEM;
	scope_init(s, cfg, t, parent);
	s->site.file = file;
	s->site.line = line;
	s->site.func = func;
	rc = scope_link(s, t);
	if (rc == 0)
		rc = scope_arm_deadline(s, parent);
	if (rc) {
		scope_free(t, s);
		return rc;
	}
	if (cfg->pool) {
		sc_pool_user(s->pool, 1);
		s->own_pool_ref = true;
	}
	t->frame.top = s;
	if (sc_observed())
		sc_emit_open(s, 0, NULL, NULL);
	else if (atomic_load_explicit(&sc_keep_times, memory_order_relaxed))
		atomic_store_explicit(&s->open_ts, sc_event_time(), memory_order_relaxed);
	*out = s;
	return 0;
}

bool sc_owns(const scope_t *s)
{
	struct sc_thread *t = sc_self_peek();

	return t == s->owner && t->frame.task == s->owner_task;
}

/* The owner check every structural call starts with. */
static int owner_check(scope_t *s, struct sc_thread **tp)
{
	struct sc_thread *t = sc_self_peek();

	if (!s)
		return -EINVAL;
	if (t != s->owner || t->frame.task != s->owner_task) {
		sc_emit_violation(s->id, SC_VIOL_NOT_OWNER, -EPERM);
		return -EPERM;
	}
	*tp = t;
	return 0;
}

/* Under s->lock: a kept task (forked with a handle) that ended takes its
 * place in the completion order (scope_next). */
static void task_done_locked(scope_t *s, scope_task_t *task)
{
	task->dnext = NULL;
	if (s->done_tail)
		s->done_tail->dnext = task;
	else
		s->done_head = task;
	s->done_tail = task;
	atomic_fetch_add_explicit(&s->ndone, 1, memory_order_release);
}

void sc_scope_tasks_each(scope_t *s, void (*fn)(void *ctx, scope_t *s, scope_task_t *task),
			 void *ctx)
{
	for (size_t i = 0; i < s->ntasks; i++)
		fn(ctx, s, s->tasks[i]);
	for (size_t i = 0; i < s->nanon; i++)
		fn(ctx, s, s->anon[i]);
}

/* Appends to a task array (v, *n, *cap) as its owner: without the lock
 * unless it must grow.  A handle-less array (sweep) is first swept of the
 * tasks whose end is done with them, except the scope's failure and
 * winner: they go back to t's recycled handles, and the array grows only
 * when more than half of it is live, so its size follows what is live. */
static int array_append(struct sc_thread *t, scope_t *s, scope_task_t ***v, _Atomic size_t *n,
			size_t *cap, scope_task_t *task, bool sweep)
{
	size_t k = atomic_load_explicit(n, memory_order_relaxed);

	if (k == *cap) {
		/* Swept and moved under the lock: cancellers and snapshots
		 * read the arrays there. */
		pthread_mutex_lock(&s->lock);
		if (sweep) {
			size_t live = 0;
			for (size_t i = 0; i < k; i++) {
				scope_task_t *x = (*v)[i];
				if (atomic_load_explicit(&x->ended, memory_order_acquire) &&
				    x != s->failure && x != s->winner)
					task_free(t, x);
				else
					(*v)[live++] = x;
			}
			k = live;
			atomic_store_explicit(n, k, memory_order_release);
		}
		if (k > *cap / 2 || !*cap) {
			size_t grown = *cap ? *cap * 2 : 8;
			scope_task_t **g = realloc(*v, grown * sizeof(*g));
			if (!g) {
				pthread_mutex_unlock(&s->lock);
				return -ENOMEM;
			}
			*v = g;
			*cap = grown;
		}
		pthread_mutex_unlock(&s->lock);
	}
	(*v)[k] = task;
	/* Before the push that hands the task over, which orders it. */
	atomic_store_explicit(&s->forked,
			      atomic_load_explicit(&s->forked, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	atomic_store_explicit(n, k + 1, memory_order_release);
	return 0;
}

static int tasks_append(struct sc_thread *t, scope_t *s, scope_task_t *task)
{
	if (task->keep)
		return array_append(t, s, &s->tasks, &s->ntasks, &s->cap, task, false);
	return array_append(t, s, &s->anon, &s->nanon, &s->anon_cap, task, true);
}

/* The end of a task, after which its end does not touch it: a kept one is
 * in the completion order; a handle-less one is the owner's to reuse.
 * Caller holds s->lock for a kept one. */
static void task_ended(scope_t *s, scope_task_t *task)
{
	if (task->keep)
		task_done_locked(s, task);
	else
		atomic_store_explicit(&task->ended, true, memory_order_release);
}

/* A task the owner ended itself in scope_fork (never queued): no waiter to
 * tell, no other thread inside the scope for it. */
static void end_on_owner(scope_t *s, scope_task_t *task)
{
	if (task->keep) {
		pthread_mutex_lock(&s->lock);
		task_done_locked(s, task);
		atomic_fetch_add(&s->ended, 1);
		pthread_mutex_unlock(&s->lock);
		return;
	}
	task_ended(s, task);
	atomic_fetch_add(&s->ended, 1);
}

/* Ends a task that never reached a worker without the joiner seeing it:
 * the forker learns of it from scope_fork's return value instead. */
static void task_refuse(scope_task_t *task, int state, int err)
{
	scope_t *s = task->scope;

	task->error = err;
	atomic_store_explicit(&task->state, state, memory_order_release);
	emit_task(SC_EV_TASK_END, task, state, err);
	end_on_owner(s, task);
}

/* scope_fork_at and scope_fork_with_at: prio is the options' priority. */
static inline int fork_at(scope_t *s, scope_fn fn, void *arg, scope_task_t **out, int prio,
			  const char *file, int line, const char *func)
{
	struct sc_thread *t;
	scope_task_t *task;
	int rc = owner_check(s, &t);

	if (rc)
		return rc;
	if (!fn)
		return -EINVAL;
	if (s->joined) {
		sc_emit_violation(s->id, SC_VIOL_FORK_AFTER_JOIN, SCOPE_EJOINED);
		return SCOPE_EJOINED;
	}
	task = task_alloc(t);
	if (!task)
		return -ENOMEM;
	task->id = id_take(&next_task_id, &t->ids_task, &t->ids_task_end);
	task->scope = s;
	task->fn = fn;
	task->arg = arg;
	task->site.file = file;
	task->site.line = line;
	task->site.func = func;
	task->keep = out != NULL;
	task->prio = prio;
	rc = tasks_append(t, s, task);
	if (rc) {
		task_free(t, task);
		return rc;
	}
	s->nforks++;
	if (out)
		*out = task;
	if (sc_check(s)) {
		/* Level-triggered: a cancelled scope starts nothing more. */
		atomic_store_explicit(&task->state, SC_TASK_UNAVAILABLE, memory_order_release);
		emit_task(SC_EV_TASK_FORK, task, SC_TASK_UNAVAILABLE, 0);
		end_on_owner(s, task);
		return 0;
	}
	if (s->joiner == SCOPE_JOIN_CUSTOM && s->ops->on_fork) {
		rc = s->ops->on_fork(s->ops->ctx, task);
		if (rc < 0) {
			emit_task(SC_EV_TASK_FORK, task, SC_TASK_FAILED, rc);
			task_refuse(task, SC_TASK_FAILED, rc);
			return rc;
		}
	}
	if (!s->pool) {
		s->pool = sc_pool_resolve(NULL);
		if (!s->pool) {
			task_refuse(task, SC_TASK_FAILED, -ENOMEM);
			return -ENOMEM;
		}
	}
	task->pool = s->pool;
	atomic_store_explicit(&task->state, SC_TASK_FORKED, memory_order_release);
	emit_task(SC_EV_TASK_FORK, task, SC_TASK_FORKED, 0);
	rc = sc_pool_submit(s->pool, task);
	if (rc < 0)
		task_refuse(task, rc == -ECANCELED ? SC_TASK_UNAVAILABLE : SC_TASK_FAILED, rc);
	return rc;
}

int scope_fork_at(scope_t *s, scope_fn fn, void *arg, scope_task_t **out, const char *file,
		  int line, const char *func)
{
	return fork_at(s, fn, arg, out, 0, file, line, func);
}

int scope_fork_with_at(scope_t *s, scope_fn fn, void *arg, scope_task_t **out,
		       const struct scope_fork_options *opts, const char *file, int line,
		       const char *func)
{
	return fork_at(s, fn, arg, out, opts ? opts->priority : 0, file, line, func);
}

/* Counts one more end of a task of s; true when it was the last forked. */
static bool end_add(scope_t *s)
{
	size_t e = atomic_fetch_add(&s->ended, 1) + 1;

	return e == atomic_load_explicit(&s->forked, memory_order_relaxed);
}

void sc_task_finish(scope_task_t *task, int state, int err)
{
	scope_t *s = task->scope;
	struct sc_thread *waiter;

	task->error = state == SC_TASK_SUCCESS ? 0 : err;
	atomic_store_explicit(&task->state, state, memory_order_release);
	emit_task(SC_EV_TASK_END, task, state, task->error);
	/* A fork child's thread ended the task it was running of a scope
	 * whose owner stayed behind: nobody here will close that scope, so it
	 * is reported closed now, rather than left open in the daemon. */
	if (__builtin_expect(atomic_load_explicit(&sc_inherited, memory_order_relaxed) == s, 0) &&
	    atomic_exchange(&sc_inherited, NULL) == s)
		emit_scope(SC_EV_SCOPE_CLOSE, s, 0);
	sc_joiner_complete(s, task, state);
	atomic_store_explicit(&task->worker, NULL, memory_order_release);
	if (task->keep) {
		/* Kept: into the completion order, under the lock, and the
		 * owner told at each end while it waits in scope_next. */
		if (s->owner != sc_self_peek())
			atomic_store_explicit(&s->remote_end, true, memory_order_relaxed);
		pthread_mutex_lock(&s->lock);
		task_done_locked(s, task);
		waiter = end_add(s) || s->wake_each ? s->waiter : NULL;
		pthread_mutex_unlock(&s->lock);
		if (waiter && waiter != sc_self_peek())
			sc_wake(waiter);
		return;
	}
	task_ended(s, task); /* not touched from here: the owner may reuse it */
	/* Joiners wait for the last task (or a stop, which cancels and so
	 * wakes them): waking them for every task would only cost switches.
	 * Any but the last end is a decrement and nothing else (the scope is
	 * alive while this task counts); the last takes the lock, so the
	 * owner, who frees the scope once it sees none left, waits for it. */
	size_t n = atomic_load_explicit(&s->ended, memory_order_acquire);
	for (;;) {
		/* Read after the ends counted in n, so it counts their forks:
		 * a fork added meanwhile only makes this end look last. */
		size_t f = atomic_load_explicit(&s->forked, memory_order_relaxed);
		if (n + 1 >= f)
			break;
		if (atomic_compare_exchange_weak_explicit(
			&s->ended, &n, n + 1, memory_order_acq_rel, memory_order_acquire))
			return;
	}
	/* Run by its owner's thread (a helping joiner, caller-runs): the
	 * scope cannot go while this runs, and the owner looks again. */
	if (s->owner == sc_self_peek()) {
		atomic_fetch_add(&s->ended, 1);
		return;
	}
	atomic_store_explicit(&s->remote_end, true, memory_order_relaxed);
	pthread_mutex_lock(&s->lock);
	waiter = end_add(s) || s->wake_each ? s->waiter : NULL;
	pthread_mutex_unlock(&s->lock);
	/* After the unlock the scope may be gone; the thread record is not.
	 * A joiner that ran the task itself looks again without being told. */
	if (waiter && waiter != sc_self_peek())
		sc_wake(waiter);
}

void sc_task_run(scope_task_t *task, scope_pool_t *pool, bool active)
{
	const struct scope_pool_hooks *hooks = pool ? sc_pool_hooks(pool) : NULL;
	struct sc_thread *t = sc_self();
	scope_t *s = task->scope;
	struct sc_frame saved;
	void *result = NULL;
	int cancelled, rc, state;

	/* No lock: the canceller sets the flag, then reads the workers (both
	 * sequentially consistent), and this thread publishes itself, then
	 * reads the flag, so either it sees the cancel or the canceller sees
	 * it (and at worst wakes a thread that already let the task go). */
	atomic_store(&task->worker, t);
	atomic_store_explicit(&task->state, SC_TASK_RUNNING, memory_order_release);
	cancelled = atomic_load(&s->cancelled);
	if (cancelled || sc_check(s)) {
		if (pool)
			sc_pool_task_done(pool, active);
		sc_task_finish(task, SC_TASK_CANCELLED, -ECANCELED);
		return;
	}
	emit_task(SC_EV_TASK_START, task, SC_TASK_RUNNING, 0);
	saved = t->frame;
	task->run_saved = saved;
	task->run_pool = pool;
	task->run_active = active;
	t->frame.top = NULL;
	t->frame.task = task;
	sc_otel_enter(task);
	if (hooks && hooks->before)
		hooks->before(hooks->ctx, task);
	rc = task->fn(task->arg, &result);
	/* A task that returns with scopes open would leave them ownerless. */
	sc_scope_close_frame(t, SC_VIOL_THREAD_EXIT);
	t->frame = saved;
	sc_otel_leave(saved.task);
	task->result = result;
	/* A failure once the scope is cancelled, or past its deadline (which
	 * this check fires), is the cancellation's doing, not the task's. */
	if (rc == 0)
		state = SC_TASK_SUCCESS;
	else
		state = sc_check(s) ? SC_TASK_CANCELLED : SC_TASK_FAILED;
	if (hooks && hooks->after)
		hooks->after(hooks->ctx, task, rc);
	/* Statistics first: once the scope learns of the end, its owner may
	 * read them. */
	if (pool)
		sc_pool_task_done(pool, active);
	sc_task_finish(task, state, rc);
}

/* Lock-free: a task's end stores its state and results before its add to
 * ended (a release), and this acquire load sees them once it sees the add.
 * Only the owner asks, and only it adds to forked. */
static bool all_done(void *arg)
{
	scope_t *s = arg;

	return atomic_load_explicit(&s->ended, memory_order_acquire) ==
	       atomic_load_explicit(&s->forked, memory_order_relaxed);
}

void sc_tasks_abandon(struct sc_thread *t)
{
	while (t->frame.task) {
		scope_task_t *task = t->frame.task;

		sc_scope_close_frame(t, SC_VIOL_THREAD_EXIT);
		t->frame = task->run_saved;
		if (task->run_pool)
			sc_pool_task_done(task->run_pool, task->run_active);
		sc_task_finish(task, SC_TASK_FAILED, SCOPE_EEXITED);
	}
	if (t->worker)
		sc_pool_worker_gone(t);
}

static bool join_done(void *arg)
{
	scope_t *s = arg;

	return all_done(s) || atomic_load(&s->stop) || atomic_load(&s->cancelled);
}

/* What join returns once waiting is over: whatever came first decides.
 * The joiner's decision (its stop cancels with reason JOINER) gives the
 * joiner's result; a deadline that passed before join decided, -ETIMEDOUT,
 * even when every subtask had ended in time (Java's TimeoutException);
 * any other cancellation, -ECANCELED. */
static int join_outcome(scope_t *s)
{
	int reason = atomic_load(&s->cancelled);

	/* Decided, its cancel not flagged yet: the decision came first. */
	if (!reason && atomic_load(&s->stop))
		return sc_joiner_result(s);
	if (!reason) {
		(void)sc_check(s); /* a deadline the timer has not reached yet */
		reason = atomic_load(&s->cancelled);
	}
	if (!reason || (reason == SC_CANCEL_JOINER && atomic_load(&s->stop)))
		return sc_joiner_result(s);
	return atomic_load(&s->cause) == SC_CANCEL_TIMEOUT ? sc_joiner_timeout(s) : -ECANCELED;
}

int scope_join(scope_t *s)
{
	struct sc_thread *t;
	int rc = owner_check(s, &t);

	if (rc)
		return rc;
	if (s->joined) {
		sc_emit_violation(s->id, SC_VIOL_DOUBLE_JOIN, SCOPE_EJOINED);
		return SCOPE_EJOINED;
	}
	s->joined = true;
	atomic_store_explicit(&s->join_ts, 0, memory_order_relaxed); /* a reused scope's */
	atomic_store(&s->waiter, t);
	atomic_store_explicit(&s->joining, true, memory_order_release);
	/* One clock read for the snapshot's copy and the event, after the
	 * change it stamps (see sc_thread_register); a snapshot that sees
	 * joining first sends 0, its now. */
	int64_t join_ts = sc_event_time();
	atomic_store_explicit(&s->join_ts, join_ts, memory_order_relaxed);
	emit_scope_at(SC_EV_JOIN_BEGIN, s, 0, join_ts);
	if (s->joiner == SCOPE_JOIN_ANY_SUCCESSFUL && s->nforks == 0) {
		rc = join_outcome(s); /* SCOPE_ENOFORKS, unless cancelled or late */
	} else {
		/* Only a joiner that waits for every subtask anyway runs queued
		 * ones itself: any other must return the moment it decides,
		 * not when a subtask it picked up ends. */
		bool helps =
		    s->joiner == SCOPE_JOIN_ALL_SUCCESSFUL || s->joiner == SCOPE_JOIN_AWAIT_ALL;
		struct sc_wait w = {
		    .ctx = s,
		    .done = join_done,
		    .arg = s,
		    .spin = true,
		    .help = helps ? s : NULL,
		    .lend = true,
		};
		(void)sc_wait(&w);
		rc = join_outcome(s);
	}
	atomic_store_explicit(&s->joining, false, memory_order_relaxed);
	atomic_store_explicit(&s->waiter, NULL, memory_order_relaxed);
	emit_scope(SC_EV_JOIN_END, s, rc);
	return rc;
}

static bool next_ready(void *arg)
{
	scope_t *s = arg;

	return atomic_load_explicit(&s->ndone, memory_order_acquire) > s->ntaken || all_done(s);
}

int scope_next(scope_t *s, scope_task_t **out)
{
	struct sc_thread *t;
	int rc = owner_check(s, &t);

	if (rc)
		return rc;
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (s->ntaken == s->ntasks)
		return 0;
	if (!next_ready(s)) {
		pthread_mutex_lock(&s->lock);
		s->waiter = t;
		s->wake_each = true;
		pthread_mutex_unlock(&s->lock);
		/* Not cancellable by the scope itself: what it cancels ends,
		 * and comes out here as it does.  No help: a queued subtask
		 * run here would hold back the ones that end meanwhile. */
		struct sc_wait w = {.done = next_ready, .arg = s, .spin = true, .lend = true};
		(void)sc_wait(&w);
		pthread_mutex_lock(&s->lock);
		s->waiter = NULL;
		s->wake_each = false;
		pthread_mutex_unlock(&s->lock);
	}
	if (atomic_load_explicit(&s->ndone, memory_order_acquire) == s->ntaken)
		return 0; /* ended without a handle in this order: none left */
	pthread_mutex_lock(&s->lock);
	*out = s->next_at ? s->next_at->dnext : s->done_head;
	s->next_at = *out;
	pthread_mutex_unlock(&s->lock);
	s->ntaken++;
	return 1;
}

/* Closes the innermost scope of t's frame: cancels what runs, waits for
 * every subtask (helping the pool if t is one of its workers), frees. */
static void close_one(struct sc_thread *t, scope_t *s, int reason, int result)
{
	if (!s->joined && s->nforks > 0)
		sc_emit_violation(s->id, SC_VIOL_NO_JOIN, 0);
	if (!all_done(s)) {
		sc_cancel(s, reason);
		if (s->pool)
			sc_pool_reclaim(s->pool, s);
		pthread_mutex_lock(&s->lock);
		s->waiter = t;
		pthread_mutex_unlock(&s->lock);
		struct sc_wait w = {
		    .done = all_done, .arg = s, .spin = true, .help = s, .lend = true};
		(void)sc_wait(&w);
	}
	sc_deadline_remove(s);
	atomic_store_explicit(&s->closing, true, memory_order_release);
	/* An end that saw the count reach 0 on another thread may still be
	 * inside the lock: it is out once the lock is had. */
	if (atomic_load_explicit(&s->remote_end, memory_order_relaxed)) {
		pthread_mutex_lock(&s->lock);
		pthread_mutex_unlock(&s->lock);
	}
	scope_unlink(s);
	t->frame.top = s->outer;
	emit_scope(SC_EV_SCOPE_CLOSE, s, result);
	if (s->own_pool_ref)
		sc_pool_user(s->pool, -1);
	/* Unlinked, so no new pin: only a snapshot already here remains. */
	while (atomic_load(&s->pins))
		sched_yield();
	scope_free(t, s);
}

void sc_scope_close_frame(struct sc_thread *t, int viol)
{
	while (t->frame.top) {
		scope_t *s = t->frame.top;
		sc_emit_violation(s->id, viol, SCOPE_ESTRUCTURE);
		close_one(t, s, SC_CANCEL_VIOLATION, SCOPE_ESTRUCTURE);
	}
}

/* One scope t owns and, below it, the ones t owns too (depth-bounded like
 * the snapshot walk).  Runs in a fork child, alone: no lock is taken. */
static void after_fork(scope_t *s, struct sc_thread *t, int depth)
{
	if (s->owner != t || depth >= SC_MAX_DEPTH)
		return;
	s->owner_tid = t->tid;
	/* Held, maybe, by a worker or the agent thread that stayed behind. */
	sc_mutex_init(&s->lock);
	atomic_store(&s->kids.held, 0);
	atomic_store(&s->pins, 0);
	for (scope_t *c = s->children; c; c = c->sib_next)
		after_fork(c, t, depth + 1);
}

scope_t *sc_scopes_after_fork(struct sc_thread *t)
{
	for (scope_t *s = t->roots; s; s = s->sib_next)
		after_fork(s, t, 0);
	/* A pool worker forked while it ran a task: the task's scope belongs
	 * to a thread that stayed behind, so the walk above did not reach it,
	 * nor the scopes t opened inside the task (they hang below it).  Up
	 * from where t is now, to the first scope t does not own. */
	scope_t *s = t->frame.top ? t->frame.top : t->frame.task ? t->frame.task->scope : NULL;
	for (int depth = 0; s && s->owner == t && depth < SC_MAX_DEPTH; depth++)
		s = s->parent;
	if (!s || s->owner == t)
		return NULL;
	/* Nobody else here can hold its lock: t alone came along. */
	sc_mutex_init(&s->lock);
	atomic_store(&s->kids.held, 0);
	atomic_store(&s->pins, 0);
	for (scope_t *c = s->children; c; c = c->sib_next)
		after_fork(c, t, 0);
	return s;
}

uint64_t sc_task_next_id(void)
{
	return atomic_load_explicit(&next_task_id, memory_order_relaxed);
}

int scope_close(scope_t *s)
{
	struct sc_thread *t;
	scope_t *x;
	int rc = owner_check(s, &t);

	if (rc)
		return rc;
	for (x = t->frame.top; x && x != s; x = x->outer)
		;
	if (!x) {
		/* Owned by this thread but in a frame a task interrupted: only
		 * the code that opened it may close it. */
		sc_emit_violation(s->id, SC_VIOL_NOT_OWNER, -EPERM);
		return -EPERM;
	}
	if (t->frame.top != s) {
		sc_emit_violation(s->id, SC_VIOL_INNER_OPEN, SCOPE_ESTRUCTURE);
		while (t->frame.top != s)
			close_one(t, t->frame.top, SC_CANCEL_VIOLATION, SCOPE_ESTRUCTURE);
		rc = SCOPE_ESTRUCTURE;
	}
	close_one(t, s, SC_CANCEL_CLOSE, rc);
	return rc;
}

const char *scope_name(const scope_t *s)
{
	return s ? s->name : NULL;
}

uint64_t scope_id(const scope_t *s)
{
	return s ? s->id : 0;
}

size_t scope_task_count(const scope_t *s)
{
	return s ? s->ntasks : 0;
}

scope_task_t *scope_task_at(const scope_t *s, size_t i)
{
	return s && i < s->ntasks ? s->tasks[i] : NULL;
}

scope_task_state_t scope_task_state(const scope_task_t *task)
{
	static const scope_task_state_t public_state[] = {
	    [SC_TASK_FORKED] = SCOPE_TASK_UNAVAILABLE,
	    [SC_TASK_RUNNING] = SCOPE_TASK_UNAVAILABLE,
	    [SC_TASK_SUCCESS] = SCOPE_TASK_SUCCESS,
	    [SC_TASK_FAILED] = SCOPE_TASK_FAILED,
	    [SC_TASK_CANCELLED] = SCOPE_TASK_UNAVAILABLE,
	    [SC_TASK_UNAVAILABLE] = SCOPE_TASK_UNAVAILABLE,
	};

	if (!task)
		return SCOPE_TASK_UNAVAILABLE;
	return public_state[atomic_load_explicit(&task->state, memory_order_acquire)];
}

void *scope_task_result(const scope_task_t *task)
{
	if (scope_task_state(task) != SCOPE_TASK_SUCCESS)
		return NULL;
	return task->result;
}

int scope_task_error(const scope_task_t *task)
{
	if (scope_task_state(task) != SCOPE_TASK_FAILED)
		return 0;
	return task->error;
}

uint64_t scope_task_id(const scope_task_t *task)
{
	return task ? task->id : 0;
}

/* Both are written under the scope's lock by completing workers. */
scope_task_t *scope_failure(const scope_t *cs)
{
	scope_t *s = (scope_t *)cs;
	scope_task_t *t;

	if (!s)
		return NULL;
	pthread_mutex_lock(&s->lock);
	t = s->failure;
	pthread_mutex_unlock(&s->lock);
	return t;
}

scope_task_t *scope_winner(const scope_t *cs)
{
	scope_t *s = (scope_t *)cs;
	scope_task_t *t;

	if (!s)
		return NULL;
	pthread_mutex_lock(&s->lock);
	t = s->winner;
	pthread_mutex_unlock(&s->lock);
	return t;
}
