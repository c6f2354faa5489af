/* pool_int.h - a pool's insides, shared by its life cycle (pool.c) and
 * the work it does (pool_work.c).  docs/scheduler.md tells the design. */
#ifndef SC_POOL_INT_H
#define SC_POOL_INT_H

#include "rt.h"

/* A list of queued tasks, linked through their qnext/qprev (pool lock). */
struct sc_tq {
	scope_task_t *head, *tail;
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
	bool lend_all; /* sleeps and fd waits lend too (the default pool) */
	uint64_t compensations; /* threads started because workers were parked */
	uint32_t gen;		/* bumped in a fork child: older queue links are void */
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
};

/* pool.c */
/* POOL_STATS on size changes (force) and at most ~10 per second otherwise. */
void sc_pool_stats_event(scope_pool_t *p, bool force);

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

#endif /* SC_POOL_INT_H */
