/* advisor_math.c - from one pool's measured windows to its figures and a
 * recommendation: N = Ncpu x U x (1 + W/C), and when not to follow it. */
#include "advisor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Past these the estimate has something to say (COLLECTING before). */
#define MIN_TASKS 20
#define MIN_SPAN_NS 1000000000LL
/* Confidence grows with tasks and seconds measured. */
#define HIGH_TASKS 1000
#define HIGH_SPAN_NS 4000000000LL
#define MEDIUM_TASKS 100
/* A CPU-saturated process: this share of its CPUs busy, or this share of
 * its tasks' time spent runnable but not running. */
#define SATURATED_UTIL 0.9
#define SATURATED_RUNNABLE 0.2
/* Starvation: this share of a pool's workers blocked in joins while tasks
 * wait in its queue. */
#define STARVED_SHARE 0.5
/* The formula is followed only past this margin either way. */
#define MARGIN 1.2
/* N is kept within [1, ncpu x ADV_MAX_FACTOR]. */
#define MAX_FACTOR 256.0

const double adv_wc_bounds[ADV_WCBUCKETS - 1] = {0.05, 0.125, 0.25, 0.5, 1,  2, 3,
						 4,    6,     9,    14,	 19, 40};

static const char *const verdicts[] = {
    [ADV_COLLECTING] = "collecting", [ADV_IDLE] = "idle",
    [ADV_LEAVE] = "leave",	     [ADV_GROW] = "grow",
    [ADV_SHRINK] = "shrink",	     [ADV_SATURATED] = "saturated",
    [ADV_STARVATION] = "starvation",
};

const char *adv_verdict_name(enum adv_verdict v)
{
	return (unsigned)v < sizeof verdicts / sizeof verdicts[0] ? verdicts[v] : "unknown";
}

/* Bucket i holds [lo(i), lo(i+1)): lo(0) = 0, then 1 us x 2^((i-1)/4). */
static double bucket_lo(int i)
{
	return i == 0 ? 0 : 1000.0 * exp2((double)(i - 1) / 4.0);
}

/* Each bucket's lower bound in whole ns (bound[i] is bucket_lo(i) rounded
 * up, so an ns count is in bucket i exactly when bound[i] <= ns <
 * bound[i+1]); made on first use. */
static int64_t bound[ADV_HBUCKETS + 1];

void adv_hist_add(struct adv_hist *h, int64_t ns)
{
	if (!bound[1])
		for (int i = 1; i <= ADV_HBUCKETS; i++)
			bound[i] = (int64_t)ceil(bucket_lo(i));
	int i = 0;
	if (ns >= 1000) {
		/* Two task ends a task: no log2 here (it was a tenth of the
		 * daemon's time in a fork storm).  The octave from the top
		 * bit of ns/1000, then its quarter from the bounds. */
		int e = 63 - __builtin_clzll((unsigned long long)(ns / 1000));
		i = 1 + 4 * e;
		if (i >= ADV_HBUCKETS) {
			i = ADV_HBUCKETS - 1;
		} else {
			while (i + 1 < ADV_HBUCKETS && ns >= bound[i + 1])
				i++;
			while (i > 1 && ns < bound[i])
				i--;
		}
	}
	h->b[i]++;
	h->n++;
	h->sum_ns = adv_sat_add(h->sum_ns, ns);
}

int64_t adv_hist_quantile(const struct adv_hist *a, const struct adv_hist *b, double q)
{
	uint64_t n = a->n + (b ? b->n : 0);
	if (!n)
		return 0;
	/* The rank of the quantile, 1-based, then the bucket holding it; its
	 * geometric middle stands for it. */
	uint64_t rank = (uint64_t)ceil(q * (double)n);
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (int i = 0; i < ADV_HBUCKETS; i++) {
		seen += a->b[i] + (b ? b->b[i] : 0);
		if (seen >= rank) {
			if (i == 0)
				return 500;
			return (int64_t)(bucket_lo(i) * exp2(0.125));
		}
	}
	return (int64_t)bucket_lo(ADV_HBUCKETS - 1);
}

void adv_wc_add(struct adv_win *w, double ratio)
{
	int i = 0;
	while (i < ADV_WCBUCKETS - 1 && ratio >= adv_wc_bounds[i])
		i++;
	w->wc[i]++;
}

/* The q-quantile of the merged W/C distributions: the middle of its bucket. */
static double wc_quantile(const uint64_t *a, const uint64_t *b, double q)
{
	uint64_t n = 0;
	for (int i = 0; i < ADV_WCBUCKETS; i++)
		n += a[i] + (b ? b[i] : 0);
	if (!n)
		return -1;
	uint64_t rank = (uint64_t)ceil(q * (double)n), seen = 0;
	if (rank < 1)
		rank = 1;
	for (int i = 0; i < ADV_WCBUCKETS; i++) {
		seen += a[i] + (b ? b[i] : 0);
		if (seen < rank)
			continue;
		double lo = i ? adv_wc_bounds[i - 1] : 0;
		double hi = i < ADV_WCBUCKETS - 1 ? adv_wc_bounds[i] : lo * 2;
		return (lo + hi) / 2;
	}
	return -1;
}

static double ns_ms(double ns)
{
	return ns / 1e6;
}

/* Sums the windows' counters into one. */
static void merge(const struct adv_input *in, struct adv_win *s)
{
	memset(s, 0, sizeof *s);
	for (int k = 0; k < 2; k++) {
		const struct adv_win *w = in->w[k];
		if (!w || !w->t1)
			continue;
		if (!s->t0 || (w->t0 && w->t0 < s->t0))
			s->t0 = w->t0;
		if (w->t1 > s->t1)
			s->t1 = w->t1;
		s->forked += w->forked;
		s->ended += w->ended;
		s->rejected += w->rejected;
		s->busy_ns = adv_sat_add(s->busy_ns, w->busy_ns);
		s->cpu_ns = adv_sat_add(s->cpu_ns, w->cpu_ns);
		s->runq_ns = adv_sat_add(s->runq_ns, w->runq_ns);
		s->wait_ns = adv_sat_add(s->wait_ns, w->wait_ns);
		s->worker_ns = adv_sat_add(s->worker_ns, w->worker_ns);
		s->worker_cpu_ns = adv_sat_add(s->worker_cpu_ns, w->worker_cpu_ns);
		s->intervals += w->intervals;
		s->samples += w->samples;
		s->queued_sum += w->queued_sum;
		if (w->queued_max > s->queued_max)
			s->queued_max = w->queued_max;
		if (w->blocked_share_max > s->blocked_share_max)
			s->blocked_share_max = w->blocked_share_max;
		if (w->blocked_max > s->blocked_max)
			s->blocked_max = w->blocked_max;
		if (w->size_max > s->size_max)
			s->size_max = w->size_max;
	}
	/* First and last queue lengths: of the oldest and newest windows. */
	const struct adv_win *old = in->w[0] && in->w[0]->samples ? in->w[0] : in->w[1];
	const struct adv_win *new = in->w[1] && in->w[1]->samples ? in->w[1] : in->w[0];
	if (old && new) {
		s->queued_first = old->queued_first;
		s->queued_last = new->queued_last;
	}
}

static void say(struct adv_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#include <stdarg.h>
static void say(struct adv_result *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->reason, sizeof r->reason, fmt, ap);
	va_end(ap);
}

/* The figures of the merged window. */
static void figures(const struct adv_input *in, const struct adv_win *s, struct adv_result *r)
{
	double span = s->t1 > s->t0 ? (double)(s->t1 - s->t0) : 0;
	r->span_s = span / 1e9;
	r->forked = s->forked;
	r->ended = s->ended;
	r->rejected = s->rejected;
	r->arrival_per_s = span > 0 ? (double)s->forked * 1e9 / span : 0;
	r->throughput_per_s = span > 0 ? (double)s->ended * 1e9 / span : 0;
	r->wc = s->cpu_ns > 0 ? (double)s->wait_ns / (double)s->cpu_ns : -1;
	const struct adv_win *a = in->w[0] ? in->w[0] : in->w[1];
	const struct adv_win *b = in->w[0] ? in->w[1] : NULL;
	r->wc_p10 = r->wc_p50 = r->wc_p90 = -1;
	if (a) {
		r->wc_p10 = wc_quantile(a->wc, b ? b->wc : NULL, 0.10);
		r->wc_p50 = wc_quantile(a->wc, b ? b->wc : NULL, 0.50);
		r->wc_p90 = wc_quantile(a->wc, b ? b->wc : NULL, 0.90);
		r->qwait_p50_ms =
		    ns_ms((double)adv_hist_quantile(&a->qwait, b ? &b->qwait : NULL, .5));
		r->qwait_p99_ms =
		    ns_ms((double)adv_hist_quantile(&a->qwait, b ? &b->qwait : NULL, .99));
		r->run_p50_ms = ns_ms((double)adv_hist_quantile(&a->run, b ? &b->run : NULL, .5));
		uint64_t n = a->run.n + (b ? b->run.n : 0);
		if (n)
			r->run_ms =
			    ns_ms((double)(a->run.sum_ns + (b ? b->run.sum_ns : 0)) / (double)n);
	}
	/* Per task: the run's mean split in the shares the sampled busy time
	 * had. */
	if (s->busy_ns > 0) {
		r->cpu_ms = r->run_ms * (double)s->cpu_ns / (double)s->busy_ns;
		r->runq_ms = r->run_ms * (double)s->runq_ns / (double)s->busy_ns;
		r->wait_ms = r->run_ms * (double)s->wait_ns / (double)s->busy_ns;
		r->runnable_share = (double)s->runq_ns / (double)s->busy_ns;
	}
	r->worker_util = s->worker_ns > 0 ? (double)s->busy_ns / (double)s->worker_ns : 0;
	if (r->worker_util > 1)
		r->worker_util = 1;
	r->cpu_util = in->proc_cpu_ns >= 0 && span > 0 && in->ncpu > 0
			  ? (double)in->proc_cpu_ns / (in->ncpu * span)
			  : -1;
	r->queued_mean = s->samples ? (double)s->queued_sum / (double)s->samples : 0;
	r->queued_max = s->queued_max;
	r->blocked_share = s->blocked_share_max;
	r->blocked_max = s->blocked_max;
	r->queue_growing = s->samples > 1 && s->queued_last > s->queued_first && s->ended == 0;
	double u = in->target_util > 0 && in->target_util <= 1 ? in->target_util : 1;
	double ncpu = in->ncpu > 0 ? in->ncpu : 1;
	r->n_formula = r->wc >= 0 ? ncpu * u * (1 + r->wc) : -1;
	if (r->n_formula > ncpu * MAX_FACTOR)
		r->n_formula = ncpu * MAX_FACTOR;
	if (r->n_formula >= 0 && r->n_formula < 1)
		r->n_formula = 1;
}

static uint32_t ceil_u32(double x)
{
	return x >= 4294967295.0 ? UINT32_MAX : (uint32_t)ceil(x);
}

/* N as a thread count: the nearest, at least 1 (a measured 2.2 says 2). */
static uint32_t round_u32(double x)
{
	return x >= 4294967295.0 ? UINT32_MAX : x < 1.5 ? 1 : (uint32_t)lround(x);
}

void adv_estimate(const struct adv_input *in, struct adv_result *r)
{
	memset(r, 0, sizeof *r);
	struct adv_win s;
	merge(in, &s);
	figures(in, &s, r);
	uint32_t cur = in->max ? in->max : in->size;
	int64_t span = s.t1 - s.t0;
	r->confidence = "none";
	if (r->queue_growing) {
		r->verdict = ADV_STARVATION;
		r->recommended = cur;
		say(r,
		    "the queue grew from %llu to %llu tasks and no task ended: the pool is stuck "
		    "(its workers are all blocked); find what they wait for (Thread.print)",
		    (unsigned long long)s.queued_first, (unsigned long long)s.queued_last);
		r->confidence = "medium";
		return;
	}
	if (!s.t1) {
		r->verdict = ADV_COLLECTING;
		say(r, "not sampled yet: the first figures come within a second");
		return;
	}
	if (!s.forked && !s.ended && !s.busy_ns) {
		r->verdict = ADV_IDLE;
		r->recommended = 0;
		say(r, "no tasks ran in the last %.1f s: nothing to measure", r->span_s);
		return;
	}
	if (s.ended < MIN_TASKS || span < MIN_SPAN_NS || s.cpu_ns <= 0) {
		r->verdict = ADV_COLLECTING;
		say(r,
		    "%llu tasks and %.1f s measured so far; advice needs at least %d tasks, "
		    "1 s and some CPU time of the workers",
		    (unsigned long long)s.ended, r->span_s, MIN_TASKS);
		return;
	}
	r->confidence = s.ended >= HIGH_TASKS && span >= HIGH_SPAN_NS ? "high"
			: s.ended >= MEDIUM_TASKS		      ? "medium"
								      : "low";
	uint32_t n = round_u32(r->n_formula);
	double ncpu = in->ncpu > 0 ? in->ncpu : 1;
	if (r->blocked_share >= STARVED_SHARE) {
		r->verdict = ADV_STARVATION;
		r->recommended = cur;
		say(r,
		    "%u of the pool's workers (%.0f%%) waited in joins while tasks queued in the "
		    "same pool: joins on tasks that need a worker of a full pool risk a deadlock; "
		    "fork the inner tasks on another pool, or raise the maximum",
		    r->blocked_max, 100 * r->blocked_share);
		return;
	}
	bool saturated = (r->cpu_util >= SATURATED_UTIL) || r->runnable_share >= SATURATED_RUNNABLE;
	if (saturated) {
		r->verdict = ADV_SATURATED;
		r->recommended = cur && n < cur ? n : cur;
		if (r->cpu_util >= SATURATED_UTIL)
			say(r,
			    "the process uses %.0f%% of its %.1f CPUs: more threads would only "
			    "queue for a CPU; don't grow%s",
			    100 * r->cpu_util, ncpu,
			    n < cur ? " (the formula says fewer would do)" : "");
		else
			say(r,
			    "tasks spent %.0f%% of their time runnable but waiting for a CPU: the "
			    "CPUs are saturated (by this process or others); don't grow",
			    100 * r->runnable_share);
		return;
	}
	bool queueing = r->qwait_p50_ms > 0.1 * r->run_p50_ms || r->queued_mean >= 1 || s.rejected;
	if (cur && n > cur * MARGIN && queueing) {
		r->verdict = ADV_GROW;
		r->recommended = n;
		say(r,
		    "tasks wait %.2g ms in the queue (median) while the CPUs are %.0f%% busy, and "
		    "each task waits %.1f ms for every ms it computes: %u threads would keep "
		    "%.1f CPUs busy",
		    r->qwait_p50_ms, r->cpu_util >= 0 ? 100 * r->cpu_util : 0, r->wc, n, ncpu);
		return;
	}
	if (cur && n > cur * MARGIN) {
		r->verdict = ADV_LEAVE;
		r->recommended = cur;
		say(r,
		    "the formula allows %u threads, but tasks do not queue: the load is below "
		    "what %u threads serve; grow only if the load does",
		    n, cur);
		return;
	}
	/* Threads needed for the load (Little's law) with a quarter to spare. */
	double busy_threads =
	    r->worker_util * (s.worker_ns > 0 && span > 0 ? (double)s.worker_ns / (double)span : 0);
	uint32_t need = ceil_u32(busy_threads * 1.25);
	if (need < 1)
		need = 1;
	if (need > n)
		need = n;
	if (in->size > 1 && r->worker_util < 0.5 && need * MARGIN < in->size) {
		r->verdict = ADV_SHRINK;
		r->recommended = need;
		say(r,
		    "the workers were idle %.0f%% of the time: %.1f threads were busy on average, "
		    "so %u would do",
		    100 * (1 - r->worker_util), busy_threads, need);
		return;
	}
	r->verdict = ADV_LEAVE;
	r->recommended = cur;
	say(r, "the size is within 20%% of what the formula gives (%u), or the load needs it", n);
}
