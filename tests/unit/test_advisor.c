/* test_advisor.c - the pool advisor: its histograms, the estimate and its
 * verdicts from synthetic windows, and the measurement end to end through the
 * model from synthetic events and a fake /proc whose CPU and runqueue times
 * are known. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../daemon/advisor.h"
#include "../../daemon/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS 1000000ll
#define SEC 1000000000ll

static void near(double got, double want, double rel, const char *what)
{
	if (fabs(got - want) > rel * fabs(want)) {
		print_message("%s: %g, wanted %g within %.0f%%\n", what, got, want, 100 * rel);
		fail();
	}
}

static void test_hist_quantiles(void **state)
{
	(void)state;
	struct adv_hist h;
	memset(&h, 0, sizeof h);
	assert_int_equal(adv_hist_quantile(&h, NULL, 0.5), 0);
	/* 1..1000 ms, one each: the median is 500 ms, the 99th 990 ms. */
	for (int i = 1; i <= 1000; i++)
		adv_hist_add(&h, i * MS);
	near((double)adv_hist_quantile(&h, NULL, 0.5), 500 * MS, 0.1, "p50");
	near((double)adv_hist_quantile(&h, NULL, 0.99), 990 * MS, 0.1, "p99");
	/* Merged with a second histogram of the same: the same quantiles. */
	near((double)adv_hist_quantile(&h, &h, 0.5), 500 * MS, 0.1, "merged p50");
	/* Below 1 us, negative, and huge values land in the end buckets. */
	adv_hist_add(&h, -5);
	adv_hist_add(&h, INT64_MAX);
	assert_int_equal(h.n, 1002);
	assert_true(adv_hist_quantile(&h, NULL, 1.0) > 100 * SEC); /* the last bucket */
	assert_int_equal(adv_hist_quantile(&h, NULL, 0.0), 500);
}

/* A window of span s seconds in which every worker of a pool of `workers`
 * was busy `util` of the time, of it cpu share on a CPU, rq runnable, the
 * rest waiting, running n tasks whose queue wait was qwait_ms. */
static struct adv_win window(double s, unsigned workers, double util, double cpu, double rq,
			     uint64_t n, double qwait_ms, double run_ms)
{
	struct adv_win w;
	memset(&w, 0, sizeof w);
	w.t0 = 10 * SEC;
	w.t1 = w.t0 + (int64_t)(s * SEC);
	w.forked = w.ended = n;
	w.worker_ns = (int64_t)(s * SEC) * workers;
	w.busy_ns = (int64_t)((double)w.worker_ns * util);
	w.cpu_ns = (int64_t)((double)w.busy_ns * cpu);
	w.runq_ns = (int64_t)((double)w.busy_ns * rq);
	w.wait_ns = w.busy_ns - w.cpu_ns - w.runq_ns;
	w.worker_cpu_ns = w.cpu_ns;
	w.intervals = (uint64_t)(s * 10) * workers;
	for (uint64_t i = 0; i < n; i++) {
		adv_hist_add(&w.qwait, (int64_t)(qwait_ms * MS));
		adv_hist_add(&w.run, (int64_t)(run_ms * MS));
	}
	for (uint64_t i = 0; i < w.intervals; i++)
		adv_wc_add(&w, cpu > 0 ? (1 - cpu - rq) / cpu : 1e9);
	w.samples = (uint64_t)(s * 10);
	w.queued_sum = w.samples * (qwait_ms > 0 ? 8 : 0);
	return w;
}

static void estimate(const struct adv_win *w, double ncpu, int64_t proc_cpu, unsigned max,
		     struct adv_result *r)
{
	struct adv_input in = {.w = {NULL, w},
			       .ncpu = ncpu,
			       .target_util = 1,
			       .proc_cpu_ns = proc_cpu,
			       .core = max,
			       .max = max,
			       .size = max};
	adv_estimate(&in, r);
}

static void test_grow(void **state)
{
	(void)state;
	/* W/C = 4 (20% on a CPU, 80% waiting), 4 workers always busy, tasks
	 * queue 9 ms: 2 CPUs x (1 + 4) = 10 threads. */
	struct adv_win w = window(8, 4, 1.0, 0.2, 0, 2000, 9, 5);
	struct adv_result r;
	estimate(&w, 2, (int64_t)(8 * SEC * 0.8), 4, &r);
	near(r.wc, 4, 0.01, "W/C");
	near(r.n_formula, 10, 0.01, "N");
	assert_int_equal(r.verdict, ADV_GROW);
	assert_int_equal(r.recommended, 10);
	assert_string_equal(r.confidence, "high");
	near(r.cpu_util, 0.4, 0.01, "CPU utilization");
	near(r.throughput_per_s, 250, 0.01, "throughput");
	near(r.qwait_p50_ms, 9, 0.1, "queue wait p50");
	near(r.cpu_ms, 1, 0.1, "CPU per task");
	near(r.wait_ms, 4, 0.1, "wait per task");
	assert_true(r.wc_p50 >= 3 && r.wc_p50 <= 6);
	assert_non_null(strstr(r.reason, "10 threads"));
	assert_string_equal(adv_verdict_name(r.verdict), "grow");
}

static void test_saturated(void **state)
{
	(void)state;
	/* W/C = 19, but the process keeps its 2 CPUs 95% busy: don't grow. */
	struct adv_win w = window(8, 40, 1.0, 0.05, 0, 2000, 9, 20);
	struct adv_result r;
	estimate(&w, 2, (int64_t)(8 * SEC * 2 * 0.95), 4, &r);
	assert_int_equal(r.verdict, ADV_SATURATED);
	assert_true(r.recommended <= 4);
	assert_non_null(strstr(r.reason, "don't grow"));
	/* Or: the tasks spend a third of their time runnable, the CPUs being
	 * taken by others: also saturated, whatever the process's own use. */
	w = window(8, 4, 1.0, 0.2, 0.35, 2000, 9, 5);
	estimate(&w, 2, (int64_t)(8 * SEC * 0.5), 4, &r);
	assert_int_equal(r.verdict, ADV_SATURATED);
	near(r.runnable_share, 0.35, 0.01, "runnable share");
	/* The runnable time is not counted as waiting: W/C stays 0.45/0.2. */
	near(r.wc, 0.45 / 0.2, 0.01, "W/C without the runnable time");
}

static void test_cpu_bound_leave(void **state)
{
	(void)state;
	/* W/C = 0 on 2 CPUs with 2 threads and the CPUs not full: leave. */
	struct adv_win w = window(8, 2, 0.8, 1.0, 0, 2000, 0.01, 2);
	struct adv_result r;
	estimate(&w, 2, (int64_t)(8 * SEC * 1.6), 2, &r);
	near(r.wc, 0, 0.01, "W/C");
	near(r.n_formula, 2, 0.01, "N");
	assert_int_equal(r.verdict, ADV_LEAVE);
	assert_int_equal(r.recommended, 2);
}

static void test_shrink(void **state)
{
	(void)state;
	/* 16 threads busy 10% of the time with W/C 1: 1.6 busy on average. */
	struct adv_win w = window(8, 16, 0.1, 0.5, 0, 500, 0.01, 2);
	struct adv_result r;
	estimate(&w, 2, (int64_t)(8 * SEC * 0.8), 16, &r);
	assert_int_equal(r.verdict, ADV_SHRINK);
	assert_int_equal(r.recommended, 2);
	assert_string_equal(r.confidence, "medium");
}

static void test_collecting_idle(void **state)
{
	(void)state;
	struct adv_win w = window(8, 4, 1.0, 0.2, 0, 5, 9, 5);
	struct adv_result r;
	estimate(&w, 2, SEC, 4, &r);
	assert_int_equal(r.verdict, ADV_COLLECTING);
	assert_int_equal(r.recommended, 0);
	assert_string_equal(r.confidence, "none");
	w = window(8, 4, 0, 0, 0, 0, 0, 0);
	estimate(&w, 2, 0, 4, &r);
	assert_int_equal(r.verdict, ADV_IDLE);
	/* No window sampled yet. */
	struct adv_input in = {.ncpu = 2};
	adv_estimate(&in, &r);
	assert_int_equal(r.verdict, ADV_COLLECTING);
}

static void test_starvation(void **state)
{
	(void)state;
	struct adv_win w = window(8, 4, 1.0, 0.2, 0, 2000, 9, 5);
	w.blocked_share_max = 0.75;
	w.blocked_max = 3;
	struct adv_result r;
	estimate(&w, 2, SEC, 4, &r);
	assert_int_equal(r.verdict, ADV_STARVATION);
	assert_non_null(strstr(r.reason, "joins"));
	/* A queue that grows while nothing ends: stuck. */
	w = window(8, 4, 0, 0, 0, 0, 0, 0);
	w.forked = 5000;
	w.samples = 80;
	w.queued_first = 10;
	w.queued_last = 5000;
	estimate(&w, 2, 0, 4, &r);
	assert_true(r.queue_growing);
	assert_int_equal(r.verdict, ADV_STARVATION);
	assert_non_null(strstr(r.reason, "no task ended"));
}

/* ---- through the model, with a fake /proc */

struct fake {
	int64_t now;
	double cpu_share, rq_share; /* of each worker's time since 0 */
	int fail_tid;
	int64_t burn_ns; /* CPU time each schedstat read costs */
	int reads;
};

static int fake_schedstat(void *ctx, pid_t pid, uint32_t tid, int64_t *cpu, int64_t *rq)
{
	struct fake *f = ctx;
	(void)pid;
	f->reads++;
	for (int64_t until = adv_cpu_now() + f->burn_ns; adv_cpu_now() < until;)
		;
	if ((int)tid == f->fail_tid)
		return -2;
	*cpu = (int64_t)((double)f->now * f->cpu_share);
	*rq = (int64_t)((double)f->now * f->rq_share);
	return 0;
}

static int64_t fake_proc_cpu(void *ctx, pid_t pid)
{
	struct fake *f = ctx;
	(void)pid;
	return (int64_t)((double)f->now * f->cpu_share * 2);
}

static double fake_ncpu(void *ctx, pid_t pid, char *why, size_t len)
{
	(void)ctx;
	(void)pid;
	snprintf(why, len, "fake: 2 CPUs");
	return 2;
}

static struct proto_str S(const char *s) {
	return (struct proto_str){s, (uint16_t)strlen(s)};
}

static void
apply(struct model *m, struct proto_msg *msg)
{
	assert_int_equal(model_apply(m, msg, msg->ts), 0);
}

static struct proto_msg ev(uint16_t type, int64_t ts, uint32_t tid)
{
	struct proto_msg m;
	memset(&m, 0, sizeof m);
	m.type = type;
	m.ts = ts;
	m.tid = tid;
	return m;
}

/* Two workers run back-to-back tasks of 5 ms for 3 s, each queued 1 ms;
 * their threads are on a CPU cpu_share and runnable rq_share of the time. */
static void run_workload(struct model *m, struct fake *f)
{
	struct proto_msg e = ev(PROTO_EV_POOL_CREATE, 1, 1);
	e.pool_id = 1;
	e.name = S("io");
	e.pool = (struct proto_pool){.core = 2, .max = 2, .size = 2, .queued = 3};
	apply(m, &e);
	for (uint32_t tid = 101; tid <= 102; tid++) {
		e = ev(PROTO_EV_THREAD_START, 1, tid);
		e.pool_id = 1;
		e.role = PROTO_ROLE_WORKER;
		e.name = S("io-1");
		apply(m, &e);
	}
	e = ev(PROTO_EV_SCOPE_OPEN, 1, 1);
	e.scope = 1;
	e.pool_id = 1;
	e.name = S("s");
	apply(m, &e);
	uint64_t task = 1;
	int64_t t = 10 * MS;
	for (int64_t tick = 100 * MS; tick <= 3 * SEC; tick += 100 * MS) {
		/* The tasks that ended by this tick, then the sample. */
		for (; t + 5 * MS <= tick; t += 5 * MS)
			for (uint32_t tid = 101; tid <= 102; tid++, task++) {
				e = ev(PROTO_EV_TASK_FORK, t - MS, 1);
				e.task = task;
				e.scope = 1;
				apply(m, &e);
				e = ev(PROTO_EV_TASK_RAN, t, tid);
				e.task = task;
				e.scope = 1;
				e.end_ts = t + 5 * MS;
				e.state = PROTO_TASK_SUCCESS;
				apply(m, &e);
			}
		f->now = tick;
		advisor_tick(m, 4242, tick);
	}
}

static struct model *model_with_advisor(struct fake *f)
{
	struct model *m = calloc(1, sizeof *m);
	struct model_limits lim = {.retain_ns = SEC};
	model_init(m, &lim);
	m->adv = advisor_new();
	assert_non_null(m->adv);
	m->adv->read_schedstat = fake_schedstat;
	m->adv->read_proc_cpu = fake_proc_cpu;
	m->adv->read_ncpu = fake_ncpu;
	m->adv->read_ctx = f;
	return m;
}

static void test_measured_through_model(void **state)
{
	(void)state;
	/* 20% on a CPU, 2% runnable, 78% waiting: W/C = 3.9. */
	struct fake f = {.cpu_share = 0.2, .rq_share = 0.02};
	struct model *m = model_with_advisor(&f);
	run_workload(m, &f);
	struct advisor *a = m->adv;
	assert_int_equal(a->npools, 1);
	struct adv_result r;
	advisor_result(m, &a->pool[0], &r);
	near(r.wc, 0.78 / 0.2, 0.1, "W/C through the model");
	near(r.runnable_share, 0.02, 0.15, "runnable share");
	near(r.worker_util, 1, 0.1, "worker utilization");
	near(r.qwait_p50_ms, 1, 0.1, "queue wait");
	near(r.run_ms, 5, 0.01, "run time");
	near(r.throughput_per_s, 400, 0.1, "throughput");
	assert_int_equal(r.verdict, ADV_GROW);
	assert_int_equal(r.recommended, 10);
	/* The JSON says the same, and names the pool. */
	struct jbuf b;
	jb_init(&b);
	advisor_render(m, "io", &b);
	jb_raw(&b, "", 1);
	assert_false(b.oom);
	assert_non_null(strstr(b.p, "\"name\":\"io\""));
	assert_non_null(strstr(b.p, "\"verdict\":\"grow\""));
	assert_non_null(strstr(b.p, "\"recommended\":10"));
	jb_reset(&b);
	advisor_render(m, "nosuch", &b);
	jb_raw(&b, "", 1);
	assert_non_null(strstr(b.p, "\"pools\":[]"));
	jb_free(&b);
	model_free(m);
	free(m);
}

/* The declared resource ceiling caps the advice and says why. */
static void test_resource_cap(void **state)
{
	(void)state;
	/* W/C 19 on 2 CPUs: the formula says 40; a connection pool of 20. */
	struct adv_win w = window(8, 8, 1.0, 0.05, 0, 2000, 9, 20);
	struct adv_input in = {.w = {NULL, &w},
			       .ncpu = 2,
			       .target_util = 1,
			       .proc_cpu_ns = (int64_t)(8 * SEC * 0.2),
			       .core = 8,
			       .max = 8,
			       .size = 8,
			       .resource_limit = 20,
			       .resource = "db"};
	struct adv_result r;
	adv_estimate(&in, &r);
	near(r.n_formula, 40, 0.01, "N");
	assert_int_equal(r.verdict, ADV_GROW);
	assert_int_equal(r.recommended, 20);
	assert_true(r.capped);
	assert_non_null(strstr(r.reason, "capped by resource db (20)"));
	assert_non_null(strstr(r.reason, "40 threads"));
	/* Already at the limit: leave it. */
	in.core = in.max = in.size = 20;
	adv_estimate(&in, &r);
	assert_int_equal(r.verdict, ADV_LEAVE);
	assert_int_equal(r.recommended, 20);
	assert_non_null(strstr(r.reason, "capped by resource db (20)"));
	/* Past it: come down to it. */
	in.core = in.max = in.size = 30;
	adv_estimate(&in, &r);
	assert_int_equal(r.verdict, ADV_SHRINK);
	assert_int_equal(r.recommended, 20);
	/* A limit above N changes nothing. */
	in.core = in.max = in.size = 8;
	in.resource_limit = 64;
	adv_estimate(&in, &r);
	assert_int_equal(r.verdict, ADV_GROW);
	assert_int_equal(r.recommended, 40);
	assert_false(r.capped);
	assert_null(strstr(r.reason, "capped"));
	/* No name: still capped, the reason says it was not named. */
	in.resource_limit = 20;
	in.resource = NULL;
	adv_estimate(&in, &r);
	assert_int_equal(r.recommended, 20);
	assert_non_null(strstr(r.reason, "capped by resource (unnamed) (20)"));
}

/* POOL_LIMIT reaches the model, the advice and its JSON; limit 0 clears it. */
static void test_resource_cap_through_model(void **state)
{
	(void)state;
	struct fake f = {.cpu_share = 0.2, .rq_share = 0.02};
	struct model *m = model_with_advisor(&f);
	struct proto_msg e = ev(PROTO_EV_POOL_CREATE, 1, 1);
	e.pool_id = 1;
	e.name = S("io");
	e.pool = (struct proto_pool){.core = 2, .max = 2, .size = 2};
	apply(m, &e);
	e = ev(PROTO_EV_POOL_LIMIT, 1, 1);
	e.pool_id = 1;
	e.limit = 6;
	e.name = S("db connections");
	apply(m, &e);
	run_workload(m, &f);
	struct adv_result r;
	advisor_result(m, &m->adv->pool[0], &r);
	/* W/C 3.9 on 2 CPUs would say 10. */
	assert_int_equal(r.verdict, ADV_GROW);
	assert_int_equal(r.recommended, 6);
	assert_non_null(strstr(r.reason, "capped by resource db connections (6)"));
	struct jbuf b;
	jb_init(&b);
	advisor_render(m, NULL, &b);
	jb_raw(&b, "", 1);
	assert_non_null(strstr(b.p, "\"resource\":{\"name\":\"db connections\",\"limit\":6}"));
	assert_non_null(strstr(b.p, "\"capped\":true"));
	jb_reset(&b);
	struct clockref clk = {0, 0};
	model_render(m, &clk, 0, &b);
	jb_raw(&b, "", 1);
	assert_non_null(strstr(b.p, "\"resource\":{\"name\":\"db connections\",\"limit\":6}"));
	/* Cleared: the formula's 10 again. */
	e = ev(PROTO_EV_POOL_LIMIT, 4 * SEC, 1);
	e.pool_id = 1;
	apply(m, &e);
	advisor_result(m, &m->adv->pool[0], &r);
	assert_int_equal(r.recommended, 10);
	assert_false(r.capped);
	jb_reset(&b);
	advisor_render(m, NULL, &b);
	jb_raw(&b, "", 1);
	assert_non_null(strstr(b.p, "\"resource\":null"));
	jb_free(&b);
	model_free(m);
	free(m);
}

/* A pool whose only worker is blocked: its POOL_STATS stop (they come with
 * task ends) and its last queue length stays 1, but the forks that keep
 * coming with nothing ending show the queue growing: stuck. */
static void test_stuck_without_stats(void **state)
{
	(void)state;
	struct fake f = {.cpu_share = 0, .rq_share = 0};
	struct model *m = model_with_advisor(&f);
	struct proto_msg e = ev(PROTO_EV_POOL_CREATE, 1, 1);
	e.pool_id = 1;
	e.name = S("jam");
	e.pool = (struct proto_pool){.core = 1, .max = 1, .size = 1, .queued = 1};
	apply(m, &e);
	e = ev(PROTO_EV_SCOPE_OPEN, 1, 1);
	e.scope = 1;
	e.pool_id = 1;
	e.name = S("s");
	apply(m, &e);
	uint64_t task = 1;
	for (int64_t tick = 100 * MS; tick <= 2 * SEC; tick += 100 * MS) {
		for (int i = 0; i < 2; i++, task++) {
			e = ev(PROTO_EV_TASK_FORK, tick - 50 * MS, 1);
			e.task = task;
			e.scope = 1;
			apply(m, &e);
		}
		f.now = tick;
		advisor_tick(m, 4242, tick);
	}
	struct adv_result r;
	advisor_result(m, &m->adv->pool[0], &r);
	assert_true(r.queue_growing);
	assert_int_equal(r.verdict, ADV_STARVATION);
	assert_non_null(strstr(r.reason, "no task ended"));
	assert_true(r.queued_max >= 30);
	model_free(m);
	free(m);
}

static void test_unreadable_threads(void **state)
{
	(void)state;
	/* One worker's schedstat cannot be read: the other's CPU time still
	 * counts, the advice still comes, nothing breaks. */
	struct fake f = {.cpu_share = 0.5, .rq_share = 0, .fail_tid = 102};
	struct model *m = model_with_advisor(&f);
	run_workload(m, &f);
	struct adv_result r;
	advisor_result(m, &m->adv->pool[0], &r);
	assert_true(r.wc >= 0);
	model_free(m);
	free(m);
}

/* Reads that cost the daemon more than 1% of the sampling period space
 * the samples out (a pool of thousands of workers, /proc at ~10 us a
 * read): each of the two workers' reads burns 1 ms of CPU here, so a
 * sample costs ~2 ms and the next comes 200 ms later, not 100. */
static void test_costly_reads_sample_less(void **state)
{
	(void)state;
	struct fake f = {.cpu_share = 0.5, .rq_share = 0.1, .burn_ns = MS};
	struct model *m = model_with_advisor(&f);
	run_workload(m, &f);
	/* 30 ticks of 100 ms: 60 reads at the fixed period, as cheap reads
	 * get. */
	print_message("%d schedstat reads in 30 ticks\n", f.reads);
	assert_true(f.reads >= 10 && f.reads <= 32);
	struct adv_result r;
	advisor_result(m, &m->adv->pool[0], &r);
	assert_true(r.wc >= 0);
	model_free(m);
	free(m);

	struct fake cheap = {.cpu_share = 0.5, .rq_share = 0.1};
	m = model_with_advisor(&cheap);
	run_workload(m, &cheap);
	assert_int_equal(cheap.reads, 60);
	model_free(m);
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hist_quantiles),
	    cmocka_unit_test(test_grow),
	    cmocka_unit_test(test_saturated),
	    cmocka_unit_test(test_cpu_bound_leave),
	    cmocka_unit_test(test_shrink),
	    cmocka_unit_test(test_collecting_idle),
	    cmocka_unit_test(test_starvation),
	    cmocka_unit_test(test_measured_through_model),
	    cmocka_unit_test(test_unreadable_threads),
	    cmocka_unit_test(test_costly_reads_sample_less),
	    cmocka_unit_test(test_resource_cap),
	    cmocka_unit_test(test_stuck_without_stats),
	    cmocka_unit_test(test_resource_cap_through_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
