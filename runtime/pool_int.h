/* pool_int.h - a pool's insides, shared by its life cycle (pool.c) and
 * the work it does (pool_work.c). */
#ifndef SC_POOL_INT_H
#define SC_POOL_INT_H

#include "rt.h"

struct worker {
	struct worker *next;	  /* all workers of the pool */
	struct worker *idle_next; /* idle stack */
	scope_pool_t *pool;
	struct sc_thread *t;
	scope_task_t *first;
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
	scope_task_t *qhead, *qtail;
	_Atomic size_t queued; /* written under lock; a spinning worker polls it */
	struct worker *workers, *idle;
	struct blocked *blocked;
	unsigned size, largest, live, next_n;
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

#endif /* SC_POOL_INT_H */
