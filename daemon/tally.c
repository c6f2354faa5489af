/* tally.c - the running counts behind /metrics, kept as the model applies events. */
#include "tally.h"

#include "model.h"
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* From 10 us to 60 s: a fork storm's tasks take microseconds, a request's
 * scope tree hundreds of milliseconds, a stuck one seconds. */
const int64_t tally_bounds_ns[TALLY_BUCKETS] = {
    10000,     100000,	  1000000,   5000000,	 10000000,   25000000,	  50000000,
    100000000, 250000000, 500000000, 1000000000, 5000000000, 60000000000,
};

struct tally *tally_new(void)
{
	return calloc(1, sizeof(struct tally));
}

void tally_free(struct tally *t)
{
	if (t)
		trace_proc_free(t->trace);
	free(t);
}

void tally_hist_add(struct tally_hist *h, int64_t ns)
{
	if (ns < 0)
		ns = 0;
	size_t i = 0;
	while (i < TALLY_BUCKETS && ns > tally_bounds_ns[i])
		i++;
	h->bucket[i]++;
	h->count++;
	h->sum_ns += ns;
}

/* The slot of pool id, taken on first use; past TALLY_POOLS the last slot. */
static struct tally_pool *pool_slot(struct model *m, uint64_t id)
{
	struct tally *t = m->tally;
	if (t->last < t->npools && t->pool[t->last].id == id)
		return &t->pool[t->last];
	for (uint32_t i = 0; i < t->npools; i++)
		if (t->pool[i].id == id) {
			t->last = i;
			return &t->pool[i];
		}
	if (t->npools == TALLY_POOLS - 1) {
		/* The overflow slot: id UINT64_MAX matches no pool. */
		t->npools = TALLY_POOLS;
		t->pool[TALLY_POOLS - 1].id = UINT64_MAX;
		memcpy(t->pool[TALLY_POOLS - 1].name, TALLY_OTHER, sizeof TALLY_OTHER);
	}
	if (t->npools == TALLY_POOLS)
		return &t->pool[TALLY_POOLS - 1];
	struct tally_pool *p = &t->pool[t->npools];
	t->last = t->npools++;
	p->id = id;
	return p;
}

void tally_task_ended(struct model *m, const struct m_task *task)
{
	const struct m_scope *s = idmap_get(&m->ents[ENT_SCOPE], task->scope);
	uint64_t pool = s ? s->pool : 0;
	struct tally_pool *p = pool_slot(m, pool);
	if (!p->name[0] && pool) {
		const struct m_pool *mp = idmap_get(&m->ents[ENT_POOL], pool);
		if (mp && mp->name)
			snprintf(p->name, sizeof p->name, "%s", mp->name);
	}
	p->ended[task->state < TALLY_STATES ? task->state : TALLY_STATES - 1]++;
	if (task->started && task->forked)
		tally_hist_add(&p->wait, task->started - task->forked);
	if (task->started && task->ended)
		tally_hist_add(&p->run, task->ended - task->started);
	trace_task_ended(m, task);
}

void tally_scope_closed(struct model *m, const struct m_scope *s)
{
	m->tally->scopes_closed++;
	trace_scope_closed(m, s);
}

void tally_scope_cancelled(struct model *m, const struct m_scope *s, uint32_t reason, int64_t ts)
{
	m->tally->cancels[reason < TALLY_REASONS ? reason : 0]++;
	trace_scope_cancelled(m, s, reason, ts);
}

void tally_violation(struct model *m, uint64_t scope, uint32_t kind, int64_t ts)
{
	/* A snapshot repeats the violations the agent keeps: counted once. */
	if (m->in_snapshot)
		return;
	m->tally->violations[kind < TALLY_KINDS ? kind : 0]++;
	trace_violation(m, scope, kind, ts);
}

void tally_event(struct model *m, const struct proto_msg *msg, int64_t now_ns)
{
	/* A snapshot repeats old events with their first times: no lag to
	 * speak of.  Session messages carry no time. */
	if (m->in_snapshot || msg->type < 0x100 || !msg->ts)
		return;
	int64_t ts = msg->end_ts > msg->ts ? msg->end_ts : msg->ts;
	tally_hist_add(&m->tally->lag, now_ns - ts);
}
