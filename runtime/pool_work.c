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

#define HELP_SCAN_MAX 256      /* queued tasks a joiner looks through for its own */
#define SPIN_IDLE_NS 20000     /* an idle worker's wait for the next fork */
#define SPIN_BACKOFF_NS 200000 /* no spinning for this long after a spin found nothing */

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

static void enqueue_locked(scope_pool_t *p, scope_task_t *task)
{
	task->qnext = NULL;
	task->qprev = p->qtail;
	if (p->qtail)
		p->qtail->qnext = task;
	else
		p->qhead = task;
	p->qtail = task;
	task->queued = true;
	p->queued++;
	atomic_fetch_add_explicit(&p->submits, 1, memory_order_relaxed);
}

static void dequeue_locked(scope_pool_t *p, scope_task_t *task)
{
	if (task->qprev)
		task->qprev->qnext = task->qnext;
	else
		p->qhead = task->qnext;
	if (task->qnext)
		task->qnext->qprev = task->qprev;
	else
		p->qtail = task->qprev;
	task->queued = false;
	p->queued--;
	/* Room appeared: forkers blocked by the BLOCK policy try again. */
	for (struct blocked *b = p->blocked; b; b = b->next)
		sc_wake(b->t);
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

/* Tries to place the task as ThreadPoolExecutor.execute does: a new core
 * thread, an idle thread, the queue, a new non-core thread.  Returns 1 when
 * placed, 0 when saturated, or a negative error; *wake is set to a thread
 * the caller must wake after unlocking.  Caller holds p->lock. */
static int place_locked(scope_pool_t *p, scope_task_t *task, struct sc_thread **wake)
{
	int rc;

	if (p->shutdown)
		return SCOPE_ESHUTDOWN;
	if (p->size < p->cfg.core_size) {
		p->size++;
		rc = sc_pool_spawn_locked(p, task);
		if (rc == 0)
			return 1;
		p->size--;
	}
	if (p->queued < p->spinners) {
		enqueue_locked(p, task); /* the spinning worker takes it */
		return 1;
	}
	if (p->idle) {
		enqueue_locked(p, task);
		*wake = claim_idle_locked(p);
		return 1;
	}
	if (queue_accepts(p)) {
		enqueue_locked(p, task);
		if (p->size == 0) {
			p->size++;
			if (sc_pool_spawn_locked(p, NULL))
				p->size--;
		}
		return 1;
	}
	if (p->size < p->cfg.max_size) {
		p->size++;
		rc = sc_pool_spawn_locked(p, task);
		if (rc == 0)
			return 1;
		p->size--;
		return rc;
	}
	return 0;
}

static int block_for_room(scope_pool_t *p, scope_task_t *task, struct sc_thread **wake)
{
	struct sc_thread *t = sc_self();
	struct blocked me = {.t = t};
	int rc;

	for (;;) {
		uint32_t seen = atomic_load(&t->seq);

		rc = place_locked(p, task, wake);
		if (rc != 0)
			break;
		me.next = p->blocked;
		p->blocked = &me;
		pthread_mutex_unlock(&p->lock);
		rc = sc_check(task->scope);
		if (!rc)
			(void)sc_park(t, seen, task->scope->eff_deadline);
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
	scope_task_t *victim = NULL;
	struct sc_thread *wake = NULL;
	int rc;

	pthread_mutex_lock(&p->lock);
	rc = place_locked(p, task, &wake);
	if (rc == 0) {
		switch (p->cfg.policy) {
		case SCOPE_POLICY_BLOCK:
			rc = block_for_room(p, task, &wake);
			break;
		case SCOPE_POLICY_DISCARD_OLDEST:
			if (p->qhead) {
				victim = p->qhead;
				dequeue_locked(p, victim);
				enqueue_locked(p, task);
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
	atomic_fetch_add(&p->completed, 1);
	if (active)
		atomic_fetch_sub(&p->active, 1);
}

static void run_hooked(scope_pool_t *p, scope_task_t *task, bool active)
{
	sc_task_run(task, p, active);
	sc_pool_stats_event(p, false);
}

/* True when task belongs to s or to a scope below it. */
static bool in_subtree(const scope_task_t *task, const scope_t *s)
{
	int depth = 0;

	for (const scope_t *x = task->scope; x && depth < SC_MAX_DEPTH; x = x->parent, depth++)
		if (x == s)
			return true;
	return false;
}

bool sc_pool_help(scope_pool_t *p, scope_t *s)
{
	scope_task_t *task;
	int n = 0;

	pthread_mutex_lock(&p->lock);
	for (task = p->qhead; task && n < HELP_SCAN_MAX; task = task->qnext, n++)
		if (in_subtree(task, s))
			break;
	if (task && n < HELP_SCAN_MAX)
		dequeue_locked(p, task);
	else
		task = NULL;
	pthread_mutex_unlock(&p->lock);
	if (!task)
		return false;
	/* The joiner was the one to notice its deadline; while it runs the
	 * task instead, an alarm interrupts a system call the task may block
	 * in when that deadline comes. */
	int64_t deadline = task->scope->eff_deadline;
	struct sc_thread *t = deadline ? sc_self_peek() : NULL;
	int64_t outer = t ? sc_thread_alarm(t, deadline) : 0;
	run_hooked(p, task, false);
	if (t)
		(void)sc_thread_alarm(t, outer);
	return true;
}

void sc_pool_reclaim(scope_pool_t *p, scope_t *s)
{
	scope_task_t *mine = NULL, *task, *next;

	pthread_mutex_lock(&p->lock);
	for (task = p->qhead; task; task = next) {
		next = task->qnext;
		if (task->scope != s)
			continue;
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

/* Spins until the queue has work or forks stop coming for SPIN_IDLE_NS;
 * true when any fork came meanwhile (even one its owner ran itself). */
static bool spin_for_work(scope_pool_t *p)
{
	uint64_t seen = atomic_load_explicit(&p->submits, memory_order_relaxed);
	int64_t end = scope_now() + SPIN_IDLE_NS;
	bool forks = false;

	for (unsigned i = 1; !atomic_load_explicit(&p->queued, memory_order_acquire); i++) {
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
			} else if (now >= end) {
				return forks;
			}
		}
	}
	return true;
}

/* Next task for worker w, or NULL when it should exit (shutdown, shrink,
 * keep-alive).  Takes the exit decision under the lock that placement
 * uses, so a task is never left to a worker that is leaving. */
static scope_task_t *take(struct worker *w)
{
	scope_pool_t *p = w->pool;
	bool timed_out = false, spun = false;
	scope_task_t *task = NULL;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		bool timed = p->cfg.allow_core_timeout || p->size > p->cfg.core_size;
		uint32_t seen;
		bool woke;

		if (p->qhead && p->size <= p->cfg.max_size) {
			task = p->qhead;
			dequeue_locked(p, task);
			p->active++;
			break;
		}
		if (p->shutdown || p->size > p->cfg.max_size || (timed && timed_out))
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
		pthread_mutex_unlock(&p->lock);
		woke = sc_park(w->t, seen, timed ? sc_after(p->cfg.keep_alive_ns) : 0);
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
	if (!task)
		p->size--;
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
			enqueue_locked(p, w->first);
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
	w->exited = true;
	p->live--;
	pthread_cond_broadcast(&p->gone);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}
