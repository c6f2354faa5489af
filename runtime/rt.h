/* rt.h - libscope's internal objects (threads, scopes, tasks, pools) and the
 * functions the runtime's files share.  Hidden from the library's users. */
#ifndef SC_RT_H
#define SC_RT_H

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "event.h"
#include "scope.h"

#define SC_NAME_MAX 64	  /* scope and pool names are cut to 63 bytes */
#define SC_THREAD_NAME 16 /* Linux's comm: 15 bytes and the NUL */
#define SC_MAX_DEPTH 1024 /* nesting the snapshot walk follows */

struct sc_value {
	struct sc_value *next;
	char *key;
	char *value;
};

/* What the calling thread runs in: the innermost scope it opened in this
 * frame, and the task it runs (pool workers, caller-runs, helped tasks).
 * Running a task pushes a fresh frame, so scopes the task opens have the
 * task's scope as parent even when a worker runs it while joining. */
struct sc_frame {
	scope_t *top;
	scope_task_t *task;
};

/* One thread the runtime knows.  Records are recycled, never freed, so a
 * late wake-up aimed at an exited thread lands on a harmless record. */
/* A spin lock (sc_spin_lock below). */
struct sc_spin {
	_Atomic int held;
};

struct sc_thread {
	struct sc_thread *next, *prev; /* registry list (thread.c's lock) */
	struct sc_thread *free_next;
	uint32_t tid;
	int role; /* enum sc_thread_role */
	uint64_t pool_id;
	scope_pool_t *pool; /* pool the thread works for, or NULL */
	void *worker;	    /* its struct worker there */
	pthread_t self;
	char name[SC_THREAD_NAME];
	_Atomic int64_t start_ts; /* scope_now() at registration, for snapshots */

	/* Parking: an event count the thread sleeps on (futex) and an eventfd
	 * it polls with scope_wait_fd.  Wakers bump seq, then wake. */
	_Atomic uint32_t seq;
	_Atomic int sleeping;
	_Atomic int polling;
	_Atomic int in_cancellable; /* enum sc_cwait: how a canceller reaches it */
	int evfd;

	/* roots: the scopes this thread opened that have no parent.  Only
	 * this thread changes the list, only a snapshot reads it from another
	 * (sc_roots_enter). */
	struct sc_spin lock;	/* a snapshot's hold on roots */
	_Atomic int roots_busy; /* the owner changes roots without the lock */
	scope_t *roots;

	struct sc_frame frame;
	scope_t *free_scopes; /* recycled scopes, so open+close skips malloc */
	unsigned nfree;
	/* The deque slot this thread holds in one pool (pool_work.c): valid
	 * while dq_pool and dq_gen match that pool's id and generation. */
	void *dq;
	uint64_t dq_pool;
	uint32_t dq_gen;
	/* Blocks of ids this thread hands out (scope.c), so that an open or
	 * a fork takes no shared counter. */
	uint64_t ids_scope, ids_scope_end, ids_task, ids_task_end;
	scope_task_t *free_tasks; /* recycled task handles, so a fork skips calloc */
	unsigned ntfree;
	/* Alternate signal stacks were turned on after this thread registered
	 * (an agent started late): it installs its own at its next runtime
	 * call (sigaltstack acts on the calling thread only). */
	_Atomic bool alt_want;
	/* In a fork child: a thread of the parent that did not come along
	 * (set by sc_threads_after_fork, before any other thread runs there).
	 * A snapshot leaves out its scopes and the tasks it was running. */
	bool left_behind;
};

/* now + ns for ns >= 0, saturating: a huge timeout means "never", not a
 * deadline in the past. */
static inline int64_t sc_after(int64_t ns)
{
	int64_t now = scope_now();

	return ns > INT64_MAX - now ? INT64_MAX : now + ns;
}

/* Tells the core a spin loop is waiting (x86 pause; a compiler barrier
 * elsewhere). */
static inline void sc_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/* A lock for the few instructions of a list link: an exchange to take, a
 * store to give back (a pthread mutex pair costs two atomic operations
 * and two calls, and a scope's open and close took two pairs).  A holder
 * descheduled on a busy machine is waited for with sched_yield. */
static inline void sc_spin_lock(struct sc_spin *l)
{
	unsigned i = 0;

	while (atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
		while (atomic_load_explicit(&l->held, memory_order_relaxed)) {
			if (++i % 64 == 0)
				sched_yield();
			else
				sc_cpu_relax();
		}
}

static inline void sc_spin_unlock(struct sc_spin *l)
{
	atomic_store_explicit(&l->held, 0, memory_order_release);
}

#if defined(__SANITIZE_THREAD__)
#define SC_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SC_TSAN 1
#endif
#endif
#ifndef SC_TSAN
#define SC_TSAN 0
#endif

/* Whether a thread changes its own roots list without the list's lock
 * (thread.c: membarrier() works here, and not under TSan, which cannot see
 * the order it makes).  Set before the first thread registers. */
extern bool sc_roots_asym;

/* The owner's side of its roots list's lock, an asymmetric one: the owner
 * changes the list at every root scope's open and close, a snapshot reads it
 * a few times a session.  The owner only says it is busy and looks whether
 * a snapshot holds the lock, with no fence; the snapshot takes the lock,
 * then a membarrier() makes every thread pass a full barrier, then waits
 * for busy owners (sc_threads_walk_roots).  So either the owner's look
 * comes after the barrier and sees the lock (it then waits for it like any
 * lock), or its busy store came before and the snapshot waits for it.  The
 * exchange and fence a lock costs were 12% of a root scope's open, fork,
 * join and close.  True when the owner went without the lock (pass it to
 * sc_roots_leave). */
static inline bool sc_roots_enter(struct sc_thread *t)
{
	if (sc_roots_asym) {
		atomic_store_explicit(&t->roots_busy, 1, memory_order_relaxed);
		/* The compiler must not move the look above the store; the
		 * processor may, which the snapshot's barrier undoes. */
		atomic_signal_fence(memory_order_seq_cst);
		if (!atomic_load_explicit(&t->lock.held, memory_order_acquire))
			return true;
		atomic_store_explicit(&t->roots_busy, 0, memory_order_release);
	}
	sc_spin_lock(&t->lock);
	return false;
}

static inline void sc_roots_leave(struct sc_thread *t, bool fast)
{
	if (fast)
		atomic_store_explicit(&t->roots_busy, 0, memory_order_release);
	else
		sc_spin_unlock(&t->lock);
}

/* Zeroes n bytes (a multiple of 8) at p, 16-byte stores four at a time.
 * memset() of a task or a scope compiles to rep stos, whose start-up costs
 * more than the few hundred bytes it clears; the empty asm keeps the
 * compiler from turning this loop back into memset. */
static inline void sc_zero(void *p, size_t n)
{
	typedef uint64_t v2 __attribute__((vector_size(16), aligned(8), may_alias));
	v2 *q = p, z = {0, 0};

	for (size_t i = 0; i + 4 <= n / 16; i += 4) {
		q[i] = z;
		q[i + 1] = z;
		q[i + 2] = z;
		q[i + 3] = z;
		__asm__ __volatile__("" : : "r"(q) : "memory");
	}
	for (size_t i = n / 16 / 4 * 4; i < n / 16; i++)
		q[i] = z;
	if (n & 8) {
		typedef uint64_t u64a __attribute__((may_alias));
		*(u64a *)((char *)p + n - 8) = 0;
	}
}

/* How a thread waits, as a canceller needs to know it. */
enum sc_cwait {
	SC_CWAIT_NONE = 0, /* running, or in an uncancellable wait: wake and signal */
	SC_CWAIT_WORD = 1, /* parked on its context's cancel word: that wake suffices */
	SC_CWAIT_WAKE = 2, /* in a runtime wait: wake it, no signal needed */
};

/* A binary heap of queued tasks (pool_prio.c): a priority pool's queue,
 * and each scope's queued tasks in such a pool. */
struct sc_theap {
	scope_task_t **v;
	size_t n, cap;
};

/* A cancellation handler, in the caller's scope_cancel_handler_t. */
struct sc_handler {
	struct sc_handler *next, *prev; /* in its scope's list, while armed */
	struct sc_handler *run_next;	/* the canceller's list to run */
	scope_t *scope;
	void (*fn)(void *ctx);
	void *ctx;
	_Atomic int state; /* enum sc_handler_state (cancel.c) */
};

struct scope_task {
	uint64_t id;
	scope_t *scope;
	scope_pool_t *pool;
	scope_fn fn;
	void *arg;
	void *result;
	int error;
	_Atomic int state;		  /* enum sc_task_state */
	struct sc_thread *_Atomic worker; /* while running */
	struct sc_site site;
	/* scope_now() when the fork and the start were reported (0: not
	 * observed then), so that a snapshot sends the original times. */
	_Atomic int64_t fork_ts, start_ts;
	/* While queued (the pool's lock): in the pool's inject queue or in the
	 * deque of the worker that forked it (home), and in its scope's list,
	 * so a joiner finds its own queued work without looking at others'. */
	scope_task_t *qnext, *qprev;
	scope_task_t *snext, *sprev;
	void *home; /* struct worker, or NULL: the inject queue */
	/* While it runs: the frame to restore after it, and the pool that
	 * counts the run, so a thread that exits inside it (pthread_exit)
	 * can end it and every task it interrupted. */
	struct sc_frame run_saved;
	scope_pool_t *run_pool;
	bool run_active;
	uint32_t gen; /* the pool's generation when queued */
	bool queued;
	/* The forker asked for a handle: kept in the scope's tasks until
	 * close.  Otherwise the task sits in the scope's live list (its lock)
	 * and its memory goes back for reuse when it ends. */
	bool keep; /* forked with a handle: kept until the scope closes */
	/* Handle-less: its end is done with it, the owner may reuse it. */
	_Atomic bool ended;
	scope_task_t *dnext; /* in its scope's completion order (kept tasks) */
	/* A priority pool's order (pool_prio.c): the fork's priority, the
	 * pool's count of queued tasks when first queued, and while queued
	 * its slots in the pool's heap and in its scope's (SC_PRIO_NONE: not
	 * in it). */
	int prio;
	uint64_t pseq;
	size_t hslot[2];
};

struct scope {
	uint64_t id;
	char name[SC_NAME_MAX];
	/* What a task's OpenTelemetry thread context (otelctx.h) is keyed by,
	 * so that the scopes of a recursion share one record per thread: the
	 * name's hash, and the id of the scope whose trace the tasks carry
	 * (the nearest with a traceparent binding, else the root; inherited
	 * at open, set again below a scope that binds one, with
	 * SC_TRACE_SRC_BOUND then). */
	uint64_t name_key;
	_Atomic uint64_t trace_src;
	uint32_t otel_ix; /* where a thread keeps that record: otelctx.h */
	struct sc_thread *owner;
	/* The task the owner ran when it opened the scope (NULL: none): the
	 * owner's rights are that task's, not its thread's, so a subtask run
	 * inline on the owner's thread is not the owner. */
	scope_task_t *owner_task;
	uint32_t owner_tid;
	scope_t *parent;
	scope_task_t *parent_task;
	scope_t *outer;	    /* enclosing scope in the owner's frame */
	scope_pool_t *pool; /* NULL: default pool, resolved at first fork */
	bool own_pool_ref;
	scope_joiner_kind_t joiner;
	scope_until_fn until;
	void *until_ctx;
	const struct scope_joiner_ops *ops;
	scope_timeout_fn on_timeout;
	void *on_timeout_ctx;
	unsigned flags;
	int64_t deadline;     /* own, absolute; 0 none */
	int64_t eff_deadline; /* min over ancestors */
	struct sc_site site;

	pthread_mutex_t lock;
	_Atomic int cancelled;	  /* 0, or enum sc_cancel_reason; also a futex word */
	_Atomic int word_waiters; /* threads parked on cancelled */
	_Atomic int stop;	  /* the joiner decided */
	/* Why the cancellation began where it began (enum sc_cancel_reason):
	 * the reason itself, or for PARENT the ancestor's cause.  Written
	 * before cancelled, under this lock. */
	_Atomic int cause;
	/* Cancellation handlers registered in this scope's context, and the
	 * eventfd (+1; 0: none) made readable on cancellation; this lock. */
	struct sc_handler *handlers;
	int cancel_efd;
	/* Handlers armed now, and run by this scope's cancellation (this
	 * lock), as SCOPE_HANDLERS tells the observer. */
	unsigned nhandlers, handlers_ran;
	/* In the timer's heap (deadline.c): dl_on is the owner's, dl_slot
	 * the timer's lock's. */
	bool dl_on;
	size_t dl_slot;
	bool joined;   /* the owner's */
	size_t nforks; /* forks made (owner's): bindings freeze at the first */
	/* Atomics: the owner writes them without the lock, snapshots read
	 * them. */
	_Atomic bool joining;
	_Atomic int64_t join_ts; /* when the join began (sc_event_time()), for snapshots */
	_Atomic int64_t open_ts; /* when the open was reported (0: not observed), likewise */
	/* Tasks appended (the owner's, a plain store: only it forks) and
	 * tasks ended (an atomic add by whichever thread ends one; the last
	 * end adds under lock): the joiner is done when they are equal. */
	_Atomic size_t forked, ended;
	/* Forks with a handle, in fork order, and handle-less forks (live, or
	 * ended and not yet reused), each appended by the owner without the
	 * lock (a release store of the count after the slot); the arrays move
	 * (realloc) and anon is swept of ended tasks only under the lock,
	 * where others read them.  So a scope that lives for days, forking
	 * without handles, holds what is live (scope.c, anon_append). */
	scope_task_t **tasks;
	_Atomic size_t ntasks;
	size_t cap;
	scope_task_t **anon;
	_Atomic size_t nanon;
	size_t anon_cap;
	/* Kept tasks in the order they ended, for scope_next (this lock);
	 * ndone counts them, ntaken those scope_next gave (owner's). */
	scope_task_t *done_head, *done_tail, *next_at;
	_Atomic size_t ndone;
	size_t ntaken;
	bool wake_each; /* the owner waits in scope_next: wake it per end */
	scope_task_t *failure, *winner;
	/* The owner while it waits for tasks: set before it looks at ended,
	 * read by the last task's end after its add (both sequentially
	 * consistent), so one of them sees the other. */
	struct sc_thread *_Atomic waiter;
	scope_task_t *qhead, *qtail; /* its queued tasks, oldest first (the pool's lock) */
	struct sc_theap pq; /* the same in a priority pool, in run order (the pool's lock) */

	struct sc_spin kids;	      /* guards children (taken after lock where both are) */
	scope_t *children;	      /* child scopes (kids) */
	scope_t *sib_next, *sib_prev; /* in parent's children or owner's roots */
	/* A snapshot walking below this scope holds a pin instead of its lock;
	 * close waits for the pins before freeing.  Pins are taken only while
	 * the scope is linked (under the lock of the list it is linked in). */
	_Atomic int pins;
	/* Unlinked or about to be: the walk skips it.  Its pin, not this
	 * flag, keeps a walk already inside safe. */
	_Atomic bool closing;
	/* The last task's end took the lock on another thread: close takes
	 * it once before the scope goes, so that end is out of it. */
	_Atomic bool remote_end;
	struct sc_value *_Atomic values;
	/* Its OpenTelemetry thread context's trace and attributes, built by
	 * the first task to run (otelctx.c), freed with the scope. */
	struct sc_otel_built *_Atomic otel;
	scope_t *free_next;
};

/* A scope name's key (64-bit FNV-1a of its n bytes); the default name's. */
static inline uint64_t sc_name_key(const char *name, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)name[i]) * 0x100000001b3ull;
	return h;
}
#define SC_NAME_KEY_DEFAULT 0xc1074ffbe7efe44bull /* sc_name_key("scope", 5) */

#define SC_ID_BLOCK 256 /* ids a thread takes from a shared counter at once (scope.c) */

/* A scope's otel_ix when it does not take its parent's: its id, so that a
 * thread's scopes opened in turn take consecutive slots (otelctx.h), plus
 * an offset per block of SC_ID_BLOCK ids, so that threads opening scopes
 * in step, whose blocks all start at multiples of SC_ID_BLOCK, do
 * not take the same slots. */
static inline uint32_t sc_otel_ix_of(uint64_t id)
{
	return (uint32_t)(id + id / SC_ID_BLOCK * 37);
}

/* A trace_src naming a scope that binds a traceparent (not a root). */
#define SC_TRACE_SRC_BOUND (1ull << 63)

/* scope.c: s binds a traceparent; its tasks, and those below it that
 * inherited their trace from above it, now carry s's trace. */
void sc_trace_src_bound(scope_t *s);

/* thread.c */
void sc_thread_altstack_late(struct sc_thread *t);
/* Gives the calling thread t its alternate signal stack if they were
 * turned on after it registered: one load of its own record otherwise. */
static inline void sc_thread_altstack_due(struct sc_thread *t)
{
	if (__builtin_expect(atomic_load_explicit(&t->alt_want, memory_order_acquire), 0))
		sc_thread_altstack_late(t);
}
/* The calling thread's record (NULL: not registered yet).  Initial-exec:
 * every structural call reads it, inline. */
extern _Thread_local struct sc_thread *sc_self_tls SC_HIDDEN
    __attribute__((tls_model("initial-exec")));
struct sc_thread *sc_self_register(void);
/* The calling thread's record, registered on first use (NULL: no memory). */
static inline struct sc_thread *sc_self(void)
{
	struct sc_thread *t = sc_self_tls;

	if (__builtin_expect(t != NULL, 1)) {
		sc_thread_altstack_due(t);
		return t;
	}
	return sc_self_register();
}
/* The same, NULL for a thread the runtime has not seen. */
static inline struct sc_thread *sc_self_peek(void)
{
	struct sc_thread *t = sc_self_tls;

	if (t)
		sc_thread_altstack_due(t);
	return t;
}
struct sc_thread *sc_thread_register(int role, scope_pool_t *pool, const char *name);
void sc_thread_unregister(void);
void sc_thread_set_name(struct sc_thread *t, const char *name);
/* In a fork child: the registry keeps only the calling thread, under its
 * new tid; returns its record (NULL: it had none). */
struct sc_thread *sc_threads_after_fork(void);
/* Changes the calling thread's role (if it has a record). */
void sc_thread_set_role(int role);
void sc_threads_walk(void (*fn)(void *ctx, struct sc_thread *t), void *ctx);
/* The same with each thread's roots list held still while fn reads it. */
void sc_threads_walk_roots(void (*fn)(void *ctx, struct sc_thread *t), void *ctx);
void sc_wake(struct sc_thread *t);
/* The signal mask of the runtime's helper threads (the deadline timer, the
 * monitor): everything blocked but the agent's stack request and faults. */
void sc_helper_sigset(sigset_t *set);
void sc_mutex_init(pthread_mutex_t *m);
/* Sleeps until woken after seq was read as seen, or until the absolute
 * deadline (0: none).  Returns false on timeout. */
bool sc_park(struct sc_thread *t, uint32_t seen, int64_t deadline);
/* As sc_park, and also until *word (a scope's cancel word) leaves 0.
 * Returns false when the kernel cannot wait on both (then use sc_park). */
bool sc_park_word(struct sc_thread *t, uint32_t seen, _Atomic int *word, int64_t deadline);
bool sc_park_word_supported(void);
/* Wakes every thread parked on word. */
void sc_wake_word(_Atomic int *word);
/* Spins up to budget_ns for a wake-up before the caller parks. */
bool sc_spin(struct sc_thread *t, uint32_t seen, int64_t budget_ns);

/* scope.c */
scope_t *sc_context(void);
void sc_scope_close_frame(struct sc_thread *t, int viol);
/* Runs task on the calling thread, with pool's hooks (NULL: none, as for
 * caller-runs); active says the pool counted this run as active. */
void sc_task_run(scope_task_t *task, scope_pool_t *pool, bool active);
void sc_emit_open(scope_t *s, int snapshot, void (*emit)(void *, const struct sc_ev *), void *ctx);
void sc_task_finish(scope_task_t *task, int state, int error);
/* The calling thread t exits (pthread_exit) while it runs tasks: each
 * ends FAILED with SCOPE_EEXITED, innermost first, with the scopes they
 * opened closed; a pool worker leaves its pool, which replaces it. */
void sc_tasks_abandon(struct sc_thread *t);
void sc_emit_violation(uint64_t scope, int kind, int err);
/* In a fork child: the scopes t owns take its new tid, and lose the locks
 * and pins that threads left behind in the parent held on them.  Returns
 * the scope of the task t was running, when t forked inside a task of a
 * scope another thread owns (NULL otherwise); its lock is made anew too. */
scope_t *sc_scopes_after_fork(struct sc_thread *t);
/* That scope, in the fork child, until the task its thread ran there ends
 * (observe.c). */
extern _Atomic(scope_t *) sc_inherited;
/* The id the next forked task will get. */
uint64_t sc_task_next_id(void);

/* Calls fn for every task of s a walk should see: those with a handle (in
 * fork order), then the handle-less ones still live.  s->lock held. */
void sc_scope_tasks_each(scope_t *s, void (*fn)(void *ctx, scope_t *s, scope_task_t *task),
			 void *ctx);

/* True when the calling context owns s: its thread, and the task that
 * thread ran when it opened s (a subtask run inline is not the owner). */
bool sc_owns(const scope_t *s);

/* cancel.c */
void sc_cancel(scope_t *s, int reason);
/* 0, or -ECANCELED when s (or an ancestor) is cancelled or past its
 * deadline; a passed deadline cancels its scope (reason TIMEOUT). */
int sc_check(scope_t *s);

/* SCOPE_HANDLERS with s's handler counts (s->lock held), through emit
 * (NULL: sc_emit) as a snapshot's repeat when snapshot is 1. */
void sc_emit_handlers(const scope_t *s, int snapshot, void (*emit)(void *, const struct sc_ev *),
		      void *ctx);

/* One runtime wait: until done(arg), the deadline, or cancellation of ctx. */
struct sc_wait {
	scope_t *ctx;		 /* cancellation context; NULL: not cancellable */
	bool (*done)(void *arg); /* NULL: never */
	void *arg;
	int64_t deadline; /* absolute; 0: none */
	bool spin;	  /* spin briefly before sleeping (short waits) */
	scope_t *help;	  /* run help's queued subtasks while waiting */
	bool lend;	  /* a pool worker parked here lends its place (join, close) */
};
/* Returns 0 (done), -ETIMEDOUT (deadline) or -ECANCELED (ctx). */
int sc_wait(const struct sc_wait *w);
void sc_interrupt_install(void);

/* deadline.c: the timer thread, shared by every scope, that cancels a
 * scope (TIMEOUT) when its own deadline passes.  add: s->deadline is set;
 * 0, -ENOMEM, or the error starting the thread.  remove: before s is
 * freed (owner; a no-op when s was never added); after it returns the
 * timer never touches s. */
int sc_deadline_add(scope_t *s);
void sc_deadline_remove(scope_t *s);

/* pool.c */
scope_pool_t *sc_pool_resolve(scope_pool_t *p);
int sc_pool_submit(scope_pool_t *p, scope_task_t *task);
/* Runs the oldest queued task of scope s (its own list: O(1)); false when
 * there is none.  An all-successful or await-all joiner does this rather
 * than wait: it saves the hand-off, and the task runs as itself. */
bool sc_pool_help(scope_pool_t *p, scope_t *s);
/* The calling thread t, a worker of t->pool, parks in a wait (on) or is
 * back (off): while parked its place is lent, and the pool starts or wakes
 * another worker when work is queued (compensation). */
void sc_pool_lend(struct sc_thread *t, bool on);
/* The pool lends a parked worker's place on every runtime wait (sleeps,
 * fd waits), not only on joins and closes. */
bool sc_pool_lends_all(const scope_pool_t *p);
/* Worker t is exiting without returning to its pool (pthread_exit in a
 * task): the pool forgets it and starts another if work waits. */
void sc_pool_worker_gone(struct sc_thread *t);
/* The calling thread t is leaving: it gives back its deque slot (what is
 * still queued there moves to its pool's inject queue). */
void sc_pool_dq_release(struct sc_thread *t);
/* The calling thread t, a worker, after its pool's shutdown_now: cancels
 * the scopes of the pool's subtasks it runs (reason SHUTDOWN).  Called by
 * the runtime's waits and scope_cancelled, where a subtask notices. */
void sc_pool_stop_check(struct sc_thread *t);
static inline void sc_pool_stop_due(struct sc_thread *t)
{
	if (t && __builtin_expect(t->worker != NULL, 0))
		sc_pool_stop_check(t);
}
/* Removes the scope's queued tasks from the pool; they end cancelled. */
void sc_pool_reclaim(scope_pool_t *p, scope_t *s);
void sc_pool_user(scope_pool_t *p, int delta);
void sc_pools_walk(void (*fn)(void *ctx, scope_pool_t *p), void *ctx);
void sc_pool_snapshot(scope_pool_t *p, void (*emit)(void *, const struct sc_ev *), void *ctx);
void sc_pool_info(scope_pool_t *p, struct sc_pool_info *out);
uint64_t sc_pool_id(const scope_pool_t *p);
/* Counts a task run by the pool as done, before its scope learns it. */
void sc_pool_task_done(scope_pool_t *p, bool active);
const struct scope_pool_hooks *sc_pool_hooks(const scope_pool_t *p);

/* values.c */
void sc_values_snapshot(const scope_t *s, void (*emit)(void *, const struct sc_ev *), void *ctx);

/* observe.c */
void sc_ev_init(struct sc_ev *ev, int kind);

/* The time to keep for an event that a snapshot repeats (scope open, task
 * fork and start), so that a daemon that comes late, or restarts, is told
 * the original one; 0 when no agent runs (sc_keep_times: nothing will ever
 * ask).  Unobserved it comes from the coarse clock (a tick's precision for
 * a tenth of the cost); observed, from scope_now(), which the observer
 * would read anyway. */
static inline int64_t sc_event_time(void)
{
	struct timespec ts;
	if (sc_observed())
		return scope_now();
	if (!atomic_load_explicit(&sc_keep_times, memory_order_relaxed) ||
	    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif /* SC_RT_H */
