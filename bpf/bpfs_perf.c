/* bpfs_perf.c - exact stacks for threads that were on a CPU during the
 * iterator pass: one user-mode perf sample per thread (registers and a copy
 * of its stack, taken by the kernel at a timer tick), with no signal and no
 * stop; a thread that does not run again in time keeps its approximate
 * stack. */
#include "bpfs_int.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DATA_PAGES 8 /* a power of two; one sample is ~16.6 KiB */
#define PAGE 4096
#define SAMPLE_PERIOD_NS 50000 /* of the thread's own CPU time */

/* perf's x86 register numbers (enum perf_event_x86_regs) for each DWARF
 * register 0..16; the sample lists registers by increasing perf number. */
static const int dwarf_to_perf[STK_NREGS] = {
    0 /* ax */, 3 /* dx */, 2 /* cx */, 1 /* bx */,
    4 /* si */, 5 /* di */, 6 /* bp */, 7 /* sp */,
    16,		17,	    18,		19,
    20,		21,	    22,		23 /* r8..r15 */,
    8 /* ip */,
};

static uint64_t regs_mask(void)
{
	uint64_t m = 0;

	for (int i = 0; i < STK_NREGS; i++)
		m |= 1ull << dwarf_to_perf[i];
	return m;
}

struct sampler {
	pid_t tid;
	int fd;
	void *ring;
	int done;
};

static int open_one(struct sampler *s)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.sample_period = SAMPLE_PERIOD_NS;
	a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
	a.sample_regs_user = regs_mask();
	a.sample_stack_user = STK_WINDOW;
	a.exclude_kernel = 1; /* sample only where the user stack is live */
	a.exclude_hv = 1;
	a.wakeup_events = 1;
	s->fd = (int)syscall(SYS_perf_event_open, &a, s->tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (s->fd < 0)
		return -errno;
	s->ring = mmap(NULL, (1 + DATA_PAGES) * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (s->ring == MAP_FAILED) {
		s->ring = NULL;
		close(s->fd);
		s->fd = -1;
		return -ENOMEM;
	}
	return 0;
}

static void close_one(struct sampler *s)
{
	if (s->ring)
		munmap(s->ring, (1 + DATA_PAGES) * PAGE);
	if (s->fd >= 0)
		close(s->fd);
	s->ring = NULL;
	s->fd = -1;
}

/* Copies len bytes at ring offset off out of the circular data area. */
static void ring_copy(const unsigned char *data, uint64_t off, void *dst, size_t len)
{
	size_t size = DATA_PAGES * PAGE, at = (size_t)(off % size);
	size_t first = len < size - at ? len : size - at;

	memcpy(dst, data + at, first);
	memcpy((unsigned char *)dst + first, data, len - first);
}

/* Parses the first sample in s's ring into h (registers) and win (the
 * stack).  Returns 1 when a usable sample was found. */
static int take_sample(struct sampler *s, struct stk_rec *h, unsigned char *win, unsigned char *rec)
{
	struct perf_event_mmap_page *meta = s->ring;
	const unsigned char *data = (const unsigned char *)s->ring + PAGE;
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = meta->data_tail;

	while (tail + sizeof(struct perf_event_header) <= head) {
		struct perf_event_header eh;
		uint64_t regs[24], abi, size, dyn;
		const unsigned char *p;
		uint32_t ids[2];
		int nregs = 0;

		ring_copy(data, tail, &eh, sizeof(eh));
		if (eh.size < sizeof(eh) || tail + eh.size > head || eh.size > DATA_PAGES * PAGE)
			break;
		ring_copy(data, tail, rec, eh.size);
		tail += eh.size;
		if (eh.type != PERF_RECORD_SAMPLE)
			continue;
		p = rec + sizeof(eh);
		memcpy(ids, p, sizeof(ids));
		p += sizeof(ids);
		memcpy(&abi, p, sizeof(abi));
		p += sizeof(abi);
		if (abi == PERF_SAMPLE_REGS_ABI_NONE || (pid_t)ids[1] != s->tid)
			continue;
		for (uint64_t m = regs_mask(); m; m &= m - 1)
			nregs++;
		if ((size_t)(p - rec) + (size_t)nregs * 8 + 8 > eh.size)
			continue;
		for (int bit = 0, k = 0; bit < 24; bit++)
			if (regs_mask() & (1ull << bit))
				memcpy(&regs[bit], p + 8 * k++, 8);
		p += nregs * 8;
		memcpy(&size, p, 8);
		p += 8;
		if (size > STK_WINDOW || (size_t)(p - rec) + size + 8 > eh.size)
			continue;
		memcpy(&dyn, p + size, 8);
		if (dyn > size)
			dyn = size;
		memcpy(win, p, dyn);
		for (int i = 0; i < STK_NREGS; i++)
			h->regs[i] = regs[dwarf_to_perf[i]];
		h->ustack_base = h->regs[STK_REG_SP];
		h->ustack_len = (uint32_t)dyn;
		h->ustack_err = 0;
		__atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
		return 1;
	}
	__atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int bpfs_perf_sample(const pid_t *tids, size_t n, int timeout_ms, bpfs_sample_fn fn, void *ctx)
{
	struct sampler s[BPFS_PERF_MAX];
	struct pollfd pfd[BPFS_PERF_MAX];
	unsigned char *win, *rec;
	size_t open = 0, left;
	int64_t deadline = now_ms() + timeout_ms;
	int got = 0, rc = 0;

	if (n > BPFS_PERF_MAX)
		n = BPFS_PERF_MAX;
	win = malloc(STK_WINDOW + DATA_PAGES * PAGE);
	if (!win)
		return -ENOMEM;
	rec = win + STK_WINDOW;
	for (size_t i = 0; i < n; i++) {
		s[open] = (struct sampler){.tid = tids[i], .fd = -1};
		rc = open_one(&s[open]);
		if (rc == 0)
			open++;
	}
	left = open;
	while (left > 0) {
		int64_t wait = deadline - now_ms();
		size_t np = 0;

		if (wait <= 0)
			break;
		for (size_t i = 0; i < open; i++)
			if (!s[i].done)
				pfd[np++] = (struct pollfd){.fd = s[i].fd, .events = POLLIN};
		if (poll(pfd, np, (int)wait) <= 0)
			break;
		for (size_t i = 0; i < open; i++) {
			struct stk_rec h;

			if (s[i].done)
				continue;
			memset(&h, 0, sizeof(h));
			h.tid = (uint32_t)s[i].tid;
			if (take_sample(&s[i], &h, win, rec)) {
				/* Stop the sampling before the (slow) unwind. */
				close_one(&s[i]);
				s[i].done = 1;
				left--;
				got++;
				fn(ctx, &h, win);
			}
		}
	}
	for (size_t i = 0; i < open; i++)
		close_one(&s[i]);
	free(win);
	return open ? got : rc;
}
