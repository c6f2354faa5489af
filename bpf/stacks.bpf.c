// SPDX-License-Identifier: GPL-2.0
/* stacks.bpf.c - sleepable task iterator that reads, for each thread of one
 * process, its scheduler state, saved user registers, kernel stack and a
 * window of its user stack, without stopping or signalling it. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "stacks.h"

char LICENSE[] SEC("license") = "GPL";

/* Written by the loader before each pass (a global, not .rodata, so one
 * loaded program serves every pid). */
struct stk_cfg cfg = {};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} records SEC(".maps");

/* Scratch for the record being built: too big for the BPF stack.  One slot
 * is enough because the loader runs one pass at a time, and a plain array
 * because per-CPU values are capped at 32 KiB. */
struct scratch {
	struct stk_rec rec;
	__u8 ustack[STK_WINDOW];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

/* Per thread, what the last record sent said of it (stacks.h stk_last), in
 * a table indexed by the tid's low bits: a global, which user space reads
 * and writes through the skeleton's mapping with no system call, and
 * which the program reaches with plain loads (the LRU hashes it replaces
 * were a tenth of a capture whose threads all moved).  A slot holds the
 * thread whose record came last; another tid there is a miss, and the
 * thread is captured anew.  Used by one pass at a time (the loader's
 * lock), and by user space between passes. */
struct stk_last last_slots[STK_SLOTS] = {};

/* The slot of tid, whichever thread holds it. */
static struct stk_last *slot_of(__u32 tid)
{
	return &last_slots[tid & (STK_SLOTS - 1)];
}

/* The slot of task t when it holds that task (the same tid and start
 * time: a tid reused is another task), else NULL. */
static struct stk_last *last_of(struct task_struct *t)
{
	struct stk_last *l = slot_of(t->pid);

	return l->tid == t->pid && l->start_ns == t->start_time ? l : NULL;
}

/* Task state field was renamed in 5.14; keep older kernels readable. */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

static __u32 task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return t->__state;
	return BPF_CORE_READ((struct task_struct___pre514 *)t, state);
}

static void read_regs(struct stk_rec *r, struct task_struct *t)
{
	struct pt_regs *p = (struct pt_regs *)bpf_task_pt_regs(t);

	if (!p) {
		r->flags |= STK_F_NO_REGS;
		return;
	}
	r->regs[0] = p->ax;
	r->regs[1] = p->dx;
	r->regs[2] = p->cx;
	r->regs[3] = p->bx;
	r->regs[4] = p->si;
	r->regs[5] = p->di;
	r->regs[6] = p->bp;
	r->regs[7] = p->sp;
	r->regs[8] = p->r8;
	r->regs[9] = p->r9;
	r->regs[10] = p->r10;
	r->regs[11] = p->r11;
	r->regs[12] = p->r12;
	r->regs[13] = p->r13;
	r->regs[14] = p->r14;
	r->regs[15] = p->r15;
	r->regs[16] = p->ip;
	r->syscall_nr = (__s64)p->orig_ax;
	/* A 32-bit program's system calls have other numbers. */
	if ((p->cs & 0xffff) != STK_USER64_CS)
		r->flags |= STK_F_COMPAT;
	r->args[0] = r->regs[5];
	r->args[1] = r->regs[4];
	r->args[2] = r->regs[1];
	r->args[3] = r->regs[10];
	r->args[4] = r->regs[8];
}

/* Copies the user stack page by page from sp upward: a copy that crosses
 * into an unmapped page fails as a whole, so each copy stays inside one
 * page and the window ends at the first page that cannot be read. */
static void read_ustack(struct scratch *s, struct task_struct *t, const struct stk_last *l)
{
	__u32 pages = l && l->pages >= 1 && l->pages <= STK_PAGES ? l->pages : STK_PAGES;
	__u64 addr = s->rec.regs[STK_REG_SP];
	__u32 len = STK_PAGE_SIZE - (addr & (STK_PAGE_SIZE - 1));
	__u32 off = 0;
	long err;

	s->rec.ustack_base = addr;
	for (int i = 0; i < STK_PAGES; i++) {
		if (i >= pages || off > STK_WINDOW - STK_PAGE_SIZE || len > STK_PAGE_SIZE)
			break;
		err = bpf_copy_from_user_task(&s->ustack[off], len, (void *)(addr + off), t, 0);
		if (err) {
			s->rec.ustack_err = (__s32)err;
			break;
		}
		off += len;
		len = STK_PAGE_SIZE;
	}
	s->rec.ustack_len = off;
}

/* Whether a thread sleeps, interruptibly, in a system call that waits in
 * one place only (a futex, a sleep, a poll, an epoll or select wait, a
 * signal wait): there the kernel stack's walk, about a fifth of a capture
 * whose threads all moved, tells nothing the system call's number does not.
 * A thread blocked on a kernel lock or on a page's I/O inside any system
 * call sleeps uninterruptibly, and keeps its walk; so does one that
 * entered the kernel some other way (no system call: -1), and one running
 * 32-bit code, whose system calls have other numbers. */
static bool plain_wait(const struct stk_rec *r)
{
	if (r->flags & (STK_F_NO_MM | STK_F_NO_REGS | STK_F_COMPAT))
		return false;
	if ((r->state & ~(__u32)STK_TASK_FREEZABLE) != STK_TASK_INTERRUPTIBLE)
		return false;
	switch (r->syscall_nr) {
	case 7:	  /* poll */
	case 23:  /* select */
	case 34:  /* pause */
	case 35:  /* nanosleep */
	case 128: /* rt_sigtimedwait */
	case 130: /* rt_sigsuspend */
	case 202: /* futex */
	case 230: /* clock_nanosleep */
	case 232: /* epoll_wait */
	case 270: /* pselect6 */
	case 271: /* ppoll */
	case 281: /* epoll_pwait */
	case 441: /* epoll_pwait2 */
	case 449: /* futex_waitv */
		return true;
	}
	return false;
}

static void emit_mark(struct seq_file *seq, struct task_struct *t, __u32 status)
{
	struct stk_mark m = {
	    .tid = t->pid,
	    .status = status,
	    .nvcsw = t->nvcsw,
	    .nivcsw = t->nivcsw,
	    .on_cpu = t->on_cpu != 0,
	};

	bpf_seq_write(seq, &m, sizeof(m));
}

static bool same_comm(const char *a, const char *b)
{
	for (int i = 0; i < STK_COMM_LEN; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

/* Whether a thread off CPU has not run since its last record l (of the
 * same task, last_of): the same switch counters and the same name
 * (another thread may rename it while it sleeps). */
static bool unchanged(const struct stk_last *l, __u64 nvcsw, __u64 nivcsw, const char *comm)
{
	return l && l->nvcsw == nvcsw && l->nivcsw == nivcsw && same_comm(l->comm, comm);
}

SEC("iter.s/task")
int capture(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	struct seq_file *seq = ctx->meta->seq;
	struct mm_struct *mm;
	struct scratch *s;
	__u32 zero = 0;
	__u64 size;

	/* The link's pid filter (6.1+) already limits the walk to the target,
	 * and works across pid namespaces; without it, every task comes by. */
	if (!t || (cfg.check_tgid && t->tgid != cfg.tgid))
		return 0;
	if (cfg.mode == STK_MODE_COUNTERS) {
		emit_mark(seq, t, STK_MARK_SENT);
		return 0;
	}
	struct stk_last *l = last_of(t);
	char comm[STK_COMM_LEN];

	__builtin_memcpy(comm, t->comm, sizeof(comm));
	if (cfg.reuse && !t->on_cpu && unchanged(l, t->nvcsw, t->nivcsw, comm)) {
		emit_mark(seq, t, STK_MARK_SAME);
		return 0;
	}
	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;

	__builtin_memset(&s->rec, 0, sizeof(s->rec));
	s->rec.tid = t->pid;
	s->rec.tgid = t->tgid;
	__builtin_memcpy(s->rec.comm, comm, sizeof(s->rec.comm));
	s->rec.state = task_state(t);
	s->rec.exit_state = (__u32)t->exit_state;
	if (t->on_cpu)
		s->rec.flags |= STK_F_ON_CPU;
	s->rec.nvcsw = t->nvcsw;
	s->rec.nivcsw = t->nivcsw;
	s->rec.leader_start_ns = t->group_leader->start_time;
	mm = t->mm;
	if (!mm) {
		s->rec.flags |= STK_F_NO_MM;
	} else {
		s->rec.exec_vm = mm->exec_vm;
		s->rec.start_code = mm->start_code;
		read_regs(&s->rec, t);
		if (!(s->rec.flags & STK_F_NO_REGS))
			read_ustack(s, t, l);
	}
	/* A task running on another CPU has no saved kernel stack to walk:
	 * what the walk would find is stale.  One asleep in a wait that
	 * sleeps in one place only needs none: its system call says where. */
	if ((!(s->rec.flags & STK_F_ON_CPU) || t == bpf_get_current_task_btf()) &&
	    !plain_wait(&s->rec))
		s->rec.kstack_len = bpf_get_task_stack(t, s->rec.kstack, sizeof(s->rec.kstack), 0);

	size = sizeof(s->rec) + s->rec.ustack_len;
	if (size > sizeof(*s))
		size = sizeof(*s);
	if (bpf_ringbuf_output(&records, s, size, 0)) {
		emit_mark(seq, t, STK_MARK_DROPPED);
		return 0;
	}
	/* Counters as the record has them: a thread that ran since gets a
	 * record again next time.  The slot is this task's from now on; its
	 * window hint stays only if it was this task's already. */
	if (!l) {
		l = slot_of(s->rec.tid);
		l->tid = s->rec.tid;
		l->start_ns = t->start_time;
		l->pages = 0;
	}
	l->nvcsw = s->rec.nvcsw;
	l->nivcsw = s->rec.nivcsw;
	__builtin_memcpy(l->comm, s->rec.comm, sizeof(l->comm));
	emit_mark(seq, t, STK_MARK_SENT);
	return 0;
}

/* ---- the sweep ---------------------------------------------------------
 * Which threads of the process ran since their last record, in one run of
 * a program over them all (the kernel's open-coded task iterator, 6.7+):
 * the iterator above costs a seq_file step and a program run per thread,
 * most of a capture in which nothing moved.  User space then takes a
 * record of each thread that ran, by a pass over it alone. */

extern struct task_struct *bpf_task_from_pid(s32 pid) __ksym;
extern void bpf_task_release(struct task_struct *p) __ksym;
extern void bpf_rcu_read_lock(void) __ksym;
extern void bpf_rcu_read_unlock(void) __ksym;
extern int bpf_iter_task_new(struct bpf_iter_task *it, struct task_struct *task,
			     unsigned int flags) __ksym;
extern struct task_struct *bpf_iter_task_next(struct bpf_iter_task *it) __ksym;
extern void bpf_iter_task_destroy(struct bpf_iter_task *it) __ksym;

struct stk_sweep sweep_res = {};
__u32 sweep_need; /* NEED marks so far in this run (in memory, as the count) */
struct stk_mark sweep_marks[STK_SWEEP_MAX] = {};

SEC("syscall")
int sweep(void *ctx)
{
	struct task_struct *leader, *t;
	struct bpf_iter_task it;

	sweep_res.n = 0;
	sweep_res.truncated = 0;
	sweep_res.many = 0;
	sweep_need = 0;
	/* cfg.tgid is the pid in the root namespace: user space runs the
	 * sweep only when its own is that one. */
	leader = bpf_task_from_pid(cfg.tgid);
	sweep_res.found = leader != NULL;
	if (!leader)
		return 0;
	bpf_rcu_read_lock();
	bpf_iter_task_new(&it, leader, BPF_TASK_ITER_PROC_THREADS);
	while ((t = bpf_iter_task_next(&it))) {
		/* The count lives in memory, not in a register the verifier
		 * follows, so that every turn of the loop looks alike to it. */
		__u32 i = sweep_res.n;
		char comm[STK_COMM_LEN];

		if (i >= STK_SWEEP_MAX) {
			sweep_res.truncated = 1;
			break;
		}
		struct stk_mark *m = &sweep_marks[i];

		m->tid = t->pid;
		m->nvcsw = t->nvcsw;
		m->nivcsw = t->nivcsw;
		m->on_cpu = t->on_cpu != 0;
		m->pad = 0;
		__builtin_memcpy(comm, t->comm, sizeof(comm));
		m->status = !cfg.counters_only && !m->on_cpu &&
				    unchanged(last_of(t), m->nvcsw, m->nivcsw, comm)
				? STK_MARK_SAME
				: STK_MARK_NEED;
		sweep_res.n = i + 1;
		if (m->status == STK_MARK_NEED && cfg.max_need && ++sweep_need > cfg.max_need) {
			sweep_res.many = 1;
			break;
		}
	}
	bpf_iter_task_destroy(&it);
	bpf_rcu_read_unlock();
	bpf_task_release(leader);
	return 0;
}
