/* pool_work.c - what a pool does: placing forks (threads, queue, saturation
 * policies), its workers' lives, and joiners running their own queued
 * subtasks. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pool_int.h"

#define SPIN_IDLE_NS 20000	  /* an idle worker's wait for the next fork */
#define SPIN_BACKOFF_NS 200000	  /* no spinning for this long after a spin found nothing */
#define POOL_HARD_MAX 32768	  /* threads, compensation included */
#define STEAL_GRACE_NS 1500	  /* a spinner leaves a fresh fork to its joiner this long */
#define STEAL_SHORT_X 2		  /* stolen work under this many steals' time: paced */
#define STEAL_PACE_SLEEP_NS 16000 /* waits this long or longer sleep rather than spin */
#define STEAL_TIMED_EVERY 4u	  /* steals a worker times when it does not pace */
#define SPIN_POLL_PAUSES 64	  /* pause instructions between a spinner's looks (~1.4 us here) */
#define SPIN_POLLS_PER_CHECK 16	  /* looks between its checks for new forks and yields */
#define MONITOR_TICK_NS 10000000  /* the monitor's look at the default pool */
#define MONITOR_STALL_TICKS 2	  /* looks without progress before it adds a thread */

static void *worker_main(void *arg);

/* ---- Work-stealing deques (see pool_int.h) ---- */

#define DQ_MASK ((int64_t)SC_DQ_CAP - 1)

/* Owner: false when the ring is full (the caller takes the locked path). */
static bool dq_push(struct sc_dq *d, scope_task_t *task)
{
	int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
	int64_t t = atomic_load_explicit(&d->top, memory_order_acquire);

	if (b - t >= (int64_t)SC_DQ_CAP)
		return false;
	atomic_store_explicit(&d->ring[b & DQ_MASK], task, memory_order_relaxed);
	atomic_store_explicit(&d->pushes,
			      atomic_load_explicit(&d->pushes, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	/* Sequentially consistent: publishes the task to thieves, and orders
	 * the push before the pusher's look at idle workers (a worker going
	 * idle says so before it looks at the deques once more). */
	atomic_store_explicit(&d->bottom, b + 1, memory_order_seq_cst);
	return true;
}

/* Owner: the newest task, or NULL. */
static scope_task_t *dq_pop(struct sc_dq *d)
{
	int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
	int64_t t = atomic_load_explicit(&d->top, memory_order_relaxed);
	scope_task_t *x = NULL;

	/* top only grows: an empty look is the truth, and skips the fence. */
	if (t >= b)
		return NULL;
	b--;
	atomic_store_explicit(&d->bottom, b, memory_order_seq_cst);
	t = atomic_load_explicit(&d->top, memory_order_seq_cst);
	if (t <= b) {
		x = atomic_load_explicit(&d->ring[b & DQ_MASK], memory_order_relaxed);
		if (t == b) {
			/* The last one: a thief may want it too. */
			if (!atomic_compare_exchange_strong_explicit(
				&d->top, &t, t + 1, memory_order_seq_cst, memory_order_relaxed))
				x = NULL;
			atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
		}
	} else {
		atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
	}
	return x;
}

/* Thief: the oldest task, or NULL (empty, or lost a race: *lost); *bottom
 * is what it saw of the owner's end. */
static scope_task_t *dq_steal_at(struct sc_dq *d, bool *lost, int64_t *bottom)
{
	int64_t t = atomic_load_explicit(&d->top, memory_order_seq_cst);
	int64_t b = atomic_load_explicit(&d->bottom, memory_order_seq_cst);
	scope_task_t *x;

	*bottom = b;
	if (t >= b)
		return NULL;
	x = atomic_load_explicit(&d->ring[t & DQ_MASK], memory_order_relaxed);
	if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1, memory_order_seq_cst,
						     memory_order_relaxed)) {
		*lost = true;
		return NULL;
	}
	return x;
}

static scope_task_t *dq_steal(struct sc_dq *d, bool *lost)
{
	int64_t b;

	return dq_steal_at(d, lost, &b);
}

static bool dq_nonempty(struct sc_dq *d)
{
	return atomic_load_explicit(&d->top, memory_order_seq_cst) <
	       atomic_load_explicit(&d->bottom, memory_order_seq_cst);
}

static unsigned nslots(scope_pool_t *p)
{
	return atomic_load_explicit(&p->nslots, memory_order_acquire);
}

static bool dq_any(scope_pool_t *p)
{
	unsigned n = nslots(p);

	for (unsigned i = 0; i < n; i++)
		if (dq_nonempty(&p->slots[i]))
			return true;
	return false;
}

bool sc_pool_any_work(scope_pool_t *p)
{
	return atomic_load_explicit(&p->queued, memory_order_seq_cst) || (p->fast && dq_any(p));
}

size_t sc_pool_dq_count(scope_pool_t *p)
{
	unsigned n = p->fast ? nslots(p) : 0;
	size_t c = 0;

	for (unsigned i = 0; i < n; i++) {
		int64_t k = atomic_load(&p->slots[i].bottom) - atomic_load(&p->slots[i].top);
		if (k > 0)
			c += (size_t)k;
	}
	return c;
}

void sc_pool_dq_stats(scope_pool_t *p, unsigned *active, uint64_t *completed)
{
	unsigned n = p->fast ? nslots(p) : 0;

	for (unsigned i = 0; i < n; i++) {
		*active += (unsigned)atomic_load_explicit(&p->slots[i].busy, memory_order_relaxed);
		*completed += atomic_load_explicit(&p->slots[i].completed, memory_order_relaxed);
	}
}

/* The slot t holds in p, or NULL. */
static struct sc_dq *slot_of(const scope_pool_t *p, const struct sc_thread *t)
{
	if (t->dq && t->dq_pool == p->id && t->dq_gen == p->gen)
		return t->dq;
	return NULL;
}

/* A free slot of p for t (which holds none): NULL when all are taken. */
static struct sc_dq *slot_claim(scope_pool_t *p, struct sc_thread *t)
{
	for (unsigned i = 0; i < SC_DQ_SLOTS; i++) {
		struct sc_dq *d = &p->slots[i];
		struct sc_thread *none = NULL;

		if (atomic_load_explicit(&d->owner, memory_order_relaxed) ||
		    !atomic_compare_exchange_strong(&d->owner, &none, t))
			continue;
		if (!d->ring) {
			d->ring = calloc(SC_DQ_CAP, sizeof(*d->ring));
			if (!d->ring) {
				atomic_store(&d->owner, NULL);
				return NULL;
			}
		}
		atomic_store_explicit(&d->worker, t->worker && t->pool == p, memory_order_relaxed);
		unsigned n = nslots(p);
		while (n < i + 1 && !atomic_compare_exchange_weak(&p->nslots, &n, i + 1))
			;
		t->dq = d;
		t->dq_pool = p->id;
		t->dq_gen = p->gen;
		return d;
	}
	return NULL;
}

/* t's slot in p, claimed on first use; NULL: take the locked path (the
 * pool has none free, or t holds a slot elsewhere with tasks in it). */
static struct sc_dq *slot_get(scope_pool_t *p, struct sc_thread *t)
{
	struct sc_dq *d = slot_of(p, t);

	if (d || !p->fast)
		return d;
	/* Held in another pool (or a dead one): given back only when empty,
	 * so that forks alternating between pools do not move tasks back and
	 * forth. */
	if (t->dq && !sc_pool_dq_give_back(t, true))
		return NULL;
	return slot_claim(p, t);
}

static void enqueue_locked(scope_pool_t *p, scope_task_t *task, struct worker *home);
bool sc_pool_dq_drop_locked(scope_pool_t *p, struct sc_thread *t, bool only_empty)
{
	struct sc_dq *d = slot_of(p, t);
	scope_task_t *task;

	if (!d)
		return true;
	if (only_empty && dq_nonempty(d))
		return false;
	while ((task = dq_pop(d)) != NULL)
		enqueue_locked(p, task, NULL);
	p->completed += atomic_exchange(&d->completed, 0);
	atomic_store(&d->busy, 0);
	atomic_store(&d->owner, NULL);
	t->dq = NULL;
	return true;
}

void sc_pool_dq_after_fork(scope_pool_t *p)
{
	for (unsigned i = 0; p->slots && i < SC_DQ_SLOTS; i++) {
		struct sc_dq *d = &p->slots[i];
		atomic_store(&d->top, 0);
		atomic_store(&d->bottom, 0);
		atomic_store(&d->busy, 0);
		atomic_store(&d->owner, NULL);
	}
}

/* What lock-free readers decide by: pushes go to the deques only while
 * enough workers are up to take them without placement.  Sequentially
 * consistent, and refreshed before a worker that leaves or parks looks
 * for work, so that a pusher that read it true is seen by that look. */
static void fast_refresh(scope_pool_t *p)
{
	unsigned core = p->cfg.core_size ? p->cfg.core_size : 1;
	bool ok = p->fast && !p->shutdown && p->size - p->lent >= core;
	bool over = p->size - p->lent > p->cfg.max_size;

	if (atomic_load_explicit(&p->fast_ok, memory_order_relaxed) != ok)
		atomic_store(&p->fast_ok, ok);
	if (atomic_load_explicit(&p->over, memory_order_relaxed) != over)
		atomic_store(&p->over, over);
}

void sc_pool_unlock(scope_pool_t *p)
{
	fast_refresh(p);
	pthread_mutex_unlock(&p->lock);
}

/* Joins workers that exited on their own (keep-alive), so their threads do
 * not linger.  Caller holds p->lock. */
void sc_pool_reap_locked(scope_pool_t *p)
{
	for (struct worker **wp = &p->workers; *wp;) {
		struct worker *w = *wp;
		if (!w->exited) {
			wp = &w->next;
			continue;
		}
		*wp = w->next;
		if (!w->detached)
			pthread_join(w->th, NULL);
		free(w);
	}
}

/* Starts a worker whose first task is first (may be NULL).  Caller holds
 * p->lock and has counted the thread in p->size already. */
int sc_pool_spawn_locked(scope_pool_t *p, scope_task_t *first)
{
	struct worker *w = calloc(1, sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	sc_pool_reap_locked(p);
	w->pool = p;
	w->first = first;
	w->n = ++p->next_n;
	if (p->cfg.hooks.thread_factory)
		rc = p->cfg.hooks.thread_factory(p->cfg.hooks.ctx, &w->th, worker_main, w);
	else
		rc = -pthread_create(&w->th, NULL, worker_main, w);
	if (rc) {
		free(w);
		return rc < 0 ? rc : -rc;
	}
	w->next = p->workers;
	p->workers = w;
	p->live++;
	if (p->size > p->largest)
		p->largest = p->size;
	if (p->lend_all)
		sc_pool_monitor_start(p);
	return 0;
}

static void tq_append(struct sc_tq *q, scope_task_t *task)
{
	task->qnext = NULL;
	task->qprev = q->tail;
	if (q->tail)
		q->tail->qnext = task;
	else
		q->head = task;
	q->tail = task;
}

static void tq_remove(struct sc_tq *q, scope_task_t *task)
{
	if (task->qprev)
		task->qprev->qnext = task->qnext;
	else
		q->head = task->qnext;
	if (task->qnext)
		task->qnext->qprev = task->qprev;
	else
		q->tail = task->qprev;
}

/* The scope's list of queued tasks, emptied first when it holds links of
 * an earlier generation (a fork child dropped the parent's queue). */
static void scope_list_fresh(scope_pool_t *p, scope_t *s)
{
	if (s->qhead && s->qhead->gen != p->gen) {
		s->qhead = s->qtail = NULL;
		s->pq.n = 0;
	}
}

/* Queues task in home's deque (a worker of p forked it) or in the inject
 * queue, and in its scope's list.  Caller holds p->lock. */
static void enqueue_locked(scope_pool_t *p, scope_task_t *task, struct worker *home)
{
	scope_t *s = task->scope;

	if (p->prio)
		home = NULL; /* its heaps order every fork (pool_prio.c) */
	tq_append(home ? &home->deque : &p->inject, task);
	task->home = home;
	task->gen = p->gen;
	if (home)
		p->ndeque++;
	scope_list_fresh(p, s);
	task->snext = NULL;
	task->sprev = s->qtail;
	if (s->qtail)
		s->qtail->snext = task;
	else
		s->qhead = task;
	s->qtail = task;
	if (p->prio)
		sc_prio_push_locked(p, task);
	task->queued = true;
	atomic_store_explicit(&p->queued, p->queued + 1, memory_order_release);
	atomic_fetch_add_explicit(&p->submits, 1, memory_order_relaxed);
}

static void dequeue_locked(scope_pool_t *p, scope_task_t *task)
{
	struct worker *home = task->home;
	scope_t *s = task->scope;

	tq_remove(home ? &home->deque : &p->inject, task);
	if (p->prio)
		sc_prio_remove_locked(p, task);
	if (home)
		p->ndeque--;
	if (task->sprev)
		task->sprev->snext = task->snext;
	else
		s->qhead = task->snext;
	if (task->snext)
		task->snext->sprev = task->sprev;
	else
		s->qtail = task->sprev;
	task->queued = false;
	atomic_store_explicit(&p->queued, p->queued - 1, memory_order_relaxed);
	/* Room appeared: forkers blocked by the BLOCK policy try again. */
	for (struct blocked *b = p->blocked; b; b = b->next)
		sc_wake(b->t);
}

/* The next task for worker w (NULL: a thread that is not a worker): its
 * own newest fork, else the oldest in another worker's deque (nested work
 * first, so parked joiners are released before new work starts), else the
 * oldest of the inject queue.  Caller holds p->lock. */
static scope_task_t *pick_locked(scope_pool_t *p, struct worker *w)
{
	if (p->prio && p->heap.n)
		return sc_prio_top(&p->heap);
	if (w && w->deque.tail)
		return w->deque.tail;
	if (p->ndeque)
		for (struct worker *v = p->workers; v; v = v->next)
			if (v->deque.head)
				return v->deque.head;
	return p->inject.head;
}

/* The oldest queued task anywhere (DISCARD_OLDEST's victim). */
static scope_task_t *oldest_locked(scope_pool_t *p)
{
	if (p->inject.head)
		return p->inject.head;
	return pick_locked(p, NULL);
}

/* Takes an idle worker off the idle list; the caller wakes the thread
 * returned, best after dropping the lock the worker will want first. */
static struct sc_thread *claim_idle_locked(scope_pool_t *p)
{
	struct worker *w = p->idle;

	if (!w)
		return NULL;
	p->idle = w->idle_next;
	atomic_fetch_sub(&p->nidle, 1);
	w->claimed = true;
	return w->t;
}

void sc_pool_wake_idle_locked(scope_pool_t *p)
{
	struct sc_thread *t = claim_idle_locked(p);

	if (t)
		sc_wake(t);
}

static bool queue_accepts(const scope_pool_t *p)
{
	switch (p->cfg.queue) {
	case SCOPE_QUEUE_UNBOUNDED:
		return true;
	case SCOPE_QUEUE_BOUNDED:
		return p->queued < p->cfg.queue_capacity;
	default:
		return false;
	}
}

/* Threads that count against core and max: those not parked with their
 * place lent. */
static unsigned working(const scope_pool_t *p)
{
	return p->size - p->lent;
}

/* Starts one more worker (first may be NULL); false when it could not. */
static bool grow_locked(scope_pool_t *p, scope_task_t *first)
{
	if (p->size >= POOL_HARD_MAX)
		return false;
	p->size++;
	if (sc_pool_spawn_locked(p, first) == 0)
		return true;
	p->size--;
	return false;
}

/* Tries to place the task as ThreadPoolExecutor.execute does: a new core
 * thread, a spinning or idle thread, the queue, a new non-core thread.
 * Parked workers' lent places do not count.  Returns 1 when placed, 0 when
 * saturated, or a negative error; *wake is set to a thread the caller must
 * wake after unlocking.  Caller holds p->lock. */
static int place_locked(scope_pool_t *p, scope_task_t *task, struct worker *home,
			struct sc_thread **wake)
{
	if (p->shutdown)
		return SCOPE_ESHUTDOWN;
	if (working(p) < p->cfg.core_size && grow_locked(p, task))
		return 1;
	if (p->queued < p->spinners) {
		enqueue_locked(p, task, home); /* the spinning worker takes it */
		return 1;
	}
	if (p->idle) {
		enqueue_locked(p, task, home);
		*wake = claim_idle_locked(p);
		return 1;
	}
	if (queue_accepts(p)) {
		enqueue_locked(p, task, home);
		if (working(p) == 0)
			(void)grow_locked(p, NULL);
		return 1;
	}
	if (working(p) < p->cfg.max_size) {
		if (grow_locked(p, task))
			return 1;
		return -EAGAIN;
	}
	return 0;
}

/* Work is queued and a worker just parked: wake an idle one, or start one
 * when fewer than core_size work (the parked one lent its place).  Returns
 * the pool's size when that start took it past max_size (0 otherwise): the
 * caller says so (a WARNING event) once the lock is released. */
static unsigned compensate_locked(scope_pool_t *p, struct sc_thread **wake)
{
	if (p->shutdown || p->spinners || !sc_pool_any_work(p))
		return 0;
	if (p->idle) {
		*wake = claim_idle_locked(p);
		return 0;
	}
	if (working(p) < p->cfg.core_size && grow_locked(p, NULL)) {
		p->compensations++;
		if (p->size > p->cfg.max_size)
			return p->size;
	}
	return 0;
}

void sc_pool_lend(struct sc_thread *t, bool on)
{
	scope_pool_t *p = t->pool;
	struct sc_thread *wake = NULL;
	unsigned over = 0, max;

	if (!p || !t->worker)
		return;
	pthread_mutex_lock(&p->lock);
	if (on) {
		p->lent++;
		/* Before the look for work: a push that saw the pool's fast
		 * path open is seen by that look. */
		fast_refresh(p);
		over = compensate_locked(p, &wake);
	} else {
		p->lent--;
	}
	max = p->cfg.max_size;
	sc_pool_unlock(p);
	if (wake)
		sc_wake(wake);
	/* Past its maximum so that the parked worker's work goes on: said,
	 * so that a dump shows why the pool is bigger than configured. */
	if (over)
		sc_emit_warning(SC_WARN_POOL_OVER_MAX, p->id, over, max);
}

void sc_pool_worker_gone(struct sc_thread *t)
{
	struct worker *w = t->worker;
	scope_pool_t *p = w->pool;
	bool last;

	t->worker = NULL;
	pthread_mutex_lock(&p->lock);
	p->size--;
	fast_refresh(p);
	(void)sc_pool_dq_drop_locked(p, t, false);
	while (w->deque.head) {
		scope_task_t *left = w->deque.head;
		dequeue_locked(p, left);
		enqueue_locked(p, left, NULL);
	}
	/* Nobody will join a thread that left this way: it frees itself. */
	if (pthread_detach(pthread_self()) == 0)
		w->detached = true;
	if (sc_pool_any_work(p) && !p->shutdown && working(p) < p->cfg.core_size)
		(void)grow_locked(p, NULL);
	w->exited = true;
	p->live--;
	last = p->shutdown && p->size == 0 && !p->terminated;
	if (last)
		p->terminated = true;
	pthread_cond_broadcast(&p->gone);
	pthread_mutex_unlock(&p->lock);
	if (last && p->cfg.hooks.terminated)
		p->cfg.hooks.terminated(p->cfg.hooks.ctx, p);
	sc_pool_stats_event(p, true);
}

bool sc_pool_lends_all(const scope_pool_t *p)
{
	return p->lend_all;
}

/* Waits for room (BLOCK policy).  A worker that waits here lends its place,
 * so a pool whose every worker forks into a full queue still runs it. */
static int block_for_room(scope_pool_t *p, scope_task_t *task, struct worker *home,
			  struct sc_thread **wake)
{
	struct sc_thread *t = sc_self();
	struct blocked me = {.t = t};
	int rc;

	for (;;) {
		uint32_t seen = atomic_load(&t->seq);

		rc = place_locked(p, task, home, wake);
		if (rc != 0)
			break;
		me.next = p->blocked;
		p->blocked = &me;
		pthread_mutex_unlock(&p->lock);
		sc_pool_stop_due(t); /* after seen was read, as every wait */
		rc = sc_check(task->scope);
		if (!rc) {
			sc_pool_lend(t, true);
			(void)sc_park(t, seen, task->scope->eff_deadline);
			sc_pool_lend(t, false);
		}
		pthread_mutex_lock(&p->lock);
		for (struct blocked **bp = &p->blocked; *bp; bp = &(*bp)->next)
			if (*bp == &me) {
				*bp = me.next;
				break;
			}
		if (rc || (rc = sc_check(task->scope)))
			break;
	}
	return rc;
}

/* Wakes an idle worker for work pushed to a deque, unless one spins. */
static void wake_for_work(scope_pool_t *p)
{
	struct sc_thread *wake = NULL;

	pthread_mutex_lock(&p->lock);
	if (!p->spinners && sc_pool_any_work(p))
		wake = claim_idle_locked(p);
	sc_pool_unlock(p);
	if (wake)
		sc_wake(wake);
}

/* After a push to the calling thread's deque d: makes sure a worker will
 * see it.  False when the pool shut down meanwhile and the task came back
 * (the caller places it under the lock, which refuses it). */
static bool after_push(scope_pool_t *p, struct sc_dq *d, scope_task_t *task)
{
	struct sc_thread *wake = NULL;

	if (__builtin_expect(atomic_load(&p->down), 0)) {
		scope_task_t *back = dq_pop(d);
		/* Not back: a worker stole it before it left, and runs it. */
		return back != task;
	}
	if (__builtin_expect(!atomic_load(&p->fast_ok), 0)) {
		/* Workers parked or left meanwhile: placement's rules decide
		 * whether one is woken or started for it. */
		pthread_mutex_lock(&p->lock);
		if (!p->shutdown && !p->spinners && sc_pool_any_work(p)) {
			if (p->idle)
				wake = claim_idle_locked(p);
			else if (working(p) < p->cfg.core_size || working(p) == 0)
				(void)grow_locked(p, NULL);
		}
		sc_pool_unlock(p);
		if (wake)
			sc_wake(wake);
		return true;
	}
	if (!atomic_load(&p->spinning) && atomic_load(&p->nidle))
		wake_for_work(p);
	return true;
}

int sc_pool_submit(scope_pool_t *p, scope_task_t *task)
{
	struct sc_thread *self = sc_self_peek();
	struct worker *home = self && self->pool == p ? self->worker : NULL;
	scope_task_t *victim = NULL;
	struct sc_thread *wake = NULL;
	int rc;

	/* The fast path: a push to the forker's own deque, no lock. */
	if (p->fast && self && atomic_load_explicit(&p->fast_ok, memory_order_relaxed)) {
		struct sc_dq *d = slot_get(p, self);
		if (d && dq_push(d, task) && after_push(p, d, task))
			return 0;
	}
	pthread_mutex_lock(&p->lock);
	rc = place_locked(p, task, home, &wake);
	if (rc == 0) {
		switch (p->cfg.policy) {
		case SCOPE_POLICY_BLOCK:
			rc = block_for_room(p, task, home, &wake);
			break;
		case SCOPE_POLICY_DISCARD_OLDEST:
			victim = p->prio ? sc_prio_victim_locked(p, task) : oldest_locked(p);
			if (victim && victim != task) {
				dequeue_locked(p, victim);
				enqueue_locked(p, task, home);
				p->rejected++;
				rc = 1;
				break;
			}
			/* Nothing older to drop, so this one goes. */
			__attribute__((fallthrough));
		case SCOPE_POLICY_DISCARD:
			p->rejected++;
			victim = task;
			rc = 1;
			break;
		case SCOPE_POLICY_CALLER_RUNS:
			rc = 2;
			break;
		default:
			p->rejected++;
			rc = SCOPE_EREJECTED;
			break;
		}
	}
	sc_pool_unlock(p);
	if (wake)
		sc_wake(wake);
	if (victim)
		sc_task_finish(victim, SC_TASK_FAILED, SCOPE_EDISCARDED);
	if (rc == 2)
		sc_task_run(task, NULL, false);
	return rc > 0 ? 0 : rc;
}

void sc_pool_task_done(scope_pool_t *p, bool active)
{
	struct sc_thread *t = p->fast ? sc_self_peek() : NULL;
	struct sc_dq *d = t ? slot_of(p, t) : NULL;

	if (d) {
		/* Its own counters: no write to a line other threads share. */
		atomic_store_explicit(&d->completed,
				      atomic_load_explicit(&d->completed, memory_order_relaxed) + 1,
				      memory_order_relaxed);
		if (active)
			atomic_store_explicit(&d->busy, 0, memory_order_relaxed);
		return;
	}
	atomic_fetch_add_explicit(&p->completed, 1, memory_order_relaxed);
	if (active)
		atomic_fetch_sub(&p->active, 1);
}

static void run_hooked(scope_pool_t *p, scope_task_t *task, bool active)
{
	sc_task_run(task, p, active);
	if (sc_observed())
		sc_pool_stats_event(p, false);
}

/* Sets the base of deque d (which must be empty, or the base is wrong
 * for what is in it) and says it changed.  Only d's owner writes either,
 * before any push under the new base; a thief that takes such a push has
 * synchronized with it (the push's release), so its second look at the
 * generation sees the change: release stores are enough. */
static void base_set(struct sc_dq *d, scope_t *s)
{
	uint64_t gen = atomic_load_explicit(&d->base_gen, memory_order_relaxed);

	atomic_store_explicit(&d->base_scope, s, memory_order_release);
	atomic_store_explicit(&d->base_gen, gen + 1, memory_order_release);
}

/* A task of the subtree of s, taken from the deque of a thread that runs a
 * subtask of s it took from elsewhere with its deque empty (all its deque
 * holds was forked under that subtask: s's joiner waits for all of it
 * anyway), or NULL.  The base and its generation are looked at before and
 * after the take, so the task was taken while that subtask ran; were it
 * not, it goes to the inject queue untouched.  Only pointers and counters
 * are compared: nothing not ours is read. */
static scope_task_t *steal_for(scope_pool_t *p, scope_t *s, struct sc_dq *mine)
{
	unsigned n = nslots(p);

	for (unsigned i = 0; i < n; i++) {
		struct sc_dq *d = &p->slots[i];
		bool lost = false;
		scope_task_t *x;
		uint64_t gen = atomic_load_explicit(&d->base_gen, memory_order_acquire);

		if (d == mine || atomic_load_explicit(&d->base_scope, memory_order_acquire) != s)
			continue;
		x = dq_steal(d, &lost);
		if (!x)
			continue;
		if (atomic_load_explicit(&d->base_gen, memory_order_acquire) == gen)
			return x;
		pthread_mutex_lock(&p->lock);
		enqueue_locked(p, x, NULL);
		if (!p->spinners && p->idle)
			sc_pool_wake_idle_locked(p);
		sc_pool_unlock(p);
	}
	return NULL;
}

bool sc_pool_help(scope_pool_t *p, scope_t *s)
{
	scope_task_t *task = NULL;
	bool own = false;

	/* The scope's queued tasks are at the bottom of its owner's deque
	 * (the owner forked them, and the owner helps). */
	if (p->fast) {
		struct sc_thread *t = sc_self_peek();
		struct sc_dq *d = t ? slot_of(p, t) : NULL;
		if (d && (task = dq_pop(d)) != NULL && task->scope != s) {
			(void)dq_push(d, task); /* an outer scope's: back it goes */
			task = NULL;
		}
		own = task != NULL;
		/* Its own are taken or running: work forked under the running
		 * ones is what the join waits for too. */
		if (!task)
			task = steal_for(p, s, d);
	}
	if (!task) {
		if (!atomic_load_explicit(&p->queued, memory_order_relaxed))
			return false;
		pthread_mutex_lock(&p->lock);
		scope_list_fresh(p, s);
		task = s->qhead;
		/* A priority pool: the scope's most urgent (pool_prio.c). */
		if (p->prio && s->pq.n)
			task = sc_prio_top(&s->pq);
		if (task)
			dequeue_locked(p, task);
		pthread_mutex_unlock(&p->lock);
		if (!task)
			return false;
	}
	/* No alarm for the scope's deadline while the task runs here: the
	 * timer thread (deadline.c) cancels the scope when it passes, and the
	 * cancel signals this thread, the task's worker now. */
	if (p->fast && !own) {
		/* Taken from elsewhere: with this thread's deque empty, what it
		 * forks meanwhile is the task's subtree, which a joiner of the
		 * task's scope may take (as from a worker's idle take). */
		struct sc_thread *t = sc_self_peek();
		struct sc_dq *d = t ? slot_of(p, t) : NULL;
		if (d && !dq_nonempty(d)) {
			scope_t *prev = atomic_load_explicit(&d->base_scope, memory_order_relaxed);
			base_set(d, task->scope);
			run_hooked(p, task, false);
			base_set(d, prev);
			return true;
		}
	}
	run_hooked(p, task, false);
	return true;
}

void sc_pool_reclaim(scope_pool_t *p, scope_t *s)
{
	scope_task_t *mine = NULL, *task, *next;

	pthread_mutex_lock(&p->lock);
	scope_list_fresh(p, s);
	while ((task = s->qhead) != NULL) {
		dequeue_locked(p, task);
		task->qnext = mine;
		mine = task;
	}
	pthread_mutex_unlock(&p->lock);
	for (task = mine; task; task = next) {
		next = task->qnext;
		sc_task_finish(task, SC_TASK_CANCELLED, -ECANCELED);
	}
}

/* Spins until the queue has had work for STEAL_GRACE_NS or forks stop
 * coming for SPIN_IDLE_NS; true when any fork came meanwhile (even one its
 * owner ran itself).  The grace leaves a task its owner is about to join
 * to the owner, which runs it without a hand-off. */
/* Forks ever made into p, locked and lock-free. */
static uint64_t submits(scope_pool_t *p)
{
	uint64_t n = atomic_load_explicit(&p->submits, memory_order_relaxed);
	unsigned k = p->fast ? nslots(p) : 0;

	for (unsigned i = 0; i < k; i++)
		n += atomic_load_explicit(&p->slots[i].pushes, memory_order_relaxed);
	return n;
}

static bool spin_for_work(scope_pool_t *p)
{
	uint64_t seen = submits(p);
	int64_t end = scope_now() + SPIN_IDLE_NS, since = 0;
	bool forks = false;

	for (unsigned i = 1;; i++) {
		if (sc_pool_any_work(p)) {
			int64_t now = scope_now();
			if (!since)
				since = now;
			else if (now - since >= STEAL_GRACE_NS)
				return true;
		} else {
			since = 0;
		}
		/* A look reads the lines of every deque, which their owners
		 * then have to fetch back: a look a microsecond or so, not one
		 * every few nanoseconds (fork+join of one task on two cores
		 * took 1.5x as long as on one with this spinner looking at
		 * every pause). */
		for (int k = 0; k < SPIN_POLL_PAUSES; k++)
			sc_cpu_relax();
		if ((i % SPIN_POLLS_PER_CHECK) == 0) {
			uint64_t now_seen = submits(p);
			int64_t now = scope_now();
			/* On a busy machine the forker may wait for this core:
			 * give it up now and then rather than spin it away. */
			sched_yield();
			if (now_seen != seen) {
				seen = now_seen;
				forks = true;
				end = now + SPIN_IDLE_NS;
			} else if (now >= end && !since) {
				return forks;
			}
		}
	}
}

/* Steal pacing.  A stolen task drags its deque slot, its record and its
 * scope's counts from its forker's core to its thief's and back: a few
 * hundred nanoseconds a line between the cores of a virtual machine.  Work
 * that ends sooner costs its forker more than it saves the thief, and the
 * forker, left alone, runs it faster (a fan-out of empty tasks on two such
 * cores: 6-8x faster).  So a worker whose stolen work (the task and what it
 * forked here) took less than STEAL_SHORT_X times what the steal itself
 * took waits STEAL_PACE_MIN_NS before its next steal, and while the
 * victim's owner works at its end of the deque meanwhile (forks more, or
 * runs its own tasks as a joiner), twice as long each time up to
 * STEAL_PACE_MAX_NS; longer work, or finding nothing
 * (take()), ends the pacing.  It costs the thief two clock reads a timed
 * steal: every steal while it paces, else one in STEAL_TIMED_EVERY.  (The
 * cycle counter instead of the clock, measured: no gain.) */
static inline int64_t steal_tick(void)
{
	return scope_now();
}

/* w just stole from d, whose owner's end it saw at bottom, having started
 * to look at tick `from` (0: not timed). */
static void stole(struct worker *w, int64_t from, struct sc_dq *d, int64_t bottom)
{
	int64_t now, took;

	if (!from) {
		w->stole_at = 0; /* not timed: its work is not judged */
		return;
	}
	now = steal_tick();
	took = now - from;
	if (took > 0)
		w->steal_ticks = w->steal_ticks ? (7 * w->steal_ticks + took) / 8 : took;
	w->stole_at = now;
	w->victim = d;
	w->victim_bottom = bottom;
}

/* Before w steals again: the wait its last stolen work calls for. */
static void steal_pace(struct worker *w, scope_pool_t *p)
{
	if (w->stole_at) {
		bool brief = steal_tick() - w->stole_at < STEAL_SHORT_X * w->steal_ticks;
		/* The victim's owner worked at its end meanwhile, pushing or
		 * popping (read only when it decides): it is there to run its
		 * tasks, and every look at its deque costs it a line. */
		bool owner_busy = brief && w->pace &&
				  atomic_load_explicit(&w->victim->bottom, memory_order_relaxed) !=
				      w->victim_bottom;
		w->pace = sc_steal_pace_next(w->pace, brief, owner_busy);
		w->stole_at = 0;
	}
	if (!w->pace)
		return;
	if (w->pace >= STEAL_PACE_SLEEP_NS) {
		/* Long waits sleep: the core is another thread's meanwhile
		 * (the forker's, an observer's) on a busy machine. */
		struct timespec ts = {0, (long)w->pace};
		nanosleep(&ts, NULL);
		return;
	}
	/* A task queued the locked way ends a short wait. */
	for (int64_t now = scope_now(), until = now + w->pace;
	     now < until && !atomic_load_explicit(&p->queued, memory_order_relaxed);
	     now = scope_now())
		for (int k = 0; k < SPIN_POLL_PAUSES / 8; k++)
			sc_cpu_relax();
}

/* Lock-free: the newest task of mine (the calling thread's deque, may be
 * NULL), else the oldest of another deque (nested work first, so parked
 * joiners are released before new work starts).  A worker w's steal is
 * timed from tick now (0: not timed). */
static scope_task_t *find_fast(scope_pool_t *p, struct sc_dq *mine, struct worker *w, int64_t now)
{
	scope_task_t *task;

	if (mine && (task = dq_pop(mine)) != NULL)
		return task;
	/* Workers' deques first: what they hold was forked by running tasks,
	 * whose owners wait for it; the deques of the application's threads
	 * hold new work.  Taking new work first would leave a parked joiner's
	 * subtask behind it, and start a thread for each such park. */
	for (int round = 0; round < 8; round++) {
		unsigned n = nslots(p);
		unsigned start = mine ? (unsigned)(mine - p->slots) + 1 : 0;
		bool lost = false, workers = round % 2 == 0;

		for (unsigned k = 0; k < n; k++) {
			struct sc_dq *d = &p->slots[(start + k) % n];
			if (d == mine ||
			    atomic_load_explicit(&d->worker, memory_order_relaxed) != workers)
				continue;
			int64_t bottom;
			if ((task = dq_steal_at(d, &lost, &bottom)) != NULL) {
				if (w)
					stole(w, now, d, bottom);
				return task;
			}
		}
		if (!lost && !workers)
			break;
	}
	return NULL;
}

/* Counts worker w's run of a task as active. */
static void mark_active(scope_pool_t *p, struct worker *w)
{
	struct sc_dq *d = slot_of(p, w->t);

	if (d)
		atomic_store_explicit(&d->busy, 1, memory_order_relaxed);
	else
		atomic_fetch_add(&p->active, 1);
}

/* The next task for worker w without the pool's lock (NULL: none, or the
 * pool is past its bounds and take() decides). */
static scope_task_t *next_fast(struct worker *w)
{
	scope_pool_t *p = w->pool;
	struct sc_dq *mine = slot_of(p, w->t);
	scope_task_t *task;

	if (!mine || atomic_load_explicit(&p->over, memory_order_relaxed))
		return NULL;
	if (!(task = dq_pop(mine))) {
		steal_pace(w, p);
		/* Timed while pacing, else one steal in STEAL_TIMED_EVERY. */
		bool timed = w->pace || (++w->nlooks % STEAL_TIMED_EVERY) == 0;
		task = find_fast(p, mine, w, timed ? steal_tick() : 0);
	}
	if (!task)
		return NULL;
	atomic_store_explicit(&mine->busy, 1, memory_order_relaxed);
	/* More is queued and nobody else is awake to see it: pass the word
	 * on, one worker at a time. */
	if (!atomic_load(&p->spinning) && atomic_load(&p->nidle) && sc_pool_any_work(p))
		wake_for_work(p);
	return task;
}

/* The next task for w under the pool's lock: the deques, then its own
 * locked deque, another's, the inject queue. */
static scope_task_t *take_next_locked(scope_pool_t *p, struct worker *w)
{
	scope_task_t *task = p->fast ? find_fast(p, slot_of(p, w->t), w, 0) : NULL;

	if (!task && (task = pick_locked(p, w)) != NULL)
		dequeue_locked(p, task);
	if (task)
		mark_active(p, w);
	return task;
}

/* Next task for worker w, or NULL when it should exit (shutdown, shrink,
 * keep-alive).  Takes the exit decision under the lock that placement
 * uses, so a task is never left to a worker that is leaving.  A worker
 * beyond max_size (a parked worker came back after its place was lent)
 * leaves at once. */
static scope_task_t *take(struct worker *w)
{
	scope_pool_t *p = w->pool;
	bool timed_out = false, spun = false;
	scope_task_t *task = NULL;

	/* Found nothing lock-free: what it steals next is new work. */
	w->pace = 0;
	pthread_mutex_lock(&p->lock);
	for (;;) {
		bool timed = p->cfg.allow_core_timeout || working(p) > p->cfg.core_size;
		uint32_t seen;
		bool woke;

		/* Past max (a parked worker came back after its place was
		 * lent): leave now, so the pool shrinks back to its bounds. */
		if (working(p) > p->cfg.max_size)
			goto leave;
		if ((task = take_next_locked(p, w)) != NULL) {
			/* More is queued and nobody else is awake to see it:
			 * pass the word on, one worker at a time. */
			if (!p->spinners && p->idle && sc_pool_any_work(p))
				sc_pool_wake_idle_locked(p);
			break;
		}
		if (p->shutdown || (timed && timed_out))
			goto leave;
		if (!spun && p->spinners == 0 &&
		    scope_now() - p->spin_failed_at > SPIN_BACKOFF_NS) {
			/* One idle worker per pool spins on the queue, so a fork
			 * finds a thread awake and wakes nobody; more spinners
			 * would only steal cores from the rest, and after a spin
			 * in vain nobody spins for a while (a burst of tasks
			 * ending must not hand the core from spinner to spinner).
			 * Placement counts on the spinner and it rechecks the
			 * queue under the lock afterwards. */
			p->spinners = 1;
			atomic_store(&p->spinning, 1);
			spun = true;
			sc_pool_unlock(p);
			bool busy = spin_for_work(p);
			pthread_mutex_lock(&p->lock);
			p->spinners = 0;
			atomic_store(&p->spinning, 0);
			if (busy)
				spun = false; /* work flows: spin again if it was taken */
			else
				p->spin_failed_at = scope_now();
			continue;
		}
		spun = false;
		w->claimed = false;
		w->idle_next = p->idle;
		p->idle = w;
		atomic_fetch_add(&p->nidle, 1);
		/* Said idle, then one more look: a push that saw no idle
		 * worker happened before it, and is seen here. */
		if (p->fast && dq_any(p)) {
			p->idle = w->idle_next;
			atomic_fetch_sub(&p->nidle, 1);
			continue;
		}
		seen = atomic_load(&w->t->seq);
		/* Read under the lock: scope_pool_set_keep_alive writes it. */
		int64_t idle_until = timed ? sc_after(p->cfg.keep_alive_ns) : 0;
		sc_pool_unlock(p);
		woke = sc_park(w->t, seen, idle_until);
		pthread_mutex_lock(&p->lock);
		if (!w->claimed) {
			for (struct worker **wp = &p->idle; *wp; wp = &(*wp)->idle_next)
				if (*wp == w) {
					*wp = w->idle_next;
					atomic_fetch_sub(&p->nidle, 1);
					break;
				}
		}
		timed_out = !woke && !w->claimed;
		continue;
	leave:
		p->size--;
		fast_refresh(p);
		/* Said so, then one more look: what was pushed before it was
		 * seen as leaving is this worker's to run, if it is the last
		 * (at shutdown, queued work still runs). */
		if ((p->shutdown || working(p) == 0) && sc_pool_any_work(p)) {
			p->size++;
			fast_refresh(p);
			if ((task = take_next_locked(p, w)) != NULL)
				break;
			continue; /* taken meanwhile: decide again */
		}
		break;
	}
	if (!task) {
		/* It may have been woken for work it now leaves: pass that on. */
		if (sc_pool_any_work(p) && !p->spinners && p->idle)
			sc_pool_wake_idle_locked(p);
		/* Empty by structure (a task closes its scopes before it
		 * ends); were it not, its tasks must not leave with it. */
		(void)sc_pool_dq_drop_locked(p, w->t, false);
		while (w->deque.head) {
			scope_task_t *left = w->deque.head;
			dequeue_locked(p, left);
			enqueue_locked(p, left, NULL);
		}
	}
	sc_pool_unlock(p);
	return task;
}

/* "<prefix>-<n>" in Linux's 15 bytes; the prefix is cut rather than the
 * number, so workers of a long-named pool stay distinguishable. */
static void thread_name(char out[SC_THREAD_NAME], const char *prefix, unsigned n)
{
	char num[12];
	int nl = snprintf(num, sizeof(num), "-%u", n);
	size_t pl = strnlen(prefix, SC_THREAD_NAME - 1);

	if (pl + (size_t)nl > SC_THREAD_NAME - 1)
		pl = SC_THREAD_NAME - 1 - (size_t)nl;
	memcpy(out, prefix, pl);
	memcpy(out + pl, num, (size_t)nl + 1);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	scope_pool_t *p = w->pool;
	char name[SC_THREAD_NAME];
	scope_task_t *task;
	bool last;

	thread_name(name, p->name, w->n);
	w->t = sc_thread_register(SC_ROLE_WORKER, p, name);
	if (w->t) {
		w->t->worker = w;
		sc_pool_stats_event(p, true);
		if (p->fast)
			(void)slot_claim(p, w->t);
		pthread_mutex_lock(&p->lock);
		if ((task = w->first) != NULL)
			mark_active(p, w);
		sc_pool_unlock(p);
		/* A worker that registered before an agent's late start takes
		 * its alternate stack before its next task: sc_task_run's
		 * sc_self() sees to it. */
		for (; task || (task = next_fast(w)) != NULL || (task = take(w)) != NULL;
		     task = NULL) {
			struct sc_dq *mine = slot_of(p, w->t);
			if (mine)
				base_set(mine, task->scope);
			run_hooked(p, task, true);
			if (mine)
				base_set(mine, NULL);
		}
	} else {
		/* No record (out of memory), no worker.  The task goes back to the
		 * other workers or, when there are none to run it, fails now:
		 * queued with nobody to take it, its joiner would wait forever. */
		task = NULL;
		pthread_mutex_lock(&p->lock);
		p->size--;
		if (w->first && p->size > 0) {
			enqueue_locked(p, w->first, NULL);
			sc_pool_wake_idle_locked(p);
		} else {
			task = w->first;
		}
		/* Nothing may join a thread that failed this early (the pool
		 * reaps only at its next spawn), so it frees itself. */
		if (pthread_detach(pthread_self()) == 0)
			w->detached = true;
		pthread_mutex_unlock(&p->lock);
		if (task)
			sc_task_finish(task, SC_TASK_FAILED, -ENOMEM);
	}
	sc_pool_stats_event(p, true);
	pthread_mutex_lock(&p->lock);
	last = p->shutdown && p->size == 0 && !p->terminated;
	if (last)
		p->terminated = true;
	pthread_mutex_unlock(&p->lock);
	if (last && p->cfg.hooks.terminated)
		p->cfg.hooks.terminated(p->cfg.hooks.ctx, p);
	sc_thread_unregister();
	pthread_mutex_lock(&p->lock);
	/* Left on its own (past max, keep-alive) while the pool lives on:
	 * nobody may join it before the pool's next spawn, so it frees its
	 * thread itself.  At shutdown, destroy joins it. */
	if (!p->shutdown && !w->detached && pthread_detach(pthread_self()) == 0)
		w->detached = true;
	w->exited = true;
	p->live--;
	pthread_cond_broadcast(&p->gone);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* ---- The monitor: tasks blocked outside the runtime ----
 *
 * A subtask of the default pool that blocks where the runtime does not see
 * it (read() on a pipe, a foreign lock) holds its worker; with every worker
 * so held, queued work waits, and if that work is what the blocked ones
 * wait for, forever.  As Go's sysmon does for goroutines in system calls,
 * a monitor thread looks at the default pool every MONITOR_TICK_NS: when
 * work is queued, no worker is idle or spinning, no task ended for
 * MONITOR_STALL_TICKS looks, and a worker running a task sleeps in the
 * kernel (its /proc state), it starts one more worker with a queued task
 * as its first.  Such a worker leaves when it finds the pool past its
 * maximum (after that task), and the start is counted in compensations and
 * said with a WARNING, as lending's are.  Pools the application configured
 * are left as configured: their sizes are its choice. */

static pthread_mutex_t monitor_lock = PTHREAD_MUTEX_INITIALIZER;
static scope_pool_t *monitor_pool; /* the pool it watches; NULL: not running */

/* Ended tasks of p, a measure of progress.  Caller holds p->lock. */
static uint64_t progress_locked(scope_pool_t *p)
{
	unsigned active = 0;
	uint64_t completed = atomic_load(&p->completed);

	sc_pool_dq_stats(p, &active, &completed);
	return completed;
}

/* Whether thread tid of this process sleeps in the kernel (S or D). */
static bool tid_sleeps(uint32_t tid)
{
	char path[64], buf[256], *rp;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%u/stat", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	rp = strrchr(buf, ')'); /* the name may hold anything, even ") " */
	return rp && rp[1] == ' ' && (rp[2] == 'S' || rp[2] == 'D');
}

/* One look at p; stalls counts looks without progress. */
static void monitor_look(scope_pool_t *p, uint64_t *last, unsigned *stalls)
{
	uint32_t tids[64];
	unsigned n = 0, over = 0, max = 0;
	bool stalled, blocked = false;
	uint64_t now;

	pthread_mutex_lock(&p->lock);
	now = progress_locked(p);
	stalled = !p->shutdown && !p->idle && !p->spinners && now == *last && sc_pool_any_work(p);
	*last = now;
	*stalls = stalled ? *stalls + 1 : 0;
	if (*stalls >= MONITOR_STALL_TICKS)
		for (struct worker *w = p->workers; w && n < 64; w = w->next)
			if (!w->exited && w->t)
				tids[n++] = w->t->tid;
	pthread_mutex_unlock(&p->lock);
	if (*stalls < MONITOR_STALL_TICKS)
		return;
	/* Outside the lock: a read of /proc per worker, only when stalled. */
	for (unsigned i = 0; i < n && !blocked; i++)
		blocked = tid_sleeps(tids[i]);
	if (!blocked)
		return;
	pthread_mutex_lock(&p->lock);
	scope_task_t *task = p->fast ? find_fast(p, NULL, NULL, 0) : NULL;
	if (!task && (task = pick_locked(p, NULL)) != NULL)
		dequeue_locked(p, task);
	if (task) {
		if (p->size < POOL_HARD_MAX && (p->size++, sc_pool_spawn_locked(p, task) == 0)) {
			p->compensations++;
			if (p->size > p->cfg.max_size)
				over = p->size;
			*stalls = 0;
		} else {
			/* No thread now: back it goes, for the next look. */
			if (p->size > 0 && p->size <= POOL_HARD_MAX)
				p->size--;
			enqueue_locked(p, task, NULL);
		}
	}
	max = p->cfg.max_size;
	sc_pool_unlock(p);
	if (over)
		sc_emit_warning(SC_WARN_POOL_OVER_MAX, p->id, over, max);
}

static void *monitor_main(void *arg)
{
	scope_pool_t *p = arg;
	uint64_t last = 0;
	unsigned stalls = 0;
	struct timespec tick = {0, MONITOR_TICK_NS};

	for (;;) {
		nanosleep(&tick, NULL);
		monitor_look(p, &last, &stalls);
	}
	return NULL;
}

void sc_pool_monitor_start(scope_pool_t *p)
{
	pthread_t th;
	pthread_attr_t attr;
	sigset_t all, old;

	pthread_mutex_lock(&monitor_lock);
	if (!monitor_pool && pthread_attr_init(&attr) == 0) {
		/* It takes no signal meant for the program's threads, but
		 * answers the agent's stack request as every thread does. */
		sc_helper_sigset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&th, &attr, monitor_main, p) == 0) {
			monitor_pool = p;
#if defined(__GLIBC__)
			pthread_setname_np(th, "scope-monitor");
#endif
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&attr);
	}
	pthread_mutex_unlock(&monitor_lock);
}

void sc_pool_monitor_after_fork(void)
{
	/* The thread stayed behind: the next worker started starts another. */
	pthread_mutex_init(&monitor_lock, NULL);
	monitor_pool = NULL;
}

size_t sc_pool_drain_locked(scope_pool_t *p, scope_task_t **out)
{
	scope_task_t *mine = NULL, *task;
	size_t n = 0;

	/* Any queued task, as the monitor takes one: the deques', then the
	 * locked queues'. */
	for (;;) {
		task = p->fast ? find_fast(p, NULL, NULL, 0) : NULL;
		if (!task && (task = pick_locked(p, NULL)) != NULL)
			dequeue_locked(p, task);
		if (!task)
			break;
		task->qnext = mine;
		mine = task;
		n++;
	}
	*out = mine;
	return n;
}
