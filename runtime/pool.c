/* pool.c - thread pools configured like ThreadPoolExecutor: creation,
 * shutdown, sizes, statistics, the default pool, and how pools show in
 * events and snapshots.  The work itself is in pool_work.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool_int.h"

#define DEFAULT_KEEP_ALIVE 60000000000LL /* 60 s, as ThreadPoolExecutor's examples */
#define DEFAULT_QUEUE_CAP 64
#define POOL_THREADS_MAX 32768	   /* more is a mistake, not a configuration */
#define STATS_INTERVAL 100000000LL /* at most ~10 POOL_STATS per second */

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static scope_pool_t *pools;
static _Atomic uint64_t next_pool_id = 1;
/* Made on first use; a failed attempt (out of memory, no threads) is tried
 * again by the next user rather than remembered forever. */
static _Atomic(scope_pool_t *) default_pool;
static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_setup(void);

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
	unsigned active = (unsigned)atomic_load(&p->active);
	uint64_t completed = atomic_load(&p->completed);

	sc_pool_dq_stats(p, &active, &completed);
	*o = (struct sc_pool_info){
	    .core = p->cfg.core_size,
	    .max = p->cfg.max_size,
	    .size = p->size,
	    .active = active,
	    .largest = p->largest,
	    .queue_kind = p->cfg.queue,
	    .policy = p->cfg.policy,
	    .queue_capacity = p->cfg.queue_capacity,
	    .queued = p->queued + sc_pool_dq_count(p),
	    .completed = completed,
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

/* The kernel's tick-resolution clock: a few ns from the vDSO against the
 * precise clock's tens, and every task's end asks it; a tick is far below
 * STATS_INTERVAL. */
static int64_t coarse_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* POOL_STATS on every size change (force) and otherwise at most every
 * STATS_INTERVAL, so a busy pool does not flood the observer. */
void sc_pool_stats_event(scope_pool_t *p, bool force)
{
	struct sc_pool_info info;
	struct sc_ev ev;
	int64_t now, last;

	if (!sc_observed())
		return;
	now = coarse_now();
	last = atomic_load_explicit(&p->last_stats, memory_order_relaxed);
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
	    cfg->core_size > POOL_THREADS_MAX || cfg->max_size > POOL_THREADS_MAX ||
	    (cfg->priority_queue && cfg->queue == SCOPE_QUEUE_DIRECT))
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->slots = aligned_alloc(_Alignof(struct sc_dq), SC_DQ_SLOTS * sizeof(struct sc_dq));
	if (!p->slots) {
		free(p);
		return -ENOMEM;
	}
	memset(p->slots, 0, SC_DQ_SLOTS * sizeof(struct sc_dq));
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
	/* Unbounded queues take the lock-free path; bounded ones and
	 * hand-offs keep the queue their saturation policies count. */
	p->fast = p->cfg.queue == SCOPE_QUEUE_UNBOUNDED && !cfg->priority_queue;
	/* A priority pool orders every fork in one heap, so forks skip the
	 * deques (pool_prio.c). */
	p->prio = cfg->priority_queue;
	sc_mutex_init(&p->lock);
	pthread_cond_init(&p->gone, NULL);
	sc_interrupt_install();
	pthread_once(&atfork_once, atfork_setup);
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
			rc = sc_pool_spawn_locked(p, NULL);
			if (rc)
				p->size--;
		}
		sc_pool_unlock(p);
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
	/* Shared by everything in the process: one caller must not stop
	 * every other's forks. */
	if (p == atomic_load(&default_pool))
		return -EBUSY;
	pthread_mutex_lock(&p->lock);
	p->shutdown = true;
	atomic_store(&p->down, true);
	while (p->idle)
		sc_pool_wake_idle_locked(p);
	for (struct blocked *b = p->blocked; b; b = b->next)
		sc_wake(b->t);
	last = p->size == 0 && !p->terminated;
	if (last)
		p->terminated = true;
	sc_pool_unlock(p);
	if (last && p->cfg.hooks.terminated)
		p->cfg.hooks.terminated(p->cfg.hooks.ctx, p);
	return 0;
}

int scope_pool_destroy(scope_pool_t *p)
{
	struct sc_ev ev;

	if (!p)
		return -EINVAL;
	if (p == atomic_load(&default_pool) || atomic_load(&p->users) > 0)
		return -EBUSY;
	(void)scope_pool_shutdown(p);
	pthread_mutex_lock(&p->lock);
	while (p->live > 0)
		pthread_cond_wait(&p->gone, &p->lock);
	sc_pool_reap_locked(p);
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
	for (unsigned i = 0; i < SC_DQ_SLOTS; i++)
		free(p->slots[i].ring);
	free(p->slots);
	free(p->heap.v);
	free(p);
	return 0;
}

int scope_pool_stats(const scope_pool_t *cp, struct scope_pool_stats *out)
{
	scope_pool_t *p = (scope_pool_t *)cp;

	if (!p || !out)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	unsigned active = (unsigned)atomic_load(&p->active);
	uint64_t completed = atomic_load(&p->completed);
	sc_pool_dq_stats(p, &active, &completed);
	size_t queued = p->queued + sc_pool_dq_count(p);
	*out = (struct scope_pool_stats){
	    .core_size = p->cfg.core_size,
	    .max_size = p->cfg.max_size,
	    .size = p->size,
	    .active = active,
	    .largest = p->largest,
	    .queued = queued,
	    .completed = completed,
	    .rejected = p->rejected,
	    .lent = p->lent,
	    .compensations = p->compensations,
	    /* Whatever path a task took (the deques, the locked queue, a
	     * new thread), it is queued, running or done. */
	    .submitted = completed + active + queued,
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
		sc_pool_wake_idle_locked(p);
	while (sc_pool_any_work(p) && p->size - p->lent < core && !p->shutdown) {
		p->size++;
		if (sc_pool_spawn_locked(p, NULL)) {
			p->size--;
			break;
		}
	}
	sc_pool_unlock(p);
	sc_pool_stats_event(p, true);
	return 0;
}

bool sc_pool_dq_give_back(struct sc_thread *t, bool only_empty)
{
	bool ok = true;

	if (!t->dq)
		return true;
	/* The pool may be gone: found by id, it cannot go while looked at. */
	pthread_mutex_lock(&pools_lock);
	for (scope_pool_t *p = pools; p; p = p->next) {
		if (p->id != t->dq_pool)
			continue;
		pthread_mutex_lock(&p->lock);
		ok = sc_pool_dq_drop_locked(p, t, only_empty);
		if (ok && p->queued && p->idle && !p->spinners)
			sc_pool_wake_idle_locked(p);
		sc_pool_unlock(p);
		break;
	}
	pthread_mutex_unlock(&pools_lock);
	if (ok)
		t->dq = NULL;
	return ok;
}

void sc_pool_dq_release(struct sc_thread *t)
{
	(void)sc_pool_dq_give_back(t, false);
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

/* In a fork child no worker came along: each pool starts over with no
 * threads and without the parent's queued subtasks, which are not the
 * child's to run. */
static void pools_after_fork(void)
{
	pthread_mutex_init(&pools_lock, NULL);
	sc_pool_monitor_after_fork();
	for (scope_pool_t *p = pools; p; p = p->next) {
		sc_mutex_init(&p->lock);
		pthread_cond_init(&p->gone, NULL);
		/* The scopes' lists still link the parent's tasks: the new
		 * generation tells them to start empty. */
		p->inject.head = p->inject.tail = NULL;
		p->ndeque = 0;
		p->heap.n = 0;
		p->lent = 0;
		p->gen++;
		atomic_store(&p->queued, 0);
		p->workers = p->idle = NULL;
		p->blocked = NULL;
		p->size = p->live = p->spinners = 0;
		atomic_store(&p->spinning, 0);
		atomic_store(&p->nidle, 0);
		atomic_store(&p->fast_ok, false);
		atomic_store(&p->over, false);
		sc_pool_dq_after_fork(p);
		atomic_store(&p->active, 0);
		p->terminated = false;
	}
}

static void atfork_setup(void)
{
	(void)pthread_atfork(NULL, NULL, pools_after_fork);
}

/* SCOPE_POOL_PARALLELISM: the default pool's thread count (default: the
 * CPUs less one, at least one), as Java's ForkJoinPool.common.parallelism; 0 when unset or not a
 * number in 1..POOL_PARALLELISM_MAX (the variable is then ignored). */
#define POOL_PARALLELISM_MAX 4096u
static unsigned parallelism_from_env(void)
{
	const char *v = getenv("SCOPE_POOL_PARALLELISM");
	char *end;
	unsigned long n;

	if (!v || *v < '0' || *v > '9')
		return 0;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || n < 1 || n > POOL_PARALLELISM_MAX)
		return 0;
	return (unsigned)n;
}

static scope_pool_t *default_create(void)
{
	struct scope_pool_config cfg = SCOPE_POOL_CONFIG_INIT;
	unsigned n = parallelism_from_env();

	/* One thread per CPU but one, as TBB's arena and Java's common pool
	 * size themselves: the forking thread runs subtasks in its join too,
	 * and a worker more only made three threads share two CPUs (fib(24)
	 * on a quiet 2-CPU host: 0.72x the time with one worker).  An
	 * unbounded queue, so a fork is a push and never blocks; a worker
	 * parked in any runtime wait (join, close, sleep, fd wait) lends its
	 * place, so blocked subtasks never starve the queued ones. */
	unsigned ncpu = scope_pool_size_for(1.0, 0.0);
	cfg.name = "scope";
	cfg.core_size = n ? n : ncpu > 1 ? ncpu - 1 : 1;
	cfg.max_size = cfg.core_size;
	cfg.queue = SCOPE_QUEUE_UNBOUNDED;
	cfg.policy = SCOPE_POLICY_ABORT;
	cfg.keep_alive_ns = DEFAULT_KEEP_ALIVE;
	/* Started now, so the first forks find threads waiting rather than
	 * each paying a thread's creation. */
	cfg.prestart = true;
	scope_pool_t *p;
	if (scope_pool_create(&p, &cfg))
		return NULL;
	p->lend_all = true;
	sc_pool_monitor_start(p);
	return p;
}

scope_pool_t *scope_pool_default(void)
{
	scope_pool_t *p = atomic_load_explicit(&default_pool, memory_order_acquire);

	if (p)
		return p;
	pthread_mutex_lock(&default_lock);
	p = atomic_load_explicit(&default_pool, memory_order_relaxed);
	if (!p) {
		p = default_create();
		atomic_store_explicit(&default_pool, p, memory_order_release);
	}
	pthread_mutex_unlock(&default_lock);
	return p;
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
	sc_pool_limit_snapshot(p, emit, ctx);
}

const struct scope_pool_hooks *sc_pool_hooks(const scope_pool_t *p)
{
	return &p->cfg.hooks;
}
