/* event.h - the runtime's single event point, and the registry walk the agent
 * uses for snapshots.  Internal to libscope (hidden visibility).
 *
 * Every lifecycle transition of the runtime is described by one struct sc_ev
 * and passed to sc_emit().  When nothing observes, sc_emit() costs one
 * predictable branch on a relaxed atomic load.  The reporting agent
 * (runtime/agent/) installs itself with sc_observer_set().
 *
 * Contract between the runtime (producer) and the agent (consumer):
 *  - sc_emit() is called on the thread that caused the event, synchronously,
 *    with no runtime lock held that another application thread could want
 *    for long (the observer must not call back into the runtime).
 *  - Strings in sc_ev are borrowed for the duration of the call only: the
 *    observer copies what it keeps.  Site strings (file, func) come from
 *    __FILE__/__func__ and are valid forever.
 *  - ts is scope_now() at the event, or 0 when the runtime leaves the stamp
 *    to the observer: it then reads scope_now() itself during the call (same
 *    thread, still before the event is published), and only for the events
 *    it keeps, so dropping or ignoring one costs no clock read.  tid is the
 *    emitting thread's kernel tid.
 *  - Ids (scope, task, pool) are 64-bit, nonzero, never reused in a process.
 *  - The registry changes before the event is emitted (linked before
 *    THREAD_START/SCOPE_OPEN/TASK_FORK, unlinked or marked ended before
 *    THREAD_EXIT/SCOPE_CLOSE/TASK_END/POOL_DESTROY): a snapshot walk racing
 *    with an event then sees the new state, so the agent's repair (discard
 *    the buffered events, walk, resume) leaves no ghosts.
 */
#ifndef SC_EVENT_H
#define SC_EVENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "proto.h"

#define SC_HIDDEN __attribute__((visibility("hidden")))

/* Event kinds: the wire's EVENT messages (proto/wire.h), same numbers, so
 * the agent maps them one to one: SC_EV_TASK_FORK = PROTO_EV_TASK_FORK.
 * Which member of struct sc_ev each field comes from is the source column
 * of the message's PROTO_FIELDS_* list there (a..d, i, u, s1, s2, site,
 * pool); tid is the emitting thread (the owner for SCOPE_OPEN, the forker
 * for TASK_FORK, the worker for TASK_START).  PROCESS_EXIT is the agent's
 * own. */
#define SC_EV_KIND_SESSION(NAME)
#define SC_EV_KIND_MARK(NAME)
#define SC_EV_KIND_STACK(NAME)
#define SC_EV_KIND_DERIVED(NAME)
#define SC_EV_KIND_EVENT(NAME) SC_##NAME = PROTO_##NAME,
#define SC_EV_KIND(NAME, name, number, class, array) SC_EV_KIND_##class(NAME)
enum sc_ev_kind { PROTO_MESSAGES(SC_EV_KIND) };

/* The wire's values under the runtime's names (proto/wire.h lists them):
 * SC_ROLE_WORKER = PROTO_ROLE_WORKER, SC_TASK_FAILED = PROTO_TASK_FAILED... */
#define SC_E_ROLE(N, v, s) SC_ROLE_##N = PROTO_ROLE_##N,
#define SC_E_CANCEL(N, v, s) SC_CANCEL_##N = PROTO_CANCEL_##N,
#define SC_E_TASK(N, v, s) SC_TASK_##N = PROTO_TASK_##N,
#define SC_E_VIOL(N, v, s) SC_VIOL_##N = PROTO_VIOL_##N,
#define SC_E_WARN(N, v, s) SC_WARN_##N = PROTO_WARN_##N,
enum sc_thread_role { PROTO_ROLES(SC_E_ROLE) };
enum sc_cancel_reason { PROTO_CANCEL_REASONS(SC_E_CANCEL) };
/* Task states as the observer sees them (finer than scope_task_state_t). */
enum sc_task_state { PROTO_TASK_STATES(SC_E_TASK) };
enum sc_violation { PROTO_VIOLATIONS(SC_E_VIOL) };
enum sc_warning { PROTO_WARNINGS(SC_E_WARN) };

struct sc_site {
	const char *file;
	const char *func;
	int line;
};

struct sc_pool_info {
	uint32_t core, max, size, active, largest;
	uint32_t queue_kind, policy;
	uint64_t queue_capacity, queued, completed, rejected;
	int64_t keep_alive_ns;
};

struct sc_ev {
	uint16_t kind;	   /* enum sc_ev_kind */
	uint16_t snapshot; /* 1 when synthesized by sc_registry_snapshot() */
	uint32_t tid;	   /* emitting thread (owner for scope events) */
	int64_t ts;	   /* scope_now(), or 0: the observer stamps it */
	uint64_t a, b, c, d;
	int64_t i;
	uint32_t u;
	const char *s1, *s2;
	struct sc_site site;
	const struct sc_pool_info *pool;
};

typedef void (*sc_observer_fn)(const struct sc_ev *ev);

/* The installed observer (NULL: none). */
extern _Atomic(sc_observer_fn) sc_observer SC_HIDDEN;

static inline void sc_emit(const struct sc_ev *ev)
{
	/* The state the event tells of is stored before the observer is
	 * read: see sc_observed. */
	atomic_signal_fence(memory_order_seq_cst);
	sc_observer_fn fn = atomic_load_explicit(&sc_observer, memory_order_relaxed);
	if (__builtin_expect(fn != 0, 0))
		fn(ev);
}

/* Whether anything observes (to skip building an event at all).  Callers
 * store the state the event tells of (a task forked, started, ended; a
 * scope linked) before they ask; the compiler barrier keeps that order in
 * the code, and the agent's process-wide barrier (membarrier, when it
 * installs the observer and before its snapshot reads those states) stands
 * for the CPU's: either this load sees the observer, or the snapshot sees
 * the state.  A fence here would cost every fork. */
static inline int sc_observed(void)
{
	atomic_signal_fence(memory_order_seq_cst);
	return atomic_load_explicit(&sc_observer, memory_order_relaxed) != 0;
}

/* The kernel tid of the calling thread (cached). */
SC_HIDDEN uint32_t sc_gettid(void);

/* Emits a WARNING: subject is past limit by amount (enum sc_warning says
 * what each is; SC_WARN_POOL_OVER_MAX: a pool, its threads now, its
 * maximum size).  Costs the one branch when nothing observes. */
static inline void sc_emit_warning(uint32_t kind, uint64_t subject, int64_t amount, uint64_t limit)
{
	if (!sc_observed())
		return;
	struct sc_ev ev = {.kind = SC_EV_WARNING,
			   .tid = sc_gettid(),
			   .a = subject,
			   .b = limit,
			   .i = amount,
			   .u = kind};
	sc_emit(&ev);
}

/* Installs (or with NULL removes) the observer. */
SC_HIDDEN void sc_observer_set(sc_observer_fn fn);

/* Set by the agent while it runs, connected or not: the runtime then keeps
 * the times of what a snapshot repeats, also while nothing observes. */
extern _Atomic int sc_keep_times SC_HIDDEN;

/* A VIOLATION emitted while nothing observes: the agent keeps the last few
 * for its next session (runtime/agent/agent.c), since no snapshot can find them. */
SC_HIDDEN void sc_keep_violation(const struct sc_ev *ev);

/* Walks the runtime's live state and calls emit once per synthesized event
 * (ev->snapshot = 1), parents before children:
 *   every live thread (THREAD_START), every pool (POOL_CREATE), every open
 *   scope (SCOPE_OPEN, then VALUE_BIND per binding, then JOIN_BEGIN if its
 *   owner is joining, SCOPE_CANCEL if cancelled), every live task of it
 *   (TASK_FORK, then TASK_START if running).
 * Only what exists in this process is listed: a scope whose owner, or a
 * running task whose worker, is not a registered thread is left out (with
 * what is below it), and so is a queued task forked before the fork() that
 * made this process (a fork child inherits the parent's memory, not its
 * threads or pool queues).
 * Takes per-object locks briefly; safe to call from the agent thread while
 * the application runs.  Events that race with the walk may appear both in
 * the walk and in the live stream: the consumer applies them idempotently. */
SC_HIDDEN void sc_registry_snapshot(void (*emit)(void *ctx, const struct sc_ev *ev), void *ctx);

/* Marks the calling thread as the agent's: role AGENT (reported with that
 * role in THREAD_START and in snapshots, never interrupted by cancellation),
 * registering it first if the runtime does not know it yet. */
SC_HIDDEN void sc_thread_mark_agent(void);
/* Whether the calling thread is the agent's. */
SC_HIDDEN bool sc_thread_is_agent(void);

/* The agent thread leaves the registry before it ends (registry first, then
 * THREAD_EXIT), so that it can still send that event itself. */
SC_HIDDEN void sc_thread_agent_exit(void);

/* Called once by the runtime when the library is first used (constructor):
 * starts the agent unless SCOPED_DISABLE=1.  Defined by the agent. */
SC_HIDDEN void sc_agent_init(void);

/* Gives the calling thread an alternate signal stack, so that the agent's
 * crash report survives a stack overflow: only once the agent has turned
 * them on, and never over one the thread already has.  sc_thread_register
 * calls it.  Defined by the agent (agent_altstack.c). */
SC_HIDDEN void sc_altstack_thread_start(void);
/* Alternate stacks were just turned on: every thread registered before
 * gets one at its next runtime call (sc_self(), sc_self_peek(), or a pool
 * worker's next task), since only a thread itself can install one.
 * Defined by the runtime (thread.c); sc_altstack_enable calls it. */
SC_HIDDEN void sc_threads_want_altstack(void);
/* Frees the stack sc_altstack_thread_start gave the calling thread (a stack
 * the application installed is left alone); sc_thread_unregister calls it. */
SC_HIDDEN void sc_altstack_thread_end(void);

/* Signals used by the runtime (documented in docs/api.md):
 *  SC_SIG_INTERRUPT wakes a worker blocked in a system call outside the
 *  runtime when its scope is cancelled (handler does nothing; installed
 *  without SA_RESTART).  SC_SIG_STACK is the agent's stack-capture signal. */
#define SC_SIG_INTERRUPT (SIGRTMIN + 2)
#define SC_SIG_STACK (SIGRTMIN + 3)

#endif /* SC_EVENT_H */
