/* bench_otelctx.c - what the OpenTelemetry thread context (OTEP 4947,
 * runtime/otelctx.c) costs per task switch: the record's writes when a task
 * starts and ends, with the context on and off in the same run, batches
 * interleaved, for each pattern of switching between scopes; then whole
 * forks and joins, on and off.  Target: <= 2 ns per task switch. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "otelctx.h"
#include "rt.h"
#include "scope.h"

#define BATCHES 25
#define SWITCHES 2000000
#define SCOPES 2000
#define FORKS 16

#define ROTATE_MAX 256

static scope_t scope_r[ROTATE_MAX];
static scope_task_t task_r[ROTATE_MAX];

/* One start and end of a task, as sc_task_run does them, for a task of
 * the i-th scope of n taken in turn (n 1: always the same scope and fork
 * site, as a worker running one fan-out); one function per n, so that
 * each is as plain as the code around sc_task_run's. */
#define SWITCH_N(n)                                                                                \
	static void switch_##n(uint64_t i)                                                         \
	{                                                                                          \
		scope_task_t *t = &task_r[i & ((n)-1)];                                            \
                                                                                                   \
		t->id = i;                                                                         \
		sc_otel_enter(t);                                                                  \
		__asm__ __volatile__("" ::: "memory"); /* the task's code */                       \
		sc_otel_leave(NULL);                                                               \
	}
SWITCH_N(1)
SWITCH_N(2)
SWITCH_N(8)
SWITCH_N(16)
SWITCH_N(64)
SWITCH_N(256)

/* The same for the first task of a new scope every time: what the first
 * thread to run a task of a scope pays once (it builds the trace and
 * attributes and hangs them off the scope). */
static uint64_t fresh_id = 1000;
static void switch_fresh(uint64_t i)
{
	scope_task_t *t = &task_r[0];

	sc_otel_scope_free(t->scope);
	t->scope->id = fresh_id++;
	t->id = i;
	sc_otel_enter(t);
	__asm__ __volatile__("" ::: "memory");
	sc_otel_leave(NULL);
}

/* ns per call of op over n calls, the context on or off. */
static double batch(void (*op)(uint64_t), int n, bool on)
{
	int64_t t0;

	sc_otel_enable(on);
	t0 = bench_now_ns();
	for (int i = 1; i <= n; i++)
		op((uint64_t)i);
	return (double)(bench_now_ns() - t0) / n;
}

static int empty(void *arg, void **res)
{
	(void)arg, (void)res;
	return 0;
}

/* open, FORKS empty tasks, join, close: SCOPES times. */
static void forks(uint64_t unused)
{
	(void)unused;
	for (int k = 0; k < SCOPES; k++) {
		scope_t *s;
		if (scope_open(&s, NULL) < 0)
			abort();
		for (int j = 0; j < FORKS; j++)
			if (scope_fork(s, empty, NULL, NULL) < 0)
				abort();
		scope_join(s);
		scope_close(s);
	}
}

static double batch_forks(bool on)
{
	int64_t t0;

	sc_otel_enable(on);
	t0 = bench_now_ns();
	forks(0);
	return (double)(bench_now_ns() - t0) / (SCOPES * FORKS);
}

struct row {
	double on, off, diff, lo, hi;
};

/* Medians of on and off, and of the per-batch differences with their 95%
 * interval (bench_median_ci). */
static struct row summarize(double *on, double *off, int n)
{
	double d[BATCHES];
	struct row r;

	for (int i = 0; i < n; i++)
		d[i] = on[i] - off[i];
	r.diff = bench_median(d, (size_t)n); /* sorts d */
	bench_median_ci(d, (size_t)n, &r.lo, &r.hi);
	r.on = bench_median(on, (size_t)n);
	r.off = bench_median(off, (size_t)n);
	return r;
}

static void print_row(const char *what, struct row r)
{
	printf("%-46s %8.2f %8.2f %8.2f  [%.2f, %.2f]\n", what, r.on, r.off, r.diff, r.lo, r.hi);
}

/* The switching patterns measured, each against the target. */
static const struct pattern {
	const char *what;
	void (*op)(uint64_t);
	unsigned scopes; /* 0: a new scope every task */
	int n;		 /* calls per batch */
} patterns[] = {
    {"task start+end, same scope and site", switch_1, 1, SWITCHES},
    {"task start+end, 2 scopes alternating", switch_2, 2, SWITCHES},
    {"task start+end, 8 scopes in turn", switch_8, 8, SWITCHES},
    {"task start+end, 16 scopes in turn", switch_16, 16, SWITCHES},
    {"task start+end, 64 scopes in turn", switch_64, 64, SWITCHES},
    {"task start+end, 256 scopes in turn (> slots)", switch_256, 256, SWITCHES / 10},
    {"first task of a new scope (once per scope)", switch_fresh, 0, SWITCHES / 40},
};
#define NPATTERNS (sizeof patterns / sizeof patterns[0])

int main(int argc, char **argv)
{
	double on[BATCHES], off[BATCHES];
	struct row rows[NPATTERNS], fj;

	/* Measured without the reporting agent, as bench_runtime is. */
	if (!getenv("SCOPED_DISABLE")) {
		setenv("SCOPED_DISABLE", "1", 1);
		execv("/proc/self/exe", argv);
	}
	(void)argc;
	for (int i = 0; i < ROTATE_MAX; i++) {
		scope_r[i].id = 10 + (uint64_t)i; /* consecutive, as one thread's scopes are */
		snprintf(scope_r[i].name, sizeof scope_r[i].name, "bench-r%d", i);
		task_r[i] = (scope_task_t){.scope = &scope_r[i],
					   .site = {"bench/bench_otelctx.c", "rotate", 42}};
	}

	batch(switch_1, 1000, true); /* the thread's record, the process context */
	for (size_t p = 0; p < NPATTERNS; p++) {
		for (int i = 0; i < BATCHES; i++) {
			on[i] = batch(patterns[p].op, patterns[p].n, true);
			off[i] = batch(patterns[p].op, patterns[p].n, false);
		}
		rows[p] = summarize(on, off, BATCHES);
	}
	forks(0); /* warm the pool */
	for (int i = 0; i < BATCHES; i++) {
		on[i] = batch_forks(true);
		off[i] = batch_forks(false);
	}
	fj = summarize(on, off, BATCHES);
	sc_otel_enable(true);

	printf("%-46s %8s %8s %8s  %s\n", "ns per task, median of 25 interleaved batches", "on",
	       "off", "on-off", "95% interval of on-off");
	for (size_t p = 0; p < NPATTERNS; p++)
		print_row(patterns[p].what, rows[p]);
	print_row("open+16 forks+join+close, per task", fj);
	printf("  on-off is the cost per task switch (target <= 2 ns); a thread keeps %d\n"
	       "  records by scope and fork site and switches its pointer between them;\n"
	       "  past that a record is refilled from what the scope keeps built; the\n"
	       "  first task of a scope builds it (once per scope, not per switch);\n"
	       "  whole forks on the default pool are noisier than all of it\n",
	       SC_OTEL_SLOTS);
	for (size_t p = 0; p < NPATTERNS; p++)
		if (patterns[p].scopes && patterns[p].scopes <= SC_OTEL_SLOTS)
			printf("target (%s): %s\n", patterns[p].what,
			       rows[p].diff <= 2.0 ? "met" : "NOT met");
	return 0;
}
