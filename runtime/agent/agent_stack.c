/* agent_stack.c - signal-mode stack capture: the agent signals each thread,
 * whose pre-warmed handler unwinds its own stack into a preallocated slot;
 * the agent turns the slots into STACK_REPLY frames. */
#define UNW_LOCAL_ONLY
#include <dirent.h>
#include <errno.h>
#include <libunwind.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#define NSLOTS 64	    /* threads captured at once */
#define DEFAULT_FRAMES 64   /* when a request says max_frames = 0 */
#define WAIT_NS 200000000LL /* how long a batch waits for its threads */
#define BUSY_WAIT_NS 50000000LL
#define MAX_ALL_TIDS 65536 /* threads listed for an all-threads request */
/* What the handler needs below its own frame: libunwind's cursor and steps
 * took 3 KiB in a measured capture (x86_64, -O2; 5.4 KiB under ASan), and
 * unwind info seen for the first time costs more. */
#define HANDLER_ROOM (12u * 1024)

/* A slot's word: generation << 2 | state, so a late handler from an older
 * request can never claim a slot armed again for another thread. */
enum { SLOT_IDLE = 0, SLOT_ARMED = 1, SLOT_BUSY = 2, SLOT_DONE = 3 };

struct slot {
	_Atomic uint32_t word;
	uint16_t max;
	uint16_t n;
	int32_t error; /* 0, or why the handler did not unwind */
	int64_t pause_ns;
	uint64_t addr[PROTO_MAX_FRAMES];
};

static struct slot slots[NSLOTS];
static _Atomic uint32_t done_seq; /* futex word: bumped by every handler */
static uint32_t next_gen;
static _Atomic int warmed; /* warm_up() ran: the handler's unwinding is safe */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Unwinds from cursor c into addr[0..max); returns the frame count. */
static uint16_t unwind(unw_cursor_t *c, uint64_t *addr, uint16_t max)
{
	uint16_t n = 0;
	do {
		unw_word_t ip;
		if (unw_get_reg(c, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		addr[n++] = (uint64_t)ip;
	} while (n < max && unw_step(c) > 0);
	return n;
}

/* Whether the handler runs on an alternate stack with less than
 * HANDLER_ROOM left below here.  The runtime's own are 64 KiB or more, but
 * a thread may bring a far smaller one (SIGSTKSZ was 8 KiB), and overflowing
 * it would kill the process rather than fail one capture.  The kernel
 * describes the thread's alternate stack in uc_stack. */
static int altstack_too_small(const ucontext_t *uc, const void *here)
{
	uintptr_t lo = (uintptr_t)uc->uc_stack.ss_sp, p = (uintptr_t)here;

	if (uc->uc_stack.ss_flags & SS_DISABLE)
		return 0;
	if (p < lo || p - lo >= uc->uc_stack.ss_size)
		return 0; /* on the thread's own stack */
	return p - lo < HANDLER_ROOM;
}

#if defined(__x86_64__)
/* A thread blocked in a system call that the signal interrupted comes back
 * to user space with its pc moved back onto the `syscall` instruction, so
 * that the kernel can restart the call after the handler.  The thread is
 * in the call, and a debugger or the kernel's own register view shows the
 * pc after it: so does the capture.  (A thread caught just before a
 * `syscall` looks the same; it is about to block there, and the line after
 * is as true of it.)  The interrupted pc was being executed, so its bytes
 * are mapped, and 0x0f opens a two-byte opcode, so the second is too. */
static uint64_t past_restarted_syscall(uint64_t pc)
{
	const volatile unsigned char *code = (const volatile unsigned char *)(uintptr_t)pc;
	return pc && code[0] == 0x0f && code[1] == 0x05 ? pc + 2 : pc;
}
#else
static uint64_t past_restarted_syscall(uint64_t pc)
{
	return pc;
}
#endif

/* The unwind itself, apart from the handler, so that the handler's own
 * frame stays small until it has checked its room: the cursor is 1 KiB. */
static __attribute__((noinline)) uint16_t unwind_from(void *uctx, uint64_t *addr, uint16_t max)
{
	unw_cursor_t c;

	if (unw_init_local2(&c, (unw_context_t *)uctx, UNW_INIT_SIGNAL_FRAME) != 0)
		return 0;
	uint16_t n = unwind(&c, addr, max);
	if (n)
		addr[0] = past_restarted_syscall(addr[0]);
	return n;
}

/* Runs on the captured thread.  Only async-signal-safe work: atomics,
 * clock_gettime, libunwind local unwinding (warmed at init), futex. */
static void on_stack_signal(int sig, siginfo_t *si, void *uctx)
{
	(void)sig;
	int saved = errno;
	int64_t t0 = now_ns();

	if (si->si_code != SI_QUEUE || si->si_pid != getpid())
		goto out; /* not the agent's request */
	uint32_t v = (uint32_t)si->si_value.sival_int;
	struct slot *s = &slots[v % NSLOTS];
	uint32_t gen = v / NSLOTS;
	uint32_t armed = gen << 2 | SLOT_ARMED;
	if (!atomic_compare_exchange_strong(&s->word, &armed, gen << 2 | SLOT_BUSY))
		goto out; /* the agent gave up on this one already */

	s->n = 0;
	s->error = 0;
	if (altstack_too_small(uctx, __builtin_frame_address(0)))
		s->error = -ENOSPC;
	else
		s->n = unwind_from(uctx, s->addr, s->max);
	s->pause_ns = now_ns() - t0;
	atomic_store_explicit(&s->word, gen << 2 | SLOT_DONE, memory_order_release);
	atomic_fetch_add(&done_seq, 1);
	syscall(SYS_futex, &done_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
out:
	errno = saved;
}

/* Every call the handler makes, made once now: libunwind sets up its
 * caches, and each function's lazy binding happens here.  The dynamic
 * linker's resolver saves the vector registers on the stack (about 3 KiB
 * with AVX-512), which a small alternate stack cannot spare. */
static void warm_up(void)
{
	unw_context_t ctx;
	unw_cursor_t c;
	uint64_t addr[8];
	int saved = errno;

	(void)now_ns();
	(void)getpid();
	(void)syscall(SYS_futex, &done_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	if (unw_getcontext(&ctx) == 0 && unw_init_local2(&c, &ctx, 0) == 0)
		(void)unwind(&c, addr, 8);
	errno = saved;
}

int sc_stack_init(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_stack_signal;
	/* On the alternate stack, which the runtime gives each of its threads:
	 * a thread deep in its own stack may have no room left there for the
	 * signal frame and the unwinder.  The unwind starts from the
	 * interrupted context, so it walks the thread's own stack wherever the
	 * handler runs. */
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	sigfillset(&sa.sa_mask);
	warm_up(); /* before any signal can come */
	atomic_store(&warmed, 1);
	if (sigaction(SC_SIG_STACK, &sa, NULL) < 0)
		return -errno;
	return 0;
}

uint16_t sc_stack_unwind_here(void *uctx, uint64_t *addr, uint16_t max)
{
	/* Unwarmed, libunwind could take locks or bind lazily: in a crash
	 * handler that could hang the process instead of ending it. */
	if (!atomic_load(&warmed) || altstack_too_small(uctx, __builtin_frame_address(0)))
		return 0;
	return unwind_from(uctx, addr, max);
}

static void put_reply(struct sc_buf *out, const struct proto_msg *req, uint32_t tid, int error,
		      int64_t pause, uint16_t n, const uint64_t *addr)
{
	struct proto_msg m;
	memset(&m, 0, sizeof m);
	m.type = PROTO_STACK_REPLY;
	m.req = req->req;
	m.tid = tid;
	m.error = error;
	m.pause_ns = pause;
	m.nframes = n;
	(void)sc_buf_put_msg(out, &m, NULL, addr);
}

/* Every thread of the process, from /proc/self/task.  *out is new. */
static size_t list_threads(uint32_t **out)
{
	size_t n = 0, cap = 256;
	uint32_t *t = malloc(cap * sizeof *t);
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	if (!t || !d) {
		free(t);
		if (d)
			closedir(d);
		*out = NULL;
		return 0;
	}
	while ((e = readdir(d)) && n < MAX_ALL_TIDS) {
		long tid = strtol(e->d_name, NULL, 10);
		if (tid <= 0)
			continue;
		if (n == cap) {
			uint32_t *g = realloc(t, 2 * cap * sizeof *t);
			if (!g)
				break;
			t = g;
			cap *= 2;
		}
		t[n++] = (uint32_t)tid;
	}
	closedir(d);
	*out = t;
	return n;
}

struct batch {
	int slot;
	uint32_t tid;
	uint32_t gen;
};

/* Arms a free slot for tid and signals the thread.  Returns the slot, or a
 * negative errno (no free slot: -EBUSY; thread gone: -ESRCH). */
static int arm(uint32_t tid, uint16_t max, int *cursor, uint32_t *gen_out)
{
	for (int k = 0; k < NSLOTS; k++) {
		int i = (*cursor + k) % NSLOTS;
		struct slot *s = &slots[i];
		uint32_t w = atomic_load(&s->word);
		if ((w & 3) == SLOT_BUSY || (w & 3) == SLOT_ARMED)
			continue; /* a handler from an abandoned request may still run */
		uint32_t gen = ++next_gen & 0x00ffffffu;
		s->max = max;
		s->n = 0;
		atomic_store(&s->word, gen << 2 | SLOT_ARMED);
		siginfo_t si;
		memset(&si, 0, sizeof si);
		si.si_signo = SC_SIG_STACK;
		si.si_code = SI_QUEUE;
		si.si_pid = getpid();
		si.si_uid = getuid();
		si.si_value.sival_int = (int)(gen * NSLOTS + (uint32_t)i);
		if (syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, SC_SIG_STACK, &si) < 0) {
			int err = errno;
			atomic_store(&s->word, SLOT_IDLE);
			return -err;
		}
		*cursor = i + 1;
		*gen_out = gen;
		return i;
	}
	return -EBUSY;
}

/* Waits until every slot of the batch is done or the time is up. */
static void wait_batch(const struct batch *b, int nb)
{
	int64_t deadline = now_ns() + WAIT_NS;
	for (;;) {
		uint32_t seen = atomic_load(&done_seq);
		int pending = 0;
		for (int i = 0; i < nb; i++)
			if (b[i].slot >= 0 &&
			    atomic_load(&slots[b[i].slot].word) != (b[i].gen << 2 | SLOT_DONE))
				pending++;
		int64_t left = deadline - now_ns();
		if (!pending || left <= 0)
			return;
		struct timespec ts = {left / 1000000000, left % 1000000000};
		syscall(SYS_futex, &done_seq, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
	}
}

/* The result of one slot: 0 and its frames, or -ETIMEDOUT. */
static int collect(const struct batch *b)
{
	struct slot *s = &slots[b->slot];
	uint32_t armed = b->gen << 2 | SLOT_ARMED;
	if (atomic_compare_exchange_strong(&s->word, &armed, SLOT_IDLE))
		return -ETIMEDOUT; /* never ran: withdrawn, a late handler does nothing */
	int64_t until = now_ns() + BUSY_WAIT_NS;
	while ((atomic_load_explicit(&s->word, memory_order_acquire) & 3) == SLOT_BUSY &&
	       now_ns() < until) {
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
	if (atomic_load_explicit(&s->word, memory_order_acquire) != (b->gen << 2 | SLOT_DONE))
		return -ETIMEDOUT; /* still busy: the slot stays out of use until it ends */
	return 0;
}

void sc_stack_answer(const struct proto_msg *req, struct sc_buf *out, uint32_t agent_tid)
{
	int64_t t0 = now_ns(), max_pause = 0;
	uint16_t max = req->max_frames ? req->max_frames : DEFAULT_FRAMES;
	uint32_t *tids = NULL, nthreads = 0;
	size_t ntids;
	int cursor = 0;

	if (max > PROTO_MAX_FRAMES)
		max = PROTO_MAX_FRAMES;
	if (req->ntids == 0) {
		ntids = list_threads(&tids);
	} else {
		ntids = req->ntids;
		tids = malloc(ntids * sizeof *tids);
		for (size_t i = 0; tids && i < ntids; i++)
			tids[i] = proto_tid_at(req, i);
		if (!tids)
			ntids = 0;
	}

	for (size_t i = 0; i < ntids;) {
		struct batch b[NSLOTS];
		int nb = 0;
		for (; i < ntids && nb < NSLOTS; i++) {
			if (tids[i] == agent_tid) {
				/* The agent reports its own stack directly. */
				unw_context_t ctx;
				unw_cursor_t c;
				uint64_t addr[PROTO_MAX_FRAMES];
				uint16_t n = 0;
				if (unw_getcontext(&ctx) == 0 && unw_init_local(&c, &ctx) == 0)
					n = unwind(&c, addr, max);
				put_reply(out, req, agent_tid, 0, 0, n, addr);
				nthreads++;
				continue;
			}
			uint32_t gen = 0;
			int s = arm(tids[i], max, &cursor, &gen);
			if (s == -EBUSY)
				break; /* every slot taken: finish this batch first */
			if (s < 0) {
				put_reply(out, req, tids[i], s, 0, 0, NULL);
				nthreads++;
				continue;
			}
			b[nb++] = (struct batch){s, tids[i], gen};
		}
		wait_batch(b, nb);
		for (int k = 0; k < nb; k++) {
			int err = collect(&b[k]);
			struct slot *s = &slots[b[k].slot];
			if (err) {
				put_reply(out, req, b[k].tid, err, 0, 0, NULL);
			} else {
				put_reply(out, req, b[k].tid, s->error, s->pause_ns, s->n, s->addr);
				if (s->pause_ns > max_pause)
					max_pause = s->pause_ns;
				atomic_store(&s->word, SLOT_IDLE);
			}
			nthreads++;
		}
		if (nb == 0 && i < ntids && tids[i] != agent_tid) {
			/* No slot came free: the rest cannot be captured now. */
			for (; i < ntids; i++, nthreads++)
				put_reply(out, req, tids[i], -EBUSY, 0, 0, NULL);
		}
	}
	free(tids);

	struct proto_msg m;
	memset(&m, 0, sizeof m);
	m.type = PROTO_STACK_DONE;
	m.req = req->req;
	m.nthreads = nthreads;
	m.total_ns = now_ns() - t0;
	m.max_pause_ns = max_pause;
	(void)sc_buf_put_msg(out, &m, NULL, NULL);
}
