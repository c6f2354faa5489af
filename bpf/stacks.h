/* stacks.h - the records the task iterator (stacks.bpf.c) hands to user space
 * (bpfstack.c), shared by both sides so their layouts cannot drift. */
#ifndef BPF_STACKS_H
#define BPF_STACKS_H

/* Pages of user stack copied per thread: the partial page sp lies in plus
 * the next STK_PAGES - 1 whole pages.  Past the window the unwinder reads
 * /proc/PID/mem, so this bounds the snapshot, not the stack depth. */
#define STK_PAGES 4
#define STK_PAGE_SIZE 4096
#define STK_WINDOW (STK_PAGES * STK_PAGE_SIZE)
#define STK_KFRAMES 32
#define STK_COMM_LEN 16

/* x86_64 DWARF register numbers 0..16: rax rdx rcx rbx rsi rdi rbp rsp
 * r8..r15, then the return address column (rip). */
#define STK_NREGS 17
#define STK_REG_BP 6
#define STK_REG_SP 7
#define STK_REG_IP 16

/* stk_rec.flags */
#define STK_F_ON_CPU 0x1u  /* task->on_cpu was set when it was read */
#define STK_F_NO_MM 0x2u   /* kernel thread or exiting: no user stack */
#define STK_F_NO_REGS 0x4u /* bpf_task_pt_regs gave nothing */
/* The thread runs 32-bit code (its saved cs is not the 64-bit user
 * segment): its system call numbers are not x86-64's. */
#define STK_F_COMPAT 0x8u
#define STK_USER64_CS 0x33u /* __USER_CS, x86-64 */
/* The task states plain_wait reads (include/linux/sched.h, x86-64). */
#define STK_TASK_INTERRUPTIBLE 0x1u
#define STK_TASK_FREEZABLE 0x2000u

/* What the iterator does in one pass (stk_cfg.mode). */
#define STK_MODE_FULL 0	    /* one stk_rec per thread into the ring buffer */
#define STK_MODE_COUNTERS 1 /* only stk_mark entries into the seq file */

/* stk_mark.status */
#define STK_MARK_SENT 0	   /* the stk_rec is in the ring buffer */
#define STK_MARK_DROPPED 1 /* the ring buffer was full: no stk_rec */
#define STK_MARK_SAME 2	   /* not run since its last record: none sent (stk_cfg.reuse) */
#define STK_MARK_NEED 3	   /* the sweep: ran since its last record, or has none */

/* One per target thread, written to the iterator's seq file in both modes:
 * it paces the reads (one read = a bounded batch of records) and gives the
 * cheap second pass its switch counters. */
struct stk_mark {
	__u32 tid;
	__u32 status;
	__u64 nvcsw;
	__u64 nivcsw;
	__u32 on_cpu;
	__u32 pad;
};

/* Ring buffer record: this header, then ustack_len bytes of user stack that
 * start at user address ustack_base. */
struct stk_rec {
	__u32 tid;
	__u32 tgid;
	char comm[STK_COMM_LEN];
	__u32 state;	  /* task->__state */
	__u32 exit_state; /* task->exit_state */
	__u32 flags;	  /* STK_F_* */
	__u32 pad0;
	__u64 nvcsw;
	__u64 nivcsw;
	/* Identify the address space so user space knows when its module map
	 * is stale: exec_vm moves on dlopen/dlclose, the others on exec. */
	__u64 exec_vm;
	__u64 start_code;
	__u64 leader_start_ns;
	__u64 regs[STK_NREGS];
	/* The syscall the thread is in (-1 when it entered the kernel some
	 * other way) and its arguments 1..5 (rdi rsi rdx r10 r8): they tell a
	 * timed wait from an untimed one. */
	__s64 syscall_nr;
	__u64 args[5];
	__s32 kstack_len; /* bytes of kstack, or a negative errno */
	__s32 ustack_err; /* 0, or the errno of the first page that failed */
	__u64 ustack_base;
	__u32 ustack_len;
	__u32 pad;
	__u64 kstack[STK_KFRAMES];
};

/* Set by the loader before each pass; read by the iterator. */
struct stk_cfg {
	__u32 tgid;	  /* global pid of the target */
	__u32 mode;	  /* STK_MODE_* */
	__u32 check_tgid; /* the kernel is not filtering by pid (before 6.1) */
	/* Full mode: a thread that has not run since its last record was
	 * sent (same switch counters, same task, off CPU) gets a
	 * STK_MARK_SAME mark and no record; user space keeps that record's
	 * result.  0: every thread gets a record. */
	__u32 reuse;
	/* The sweep: every mark NEED, its counters only (no look at the last
	 * record): what a counters pass reads, in one run. */
	__u32 counters_only;
	/* The sweep: stop, with stk_sweep.many set, once more than this many
	 * threads need a record (user space then makes a full pass, and the
	 * rest of the sweep would be wasted).  0: no limit. */
	__u32 max_need;
};

/* The sweep (stacks.bpf.c's sweep program): in one run, a mark for each
 * thread of the process, SAME or NEED, in sweep_marks[0..n). */
#define STK_SWEEP_MAX 32768
struct stk_sweep {
	__u32 n;
	__u32 found;	 /* the process was there */
	__u32 truncated; /* more threads than STK_SWEEP_MAX */
	__u32 many;	 /* stopped past stk_cfg.max_need threads to record */
};

/* What the iterator remembers of the last record it sent for a thread,
 * in slot tid & (STK_SLOTS - 1) of stacks.bpf.c's last_slots. */
#define STK_SLOTS 32768
struct stk_last {
	__u32 tid; /* whose slot it is (0: nobody's) */
	/* Pages of user stack the thread's last unwind read (1..STK_PAGES),
	 * written by user space after each capture: a thread waiting where it
	 * waited before needs no more (the unwinder reads past the window,
	 * from /proc/PID/mem, when it does).  0: the whole window. */
	__u32 pages;
	__u64 nvcsw;
	__u64 nivcsw;
	__u64 start_ns;		 /* the task's start time: a reused tid is another task */
	char comm[STK_COMM_LEN]; /* another thread may rename it meanwhile */
};

#endif /* BPF_STACKS_H */
