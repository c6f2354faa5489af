/* pool.c - thread pools configured like ThreadPoolExecutor: core and maximum
 * size, keep-alive, queue kinds, saturation policies, hooks, statistics. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"

#define DEFAULT_KEEP_ALIVE 60000000000LL /* 60 s, as ThreadPoolExecutor's examples */
#define DEFAULT_QUEUE_CAP 64
#define DEFAULT_POOL_MAX 256
#define POOL_THREADS_MAX 32768	   /* more is a mistake, not a configuration */
#define HELP_SCAN_MAX 256	   /* queued tasks a joiner looks through for its own */
#define STATS_INTERVAL 100000000LL /* at most ~10 POOL_STATS per second */
#define SPIN_IDLE_NS 20000	   /* an idle worker's wait for the next fork */
#define SPIN_BACKOFF_NS 200000	   /* no spinning for this long after a spin found nothing */

struct worker {
	struct worker *next;	  /* all workers of the pool */
	struct worker *idle_next; /* idle stack */
	scope_pool_t *pool;
	struct sc_thread *t;
	scope_task_t *first;
	pthread_t th;
	unsigned n;
	bool claimed; /* woken for work while idle */
	bool exited;  /* no longer touches the pool */
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

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static scope_pool_t *pools;
static _Atomic uint64_t next_pool_id = 1;
static scope_pool_t *default_pool;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

uint64_t sc_pool_id(const scope_pool_t *p)
{
	return p->id;
}

const char *scope_pool_name(const scope_pool_t *p)
{
	return p ? p->name : NULL;
}

/* Caller holds p->lock. */
static void info_locked(scope_pool_t *p, struct sc_pool_info *o)
{
	*o = (struct sc_pool_info){
	    .core = p->cfg.core_size,
	    .max = p->cfg.max_size,
	    .size = p->size,
	    .active = p->active,
	    .largest = p->largest,
	    .queue_kind = p->cfg.queue,
	    .policy = p->cfg.policy,
	    .queue_capacity = p->cfg.queue_capacity,
	    .queued = p->queued,
	    .completed = p->completed,
	    .rejected = p->rejected,
	    .keep_alive_ns = p->cfg.keep_alive_ns,
	};
}

void sc_pool_info(scope_pool_t *p, struct sc_pool_info *out)
{
	pthread_mutex_lock(&p->lock);
	info_locked(p, out);
	pthread_mutex_unlock(&p->lock);
}

/* POOL_STATS on every size change (force) and otherwise at most every
 * STATS_INTERVAL, so a busy pool does not flood the observer. */
static void stats_event(scope_pool_t *p, bool force)
{
	struct sc_pool_info info;
	struct sc_ev ev;
	int64_t now, last;

	if (!sc_observed())
		return;
	now = scope_now();
	last = atomic_load(&p->last_stats);
	if (!force && now - last < STATS_INTERVAL)
		return;
	if (!force && !atomic_compare_exchange_strong(&p->last_stats, &last, now))
		return;
	if (force)
		atomic_store(&p->last_stats, now);
	sc_pool_info(p, &info);
	sc_ev_init(&ev, SC_EV_POOL_STATS);
	ev.a = p->id;
	ev.pool = &info;
	sc_emit(&ev);
}

static void *worker_main(void *arg);

/* Joins workers that exited on their own (keep-alive), so their threads do
 * not linger.  Caller holds p->lock. */
static void reap_locked(scope_pool_t *p)
{
	for (struct worker **wp = &p->workers; *wp;) {
		struct worker *w = *wp;
		if (!w->exited) {
			wp = &w->next;
			continue;
		}
		*wp = w->next;
		pthread_join(w->th, NULL);
		free(w);
	}
}

/* Starts a worker whose first task is first (may be NULL).  Caller holds
 * p->lock and has counted the thread in p->size already. */
static int spawn_locked(scope_pool_t *p, scope_task_t *first)
{
	struct worker *w = calloc(1, sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	reap_locked(p);
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

static void wake_idle_locked(scope_pool_t *p)
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
		rc = spawn_locked(p, task);
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
			if (spawn_locked(p, NULL))
				p->size--;
		}
		return 1;
	}
	if (p->size < p->cfg.max_size) {
		p->size++;
		rc = spawn_locked(p, task);
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
	stats_event(p, false);
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
		stats_event(p, true);
		pthread_mutex_lock(&p->lock);
		if ((task = w->first) != NULL)
			p->active++;
		pthread_mutex_unlock(&p->lock);
		for (; task || (task = take(w)) != NULL; task = NULL)
			run_hooked(p, task, true);
	} else {
		/* No record, no worker: hand the task back and leave. */
		pthread_mutex_lock(&p->lock);
		p->size--;
		if (w->first)
			enqueue_locked(p, w->first);
		pthread_mutex_unlock(&p->lock);
	}
	stats_event(p, true);
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

static void pool_event_create(scope_pool_t *p, int snapshot,
			      void (*emit)(void *, const struct sc_ev *), void *ctx)
{
	struct sc_pool_info info;
	struct sc_ev ev;

	sc_pool_info(p, &info);
	sc_ev_init(&ev, SC_EV_POOL_CREATE);
	ev.snapshot = (uint16_t)snapshot;
	ev.a = p->id;
	ev.s1 = p->name;
	ev.pool = &info;
	if (emit)
		emit(ctx, &ev);
	else
		sc_emit(&ev);
}

int scope_pool_create(scope_pool_t **out, const struct scope_pool_config *cfg)
{
	static const struct scope_pool_config defaults = SCOPE_POOL_CONFIG_INIT;
	const char *name;
	scope_pool_t *p;
	size_t n;
	int rc = 0;

	if (!out)
		return -EINVAL;
	if (!cfg)
		cfg = &defaults;
	if ((unsigned)cfg->queue > SCOPE_QUEUE_DIRECT ||
	    (unsigned)cfg->policy > SCOPE_POLICY_BLOCK || cfg->keep_alive_ns < 0 ||
	    cfg->core_size > POOL_THREADS_MAX || cfg->max_size > POOL_THREADS_MAX)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	name = cfg->name ? cfg->name : "pool";
	n = strnlen(name, SC_NAME_MAX - 1);
	memcpy(p->name, name, n);
	p->cfg = *cfg;
	p->cfg.name = p->name;
	if (!p->cfg.core_size)
		p->cfg.core_size = 1;
	if (p->cfg.max_size < p->cfg.core_size)
		p->cfg.max_size = p->cfg.core_size;
	if (!p->cfg.keep_alive_ns)
		p->cfg.keep_alive_ns = DEFAULT_KEEP_ALIVE;
	if (p->cfg.queue == SCOPE_QUEUE_BOUNDED && !p->cfg.queue_capacity)
		p->cfg.queue_capacity = DEFAULT_QUEUE_CAP;
	p->id = atomic_fetch_add(&next_pool_id, 1);
	sc_mutex_init(&p->lock);
	pthread_cond_init(&p->gone, NULL);
	sc_interrupt_install();
	pthread_mutex_lock(&pools_lock);
	p->next = pools;
	if (pools)
		pools->prev = p;
	pools = p;
	pthread_mutex_unlock(&pools_lock);
	if (sc_observed())
		pool_event_create(p, 0, NULL, NULL);
	if (cfg->prestart) {
		pthread_mutex_lock(&p->lock);
		while (p->size < p->cfg.core_size && rc == 0) {
			p->size++;
			rc = spawn_locked(p, NULL);
			if (rc)
				p->size--;
		}
		pthread_mutex_unlock(&p->lock);
		if (rc) {
			(void)scope_pool_destroy(p);
			return rc;
		}
	}
	*out = p;
	return 0;
}

int scope_pool_shutdown(scope_pool_t *p)
{
	bool last;

	if (!p)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	p->shutdown = true;
	while (p->idle)
		wake_idle_locked(p);
	for (struct blocked *b = p->blocked; b; b = b->next)
		sc_wake(b->t);
	last = p->size == 0 && !p->terminated;
	if (last)
		p->terminated = true;
	pthread_mutex_unlock(&p->lock);
	if (last && p->cfg.hooks.terminated)
		p->cfg.hooks.terminated(p->cfg.hooks.ctx, p);
	return 0;
}

int scope_pool_destroy(scope_pool_t *p)
{
	struct sc_ev ev;

	if (!p)
		return -EINVAL;
	if (p == default_pool || atomic_load(&p->users) > 0)
		return -EBUSY;
	(void)scope_pool_shutdown(p);
	pthread_mutex_lock(&p->lock);
	while (p->live > 0)
		pthread_cond_wait(&p->gone, &p->lock);
	reap_locked(p);
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_lock(&pools_lock);
	if (p->prev)
		p->prev->next = p->next;
	else
		pools = p->next;
	if (p->next)
		p->next->prev = p->prev;
	pthread_mutex_unlock(&pools_lock);
	if (sc_observed()) {
		sc_ev_init(&ev, SC_EV_POOL_DESTROY);
		ev.a = p->id;
		sc_emit(&ev);
	}
	pthread_cond_destroy(&p->gone);
	pthread_mutex_destroy(&p->lock);
	free(p);
	return 0;
}

int scope_pool_stats(const scope_pool_t *cp, struct scope_pool_stats *out)
{
	scope_pool_t *p = (scope_pool_t *)cp;

	if (!p || !out)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	*out = (struct scope_pool_stats){
	    .core_size = p->cfg.core_size,
	    .max_size = p->cfg.max_size,
	    .size = p->size,
	    .active = p->active,
	    .largest = p->largest,
	    .queued = p->queued,
	    .completed = p->completed,
	    .rejected = p->rejected,
	};
	pthread_mutex_unlock(&p->lock);
	return 0;
}

int scope_pool_set_size(scope_pool_t *p, unsigned core, unsigned max)
{
	if (!p || core > POOL_THREADS_MAX || max > POOL_THREADS_MAX)
		return -EINVAL;
	if (!core)
		core = 1;
	if (max < core)
		max = core;
	pthread_mutex_lock(&p->lock);
	p->cfg.core_size = core;
	p->cfg.max_size = max;
	/* Idle workers re-check the bounds; queued work gets new threads. */
	while (p->idle)
		wake_idle_locked(p);
	while (p->queued > 0 && p->size < core && !p->shutdown) {
		p->size++;
		if (spawn_locked(p, NULL)) {
			p->size--;
			break;
		}
	}
	pthread_mutex_unlock(&p->lock);
	stats_event(p, true);
	return 0;
}

void sc_pool_user(scope_pool_t *p, int delta)
{
	atomic_fetch_add(&p->users, delta);
}

unsigned scope_pool_size_for(double utilization, double wait_compute_ratio)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	double n;

	if (ncpu < 1)
		ncpu = 1;
	if (!(utilization > 0.0) || utilization > 1.0)
		utilization = 1.0;
	if (!(wait_compute_ratio >= 0.0))
		wait_compute_ratio = 0.0;
	n = (double)ncpu * utilization * (1.0 + wait_compute_ratio);
	if (n > 65536.0)
		n = 65536.0;
	return n < 1.0 ? 1u : (unsigned)(n + 0.5);
}

static void default_create(void)
{
	struct scope_pool_config cfg = SCOPE_POOL_CONFIG_INIT;

	/* A cached pool: forks hand off to an idle thread or get a new one,
	 * so blocked subtasks never starve each other; past the maximum the
	 * forker runs the task itself rather than failing. */
	cfg.name = "scope";
	cfg.core_size = scope_pool_size_for(1.0, 0.0);
	cfg.max_size = DEFAULT_POOL_MAX;
	cfg.queue = SCOPE_QUEUE_DIRECT;
	cfg.policy = SCOPE_POLICY_CALLER_RUNS;
	if (scope_pool_create(&default_pool, &cfg))
		default_pool = NULL;
}

scope_pool_t *scope_pool_default(void)
{
	pthread_once(&default_once, default_create);
	return default_pool;
}

scope_pool_t *sc_pool_resolve(scope_pool_t *p)
{
	return p ? p : scope_pool_default();
}

void sc_pools_walk(void (*fn)(void *ctx, scope_pool_t *p), void *ctx)
{
	pthread_mutex_lock(&pools_lock);
	for (scope_pool_t *p = pools; p; p = p->next)
		fn(ctx, p);
	pthread_mutex_unlock(&pools_lock);
}

void sc_pool_snapshot(scope_pool_t *p, void (*emit)(void *, const struct sc_ev *), void *ctx)
{
	pool_event_create(p, 1, emit, ctx);
}

const struct scope_pool_hooks *sc_pool_hooks(const scope_pool_t *p)
{
	return &p->cfg.hooks;
}
