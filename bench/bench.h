/* bench.h - the clock and the order statistics every benchmark reports with. */
#ifndef BENCH_BENCH_H
#define BENCH_BENCH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* CLOCK_MONOTONIC, so a wall-clock step cannot land inside a measurement. */
static inline int64_t bench_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline double bench_now_ms(void)
{
	return (double)bench_now_ns() / 1e6;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static inline int bench_cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static inline void bench_sort(double *v, size_t n)
{
	qsort(v, n, sizeof *v, bench_cmp_double);
}

static inline void bench_sort_i64(int64_t *v, size_t n)
{
	qsort(v, n, sizeof *v, bench_cmp_i64);
}

/* Sorts v; the middle value, or the mean of the two middle ones when n is
 * even (n > 0). */
static inline double bench_median(double *v, size_t n)
{
	bench_sort(v, n);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The distribution-free 95% confidence interval of the median of the n
 * values in sorted (ascending): [x(k), x(n+1-k)], k the largest rank with
 * P(B < k) <= 2.5% for B ~ Binomial(n, 1/2) (the chance that fewer than k
 * of n values fall below the true median).  It assumes nothing about the
 * shape of the values, which on shared cores is anything but normal.  For
 * n = 15 it is x(4)..x(12); for n = 25, x(8)..x(18).  Below n = 6 no
 * interval reaches 95%: the whole range is given, and 0 returned (else 1). */
static inline int bench_median_ci(const double *sorted, size_t n, double *lo, double *hi)
{
	double cum = 0, lp_n = lgamma((double)n + 1) - (double)n * log(2.0);
	size_t k = 0;
	for (size_t j = 0; j < n; j++) {
		double pj = exp(lp_n - lgamma((double)j + 1) - lgamma((double)(n - j) + 1));
		if (cum + pj > 0.025)
			break;
		cum += pj;
		k = j + 1;
	}
	if (k == 0) {
		*lo = sorted[0];
		*hi = sorted[n - 1];
		return 0;
	}
	*lo = sorted[k - 1];
	*hi = sorted[n - k];
	return 1;
}

/* Sorts v; the value at fraction p (0..1) of the way from the least to the
 * greatest, rounded to the nearest sample (n > 0). */
static inline int64_t bench_pct_i64(int64_t *v, size_t n, double p)
{
	bench_sort_i64(v, n);
	return v[(size_t)(p * (double)(n - 1) + 0.5)];
}

#endif
