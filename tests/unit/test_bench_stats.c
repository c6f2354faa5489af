/* test_bench_stats.c - the order statistics the benchmarks report their
 * verdicts with (bench/bench.h): the median and its distribution-free 95%
 * interval.  The ranks below come from the exact binomial tail, computed
 * apart from the code under test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../bench/bench.h"

/* n, and the 1-based ranks of the interval's ends (0: none reaches 95%). */
static const struct {
	size_t n, lo, hi;
} ranks[] = {
    {5, 0, 0},	 {6, 1, 6},   {8, 1, 8},    {9, 2, 8},	   {10, 2, 9},	  {15, 4, 12},
    {20, 6, 15}, {25, 8, 18}, {30, 10, 21}, {100, 40, 61}, {101, 41, 61}, {201, 87, 115},
};

static void interval_ranks(void **state)
{
	static double v[256];
	(void)state;
	for (size_t i = 0; i < 256; i++)
		v[i] = (double)(i + 1); /* v[i] is its own rank */
	for (size_t t = 0; t < sizeof ranks / sizeof ranks[0]; t++) {
		double lo, hi;
		int ok = bench_median_ci(v, ranks[t].n, &lo, &hi);
		if (!ranks[t].lo) {
			assert_int_equal(ok, 0);
			assert_true(lo == 1.0 && hi == (double)ranks[t].n);
			continue;
		}
		assert_int_equal(ok, 1);
		if (lo != (double)ranks[t].lo || hi != (double)ranks[t].hi)
			fail_msg("n=%zu: interval x(%g)..x(%g), want x(%zu)..x(%zu)", ranks[t].n,
				 lo, hi, ranks[t].lo, ranks[t].hi);
	}
}

/* The interval brackets the median and reads the sorted values, whatever
 * they are. */
static void interval_of_sorted_values(void **state)
{
	double v[15] = {1.30, 0.90, 1.05, 1.10, 0.95, 1.02, 1.20, 1.00,
			1.08, 0.97, 1.15, 1.01, 0.99, 1.04, 1.25};
	(void)state;
	double med = bench_median(v, 15), lo, hi;
	assert_true(med == 1.04);
	for (int i = 1; i < 15; i++)
		assert_true(v[i - 1] <= v[i]); /* bench_median sorted in place */
	assert_int_equal(bench_median_ci(v, 15, &lo, &hi), 1);
	assert_true(lo == 0.99 && hi == 1.15); /* the 4th and the 12th */
	assert_true(lo <= med && med <= hi);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(interval_ranks),
	    cmocka_unit_test(interval_of_sorted_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
