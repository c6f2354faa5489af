/* bpfs_classify.c - turns a captured thread's scheduler state, syscall and
 * kernel stack into what it is blocked in ("futex", "read", ...) and its JDK
 * thread state (RUNNABLE, WAITING, TIMED_WAITING, BLOCKED). */
#include "bpfs_int.h"

#include <string.h>

/* Kernel functions that name what a sleeping thread waits for.  Every frame
 * of the kernel stack is looked up and the earliest row that matches any
 * frame wins, so syscall-level rows sit above the generic ones they call
 * (a read() on a socket is "read", a recvfrom() is "recv"). */
static const struct {
	const char *prefix;
	const char *blocked_in;
} kfunc_table[] = {
    {"futex_", "futex"},
    {"__futex_", "futex"},
    {"do_epoll_wait", "epoll"},
    {"ep_poll", "epoll"},
    {"do_sys_poll", "poll"},
    {"do_select", "select"},
    {"core_sys_select", "select"},
    {"do_nanosleep", "sleep"},
    {"hrtimer_nanosleep", "sleep"},
    {"common_nsleep", "sleep"},
    {"do_accept", "accept"},
    {"__sys_accept", "accept"},
    {"inet_csk_accept", "accept"},
    {"__sys_connect", "connect"},
    {"__sys_recv", "recv"},
    {"___sys_recvmsg", "recv"},
    {"do_recvmmsg", "recv"},
    {"__sys_send", "send"},
    {"___sys_sendmsg", "send"},
    {"ksys_read", "read"},
    {"ksys_pread", "read"},
    {"do_readv", "read"},
    {"vfs_read", "read"},
    {"ksys_write", "write"},
    {"ksys_pwrite", "write"},
    {"do_writev", "write"},
    {"vfs_write", "write"},
    {"do_wait", "wait"},
    {"kernel_wait", "wait"},
    {"do_sigtimedwait", "signal"},
    {"sigsuspend", "signal"},
    {"__x64_sys_pause", "signal"},
    {"io_cqring_wait", "io_uring"},
    {"do_semtimedop", "semaphore"},
    {"do_msgrcv", "msgrcv"},
    {"fcntl_setlk", "file_lock"},
    {"locks_lock_inode_wait", "file_lock"},
    {"exc_page_fault", "page_fault"},
    {"pipe_read", "read"},
    {"pipe_write", "write"},
    {"sock_recvmsg", "recv"},
    {"sock_sendmsg", "send"},
    {"rwsem_down", "kernel_lock"},
    {"__mutex_lock", "kernel_lock"},
    {"io_schedule", "io"},
    {"do_exit", "exit"},
};

/* x86_64 syscalls that can wait, and which argument says how long: an
 * untimed wait is WAITING, a timed one TIMED_WAITING. */
enum timeout_kind {
	TMO_PTR, /* a pointer argument; NULL waits forever */
	TMO_MS,	 /* an int of milliseconds; negative waits forever */
	TMO_ALWAYS,
};

static const struct {
	int64_t nr;
	enum timeout_kind kind;
	int arg; /* 0-based argument index */
} syscall_table[] = {
    {7, TMO_MS, 2},	  /* poll */
    {23, TMO_PTR, 4},	  /* select */
    {35, TMO_ALWAYS, 0},  /* nanosleep */
    {128, TMO_PTR, 2},	  /* rt_sigtimedwait */
    {202, TMO_PTR, 3},	  /* futex */
    {208, TMO_PTR, 4},	  /* io_getevents */
    {220, TMO_PTR, 3},	  /* semtimedop */
    {230, TMO_ALWAYS, 0}, /* clock_nanosleep */
    {232, TMO_MS, 3},	  /* epoll_wait */
    {243, TMO_PTR, 4},	  /* mq_timedreceive */
    {270, TMO_PTR, 4},	  /* pselect6 */
    {271, TMO_PTR, 2},	  /* ppoll */
    {281, TMO_MS, 3},	  /* epoll_pwait */
    {299, TMO_PTR, 4},	  /* recvmmsg */
    {441, TMO_PTR, 3},	  /* epoll_pwait2 */
    {449, TMO_PTR, 3},	  /* futex_waitv */
};

#define SYS_FUTEX 202
#define FUTEX_CMD_MASK 0x7f
#define FUTEX_WAIT_OP 0
#define FUTEX_LOCK_PI_OP 6
#define FUTEX_LOCK_PI2_OP 13
/* glibc's low-level lock sleeps with the futex word at 2 ("locked, with
 * waiters"): that is what tells a mutex wait from a condition wait. */
#define GLIBC_LLL_CONTENDED 2
#define FUTEX_WAITERS_BIT 0x80000000u
#define FUTEX_TID_BITS 0x3fffffffu

/* Task state bits (include/linux/sched.h), in the order /proc reports them. */
static const struct {
	uint32_t mask;
	char letter;
} state_table[] = {
    {0x0002 | 0x0400, 'I'}, /* TASK_IDLE = uninterruptible + noload */
    {0x0001, 'S'},	    {0x0002, 'D'}, {0x0004, 'T'}, {0x0008, 't'}, {0x0040, 'P'},
};

char bpfs_state_letter(uint32_t state, uint32_t exit_state)
{
	if (exit_state & 0x20)
		return 'Z';
	if (exit_state & 0x10)
		return 'X';
	if (state == 0)
		return 'R';
	for (size_t i = 0; i < sizeof(state_table) / sizeof(state_table[0]); i++)
		if ((state & state_table[i].mask) == state_table[i].mask)
			return state_table[i].letter;
	return 'S';
}

#define NROWS (sizeof(kfunc_table) / sizeof(kfunc_table[0]))

/* The classifier row of one kernel address, or -1. */
static int kfunc_row(const struct bpfs_ksyms *ks, uint64_t addr)
{
	const char *name = bpfs_ksyms_find(ks, addr);

	if (!name)
		return -1;
	for (size_t i = 0; i < NROWS; i++)
		if (strncmp(name, kfunc_table[i].prefix, strlen(kfunc_table[i].prefix)) == 0)
			return (int)i;
	return -1;
}

static int kfunc_row_cached(const struct bpfs_ksyms *ks, struct bpfs_kcache *kc, uint64_t addr)
{
	size_t slot = (size_t)((addr ^ (addr >> 12)) % BPFS_KCACHE);

	if (!kc)
		return kfunc_row(ks, addr);
	if (kc->addr[slot] != addr || addr == 0) {
		kc->addr[slot] = addr;
		kc->row[slot] = (int16_t)kfunc_row(ks, addr);
	}
	return kc->row[slot];
}

static const char *blocked_in_from_kstack(const struct bpfs_ksyms *ks, struct bpfs_kcache *kc,
					  const struct bpfstack_thread *t)
{
	int best = (int)NROWS;

	for (size_t f = 0; f < t->nkframes; f++) {
		int row = kfunc_row_cached(ks, kc, t->kframes[f]);

		if (row >= 0 && row < best)
			best = row;
	}
	return best < (int)NROWS ? kfunc_table[best].blocked_in : NULL;
}

static bool is_lock_wait(const struct stk_rec *r)
{
	uint64_t cmd = r->args[1] & FUTEX_CMD_MASK;

	if (r->syscall_nr != SYS_FUTEX)
		return false;
	return (cmd == FUTEX_WAIT_OP && (uint32_t)r->args[2] == GLIBC_LLL_CONTENDED) ||
	       cmd == FUTEX_LOCK_PI_OP || cmd == FUTEX_LOCK_PI2_OP;
}

/* Records the futex a thread sleeps on when the wait has a lock's shape:
 * glibc's contended lock word (2), a PI lock, or a robust mutex's word
 * (the owner's tid with FUTEX_WAITERS).  Condition variables and
 * semaphores wait for other values (glibc 2.36: 0) and are left out. */
static void lock_wait(const struct stk_rec *r, struct bpfstack_thread *t)
{
	uint64_t cmd = r->args[1] & FUTEX_CMD_MASK;
	uint32_t val = (uint32_t)r->args[2];

	t->lock_addr = 0;
	t->lock_how = BPFSTACK_LOCK_NONE;
	if (r->syscall_nr != SYS_FUTEX || !r->args[0])
		return;
	if (cmd == FUTEX_LOCK_PI_OP || cmd == FUTEX_LOCK_PI2_OP)
		t->lock_how = BPFSTACK_LOCK_PI;
	else if (cmd == FUTEX_WAIT_OP && val == GLIBC_LLL_CONTENDED)
		t->lock_how = BPFSTACK_LOCK_LLL;
	else if (cmd == FUTEX_WAIT_OP && (val & FUTEX_WAITERS_BIT) && (val & FUTEX_TID_BITS))
		t->lock_how = BPFSTACK_LOCK_ROBUST;
	if (t->lock_how != BPFSTACK_LOCK_NONE)
		t->lock_addr = r->args[0];
}

void bpfs_lock_wait(const struct stk_rec *r, struct bpfstack_thread *t)
{
	if (t->sched_state == 'R' || t->on_cpu || t->sched_state == 'Z' || t->sched_state == 'X')
		t->lock_addr = 0, t->lock_how = BPFSTACK_LOCK_NONE;
	else
		lock_wait(r, t);
}

/* Whether the syscall the thread sleeps in has a timeout; false when the
 * syscall is not one that waits. */
static bool is_timed(const struct stk_rec *r)
{
	for (size_t i = 0; i < sizeof(syscall_table) / sizeof(syscall_table[0]); i++) {
		uint64_t a;

		if (syscall_table[i].nr != r->syscall_nr)
			continue;
		a = r->args[syscall_table[i].arg];
		switch (syscall_table[i].kind) {
		case TMO_PTR:
			return a != 0;
		case TMO_MS:
			return (int32_t)a >= 0;
		case TMO_ALWAYS:
			return true;
		}
	}
	return false;
}

static const char *blocked_in_from_syscall(int64_t nr);

void bpfs_classify(const struct bpfs_ksyms *ks, struct bpfs_kcache *kc, const struct stk_rec *r,
		   struct bpfstack_thread *t)
{
	bool in_syscall;

	t->blocked_in = NULL;
	t->lock_addr = 0;
	t->lock_how = BPFSTACK_LOCK_NONE;
	if (t->sched_state == 'Z' || t->sched_state == 'X') {
		t->jstate = "TERMINATED";
		return;
	}
	if (t->sched_state == 'R' || t->on_cpu) {
		t->jstate = "RUNNABLE";
		return;
	}
	t->blocked_in = blocked_in_from_kstack(ks, kc, t);
	/* No kernel frame says (no kernel symbols, or a kernel whose function
	 * names moved): the system call does. */
	if (!t->blocked_in && r->syscall_nr >= 0)
		t->blocked_in = blocked_in_from_syscall(r->syscall_nr);
	/* A fault leaves an error code where a syscall leaves its number. */
	in_syscall = !t->blocked_in || strcmp(t->blocked_in, "page_fault") != 0;
	if (in_syscall)
		lock_wait(r, t);
	if (in_syscall && t->blocked_in && strcmp(t->blocked_in, "futex") == 0 && is_lock_wait(r)) {
		t->blocked_in = "mutex";
		t->jstate = "BLOCKED";
	} else if (t->blocked_in && strcmp(t->blocked_in, "kernel_lock") == 0) {
		t->jstate = "BLOCKED";
	} else if ((t->blocked_in && strcmp(t->blocked_in, "sleep") == 0) ||
		   (in_syscall && is_timed(r))) {
		t->jstate = "TIMED_WAITING";
	} else {
		t->jstate = "WAITING";
	}
}

/* What a thread blocked in syscall nr waits for, when no kernel stack says
 * (the /proc tier cannot read one without privileges). */
static const struct {
	int64_t nr;
	const char *blocked_in;
} syscall_names[] = {
    {0, "read"},    {1, "write"},      {7, "poll"},	  {17, "read"},	      {18, "write"},
    {19, "read"},   {20, "write"},     {23, "select"},	  {34, "signal"},     {35, "sleep"},
    {43, "accept"}, {42, "connect"},   {44, "send"},	  {45, "recv"},	      {46, "send"},
    {47, "recv"},   {61, "wait"},      {64, "semaphore"}, {65, "semaphore"},  {69, "msgrcv"},
    {70, "msgrcv"}, {72, "file_lock"}, {73, "file_lock"}, {128, "signal"},    {130, "signal"},
    {202, "futex"}, {206, "io"},       {208, "io"},	  {220, "semaphore"}, {230, "sleep"},
    {232, "epoll"}, {243, "msgrcv"},   {247, "wait"},	  {270, "select"},    {271, "poll"},
    {281, "epoll"}, {288, "accept"},   {295, "read"},	  {296, "write"},     {299, "recv"},
    {307, "send"},  {426, "io_uring"}, {441, "epoll"},	  {449, "futex"},
};

static const char *blocked_in_from_syscall(int64_t nr)
{
	for (size_t i = 0; i < sizeof(syscall_names) / sizeof(syscall_names[0]); i++)
		if (syscall_names[i].nr == nr)
			return syscall_names[i].blocked_in;
	return NULL;
}

void bpfs_classify_syscall(const struct stk_rec *r, struct bpfstack_thread *t)
{
	t->blocked_in = NULL;
	t->lock_addr = 0;
	t->lock_how = BPFSTACK_LOCK_NONE;
	if (t->sched_state == 'Z' || t->sched_state == 'X') {
		t->jstate = "TERMINATED";
		return;
	}
	if (t->sched_state == 'R' || t->on_cpu || r->syscall_nr < 0) {
		/* Woken, or in the kernel for a fault or preemption: it runs. */
		t->jstate = "RUNNABLE";
		return;
	}
	t->blocked_in = blocked_in_from_syscall(r->syscall_nr);
	lock_wait(r, t);
	if (is_lock_wait(r)) {
		t->blocked_in = "mutex";
		t->jstate = "BLOCKED";
	} else if (t->blocked_in && strcmp(t->blocked_in, "file_lock") == 0) {
		t->jstate = "BLOCKED";
	} else if (is_timed(r)) {
		t->jstate = "TIMED_WAITING";
	} else {
		t->jstate = "WAITING";
	}
}
