/* pool_work.c - what a pool does: placing forks (threads, queue, saturation
 * policies), its workers' lives, and joiners running their own queued
 * subtasks. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool_int.h"

#define SPIN_IDLE_NS 20000	/* an idle worker's wait for the next fork */
#define SPIN_BACKOFF_NS 200000	/* no spinning for this long after a spin found nothing */
#define POOL_HARD_MAX 32768	/* threads, compensation included */
#define STEAL_GRACE_NS 1500	/* a spinner leaves a fresh fork to its joiner this long */

static void *worker_main(void *arg);

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
	if (s->qhead && s->qhead->gen != p->gen)
		s->qhead = s->qtail = NULL;
}

/* Queues task in home's deque (a worker of p forked it) or in the inject
 * queue, and in its scope's list.  Caller holds p->lock. */
static void enqueue_locked(scope_pool_t *p, scope_task_t *task, struct worker *home)
{
	scope_t *s = task->scope;

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
	task->queued = true;
	atomic_store_explicit(&p->queued, p->queued + 1, memory_order_release);
	atomic_fetch_add_explicit(&p->submits, 1, memory_order_relaxed);
}

static void dequeue_locked(scope_pool_t *p, scope_task_t *task)
{
	struct worker *home = task->home;
	scope_t *s = task->scope;

	tq_remove(home ? &home->deque : &p->inject, task);
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
 * when fewer than core_size work (the parked one lent its place). */
static void compensate_locked(scope_pool_t *p, struct sc_thread **wake)
{
	if (!p->queued || p->shutdown || p->spinners)
		return;
	if (p->idle) {
		*wake = claim_idle_locked(p);
		return;
	}
	if (working(p) < p->cfg.core_size && grow_locked(p, NULL))
		p->compensations++;
}

void sc_pool_lend(struct sc_thread *t, bool on)
{
	scope_pool_t *p = t->pool;
	struct sc_thread *wake = NULL;

	if (!p || !t->worker)
		return;
	pthread_mutex_lock(&p->lock);
	if (on) {
		p->lent++;
		compensate_locked(p, &wake);
	} else {
		p->lent--;
	}
	pthread_mutex_unlock(&p->lock);
	if (wake)
		sc_wake(wake);
}

void sc_pool_worker_gone(struct sc_thread *t)
{
	struct worker *w = t->worker;
	scope_pool_t *p = w->pool;
	bool last;

	t->worker = NULL;
	pthread_mutex_lock(&p->lock);
	p->size--;
	while (w->deque.head) {
		scope_task_t *left = w->deque.head;
		dequeue_locked(p, left);
		enqueue_locked(p, left, NULL);
	}
	/* Nobody will join a thread that left this way: it frees itself. */
	if (pthread_detach(pthread_self()) == 0)
		w->detached = true;
	if (p->queued && !p->shutdown && working(p) < p->cfg.core_size)
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

int sc_pool_submit(scope_pool_t *p, scope_task_t *task)
{
	struct sc_thread *self = sc_self_peek();
	struct worker *home = self && self->pool == p ? self->worker : NULL;
	scope_task_t *victim = NULL;
	struct sc_thread *wake = NULL;
	int rc;

	pthread_mutex_lock(&p->lock);
	rc = place_locked(p, task, home, &wake);
	if (rc == 0) {
		switch (p->cfg.policy) {
		case SCOPE_POLICY_BLOCK:
			rc = block_for_room(p, task, home, &wake);
			break;
		case SCOPE_POLICY_DISCARD_OLDEST:
			victim = oldest_locked(p);
			if (victim) {
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
	pthread_mutex_unlock(&p->lock);
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
	atomic_fetch_add_explicit(&p->completed, 1, memory_order_relaxed);
	if (active)
		atomic_fetch_sub(&p->active, 1);
}

static void run_hooked(scope_pool_t *p, scope_task_t *task, bool active)
{
	sc_task_run(task, p, active);
	sc_pool_stats_event(p, false);
}

bool sc_pool_help(scope_pool_t *p, scope_t *s)
{
	scope_task_t *task;

	if (!atomic_load_explicit(&p->queued, memory_order_relaxed))
		return false;
	pthread_mutex_lock(&p->lock);
	scope_list_fresh(p, s);
	task = s->qhead;
	if (task)
		dequeue_locked(p, task);
	pthread_mutex_unlock(&p->lock);
	if (!task)
		return false;
	/* No alarm for the scope's deadline while the task runs here: the
	 * timer thread (deadline.c) cancels the scope when it passes, and the
	 * cancel signals this thread, the task's worker now. */
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
static bool spin_for_work(scope_pool_t *p)
{
	uint64_t seen = atomic_load_explicit(&p->submits, memory_order_relaxed);
	int64_t end = scope_now() + SPIN_IDLE_NS, since = 0;
	bool forks = false;

	for (unsigned i = 1;; i++) {
		if (atomic_load_explicit(&p->queued, memory_order_acquire)) {
			int64_t now = scope_now();
			if (!since)
				since = now;
			else if (now - since >= STEAL_GRACE_NS)
				return true;
		} else {
			since = 0;
		}
		sc_cpu_relax();
		if ((i & 63) == 0) {
			uint64_t now_seen = atomic_load_explicit(&p->submits, memory_order_relaxed);
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

	pthread_mutex_lock(&p->lock);
	for (;;) {
		bool timed = p->cfg.allow_core_timeout || working(p) > p->cfg.core_size;
		uint32_t seen;
		bool woke;

		/* Past max (a parked worker came back after its place was
		 * lent): leave now, so the pool shrinks back to its bounds. */
		if (working(p) > p->cfg.max_size)
			break;
		if ((task = pick_locked(p, w)) != NULL) {
			dequeue_locked(p, task);
			p->active++;
			/* More is queued and nobody else is awake to see it:
			 * pass the word on, one worker at a time. */
			if (p->queued && !p->spinners && p->idle)
				sc_pool_wake_idle_locked(p);
			break;
		}
		if (p->shutdown || (timed && timed_out))
			break;
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
			spun = true;
			pthread_mutex_unlock(&p->lock);
			bool busy = spin_for_work(p);
			pthread_mutex_lock(&p->lock);
			p->spinners = 0;
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
		seen = atomic_load(&w->t->seq);
		/* Read under the lock: scope_pool_set_keep_alive writes it. */
		int64_t idle_until = timed ? sc_after(p->cfg.keep_alive_ns) : 0;
		pthread_mutex_unlock(&p->lock);
		woke = sc_park(w->t, seen, idle_until);
		pthread_mutex_lock(&p->lock);
		if (!w->claimed) {
			for (struct worker **wp = &p->idle; *wp; wp = &(*wp)->idle_next)
				if (*wp == w) {
					*wp = w->idle_next;
					break;
				}
		}
		timed_out = !woke && !w->claimed;
	}
	if (!task) {
		p->size--;
		/* It may have been woken for work it now leaves: pass that on. */
		if (p->queued && !p->spinners && p->idle)
			sc_pool_wake_idle_locked(p);
		/* Empty by structure (a task closes its scopes before it
		 * ends); were it not, its tasks must not leave with it. */
		while (w->deque.head) {
			scope_task_t *left = w->deque.head;
			dequeue_locked(p, left);
			enqueue_locked(p, left, NULL);
		}
	}
	pthread_mutex_unlock(&p->lock);
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
		pthread_mutex_lock(&p->lock);
		if ((task = w->first) != NULL)
			p->active++;
		pthread_mutex_unlock(&p->lock);
		/* A worker that registered before an agent's late start takes
		 * its alternate stack before its next task: sc_task_run's
		 * sc_self() sees to it. */
		for (; task || (task = take(w)) != NULL; task = NULL)
			run_hooked(p, task, true);
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

size_t sc_pool_drain_locked(scope_pool_t *p, scope_task_t **out)
{
	scope_task_t *mine = NULL, *task;
	size_t n = 0;

	while ((task = p->inject.head) != NULL) {
		dequeue_locked(p, task);
		task->qnext = mine;
		mine = task;
		n++;
	}
	for (struct worker *w = p->workers; w; w = w->next)
		while ((task = w->deque.head) != NULL) {
			dequeue_locked(p, task);
			task->qnext = mine;
			mine = task;
			n++;
		}
	*out = mine;
	return n;
}
