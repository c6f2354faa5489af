/* advisor_json.c - the pool advice as JSON: the "advise" reply's pools
 * (schemas/control.md). */
#include "advisor.h"

#include "model.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void advisor_result(const struct model *m, const struct adv_pool *p, struct adv_result *r)
{
	const struct advisor *a = m->adv;
	const struct m_pool *mp = idmap_get(&m->ents[ENT_POOL], p->id);
	struct adv_input in = {
	    .w = {p->prev.t1 ? &p->prev : NULL, &p->cur},
	    .ncpu = a->ncpu > 0 ? a->ncpu : 1,
	    .target_util = 1,
	    .proc_cpu_ns =
		a->have_proc_cpu ? a->proc_cpu_cur + (p->prev.t1 ? a->proc_cpu_prev : 0) : -1,
	};
	/* The sizes now, or the last sampled of a pool destroyed since. */
	in.core = mp ? mp->cfg.core : p->core;
	in.max = mp ? mp->cfg.max : p->max;
	in.size = mp ? mp->cfg.size : p->size;
	uint64_t q = mp && mp->cfg.queued > p->queued ? mp->cfg.queued : p->queued;
	in.queued = (uint32_t)(q > UINT32_MAX ? UINT32_MAX : q);
	uint64_t lim = mp ? mp->resource_limit : p->resource_limit;
	in.resource_limit = (uint32_t)(lim > UINT32_MAX ? UINT32_MAX : lim);
	in.resource = mp ? mp->resource : p->resource;
	adv_estimate(&in, r);
	/* Events lost make every count low: say so in the confidence. */
	if (m->had_loss && strcmp(r->confidence, "none") != 0)
		r->confidence = "low";
}

/* A finite number, or null. */
static void num(struct jbuf *b, const char *key, double v, bool null_if_negative)
{
	jb_key(b, key);
	if (!isfinite(v) || (null_if_negative && v < 0)) {
		jb_null(b);
		return;
	}
	char s[48];
	int n = snprintf(s, sizeof s, "%.4g", v);
	/* JSON has no exponent-free rule, but "1e+06" is valid JSON; ".4g"
	 * never writes "inf" here (finite). */
	jb_json(b, s, (size_t)n);
}

static void spark(struct jbuf *b, const char *key, const struct adv_pool *p, const uint32_t *v)
{
	jb_key(b, key);
	jb_arr(b);
	uint32_t n = p->spark_at < ADV_SPARK ? p->spark_at : ADV_SPARK;
	for (uint32_t i = 0; i < n; i++)
		jb_u64(b, v[(p->spark_at - n + i) % ADV_SPARK]);
	jb_arr_end(b);
}

static void pool_json(const struct model *m, const struct adv_pool *p, struct jbuf *b)
{
	struct adv_result r;
	advisor_result(m, p, &r);
	const struct m_pool *mp = idmap_get(&m->ents[ENT_POOL], p->id);
	jb_obj(b);
	jb_key(b, "id");
	jb_u64(b, p->id);
	jb_key(b, "name");
	jb_str(b, mp && mp->name ? mp->name : p->name);
	jb_key(b, "live");
	jb_bool(b, mp != NULL);
	jb_key(b, "core");
	jb_u64(b, mp ? mp->cfg.core : p->core);
	jb_key(b, "max");
	jb_u64(b, mp ? mp->cfg.max : p->max);
	jb_key(b, "size");
	jb_u64(b, mp ? mp->cfg.size : p->size);
	jb_key(b, "queued");
	jb_u64(b, mp && mp->cfg.queued > p->queued ? mp->cfg.queued : p->queued);
	num(b, "span_s", r.span_s, false);
	jb_key(b, "tasks_forked");
	jb_u64(b, r.forked);
	jb_key(b, "tasks_ended");
	jb_u64(b, r.ended);
	jb_key(b, "rejected");
	jb_u64(b, r.rejected);
	num(b, "arrival_per_s", r.arrival_per_s, false);
	num(b, "throughput_per_s", r.throughput_per_s, false);
	num(b, "wait_compute_ratio", r.wc, true);
	jb_key(b, "wait_compute_ratio_intervals");
	jb_obj(b);
	num(b, "p10", r.wc_p10, true);
	num(b, "p50", r.wc_p50, true);
	num(b, "p90", r.wc_p90, true);
	jb_obj_end(b);
	num(b, "run_ms", r.run_ms, false);
	num(b, "cpu_ms", r.cpu_ms, false);
	num(b, "runnable_ms", r.runq_ms, false);
	num(b, "wait_ms", r.wait_ms, false);
	num(b, "queue_wait_p50_ms", r.qwait_p50_ms, false);
	num(b, "queue_wait_p99_ms", r.qwait_p99_ms, false);
	num(b, "worker_utilization", r.worker_util, false);
	num(b, "runnable_share", r.runnable_share, false);
	num(b, "cpu_utilization", r.cpu_util, true);
	num(b, "queued_mean", r.queued_mean, false);
	jb_key(b, "queued_max");
	jb_u64(b, r.queued_max);
	jb_key(b, "queue_growing");
	jb_bool(b, r.queue_growing);
	num(b, "join_blocked_share", r.blocked_share, false);
	num(b, "n_formula", r.n_formula, true);
	jb_key(b, "recommended");
	if (r.recommended)
		jb_u64(b, r.recommended);
	else
		jb_null(b);
	jb_key(b, "resource");
	uint64_t lim = mp ? mp->resource_limit : p->resource_limit;
	if (lim) {
		jb_obj(b);
		jb_key(b, "name");
		jb_str(b, mp ? mp->resource : p->resource);
		jb_key(b, "limit");
		jb_u64(b, lim);
		jb_obj_end(b);
	} else {
		jb_null(b);
	}
	jb_key(b, "capped");
	jb_bool(b, r.capped);
	jb_key(b, "verdict");
	jb_str(b, adv_verdict_name(r.verdict));
	jb_key(b, "confidence");
	jb_str(b, r.confidence);
	jb_key(b, "reason");
	jb_str(b, r.reason);
	spark(b, "queued_per_s", p, p->spark_queued);
	spark(b, "queue_wait_us_per_s", p, p->spark_wait_us);
	jb_obj_end(b);
}

void advisor_render(const struct model *m, const char *pool_name, struct jbuf *b)
{
	const struct advisor *a = m->adv;
	jb_obj(b);
	jb_key(b, "enabled");
	jb_bool(b, a != NULL);
	if (a) {
		num(b, "ncpu", a->ncpu, true);
		jb_key(b, "ncpu_source");
		jb_str(b, a->ncpu_why[0] ? a->ncpu_why : NULL);
		num(b, "target_utilization", 1, false);
		num(b, "window_s", (double)ADV_WINDOW_NS / 1e9, false);
	}
	jb_key(b, "pools");
	jb_arr(b);
	for (uint32_t i = 0; a && i < a->npools; i++) {
		const struct adv_pool *p = &a->pool[i];
		if (pool_name) {
			const struct m_pool *mp = idmap_get(&m->ents[ENT_POOL], p->id);
			const char *name = mp && mp->name ? mp->name : p->name;
			char *end;
			unsigned long long id = strtoull(pool_name, &end, 10);
			bool by_id = *pool_name && !*end && id == p->id;
			if (!by_id && strcmp(name, pool_name) != 0)
				continue;
		}
		pool_json(m, p, b);
	}
	jb_arr_end(b);
	jb_obj_end(b);
}
