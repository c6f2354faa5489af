/* bench.h - the clock and the order statistics every benchmark reports with. */
#ifndef BENCH_BENCH_H
#define BENCH_BENCH_H

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

/* Sorts v; the value at fraction p (0..1) of the way from the least to the
 * greatest, rounded to the nearest sample (n > 0). */
static inline int64_t bench_pct_i64(int64_t *v, size_t n, double p)
{
	bench_sort_i64(v, n);
	return v[(size_t)(p * (double)(n - 1) + 0.5)];
}

#endif
