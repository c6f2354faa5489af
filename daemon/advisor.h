/* advisor.h - per pool, how long tasks wait for a worker, run, compute, sit
 * runnable and wait on something else, measured from the events the model
 * applies and the workers' CPU time read from /proc, and the pool size that
 * the measurement argues for (N = Ncpu x U x (1 + W/C), docs/advisor.md). */
#ifndef DAEMON_ADVISOR_H
#define DAEMON_ADVISOR_H

#include "jbuf.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct model;
struct m_task;

/* Pools measured apart per process; tasks of further pools are not measured. */
#define ADV_POOLS 32
#define ADV_NAME 48
/* Queue-wait and run-time histograms: quarter-octave buckets from 1 us. */
#define ADV_HBUCKETS 112
/* W/C ratios of each pool's sampling intervals: bucket i holds ratios below
 * adv_wc_bounds[i] (the last: any larger). */
#define ADV_WCBUCKETS 14
extern const double adv_wc_bounds[ADV_WCBUCKETS - 1];
/* Seconds of history behind the sparklines. */
#define ADV_SPARK 60
/* Worker threads whose CPU time is sampled per process. */
#define ADV_MAX_WORKERS 1024
/* A window's length: advice covers the last one to two windows. */
#define ADV_WINDOW_NS 5000000000LL
/* How often workers' CPU time is read, at the most often; and the share
 * of the daemon's time those reads may take, as its inverse (1%). */
#define ADV_SAMPLE_NS 100000000LL
#define ADV_CPU_SHARE 100

struct adv_hist {
	uint64_t b[ADV_HBUCKETS];
	uint64_t n;
	int64_t sum_ns;
};

/* What one pool did over one window. */
struct adv_win {
	int64_t t0, t1; /* the span sampled (daemon monotonic clock) */
	uint64_t forked, ended, rejected;
	/* Over the sampling intervals, summed over the pool's workers: time in
	 * tasks (busy), and of it on a CPU, runnable but not running, and
	 * neither (waiting: I/O, sleep, locks, joins). */
	int64_t busy_ns, cpu_ns, runq_ns, wait_ns;
	int64_t worker_ns;     /* the workers' time present (threads x interval) */
	int64_t worker_cpu_ns; /* the workers' CPU time, in tasks or not */
	uint64_t intervals;    /* sampling intervals with busy time */
	uint64_t wc[ADV_WCBUCKETS];
	/* Queue length and joins, at each sample. */
	uint64_t samples, queued_sum, queued_max, queued_first, queued_last;
	uint32_t size_max;
	double blocked_share_max; /* workers blocked in joins / pool size, while tasks queued */
	uint32_t blocked_max;
	struct adv_hist qwait, run;
};

struct adv_pool {
	uint64_t id;
	char name[ADV_NAME];
	struct adv_win cur, prev;
	/* The pool's counters at the last sample, for the deltas. */
	uint64_t rejected_at;
	bool have_rejected;
	/* Its sizes at the last sample (kept after it is destroyed). */
	uint32_t core, max, size;
	uint64_t queued; /* the larger of the pool's count and the estimate below */
	/* Tasks forked and not ended (not below 0): a pool reports its queue
	 * length when tasks end, so a pool where nothing ends would keep its
	 * last count; this less one per worker is what is queued at least. */
	uint64_t outstanding;
	/* Its declared resource ceiling (scope_pool_set_resource_limit). */
	uint32_t resource_limit;
	char resource[ADV_NAME];
	int64_t busy_ended; /* run time of the pool's tasks ended on its workers, total */
	int64_t busy_at;    /* busy total at the last sample */
	bool have_busy;
	/* Per second: tasks queued (mean) and mean queue wait in microseconds. */
	uint32_t spark_queued[ADV_SPARK], spark_wait_us[ADV_SPARK];
	uint32_t spark_at;
	int64_t spark_t;
	uint64_t spark_qsum, spark_qn, spark_wsum_us, spark_wn;
};

struct adv_thread {
	uint32_t tid;
	uint32_t mark; /* the sample that saw it last */
	int64_t cpu_ns, runq_ns;
};

/* Reads a thread's schedstat: on-CPU and runqueue-wait nanoseconds.  0 or
 * a negative errno.  Tests replace it. */
typedef int (*adv_schedstat_fn)(void *ctx, pid_t pid, uint32_t tid, int64_t *cpu_ns,
				int64_t *runq_ns);

struct advisor {
	struct adv_pool pool[ADV_POOLS];
	uint32_t npools, last;
	struct adv_thread *th;
	uint32_t nth, thcap, mark;
	int64_t last_sample, win_start;
	/* The wait until the next sample: ADV_SAMPLE_NS, or longer when a
	 * sample's /proc reads (one per worker) cost more than ADV_CPU_SHARE
	 * of it, so a pool of thousands of threads does not keep the daemon
	 * busy. */
	int64_t gap;
	/* The process's CPU time (user + system) at the last sample, and over
	 * the current and previous windows. */
	int64_t proc_cpu_at, proc_cpu_cur, proc_cpu_prev;
	bool have_proc_cpu;
	/* CPUs the process may use: affinity and cgroup quota. */
	double ncpu;
	char ncpu_why[96];
	int64_t ncpu_at;
	/* The last scope and worker looked up, and their pools: the tasks of a
	 * fork storm end in runs of one scope on few threads. */
	uint64_t hint_scope, hint_scope_pool;
	struct adv_pool *hint_slot; /* hint_scope_pool's slot (NULL: not looked up yet) */
	uint32_t hint_tid;
	uint64_t hint_tid_pool;
	adv_schedstat_fn read_schedstat;
	void *read_ctx;
	int64_t (*read_proc_cpu)(void *ctx, pid_t pid); /* ns, or < 0 */
	double (*read_ncpu)(void *ctx, pid_t pid, char *why, size_t len);
};

/* A zeroed advisor reading from /proc (new), or NULL. */
struct advisor *advisor_new(void);
void advisor_free(struct advisor *a);

/* Called by the model (m->adv set), outside snapshots. */
void advisor_task_forked(struct model *m, const struct m_task *t);
void advisor_task_ended(struct model *m, const struct m_task *t);

/* Samples the workers of m's process pid at now_ns (daemon monotonic, the
 * clock the events use) when ADV_SAMPLE_NS passed since the last sample. */
void advisor_tick(struct model *m, pid_t pid, int64_t now_ns);

/* ---- the estimate (advisor_math.c) */

enum adv_verdict {
	ADV_COLLECTING = 0, /* not enough measured yet */
	ADV_IDLE,	    /* no tasks */
	ADV_LEAVE,
	ADV_GROW,
	ADV_SHRINK,
	ADV_SATURATED, /* CPU-bound: growing adds nothing */
	ADV_STARVATION,
};

/* Everything the estimate of one pool starts from. */
struct adv_input {
	const struct adv_win *w[2]; /* windows to merge (NULL: none) */
	double ncpu;		    /* > 0 */
	double target_util;	    /* U, 0 < U <= 1 */
	int64_t proc_cpu_ns;	    /* the process's CPU time over the span; < 0 unknown */
	uint32_t core, max, size, queued;
	/* Each task holds one of resource_limit units of resource (0: none
	 * declared): N never goes past it. */
	uint32_t resource_limit;
	const char *resource;
};

struct adv_result {
	enum adv_verdict verdict;
	const char *confidence; /* "none", "low", "medium", "high" */
	double span_s;
	uint64_t forked, ended, rejected;
	double arrival_per_s, throughput_per_s;
	double wc;		       /* W/C, < 0 when there is no CPU time to divide by */
	double wc_p10, wc_p50, wc_p90; /* of the sampling intervals */
	double run_ms, cpu_ms, runq_ms, wait_ms; /* per task, mean */
	double worker_util;			 /* share of worker time in tasks */
	double runnable_share;			 /* of busy time, runnable but not running */
	double cpu_util;			 /* process CPU / (ncpu x span); < 0 unknown */
	double qwait_p50_ms, qwait_p99_ms, run_p50_ms;
	double queued_mean;
	uint64_t queued_max;
	double blocked_share;
	uint32_t blocked_max;
	double n_formula;     /* Ncpu x U x (1 + W/C), bounded */
	uint32_t recommended; /* threads to set the maximum to (0: none) */
	bool queue_growing;   /* queued grew and nothing ended */
	bool capped;	      /* recommended was lowered to the resource limit */
	char reason[512];
};

/* Estimates one pool. */
void adv_estimate(const struct adv_input *in, struct adv_result *r);

/* The verdict's name in JSON ("grow"...). */
const char *adv_verdict_name(enum adv_verdict v);

/* a + b for sums of times a peer's timestamps feed (b >= 0 assumed, a
 * negative b counts as 0): stops at INT64_MAX instead of overflowing. */
static inline int64_t adv_sat_add(int64_t a, int64_t b)
{
	if (b <= 0)
		return a;
	return a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* Histograms. */
void adv_hist_add(struct adv_hist *h, int64_t ns);
/* The q-quantile (0..1) in ns of the merged a and b (b may be NULL); 0 when empty. */
int64_t adv_hist_quantile(const struct adv_hist *a, const struct adv_hist *b, double q);
/* Adds a W/C ratio to a window's distribution. */
void adv_wc_add(struct adv_win *w, double ratio);

/* ---- rendering (advisor_json.c) */

/* The pool's estimate, from the advisor's windows and the model's pool. */
void advisor_result(const struct model *m, const struct adv_pool *p, struct adv_result *r);
/* {"ncpu":..,"ncpu_source":..,"pools":[...]} of m, only pool pool_name when
 * not NULL (matched by name or id). */
void advisor_render(const struct model *m, const char *pool_name, struct jbuf *b);

/* ---- /proc (advisor_proc.c) */

int adv_read_schedstat(void *ctx, pid_t pid, uint32_t tid, int64_t *cpu_ns, int64_t *runq_ns);
/* The calling thread's CPU time, ns (what a sample's reads cost). */
int64_t adv_cpu_now(void);
int64_t adv_read_proc_cpu(void *ctx, pid_t pid);
/* CPUs pid may use: its affinity, lowered by its cgroup's cpu.max quota;
 * why says which. */
double adv_read_ncpu(void *ctx, pid_t pid, char *why, size_t len);

#endif
