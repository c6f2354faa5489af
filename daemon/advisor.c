/* advisor.c - the per-pool measurement behind the pool advice: task counts and
 * times from the model's events, the workers' CPU and runqueue time sampled
 * from /proc every ADV_SAMPLE_NS and attributed to the time they spent in
 * tasks. */
#include "advisor.h"

#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct advisor *advisor_new(void)
{
	struct advisor *a = calloc(1, sizeof *a);
	if (!a)
		return NULL;
	a->read_schedstat = adv_read_schedstat;
	a->read_proc_cpu = adv_read_proc_cpu;
	a->read_ncpu = adv_read_ncpu;
	return a;
}

void advisor_free(struct advisor *a)
{
	if (a)
		free(a->th);
	free(a);
}

/* The slot of pool id, taken on first use; NULL past ADV_POOLS. */
static struct adv_pool *pool_slot(struct advisor *a, uint64_t id, bool take)
{
	if (a->last < a->npools && a->pool[a->last].id == id)
		return &a->pool[a->last];
	for (uint32_t i = 0; i < a->npools; i++)
		if (a->pool[i].id == id) {
			a->last = i;
			return &a->pool[i];
		}
	if (!take || a->npools == ADV_POOLS)
		return NULL;
	struct adv_pool *p = &a->pool[a->npools];
	memset(p, 0, sizeof *p);
	a->last = a->npools++;
	p->id = id;
	return p;
}

/* The pool t's scope forks on (0: none known). */
static uint64_t task_pool(const struct model *m, const struct m_task *t)
{
	const struct m_scope *s = idmap_get(&m->ents[ENT_SCOPE], t->scope);
	return s ? s->pool : 0;
}

static struct adv_pool *named_slot(struct model *m, uint64_t id)
{
	struct adv_pool *p = pool_slot(m->adv, id, true);
	if (p && !p->name[0]) {
		const struct m_pool *mp = idmap_get(&m->ents[ENT_POOL], id);
		if (mp && mp->name)
			snprintf(p->name, sizeof p->name, "%s", mp->name);
	}
	return p;
}

static struct adv_pool *task_slot(struct model *m, const struct m_task *t);

void advisor_task_forked(struct model *m, const struct m_task *t)
{
	struct adv_pool *p = task_slot(m, t);
	if (p) {
		p->cur.forked++;
		p->outstanding++;
	}
}

/* The slot of the pool t's scope forks on (NULL: none), through the last
 * scope's hint.  A scope's pool never changes, so the hint stays right
 * while the scope lives; ids are not reused within a process; slots are
 * never freed. */
static struct adv_pool *task_slot(struct model *m, const struct m_task *t)
{
	struct advisor *a = m->adv;
	if (!t->scope || t->scope != a->hint_scope) {
		a->hint_scope = t->scope;
		a->hint_scope_pool = task_pool(m, t);
		a->hint_slot = NULL;
	}
	if (!a->hint_scope_pool)
		return NULL;
	struct adv_pool *p = a->hint_slot;
	if (!p || !p->name[0]) /* (named once the pool's name is known) */
		p = a->hint_slot = named_slot(m, a->hint_scope_pool);
	return p;
}

/* The pool of thread tid (0: none), through the last worker's hint, which
 * is refreshed at every sample (a thread's pool is set once, at its start). */
static uint64_t thread_pool_hinted(struct model *m, uint32_t tid)
{
	struct advisor *a = m->adv;
	if (tid && tid == a->hint_tid)
		return a->hint_tid_pool;
	const struct m_thread *th = idmap_get(&m->ents[ENT_THREAD], tid);
	a->hint_tid = tid;
	a->hint_tid_pool = th ? th->pool : 0;
	return a->hint_tid_pool;
}

void advisor_task_ended(struct model *m, const struct m_task *t)
{
	struct adv_pool *p = task_slot(m, t);
	uint64_t id = m->adv->hint_scope_pool;
	if (p && p->outstanding)
		p->outstanding--;
	if (!p || t->started <= 0)
		return; /* never ran: no wait or run to speak of */
	p->cur.ended++;
	if (t->forked > 0 && t->started >= t->forked) {
		adv_hist_add(&p->cur.qwait, t->started - t->forked);
		p->spark_wsum_us += (uint64_t)(t->started - t->forked) / 1000;
		p->spark_wn++;
	}
	if (t->ended < t->started)
		return;
	adv_hist_add(&p->cur.run, t->ended - t->started);
	/* Busy time counts where CPU time is sampled: on the pool's own
	 * workers (a joiner that ran the task inline is not one). */
	if (thread_pool_hinted(m, t->worker) == id)
		p->busy_ended = adv_sat_add(p->busy_ended, t->ended - t->started);
}

/* The thread record of tid, near where it was found last time (hint). */
static struct adv_thread *thread_rec(struct advisor *a, uint32_t tid, uint32_t *hint)
{
	for (uint32_t k = 0; k < a->nth; k++) {
		uint32_t i = (*hint + k) % a->nth;
		if (a->th[i].tid == tid) {
			*hint = i + 1;
			return &a->th[i];
		}
	}
	if (a->nth == a->thcap) {
		uint32_t cap = a->thcap ? a->thcap * 2 : 16;
		if (cap > ADV_MAX_WORKERS)
			return NULL;
		struct adv_thread *n = realloc(a->th, cap * sizeof *n);
		if (!n)
			return NULL;
		a->th = n;
		a->thcap = cap;
	}
	struct adv_thread *r = &a->th[a->nth++];
	*r = (struct adv_thread){.tid = tid, .cpu_ns = -1};
	return r;
}

/* Forgets threads the last sample did not see (exited). */
static void thread_sweep(struct advisor *a)
{
	uint32_t o = 0;
	for (uint32_t i = 0; i < a->nth; i++)
		if (a->th[i].mark == a->mark)
			a->th[o++] = a->th[i];
	a->nth = o;
}

/* Per pool over one sampling interval. */
struct interval {
	int64_t busy_running; /* time in tasks still running, up to now */
	int64_t cpu, runq;    /* the workers' deltas */
	uint32_t workers, blocked;
	bool sampled;
};

/* Starts a new window when the current one is ADV_WINDOW_NS old. */
static void roll(struct advisor *a, int64_t now)
{
	if (!a->win_start)
		a->win_start = now;
	if (now - a->win_start < ADV_WINDOW_NS)
		return;
	for (uint32_t i = 0; i < a->npools; i++) {
		struct adv_pool *p = &a->pool[i];
		p->prev = p->cur;
		memset(&p->cur, 0, sizeof p->cur);
	}
	a->proc_cpu_prev = a->proc_cpu_cur;
	a->proc_cpu_cur = 0;
	a->win_start = now;
}

/* The per-second sparklines of pool p. */
static void spark(struct adv_pool *p, uint64_t queued, int64_t now)
{
	p->spark_qsum += queued;
	p->spark_qn++;
	if (!p->spark_t)
		p->spark_t = now;
	if (now - p->spark_t < 1000000000LL)
		return;
	uint32_t at = p->spark_at++ % ADV_SPARK;
	p->spark_queued[at] = (uint32_t)(p->spark_qn ? p->spark_qsum / p->spark_qn : 0);
	uint64_t w = p->spark_wn ? p->spark_wsum_us / p->spark_wn : 0;
	p->spark_wait_us[at] = w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
	p->spark_qsum = p->spark_qn = p->spark_wsum_us = p->spark_wn = 0;
	p->spark_t = now;
}

/* Attributes one pool's interval: CPU first, then runnable, the rest waiting. */
static void attribute(struct adv_pool *p, const struct interval *iv, int64_t dt)
{
	struct adv_win *w = &p->cur;
	int64_t busy_total = adv_sat_add(p->busy_ended, iv->busy_running);
	int64_t busy = p->have_busy ? busy_total - p->busy_at : 0;
	p->busy_at = busy_total;
	p->have_busy = true;
	if (!iv->sampled)
		return;
	w->worker_ns = adv_sat_add(w->worker_ns, (int64_t)iv->workers * dt);
	w->worker_cpu_ns = adv_sat_add(w->worker_cpu_ns, iv->cpu);
	if (busy <= 0)
		return;
	/* The workers' CPU time outside tasks (spinning, parking) cannot be
	 * told apart here: CPU time counts as the tasks' up to their busy time. */
	int64_t cpu = iv->cpu < busy ? iv->cpu : busy;
	int64_t rq = iv->runq < busy - cpu ? iv->runq : busy - cpu;
	w->busy_ns = adv_sat_add(w->busy_ns, busy);
	w->cpu_ns = adv_sat_add(w->cpu_ns, cpu);
	w->runq_ns = adv_sat_add(w->runq_ns, rq);
	w->wait_ns = adv_sat_add(w->wait_ns, busy - cpu - rq);
	w->intervals++;
	adv_wc_add(w, cpu > 0 ? (double)(busy - cpu - rq) / (double)cpu : 1e9);
}

void advisor_tick(struct model *m, pid_t pid, int64_t now)
{
	struct advisor *a = m->adv;
	if (!a || (a->last_sample && now - a->last_sample < (a->gap ? a->gap : ADV_SAMPLE_NS)))
		return;
	int64_t cost_from = adv_cpu_now();
	int64_t dt = a->last_sample ? now - a->last_sample : 0;
	bool first = !a->last_sample;
	a->last_sample = now;
	roll(a, now);
	if (!a->ncpu_at || now - a->ncpu_at > 10 * 1000000000LL) {
		a->ncpu = a->read_ncpu(a->read_ctx, pid, a->ncpu_why, sizeof a->ncpu_why);
		a->ncpu_at = now;
	}
	int64_t pc = a->read_proc_cpu(a->read_ctx, pid);
	if (pc >= 0) {
		if (a->have_proc_cpu && pc >= a->proc_cpu_at)
			a->proc_cpu_cur += pc - a->proc_cpu_at;
		a->proc_cpu_at = pc;
		a->have_proc_cpu = true;
	}

	struct interval iv[ADV_POOLS];
	memset(iv, 0, sizeof iv);
	/* Pools known to the model get a slot even before their first task. */
	const struct live_set *pools = &m->live[ENT_POOL];
	for (uint32_t i = 0; i < pools->n; i++) {
		const struct m_pool *mp = pools->e[i];
		if (!(mp->flags & EF_PLACEHOLDER))
			named_slot(m, mp->id);
	}
	a->mark++;
	a->hint_tid = 0; /* a tid may have been reused by a new thread */
	a->hint_scope = 0;
	uint32_t hint = 0;
	const struct live_set *ths = &m->live[ENT_THREAD];
	for (uint32_t i = 0; i < ths->n; i++) {
		const struct m_thread *t = ths->e[i];
		if (!t->pool || (t->flags & EF_ENDED))
			continue;
		struct adv_pool *p = pool_slot(a, t->pool, false);
		if (!p)
			continue;
		struct interval *v = &iv[p - a->pool];
		v->workers++;
		if (t->task) {
			const struct m_task *task = idmap_get(&m->ents[ENT_TASK], t->task);
			if (task && task->started > 0 && !(task->flags & EF_ENDED) &&
			    task->started < now && task_pool(m, task) == t->pool)
				v->busy_running = adv_sat_add(v->busy_running, now - task->started);
		}
		struct adv_thread *r = thread_rec(a, (uint32_t)t->id, &hint);
		int64_t cpu, rq;
		if (!r || a->read_schedstat(a->read_ctx, pid, (uint32_t)t->id, &cpu, &rq) != 0)
			continue;
		r->mark = a->mark;
		if (r->cpu_ns >= 0 && cpu >= r->cpu_ns && rq >= r->runq_ns) {
			v->cpu += cpu - r->cpu_ns;
			v->runq += rq - r->runq_ns;
			v->sampled = true;
		}
		r->cpu_ns = cpu;
		r->runq_ns = rq;
	}
	thread_sweep(a);
	/* The reads above are nearly all of a sample's cost: at most
	 * 1/ADV_CPU_SHARE of the daemon's time goes to them. */
	int64_t cost = adv_cpu_now() - cost_from;
	a->gap = cost * ADV_CPU_SHARE > ADV_SAMPLE_NS ? cost * ADV_CPU_SHARE : ADV_SAMPLE_NS;

	/* Workers blocked in a join: owners of scopes in a join not yet ended. */
	const struct live_set *scs = &m->live[ENT_SCOPE];
	for (uint32_t i = 0; i < scs->n && i < 200000; i++) {
		const struct m_scope *s = scs->e[i];
		if ((s->flags & (EF_JOINING | EF_JOINED | EF_ENDED)) != EF_JOINING)
			continue;
		const struct m_thread *t = idmap_get(&m->ents[ENT_THREAD], s->owner);
		struct adv_pool *p = t && t->pool ? pool_slot(a, t->pool, false) : NULL;
		if (p)
			iv[p - a->pool].blocked++;
	}

	for (uint32_t i = 0; i < a->npools; i++) {
		struct adv_pool *p = &a->pool[i];
		struct adv_win *w = &p->cur;
		const struct m_pool *mp = idmap_get(&m->ents[ENT_POOL], p->id);
		if (first || !w->t0)
			w->t0 = now - dt;
		w->t1 = now;
		if (!first)
			attribute(p, &iv[i], dt);
		else
			attribute(p, &(struct interval){.busy_running = iv[i].busy_running}, 0);
		if (!mp)
			continue;
		uint64_t q = mp->cfg.queued;
		if (p->outstanding > mp->cfg.size && p->outstanding - mp->cfg.size > q)
			q = p->outstanding - mp->cfg.size;
		p->core = mp->cfg.core;
		p->max = mp->cfg.max;
		p->size = mp->cfg.size;
		p->queued = q;
		p->resource_limit =
		    mp->resource_limit > UINT32_MAX ? UINT32_MAX : (uint32_t)mp->resource_limit;
		snprintf(p->resource, sizeof p->resource, "%s", mp->resource ? mp->resource : "");
		if (!w->samples)
			w->queued_first = q;
		w->samples++;
		w->queued_sum += q;
		w->queued_last = q;
		if (q > w->queued_max)
			w->queued_max = q;
		if (mp->cfg.size > w->size_max)
			w->size_max = mp->cfg.size;
		if (p->have_rejected && mp->cfg.rejected >= p->rejected_at)
			w->rejected += mp->cfg.rejected - p->rejected_at;
		p->rejected_at = mp->cfg.rejected;
		p->have_rejected = true;
		uint32_t size = mp->cfg.size > iv[i].workers ? mp->cfg.size : iv[i].workers;
		if (q > 0 && size > 0) {
			double share = (double)iv[i].blocked / size;
			if (share > w->blocked_share_max)
				w->blocked_share_max = share;
			if (iv[i].blocked > w->blocked_max)
				w->blocked_max = iv[i].blocked;
		}
		spark(p, q, now);
	}
}
