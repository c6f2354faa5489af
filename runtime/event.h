/* event.h - the runtime's single event point, and the registry walk the agent
 * uses for snapshots.  Internal to libscope (hidden visibility).
 *
 * Every lifecycle transition of the runtime is described by one struct sc_ev
 * and passed to sc_emit().  When nothing observes, sc_emit() costs one
 * predictable branch on a relaxed atomic load.  The reporting agent
 * (runtime/agent*.c) installs itself with sc_observer_set().
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
#include <stdint.h>

#define SC_HIDDEN __attribute__((visibility("hidden")))

/* Event kinds.  Same numbers as the wire message types (proto/proto.h,
 * PROTO_EV_*), so the agent maps them one to one. */
enum sc_ev_kind {
	SC_EV_THREAD_START = 0x100, /* tid; s1 = name; a = pool id or 0; i = role */
	SC_EV_THREAD_EXIT = 0x101,  /* tid */
	SC_EV_THREAD_NAME = 0x102,  /* tid; s1 = new name */
	SC_EV_PROCESS_EXIT = 0x103, /* u = 1 exit / 2 signal; i = status or signal (agent only) */

	SC_EV_SCOPE_OPEN = 0x110,   /* a = scope; b = parent scope or 0; c = parent task or 0;
				     * tid = owner; s1 = name; i = deadline (0 none);
				     * u = joiner kind; site = open site; d = pool id */
	SC_EV_JOIN_BEGIN = 0x111,   /* a = scope */
	SC_EV_JOIN_END = 0x112,     /* a = scope; i = join's return value */
	SC_EV_SCOPE_CANCEL = 0x113, /* a = scope; u = enum sc_cancel_reason */
	SC_EV_SCOPE_CLOSE = 0x114,  /* a = scope; i = close's return value */

	SC_EV_TASK_FORK = 0x120,    /* a = task; b = scope; site = fork site; tid = forker;
				     * u = initial state (enum sc_task_state);
				     * d = the body's address (scope_fork's fn) */
	SC_EV_TASK_START = 0x121,   /* a = task; b = scope; tid = worker */
	SC_EV_TASK_END = 0x122,     /* a = task; b = scope; u = enum sc_task_state; i = error */

	SC_EV_VIOLATION = 0x130,    /* a = scope (or 0); u = enum sc_violation; i = error */
	SC_EV_VALUE_BIND = 0x131,   /* a = scope; s1 = key; s2 = value */

	SC_EV_POOL_CREATE = 0x140,  /* a = pool; s1 = name; pool = config and stats */
	SC_EV_POOL_STATS = 0x141,   /* a = pool; pool = stats */
	SC_EV_POOL_DESTROY = 0x142, /* a = pool */
};

enum sc_thread_role { SC_ROLE_OTHER = 0, SC_ROLE_MAIN = 1, SC_ROLE_WORKER = 2, SC_ROLE_AGENT = 3 };

enum sc_cancel_reason {
	SC_CANCEL_JOINER = 1,   /* the joiner decided (failure, winner, predicate) */
	SC_CANCEL_TIMEOUT = 2,  /* the deadline passed */
	SC_CANCEL_EXPLICIT = 3, /* scope_cancel() */
	SC_CANCEL_PARENT = 4,   /* an ancestor was cancelled */
	SC_CANCEL_VIOLATION = 5,/* closed because of a structure violation */
	SC_CANCEL_CLOSE = 6,    /* closed with subtasks still running */
};

/* Task states as the observer sees them (finer than scope_task_state_t). */
enum sc_task_state {
	SC_TASK_FORKED = 0,      /* queued, not started */
	SC_TASK_RUNNING = 1,
	SC_TASK_SUCCESS = 2,
	SC_TASK_FAILED = 3,
	SC_TASK_CANCELLED = 4,   /* ended because its scope was cancelled */
	SC_TASK_UNAVAILABLE = 5, /* never started (fork into a cancelled scope, discarded) */
};

enum sc_violation {
	SC_VIOL_NOT_OWNER = 1,     /* fork/join/close from a thread that is not the owner */
	SC_VIOL_DOUBLE_JOIN = 2,
	SC_VIOL_FORK_AFTER_JOIN = 3,
	SC_VIOL_INNER_OPEN = 4,    /* closing a scope while an inner one is open */
	SC_VIOL_THREAD_EXIT = 5,   /* thread exited with scopes open */
	SC_VIOL_NO_JOIN = 6,       /* closed with forks but without a join */
};

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
	uint16_t kind;     /* enum sc_ev_kind */
	uint16_t snapshot; /* 1 when synthesized by sc_registry_snapshot() */
	uint32_t tid;      /* emitting thread (owner for scope events) */
	int64_t ts;        /* scope_now(), or 0: the observer stamps it */
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
	sc_observer_fn fn = atomic_load_explicit(&sc_observer, memory_order_relaxed);
	if (__builtin_expect(fn != 0, 0))
		fn(ev);
}

/* Whether anything observes (to skip building an event at all). */
static inline int sc_observed(void)
{
	return atomic_load_explicit(&sc_observer, memory_order_relaxed) != 0;
}

/* Installs (or with NULL removes) the observer. */
SC_HIDDEN void sc_observer_set(sc_observer_fn fn);

/* Set by the agent while it runs, connected or not: the runtime then keeps
 * the times of what a snapshot repeats, also while nothing observes. */
extern _Atomic int sc_keep_times SC_HIDDEN;

/* A VIOLATION emitted while nothing observes: the agent keeps the last few
 * for its next session (runtime/agent.c), since no snapshot can find them. */
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

/* The kernel tid of the calling thread (cached). */
SC_HIDDEN uint32_t sc_gettid(void);

/* Marks the calling thread as the agent's: role AGENT (reported with that
 * role in THREAD_START and in snapshots, never interrupted by cancellation),
 * registering it first if the runtime does not know it yet. */
SC_HIDDEN void sc_thread_mark_agent(void);

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
