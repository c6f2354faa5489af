/* halves.h - a loop run in two halves at once: one on the calling thread,
 * the other on a helper thread kept for the purpose.  For the /proc stack
 * source (procstack.c), whose per-thread reads are system calls the kernel
 * serves on two CPUs in half the time (bench_plain: 1,005 threads' four
 * reads 14-16 ms on one thread, 7-9 ms on two).
 *
 * The helper sleeps between captures; within one it waits a little, on a
 * CPU, for the next half, since the halves of a capture come a fraction of
 * a millisecond apart.  It takes no signal.  One caller thread at a time. */
#ifndef HALVES_H
#define HALVES_H

#include <stddef.h>

struct halves;

/* A loop's body over [lo, hi). */
typedef void halves_fn(void *ctx, size_t lo, size_t hi);

/* A helper, or NULL when the caller may run on one CPU only (its affinity)
 * or the thread cannot be made: halves_run then runs loops whole. */
struct halves *halves_new(void);
/* Stops and joins the helper; NULL is fine. */
void halves_free(struct halves *h);

/* fn over [0, n): [0, n/2) on this thread and [n/2, n) on the helper (with
 * no helper, or n below min, all of it here).  Returns when both are done;
 * whatever the helper's half wrote is then visible here.  1 when the
 * helper took a half. */
int halves_run(struct halves *h, halves_fn *fn, void *ctx, size_t n, size_t min);

#endif /* HALVES_H */
