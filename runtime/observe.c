/* observe.c - the runtime's event point: the observer slot, the cached tid,
 * the agent-thread mark, the snapshot walk, and the library constructor
 * that starts the agent. */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rt.h"

/* Zero-initialized (no observer): clang refuses NULL as a constant
 * initializer of an _Atomic function pointer. */
_Atomic(sc_observer_fn) sc_observer;
_Atomic int sc_keep_times;

/* Initial-exec, like every hot thread-local of libscope: in a shared library
 * the default model makes each access a call to __tls_get_addr (every event
 * reads the tid).  The few bytes fit the static TLS glibc keeps for
 * libraries loaded late (tests/e2e/dlopen.sh). */
static _Thread_local uint32_t cached_tid __attribute__((tls_model("initial-exec")));
static _Thread_local bool is_agent __attribute__((tls_model("initial-exec")));

void sc_observer_set(sc_observer_fn fn)
{
	atomic_store_explicit(&sc_observer, fn, memory_order_release);
}

uint32_t sc_gettid(void)
{
	/* gettid() is a real system call; every event carries the tid, so it
	 * is fetched once per thread. */
	if (__builtin_expect(cached_tid == 0, 0))
		cached_tid = (uint32_t)syscall(SYS_gettid);
	return cached_tid;
}

void sc_thread_mark_agent(void)
{
	is_agent = true;
	/* Registered, so that dumps name the thread whose stack replies they
	 * hold; a thread the runtime already knew just changes role. */
	if (sc_self_peek())
		sc_thread_set_role(SC_ROLE_AGENT);
	else
		(void)sc_thread_register(SC_ROLE_AGENT, NULL, NULL);
}

void sc_thread_agent_exit(void)
{
	sc_thread_unregister();
}

bool sc_thread_is_agent(void)
{
	return is_agent;
}

void sc_ev_init(struct sc_ev *ev, int kind)
{
	/* ts stays 0: the observer stamps the event when it keeps it (see
	 * event.h), so one that drops or ignores it reads no clock.
	 * Field by field, not memset: with the size known gcc inlined a
	 * `rep stos` whose start-up cost made this function and its caller 7%
	 * of a fork's CPU with an observer that does nothing, and the library's
	 * memset is a call into 512-bit stores on this kind of machine; these
	 * are a few plain stores (the padding stays as it was: no observer
	 * reads it). */
	ev->kind = (uint16_t)kind;
	ev->snapshot = 0;
	ev->tid = sc_gettid();
	ev->ts = 0;
	ev->a = ev->b = ev->c = ev->d = 0;
	ev->i = 0;
	ev->u = 0;
	ev->s1 = ev->s2 = NULL;
	ev->site.file = ev->site.func = NULL;
	ev->site.line = 0;
	ev->pool = NULL;
}

/* Tasks with a smaller id were forked before the last fork() made this
 * process: the pool queues they waited in, and the workers that ran them,
 * stayed with the parent. */
static uint64_t task_floor;
/* In a fork child made by a thread running a task of a scope another
 * thread owned: that scope (see sc_scopes_after_fork), until that task
 * ends here (sc_task_finish).  Its owner stayed behind, so it is never
 * closed here and stays allocated. */
_Atomic(scope_t *) sc_inherited;

struct snap {
	void (*emit)(void *ctx, const struct sc_ev *ev);
	void *ctx;
};

static void snap_thread(void *arg, struct sc_thread *t)
{
	struct snap *sn = arg;
	struct sc_ev ev;

	sc_ev_init(&ev, SC_EV_THREAD_START);
	ev.snapshot = 1;
	ev.ts = atomic_load_explicit(&t->start_ts, memory_order_relaxed);
	ev.tid = t->tid;
	ev.s1 = t->name;
	ev.a = t->pool_id;
	ev.i = t->role;
	sn->emit(sn->ctx, &ev);
}

static void snap_pool(void *arg, scope_pool_t *p)
{
	struct snap *sn = arg;

	sc_pool_snapshot(p, sn->emit, sn->ctx);
}

static void snap_task(struct snap *sn, const scope_t *s, const scope_task_t *task)
{
	int state = atomic_load(&task->state);
	struct sc_thread *w = atomic_load(&task->worker);
	struct sc_ev ev;

	if (state != SC_TASK_FORKED && state != SC_TASK_RUNNING)
		return;
	/* Inherited across fork() and never to run or end here.  (Not "its
	 * worker is not among the tids the walk began with": a pool thread
	 * that started since, running a task forked before the rings were
	 * thrown away, left that task out of both the snapshot and the live
	 * stream, for good.) */
	if (state == SC_TASK_FORKED ? task->id < task_floor : (w && w->left_behind))
		return;
	/* The original times, not the walk's: 0 (never observed) is now. */
	sc_ev_init(&ev, SC_EV_TASK_FORK);
	ev.snapshot = 1;
	ev.ts = atomic_load_explicit(&task->fork_ts, memory_order_relaxed);
	ev.tid = s->owner_tid;
	ev.a = task->id;
	ev.b = s->id;
	ev.u = SC_TASK_FORKED;
	ev.site = task->site;
	ev.d = (uint64_t)(uintptr_t)task->fn;
	sn->emit(sn->ctx, &ev);
	if (state == SC_TASK_RUNNING && w) {
		sc_ev_init(&ev, SC_EV_TASK_START);
		ev.snapshot = 1;
		ev.ts = atomic_load_explicit(&task->start_ts, memory_order_relaxed);
		ev.tid = w->tid;
		ev.a = task->id;
		ev.b = s->id;
		ev.u = SC_TASK_RUNNING;
		sn->emit(sn->ctx, &ev);
	}
}

/* ts 0: the observer stamps it (now). */
static void snap_scope_event(struct snap *sn, const scope_t *s, int kind, uint32_t u, int64_t ts)
{
	struct sc_ev ev;

	sc_ev_init(&ev, kind);
	ev.snapshot = 1;
	ev.ts = ts;
	ev.tid = s->owner_tid;
	ev.a = s->id;
	ev.u = u;
	if (kind == SC_EV_SCOPE_CANCEL)
		ev.b = (uint64_t)atomic_load(&s->cause);
	sn->emit(sn->ctx, &ev);
}

/* Scopes pinned for the walk: each list is pinned under the lock that
 * guards it, then walked with no lock of its owner held. */
struct pinned {
	scope_t **v;
	size_t n, cap;
};

static bool pin(struct pinned *pl, scope_t *s)
{
	if (pl->n == pl->cap) {
		size_t cap = pl->cap ? pl->cap * 2 : 16;
		scope_t **v = realloc(pl->v, cap * sizeof(*v));
		if (!v)
			return false; /* the snapshot misses it; the live stream does not */
		pl->v = v;
		pl->cap = cap;
	}
	atomic_fetch_add(&s->pins, 1);
	pl->v[pl->n++] = s;
	return true;
}

static void snap_scope(struct snap *sn, scope_t *s, int depth);

static void snap_pinned(struct snap *sn, struct pinned *pl, int depth)
{
	for (size_t i = 0; i < pl->n; i++) {
		if (depth < SC_MAX_DEPTH)
			snap_scope(sn, pl->v[i], depth);
		atomic_fetch_sub(&pl->v[i]->pins, 1);
	}
	free(pl->v);
}

/* With s->lock held (released here): s's tasks, then, pinned, its child
 * scopes, at depth + 1. */
static void snap_task_each(void *ctx, scope_t *s, scope_task_t *task)
{
	snap_task(ctx, s, task);
}

static void snap_below(struct snap *sn, scope_t *s, int depth)
{
	struct pinned kids = {0};

	sc_scope_tasks_each(s, snap_task_each, sn);
	sc_spin_lock(&s->kids);
	for (scope_t *c = s->children; c && pin(&kids, c); c = c->sib_next)
		;
	sc_spin_unlock(&s->kids);
	pthread_mutex_unlock(&s->lock);
	snap_pinned(sn, &kids, depth + 1);
}

/* One scope, then (pinned, its lock released) everything below it: the
 * scope's lock is held only while its own events are emitted. */
static void snap_scope(struct snap *sn, scope_t *s, int depth)
{
	int cancelled;

	/* A scope of a thread that did not come along through fork() is left
	 * out with everything below it; its lock may even be held for good.
	 * Its owner's record says so (a thread registered since the walk
	 * began owns its scopes all the same). */
	if (s->owner->left_behind)
		return;
	pthread_mutex_lock(&s->lock);
	if (s->closing) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	sc_emit_open(s, 1, sn->emit, sn->ctx);
	sc_values_snapshot(s, sn->emit, sn->ctx);
	/* Stamped when the join began, not now: a daemon that connects late
	 * still sees how long the owner has been waiting. */
	if (s->joining)
		snap_scope_event(sn, s, SC_EV_JOIN_BEGIN, 0, s->join_ts);
	cancelled = atomic_load(&s->cancelled);
	if (cancelled)
		snap_scope_event(sn, s, SC_EV_SCOPE_CANCEL, (uint32_t)cancelled, 0);
	snap_below(sn, s, depth);
}

static void emit_as_root(void *ctx, const struct sc_ev *ev)
{
	struct snap *sn = ctx;
	struct sc_ev e = *ev;

	e.b = e.c = 0; /* its parent scope and task stayed behind */
	sn->emit(sn->ctx, &e);
}

/* Sets *ctx (a bool) when the task runs on a thread that came along
 * through fork(). */
static void here_each(void *ctx, scope_t *s, scope_task_t *task)
{
	struct sc_thread *w = atomic_load(&task->worker);
	(void)s;

	if (atomic_load(&task->state) == SC_TASK_RUNNING && w && !w->left_behind)
		*(bool *)ctx = true;
}

/* The scope inherited from the task this fork child's thread was running,
 * as a root: the task, on the child's thread, and the scopes the thread
 * opened inside it.  Only while that task runs here.  Its owner's tid is
 * the parent's thread's (the dump shows it as an owner not in the process);
 * no join or cancellation is reported: nobody here will join it. */
static void snap_inherited(struct snap *sn, scope_t *s)
{
	bool here = false;

	pthread_mutex_lock(&s->lock);
	sc_scope_tasks_each(s, here_each, &here);
	if (!here) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	sc_emit_open(s, 1, emit_as_root, sn);
	snap_below(sn, s, 0);
}

/* With t's roots list held still (sc_threads_walk_roots). */
static void pin_roots(void *arg, struct sc_thread *t)
{
	struct pinned *roots = arg;

	for (scope_t *s = t->roots; s && pin(roots, s); s = s->sib_next)
		;
}

void sc_registry_snapshot(void (*emit)(void *ctx, const struct sc_ev *ev), void *ctx)
{
	struct snap sn = {.emit = emit, .ctx = ctx};
	struct pinned roots = {0};

	if (!emit)
		return;
	sc_threads_walk(snap_thread, &sn);
	sc_pools_walk(snap_pool, &sn);
	sc_threads_walk_roots(pin_roots, &roots);
	snap_pinned(&sn, &roots, 0);
	scope_t *inherited = atomic_load(&sc_inherited);
	if (inherited)
		snap_inherited(&sn, inherited);
}

/* In a fork child, before anything else of the runtime runs there: only
 * the calling thread came along, with a new tid (the cached one is the
 * parent's), and the registry and the scopes it owns must say so. */
static void runtime_after_fork(void)
{
	struct sc_thread *t;

	cached_tid = 0;
	atomic_store(&sc_inherited, NULL);
	t = sc_threads_after_fork();
	if (t)
		atomic_store(&sc_inherited, sc_scopes_after_fork(t));
	task_floor = sc_task_next_id();
}

__attribute__((constructor)) static void sc_library_init(void)
{
	/* Before the agent's own handler, so that it finds the registry pruned. */
	(void)pthread_atfork(NULL, NULL, runtime_after_fork);
	sc_agent_init();
}
