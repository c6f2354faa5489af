/* bpfstack.h - kernel-side stack capture for the daemon: one pass of a
 * sleepable BPF task iterator over a target's threads, unwound in user space
 * with libdw.  Nothing runs in the target and no signal reaches it.
 *
 * The daemon uses it through this interface only; symbolization stays in the
 * daemon (it gets raw user addresses, unwound, top first). */
#ifndef BPFSTACK_H
#define BPFSTACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BPFSTACK_MAX_FRAMES 128
#define BPFSTACK_MAX_KFRAMES 32

struct bpfstack;

struct bpfstack_thread {
	uint32_t tid;
	char comm[16];
	char sched_state;	 /* 'R', 'S', 'D', 'T', ... as in /proc/PID/stat */
	bool on_cpu;		 /* was running on a CPU at capture */
	bool ran_during_capture; /* context-switch counters moved during capture (not
				  * looked for when no thread ran since the last one) */
	bool approximate;	 /* user stack as of its last kernel entry */
	bool reused; /* not run since the last capture of this process: that entry, unchanged */
	uint64_t nvcsw, nivcsw;
	int error;		     /* 0, or negative errno: this thread's stack is missing */
	const char *error_why;	     /* static: why, in words, when error is set (or NULL) */
	const char *approximate_why; /* static: why the stack is approximate (or NULL) */
	size_t nframes;
	uint64_t frames[BPFSTACK_MAX_FRAMES]; /* user return addresses, top first */
	size_t nkframes;
	uint64_t kframes[BPFSTACK_MAX_KFRAMES]; /* kernel addresses, top first */
	const char *blocked_in; /* static: "futex", "poll", "epoll", "read", "sleep", ... or NULL */
	const char
	    *jstate; /* static JDK state: "RUNNABLE", "WAITING", "TIMED_WAITING", "BLOCKED" */
	/* A thread asleep in a futex wait that may be a lock's: the futex
	 * word's address in the target and how it waits (BPFSTACK_LOCK_*);
	 * whether it is a pthread mutex, and whose, is for the reader of the
	 * target's memory to decide (daemon/locks.c). */
	uint64_t lock_addr;
	int lock_how;
	/* Pages of the user stack window its unwind read (1..4; 0: not
	 * unwound from a window): the next capture copies no more. */
	uint8_t window_pages;
	uint32_t window_bytes; /* the window copied for this entry's unwind */
};

enum {
	BPFSTACK_LOCK_NONE,
	BPFSTACK_LOCK_LLL,    /* FUTEX_WAIT for the value 2: glibc's lock, contended */
	BPFSTACK_LOCK_PI,     /* FUTEX_LOCK_PI(2): the word holds the owner's tid */
	BPFSTACK_LOCK_ROBUST, /* FUTEX_WAIT for owner tid | FUTEX_WAITERS */
};

/* Loads and verifies the BPF programs.  *out is new (bpfstack_close()).
 * Returns 0, or a negative errno with a one-line reason in err (such as
 * "BPF needs CAP_BPF and CAP_PERFMON (running as uid 1000)"). */
int bpfstack_open(struct bpfstack **out, char *err, size_t errlen);

/* Captures every thread of pid.  *threads is a new array of *n entries,
 * sorted by tid (free() it).  Returns 0 or a negative errno with the reason
 * in err (-ESRCH: no such process).  A process with more than 32768 threads
 * is captured in part: 0 is returned and err says so.  Captures on one
 * struct bpfstack are serialised.  Threads still on a CPU get a perf
 * sample, which can add up to 10 ms. */
int bpfstack_capture(struct bpfstack *b, pid_t pid, struct bpfstack_thread **threads, size_t *n,
		     char *err, size_t errlen);

/* Symbol name of a kernel address from /proc/kallsyms ("futex_wait_queue"),
 * or NULL.  Borrowed: valid until bpfstack_close(). */
const char *bpfstack_ksym(struct bpfstack *b, uint64_t addr);

/* Captures that the sweep served (a capture after one, in which few
 * threads ran), and whether the kernel took the sweep at all (6.7+, and a
 * loader in the root pid namespace): for tests and statistics. */
uint64_t bpfstack_swept(const struct bpfstack *b, bool *available);

/* For tests: the next record of thread tid copies pages (1..4) of its user
 * stack, as if its last unwind had needed no more.  -ENOENT when the
 * program keeps nothing of tid (no record of it yet). */
int bpfstack_set_window_hint(struct bpfstack *b, uint32_t tid, unsigned pages);

void bpfstack_close(struct bpfstack *b);

#endif /* BPFSTACK_H */
