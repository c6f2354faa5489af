/* pool_int.h - a pool's insides, shared by its life cycle (pool.c) and
 * the work it does (pool_work.c).  docs/scheduler.md tells the design. */
#ifndef SC_POOL_INT_H
#define SC_POOL_INT_H

#include "rt.h"

/* A list of queued tasks, linked through their qnext/qprev (pool lock). */
struct sc_tq {
	scope_task_t *head, *tail;
};

/* A work-stealing deque (Chase and Lev's, with the C11 orderings of Le et
 * al.): its owner pushes and pops at the bottom without a lock, thieves
 * take from the top with a compare-and-swap.  Each thread that forks into
 * an unbounded pool (its workers, and other threads on their first fork)
 * holds one slot of the pool's array; a thread with no slot, a full ring,
 * or a pool with a bounded queue takes the locked path (the inject queue).
 * docs/scheduler.md tells why. */
#define SC_DQ_CAP 4096u /* tasks per deque ring (a power of two) */
#define SC_DQ_SLOTS 64u /* deques per pool */

struct sc_dq {
	_Alignas(64) _Atomic int64_t top; /* thieves */
	char pad0[64 - sizeof(int64_t)];
	_Atomic int64_t bottom; /* owner */
	/* Forks ever pushed here, owner-written: an idle spinner sees forks
	 * coming even when their owner pops them itself. */
	_Atomic uint64_t pushes;
	/* Statistics, owner-written, summed by the pool's info. */
	_Atomic uint64_t completed;
	_Atomic int busy; /* a worker running a task it took as a worker */
	char pad1[64 - 2 * sizeof(int64_t) - sizeof(uint64_t) - sizeof(int)];
	struct sc_thread *_Atomic owner; /* NULL: free slot */
	_Atomic bool worker;		 /* the owner is a worker of the pool: stolen from first */
	/* A deque holds only tasks forked under the task its owner took from
	 * elsewhere while the deque was empty (a worker's idle take, a joiner's
	 * steal): that task's scope, while it runs, lets a joiner of that
	 * scope take them (pool_work.c).  base_gen counts its changes, so a
	 * thief sees whether the base stayed the same across its take. */
	_Atomic(scope_t *) base_scope;
	_Atomic uint64_t base_gen;
	_Atomic(scope_task_t *) *ring; /* SC_DQ_CAP entries, made on first claim */
};

struct worker {
	struct worker *next;	  /* all workers of the pool */
	struct worker *idle_next; /* idle stack */
	scope_pool_t *pool;
	struct sc_thread *t;
	scope_task_t *first;
	/* Tasks this worker forked: it takes the newest itself, an idle
	 * worker steals the oldest (pool lock). */
	struct sc_tq deque;
	pthread_t th;
	unsigned n;
	/* Steal pacing (pool_work.c, steal_pace): when it stole the work it
	 * runs (0: none since it last looked) and what steals take;
	 * its wait before the next steal (ns). */
	int64_t stole_at, steal_ticks, pace;
	unsigned nlooks;      /* its looks to steal, some of them timed */
	struct sc_dq *victim; /* of its last steal, and its owner's end then */
	int64_t victim_bottom;
	bool claimed;  /* woken for work while idle */
	bool exited;   /* no longer touches the pool */
	bool detached; /* left without a record and detached itself: not joined */
};

/* A forker waiting for room under the BLOCK policy. */
struct blocked {
	struct blocked *next;
	struct sc_thread *t;
};

struct scope_pool {
	uint64_t id;
	char name[SC_NAME_MAX];
	struct scope_pool_config cfg;
	pthread_mutex_t lock;
	pthread_cond_t gone;
	struct sc_tq inject;   /* forks from threads that are not this pool's workers */
	_Atomic size_t queued; /* inject + every deque; written under lock, polled by spinners */
	size_t ndeque;	       /* of which in workers' deques */
	struct worker *workers, *idle;
	struct blocked *blocked;
	unsigned size, largest, live, next_n;
	/* Workers parked in a join, a close or a BLOCK fork (and, in a pool
	 * that lends on every wait, a sleep or fd wait): their places are
	 * lent, so size - lent is what counts against core and max. */
	unsigned lent;
	bool lend_all;		 /* sleeps and fd waits lend too (the default pool) */
	uint64_t compensations;	 /* threads started because workers were parked */
	uint32_t gen;		 /* bumped in a fork child: older queue links are void */
	_Atomic unsigned active; /* atomics: a task's end takes no pool lock */
	_Atomic uint64_t completed;
	uint64_t rejected;
	bool shutdown, terminated;
	_Atomic int users;
	unsigned spinners;	  /* idle workers spinning on the queue (0 or 1) */
	_Atomic uint64_t submits; /* tasks ever queued: a spinner sees forks coming */
	int64_t spin_failed_at;	  /* when a spin last found no work */
	_Atomic int64_t last_stats;
	scope_pool_t *next, *prev; /* global list */

	/* The lock-free path (unbounded queues only): fast says the pool
	 * takes it; fast_ok, recomputed at every unlock of the pool's lock,
	 * that enough workers are up that a push needs no placement. */
	bool fast;
	_Atomic bool fast_ok;
	_Atomic bool down;	   /* shutdown, for lock-free readers */
	_Atomic bool stop_now;	   /* shutdown_now: running subtasks are cancelled (pool_admin.c) */
	_Atomic bool over;	   /* more workers than max: the next to look leaves */
	_Atomic unsigned nidle;	   /* workers on the idle list */
	_Atomic unsigned spinning; /* mirrors spinners for lock-free readers */
	_Atomic unsigned nslots;   /* slots ever claimed (high-water mark) */
	struct sc_dq *slots;	   /* SC_DQ_SLOTS of them */

	/* A priority pool (cfg.priority_queue; pool_prio.c): every fork takes
	 * the locked path, and its queue is a binary heap of tasks, highest
	 * priority first, fork order among equals (pseq).  The inject queue
	 * holds only what the heap had no memory for. */
	bool prio;
	struct sc_theap heap;
	uint64_t pseq;

	/* scope_pool_set_resource_limit (pool lock); limit 0: none. */
	char resource[SC_NAME_MAX];
	unsigned resource_limit;
};

/* Steal pacing (pool_work.c, steal_pace): a worker's wait before its next
 * steal, from its wait before the last one, whether the work that steal
 * brought was brief, and whether the victim's owner worked at its end of
 * the deque meanwhile (pushed or popped).  Brief work makes it wait
 * STEAL_PACE_MIN_NS, twice as long each time while the owner is busy
 * there, up to STEAL_PACE_MAX_NS; other work, no wait. */
#define STEAL_PACE_MIN_NS 1000
#define STEAL_PACE_MAX_NS 32000
static inline int64_t sc_steal_pace_next(int64_t pace, bool brief, bool owner_busy)
{
	if (!brief)
		return 0;
	if (!pace || !owner_busy)
		return STEAL_PACE_MIN_NS;
	return pace < STEAL_PACE_MAX_NS / 2 ? pace * 2 : STEAL_PACE_MAX_NS;
}

/* pool_work.c: the deques */
/* Unlocks p->lock after refreshing what lock-free readers see. */
void sc_pool_unlock(scope_pool_t *p);
/* Any task queued anywhere in p (inject queue or a deque). */
bool sc_pool_any_work(scope_pool_t *p);
/* Queued tasks in p's deques (approximate while they move). */
size_t sc_pool_dq_count(scope_pool_t *p);
/* Sums the deques' statistics into *active and *completed. */
void sc_pool_dq_stats(scope_pool_t *p, unsigned *active, uint64_t *completed);
/* Gives back t's slot in p (t is the calling thread): what is still
 * queued there moves to the inject queue, or, with only_empty, nothing is
 * given back while tasks are there (returns false).  Caller holds p->lock. */
bool sc_pool_dq_drop_locked(scope_pool_t *p, struct sc_thread *t, bool only_empty);
/* pool.c: the same, finding t's pool by id (it may be gone); true when t
 * holds no slot afterwards. */
bool sc_pool_dq_give_back(struct sc_thread *t, bool only_empty);
/* Starts the monitor of p (the default pool) unless one runs: it adds a
 * worker when every worker is blocked outside the runtime with work queued. */
void sc_pool_monitor_start(scope_pool_t *p);
/* In a fork child: the default pool's monitor is not running. */
void sc_pool_monitor_after_fork(void);
/* In a fork child: every slot is free and empty. */
void sc_pool_dq_after_fork(scope_pool_t *p);

/* pool.c */
/* POOL_STATS on size changes (force) and at most ~10 per second otherwise. */
void sc_pool_stats_event(scope_pool_t *p, bool force);
/* pool_admin.c: POOL_LIMIT of p into a snapshot, when it has a limit. */
void sc_pool_limit_snapshot(scope_pool_t *p, void (*emit)(void *, const struct sc_ev *), void *ctx);

/* pool_work.c; the caller holds p->lock for the _locked ones. */
/* Starts a worker whose first task is first (may be NULL); p->size already
 * counts it. */
int sc_pool_spawn_locked(scope_pool_t *p, scope_task_t *first);
/* Joins workers that exited on their own, so their threads do not linger. */
void sc_pool_reap_locked(scope_pool_t *p);
/* Wakes one idle worker (to take work or to re-check the pool's bounds). */
void sc_pool_wake_idle_locked(scope_pool_t *p);
/* Takes every queued task off the pool (shutdown_now): *out chains them
 * through qnext; returns how many.  The caller ends them. */
size_t sc_pool_drain_locked(scope_pool_t *p, scope_task_t **out);

/* pool_prio.c: a priority pool's queue; the caller holds p->lock. */
#define SC_PRIO_NONE ((size_t)-1)
/* Puts task in p's heap and its scope's; a heap that had no memory to
 * grow leaves it out (its slot SC_PRIO_NONE): the inject queue and the
 * scope's list still hold it. */
void sc_prio_push_locked(scope_pool_t *p, scope_task_t *task);
/* Takes task out of the heaps it is in. */
void sc_prio_remove_locked(scope_pool_t *p, scope_task_t *task);
/* The queued task that runs next (in p, or of scope s), or NULL. */
static inline scope_task_t *sc_prio_top(const struct sc_theap *h)
{
	return h->n ? h->v[0] : NULL;
}
/* DISCARD_OLDEST's victim when task cannot be queued: the queued task that
 * would run last (lowest priority, the oldest of those), or task itself
 * when it ranks below every queued one. */
scope_task_t *sc_prio_victim_locked(scope_pool_t *p, scope_task_t *task);

#endif /* SC_POOL_INT_H */
