/* procstack.h - stacks of any process the daemon may read, without BPF and
 * without stopping it: the kernel's register view of each thread blocked in
 * the kernel (/proc/PID/task/TID/syscall), one batched process_vm_readv of
 * the stack windows, unwound with libdw.  A thread that did not run since
 * the last capture of its process keeps its entry.  Threads running on a CPU get one
 * user-mode perf sample where perf allows it, else are reported as not
 * captured, with the reason.
 *
 * Same thread records as bpfstack.h, so the daemon treats both alike. */
#ifndef PROCSTACK_H
#define PROCSTACK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "bpfstack.h"

struct procstack;

/* New capture state (NULL on out of memory); procstack_close() frees it. */
struct procstack *procstack_open(void);
void procstack_close(struct procstack *ps);

/* Captures every thread of pid.  *threads is a new array of *n entries,
 * sorted by tid (free() it).  Returns 0, or a negative errno with the reason
 * in err: -ESRCH no such process, -EPERM the daemon may not read its memory
 * (another user's process, and no CAP_SYS_PTRACE).  A thread without a stack
 * has error set and error_why saying why. */
int procstack_capture(struct procstack *ps, pid_t pid, struct bpfstack_thread **threads, size_t *n,
		      char *err, size_t errlen);

/* Closes the files kept open for the next capture and drops the last
 * capture's result. */
void procstack_release(struct procstack *ps);

/* The same, when the process of the last capture has exited. */
void procstack_forget_gone(struct procstack *ps);

/* What the last capture did and where its time went (for tests and
 * benchmarks). */
struct procstack_stats {
	size_t threads;	   /* captured */
	size_t reused;	   /* kept the last capture's entry: they did not run since */
	size_t names_read; /* of those, whose name was read again */
	size_t unwound;	   /* unwound (the other moved threads: the memo's frames) */
	size_t memo_hits;  /* moved threads the unwinder's memory answered */
	/* Reading: the threads' files, registers, stack windows, the mappings,
	 * and the wait for perf samples of threads on a CPU. */
	int64_t read_ns;
	int64_t unwind_ns; /* unwinding, the memo's checks included */
	size_t halves;	   /* loops of reads whose second half the helper thread ran */
};
void procstack_last_stats(const struct procstack *ps, struct procstack_stats *st);

/* Whether a capture reads the threads' files in two halves at once, on
 * this thread and a helper thread made for it (on by default where the
 * daemon may use two CPUs; never for the caller's own process). */
void procstack_parallel(struct procstack *ps, bool on);

/* Descriptors kept open for the next capture (at most a quarter of
 * RLIMIT_NOFILE, and 8192). */
size_t procstack_kept_fds(const struct procstack *ps);

/* The futex thread tid of pid sleeps on, when the wait has a lock's shape
 * (see bpfstack_thread.lock_how), from /proc/PID/task/TID/syscall alone: for
 * threads whose stacks came from another source (signal mode).  Returns 1
 * with *addr and *how set, 0 when the thread runs or waits for something
 * else, or a negative errno (-EACCES: the ptrace rules refuse it). */
int procstack_lock_wait(pid_t pid, uint32_t tid, uint64_t *addr, int *how);

#endif /* PROCSTACK_H */
