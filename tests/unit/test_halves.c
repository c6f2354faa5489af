/* test_halves.c - a loop in two halves at once (bpf/halves.h): each index
 * run once, the second half on another thread whose writes are seen on
 * return, short loops run whole here, and the hand-off holds through many
 * loops in a row, some after the helper fell asleep. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../bpf/halves.h"

#define N 1000

struct job {
	long out[N];	  /* plain writes: read on return with no lock */
	pid_t who[N];	  /* the thread that ran each index */
	_Atomic int runs; /* calls of the body */
};

static void body(void *ctx, size_t lo, size_t hi)
{
	struct job *j = ctx;
	pid_t me = (pid_t)syscall(SYS_gettid);
	atomic_fetch_add(&j->runs, 1);
	for (size_t i = lo; i < hi; i++) {
		j->out[i] += (long)i * 2 + 1;
		j->who[i] = me;
	}
}

static int cpus(void)
{
	cpu_set_t s;
	return sched_getaffinity(0, sizeof(s), &s) == 0 ? CPU_COUNT(&s) : 1;
}

/* Every index once; the first half here, the second on one other thread. */
static void test_split(void **state)
{
	(void)state;
	struct halves *h = halves_new();
	if (cpus() < 2) {
		/* One CPU: no helper, and the loop runs whole here. */
		assert_null(h);
		struct job j = {0};
		assert_int_equal(halves_run(h, body, &j, N, 2), 0);
		for (size_t i = 0; i < N; i++)
			assert_int_equal(j.out[i], (long)i * 2 + 1);
		print_message("one CPU to run on: no helper, so no second half to check\n");
		skip();
	}
	assert_non_null(h);
	struct job *j = calloc(1, sizeof(*j));
	assert_non_null(j);
	pid_t me = (pid_t)syscall(SYS_gettid);
	assert_int_equal(halves_run(h, body, j, N, 2), 1);
	assert_int_equal(atomic_load(&j->runs), 2);
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(j->out[i], (long)i * 2 + 1);
		if (i < N / 2)
			assert_int_equal(j->who[i], me);
		else
			assert_int_not_equal(j->who[i], me);
	}
	for (size_t i = N / 2 + 1; i < N; i++)
		assert_int_equal(j->who[i], j->who[N / 2]);
	free(j);
	halves_free(h);
}

/* Below the minimum (or with no helper) the loop is run whole here. */
static void test_short_loop_whole(void **state)
{
	(void)state;
	struct halves *h = halves_new();
	struct job j = {0};
	pid_t me = (pid_t)syscall(SYS_gettid);
	assert_int_equal(halves_run(h, body, &j, 10, 32), 0);
	assert_int_equal(atomic_load(&j.runs), 1);
	for (size_t i = 0; i < 10; i++) {
		assert_int_equal(j.out[i], (long)i * 2 + 1);
		assert_int_equal(j.who[i], me);
	}
	assert_int_equal(halves_run(NULL, body, &j, N, 2), 0);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(j.who[i], me);
	halves_free(h);
	halves_free(NULL);
}

/* Many loops in a row, of every length, some after a pause long enough for
 * the helper to sleep: each index of each run exactly once. */
static void test_many_handoffs(void **state)
{
	(void)state;
	struct halves *h = halves_new();
	if (!h) {
		print_message("one CPU to run on: no helper to hand halves to\n");
		skip();
	}
	struct job *j = calloc(1, sizeof(*j));
	assert_non_null(j);
	int expect_runs = 0;
	for (int round = 0; round < 3000; round++) {
		size_t n = 2 + (size_t)(round * 7919) % (N - 1);
		expect_runs += halves_run(h, body, j, n, 2) ? 2 : 1;
		for (size_t i = 0; i < n; i++)
			j->out[i] -= (long)i * 2 + 1; /* back to 0: each index ran once */
		for (size_t i = 0; i < N; i++)
			if (j->out[i] != 0)
				fail_msg("round %d (n %zu): index %zu ran %ld times", round, n, i,
					 1 + j->out[i] / ((long)i * 2 + 1));
		if (round % 500 == 499)
			usleep(2000); /* past the helper's spin: it sleeps */
	}
	assert_int_equal(atomic_load(&j->runs), expect_runs);
	free(j);
	halves_free(h);
}

/* A helper freed at once, never used, and one freed while it spins. */
static void test_free_idle(void **state)
{
	(void)state;
	halves_free(halves_new());
	struct halves *h = halves_new();
	if (h) {
		struct job j = {0};
		halves_run(h, body, &j, N, 2);
	}
	halves_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_split),
	    cmocka_unit_test(test_short_loop_whole),
	    cmocka_unit_test(test_many_handoffs),
	    cmocka_unit_test(test_free_idle),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
