/* bpfs_unwind.c - unwinds captured user stacks with libdw's CFI unwinder,
 * reading registers and stack from the capture (and past its window from
 * /proc/PID/mem), with a frame-pointer walk where CFI gives up; keeps one
 * Dwfl per process so a warm capture opens no files, and each thread's
 * last unwind with the stack words it read, so a thread that ran and came
 * back to where it was costs a comparison of those words, not an unwind. */
#include "bpfs_int.h"

#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Processes whose module maps stay loaded; the least recently used goes. */
#define UNW_PROCS 8
/* A frame-pointer step longer than this is taken as garbage, not a frame. */
#define FP_MAX_STEP (1u << 20)
/* A map rebuilt because unwinding reached unknown code is not rebuilt
 * again for this long (JIT code would otherwise cost a rebuild a thread). */
#define REBUILD_MIN_NS 1000000000LL
/* Stack words an unwind may read and still be remembered (a CFI unwind of
 * 30 frames reads about 60; the frame-pointer search reads many more). */
#define MEMO_MAX_READS 160
/* Bytes the remembered unwinds of all processes hold at most. */
#define MEMO_BYTES_MAX (24u << 20)
/* Slots of one process's table at most (a power of two). */
#define MEMO_SLOTS_MAX 32768u

/* A word an unwind read from the captured window. */
struct memo_read {
	uint64_t addr, val;
};

enum { MEMO_FULL = 1, MEMO_SP_IP };

/* A thread's last unwind.  Unwinding is a function of the registers it
 * starts from, the words it reads from the stack and the module map (the
 * cache below is dropped whenever the map is rebuilt): the same registers
 * and the same values at the same addresses give the same frames, whatever
 * else on the stack changed, and whichever thread it is. */
struct unw_memo {
	uint32_t tid; /* 0: free */
	uint8_t kind; /* MEMO_*: which entry point unwound it */
	bool inferred;
	uint16_t nframes, nreads;
	uint64_t regs[STK_NREGS];
	uint64_t *frames; /* nframes, then nreads struct memo_read: one block */
};

struct unw_proc {
	pid_t pid;
	uint64_t exec_vm, start_code, leader_start_ns; /* identity of the map */
	Dwfl *dwfl;
	int memfd;		     /* /proc/PID/mem, for reads past the window */
	const struct stk_rec *cur;   /* the thread being unwound */
	const unsigned char *ustack; /* and its window */
	/* Pages read past the window for the thread being unwound: a deep
	 * stack costs one pread per page, not one per word. */
	uint64_t page_addr[2];
	unsigned char page[2][STK_PAGE_SIZE];
	unsigned page_next;
	int64_t built_ns;
	uint64_t last_use;
	/* Where unwinds ended, and whether that is a thread's first
	 * function: the same few addresses end every stack. */
	uint64_t end_pc[16];
	int8_t end_outermost[16];
	/* Remembered unwinds by tid (open addressing, a power of two). */
	struct unw_memo *memo;
	size_t memo_cap, memo_used, memo_bytes;
	/* The words the unwind in progress read from its window; lost: it
	 * read more, or read past the window (what /proc/PID/mem gives is
	 * not in the next capture to compare with). */
	struct memo_read reads[MEMO_MAX_READS];
	unsigned nreads;
	bool reads_lost;
	/* The end of the highest word it read from its window, and whether
	 * it read past the window: how much window the next capture needs. */
	uint64_t read_hi;
	bool read_past;
};

struct bpfs_unwinder {
	struct unw_proc procs[UNW_PROCS];
	uint64_t clock;
	size_t memo_hits;
};

/* Unwinding needs only .eh_frame and the symbol tables of the files
 * themselves: never look for separate debuginfo (which could mean a network
 * round trip through debuginfod inside a capture). */
static int no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
			char **debuginfo_file_name)
{
	(void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
	(void)debuglink_file, (void)debuglink_crc, (void)debuginfo_file_name;
	return -1;
}

static const Dwfl_Callbacks proc_callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = no_debuginfo,
};

static pid_t cb_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	(void)dwfl, (void)arg, (void)thread_argp;
	return 0; /* threads are only ever asked for by tid */
}

static bool cb_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	struct unw_proc *p = arg;

	(void)dwfl;
	if (!p->cur || (pid_t)p->cur->tid != tid)
		return false;
	*thread_argp = (void *)p->cur;
	return true;
}

/* Reads a word of the target past the window, through the page cache. */
static bool read_past_window(struct unw_proc *p, Dwarf_Addr addr, Dwarf_Word *result)
{
	uint64_t base = addr & ~(uint64_t)(STK_PAGE_SIZE - 1);
	size_t off = (size_t)(addr - base);
	unsigned slot;

	if (p->memfd < 0 || addr > (Dwarf_Addr)INT64_MAX - STK_PAGE_SIZE)
		return false;
	if (off + sizeof(*result) > STK_PAGE_SIZE) /* straddles two pages */
		return pread(p->memfd, result, sizeof(*result), (off_t)addr) == sizeof(*result);
	for (slot = 0; slot < 2; slot++)
		if (p->page_addr[slot] == base)
			break;
	if (slot == 2) {
		slot = p->page_next++ & 1;
		p->page_addr[slot] = 0;
		if (pread(p->memfd, p->page[slot], STK_PAGE_SIZE, (off_t)base) != STK_PAGE_SIZE)
			return pread(p->memfd, result, sizeof(*result), (off_t)addr) ==
			       sizeof(*result);
		p->page_addr[slot] = base;
	}
	memcpy(result, p->page[slot] + off, sizeof(*result));
	return true;
}

static bool cb_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct unw_proc *p = arg;
	const struct stk_rec *h = p->cur;

	(void)dwfl;
	/* Page zero, which no process maps (vm.mmap_min_addr), and the upper
	 * half of the address space, the kernel's: where an unwind through a
	 * cleared frame pointer reads (0 + 16, 0 - 40), failing the same in
	 * every capture, so it does not keep the unwind from being
	 * remembered. */
	if (addr < STK_PAGE_SIZE || addr >= (Dwarf_Addr)1 << 63)
		return false;
	if (h && addr >= h->ustack_base && addr - h->ustack_base <= h->ustack_len &&
	    h->ustack_len - (addr - h->ustack_base) >= sizeof(*result)) {
		memcpy(result, p->ustack + (addr - h->ustack_base), sizeof(*result));
		if (addr + sizeof(*result) > p->read_hi)
			p->read_hi = addr + sizeof(*result);
		if (p->nreads < MEMO_MAX_READS)
			p->reads[p->nreads++] = (struct memo_read){addr, *result};
		else
			p->reads_lost = true;
		return true;
	}
	p->reads_lost = true;
	p->read_past = true;
	return read_past_window(p, addr, result);
}

static bool cb_set_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
	const struct stk_rec *h = thread_arg;
	Dwarf_Word regs[STK_NREGS];

	for (int i = 0; i < STK_NREGS; i++)
		regs[i] = h->regs[i];
	if (!dwfl_thread_state_registers(thread, 0, STK_NREGS, regs))
		return false;
	dwfl_thread_state_register_pc(thread, regs[STK_REG_IP]);
	return true;
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
    .next_thread = cb_next_thread,
    .get_thread = cb_get_thread,
    .memory_read = cb_memory_read,
    .set_initial_registers = cb_set_initial_registers,
};

struct bpfs_unwinder *bpfs_unwinder_new(void)
{
	struct bpfs_unwinder *u = calloc(1, sizeof(*u));

	if (!u)
		return NULL;
	for (int i = 0; i < UNW_PROCS; i++)
		u->procs[i].memfd = -1;
	return u;
}

static void memo_clear(struct unw_proc *p)
{
	for (size_t i = 0; i < p->memo_cap; i++)
		free(p->memo[i].frames);
	free(p->memo);
	p->memo = NULL;
	p->memo_cap = p->memo_used = p->memo_bytes = 0;
}

static void proc_drop(struct unw_proc *p)
{
	memo_clear(p);
	if (p->dwfl)
		dwfl_end(p->dwfl);
	if (p->memfd >= 0)
		close(p->memfd);
	memset(p, 0, sizeof(*p));
	p->memfd = -1;
}

void bpfs_unwinder_free(struct bpfs_unwinder *u)
{
	if (!u)
		return;
	for (int i = 0; i < UNW_PROCS; i++)
		proc_drop(&u->procs[i]);
	free(u);
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Builds p's module map from /proc/PID/maps and attaches the callbacks. */
static int proc_build(struct unw_proc *p, pid_t pid, const struct stk_rec *h)
{
	char path[64];

	proc_drop(p);
	p->dwfl = dwfl_begin(&proc_callbacks);
	if (!p->dwfl)
		return -ENOMEM;
	dwfl_report_begin(p->dwfl);
	if (dwfl_linux_proc_report(p->dwfl, pid) != 0 ||
	    dwfl_report_end(p->dwfl, NULL, NULL) != 0 ||
	    !dwfl_attach_state(p->dwfl, NULL, pid, &thread_callbacks, p)) {
		proc_drop(p);
		return -ESRCH;
	}
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	p->memfd = open(path, O_RDONLY | O_CLOEXEC);
	p->pid = pid;
	p->built_ns = mono_ns();
	p->exec_vm = h->exec_vm;
	p->start_code = h->start_code;
	p->leader_start_ns = h->leader_start_ns;
	return 0;
}

/* The cached process for pid, rebuilt when its executable mappings or its
 * identity changed, or a fresh slot (evicting the least recently used). */
static struct unw_proc *proc_get(struct bpfs_unwinder *u, pid_t pid, const struct stk_rec *h,
				 int *err)
{
	struct unw_proc *p = NULL, *lru = &u->procs[0];

	for (int i = 0; i < UNW_PROCS; i++) {
		if (u->procs[i].dwfl && u->procs[i].pid == pid)
			p = &u->procs[i];
		if (u->procs[i].last_use < lru->last_use)
			lru = &u->procs[i];
	}
	if (p && (p->exec_vm != h->exec_vm || p->start_code != h->start_code ||
		  p->leader_start_ns != h->leader_start_ns))
		*err = proc_build(p, pid, h);
	else if (!p)
		*err = proc_build(p = lru, pid, h);
	else
		*err = 0;
	p->last_use = ++u->clock;
	return *err ? NULL : p;
}

/* The slot of tid in p's table: its own, or the free one it would take;
 * NULL when there is no table. */
static struct unw_memo *memo_slot(struct unw_proc *p, uint32_t tid)
{
	size_t mask = p->memo_cap - 1;

	if (!p->memo_cap)
		return NULL;
	for (size_t i = (tid * 2654435761u) & mask, k = 0; k < p->memo_cap; i = (i + 1) & mask, k++)
		if (p->memo[i].tid == tid || p->memo[i].tid == 0)
			return &p->memo[i];
	return NULL;
}

/* Gives t the remembered unwind of h's thread when it still holds: the
 * same entry point, the same registers, the same words at every address
 * it read. */
static bool memo_take(struct bpfs_unwinder *u, struct unw_proc *p, const struct stk_rec *h,
		      const unsigned char *ustack, int kind, struct bpfstack_thread *t,
		      bool *inferred)
{
	const struct unw_memo *m = memo_slot(p, h->tid);
	const struct memo_read *r;

	if (!m || m->tid != h->tid || m->kind != kind ||
	    memcmp(m->regs, h->regs, sizeof(m->regs)) != 0)
		return false;
	r = (const struct memo_read *)(m->frames + m->nframes);
	for (unsigned i = 0; i < m->nreads; i++) {
		uint64_t off = r[i].addr - h->ustack_base, v;

		if (r[i].addr < h->ustack_base || off > h->ustack_len ||
		    h->ustack_len - off < sizeof(v))
			return false;
		memcpy(&v, ustack + off, sizeof(v));
		if (v != r[i].val)
			return false;
	}
	memcpy(t->frames, m->frames, m->nframes * sizeof(t->frames[0]));
	t->nframes = m->nframes;
	if (inferred)
		*inferred = m->inferred;
	u->memo_hits++;
	return true;
}

/* Bytes the remembered unwinds of all processes hold. */
static size_t memo_total(const struct bpfs_unwinder *u)
{
	size_t n = 0;

	for (int i = 0; i < UNW_PROCS; i++)
		n += u->procs[i].memo_bytes + u->procs[i].memo_cap * sizeof(struct unw_memo);
	return n;
}

/* Remembers the unwind just made of h's thread, with the words it read;
 * nothing when it read too many or past its window, or when the tables
 * are at their bound.  A table doubles when half full, up to its largest
 * size and within the bound; one three quarters full (it could not grow:
 * tids of threads long gone fill it) starts again. */
static void memo_put(struct bpfs_unwinder *u, struct unw_proc *p, const struct stk_rec *h, int kind,
		     const struct bpfstack_thread *t, bool inferred)
{
	struct unw_memo *m;
	size_t bytes = t->nframes * sizeof(uint64_t) + p->nreads * sizeof(struct memo_read);

	if (p->reads_lost || !h->tid || memo_total(u) + bytes > MEMO_BYTES_MAX)
		return;
	if (p->memo_cap && p->memo_used * 4 >= p->memo_cap * 3)
		memo_clear(p);
	size_t cap = p->memo_cap ? 2 * p->memo_cap : 256;
	if (p->memo_used * 2 >= p->memo_cap && p->memo_cap < MEMO_SLOTS_MAX &&
	    memo_total(u) + bytes + cap * sizeof(struct unw_memo) <= MEMO_BYTES_MAX) {
		struct unw_memo *old = p->memo, *nm = calloc(cap, sizeof(*nm));
		size_t oldcap = p->memo_cap;

		if (nm) {
			p->memo = nm;
			p->memo_cap = cap;
			for (size_t i = 0; i < oldcap; i++)
				if (old[i].tid)
					*memo_slot(p, old[i].tid) = old[i];
			free(old);
		}
	}
	/* Never filled past three quarters: a lookup ends at a free slot. */
	if (!p->memo_cap || p->memo_used * 4 >= p->memo_cap * 3)
		return;
	if (!(m = memo_slot(p, h->tid)))
		return;
	uint64_t *block = malloc(bytes ? bytes : 1);
	if (!block)
		return;
	if (m->tid) {
		p->memo_bytes -=
		    m->nframes * sizeof(uint64_t) + m->nreads * sizeof(struct memo_read);
		free(m->frames);
	} else {
		p->memo_used++;
	}
	memcpy(block, t->frames, t->nframes * sizeof(uint64_t));
	memcpy(block + t->nframes, p->reads, p->nreads * sizeof(struct memo_read));
	*m = (struct unw_memo){.tid = h->tid,
			       .kind = (uint8_t)kind,
			       .inferred = inferred,
			       .nframes = (uint16_t)t->nframes,
			       .nreads = (uint16_t)p->nreads,
			       .frames = block};
	memcpy(m->regs, h->regs, sizeof(m->regs));
	p->memo_bytes += bytes;
}

size_t bpfs_unwinder_memo_hits(const struct bpfs_unwinder *u)
{
	return u->memo_hits;
}

struct walk {
	struct bpfstack_thread *t;
	Dwarf_Word bp, sp;
	bool have_bp, have_sp;
};

static int frame_cb(Dwfl_Frame *state, void *arg)
{
	struct walk *w = arg;
	Dwarf_Addr pc;

	if (!dwfl_frame_pc(state, &pc, NULL))
		return DWARF_CB_ABORT;
	w->t->frames[w->t->nframes++] = pc;
	w->have_bp = dwfl_frame_reg(state, STK_REG_BP, &w->bp) == 0;
	w->have_sp = dwfl_frame_reg(state, STK_REG_SP, &w->sp) == 0;
	return w->t->nframes < BPFSTACK_MAX_FRAMES ? DWARF_CB_OK : DWARF_CB_ABORT;
}

/* Follows the saved-rbp chain from the last frame CFI reached; stops at the
 * first link that does not look like a frame of a known module. */
static void fp_walk(struct unw_proc *p, struct walk *w)
{
	Dwarf_Word bp = w->bp, next, ra;

	while (w->t->nframes < BPFSTACK_MAX_FRAMES) {
		if (bp == 0 || (bp & 7) || !cb_memory_read(p->dwfl, bp, &next, p) ||
		    !cb_memory_read(p->dwfl, bp + 8, &ra, p))
			return;
		if (ra == 0 || !dwfl_addrmodule(p->dwfl, ra))
			return;
		w->t->frames[w->t->nframes++] = ra;
		if (next <= bp || next - bp > FP_MAX_STEP)
			return;
		bp = next;
	}
}

/* One unwind of the thread into t; returns whether it stopped at a frame
 * that lies in no module of the map.  *cfi_end: CFI ran to the outermost
 * frame; *stop_sp: the stack pointer of the last frame CFI reached (0 when
 * not known). */
static bool unwind_walk(struct unw_proc *p, const struct stk_rec *h, struct bpfstack_thread *t,
			bool *cfi_end, Dwarf_Word *stop_sp)
{
	struct walk w = {.t = t};
	Dwarf_Addr last;
	int rc;

	t->nframes = 0;
	p->page_addr[0] = p->page_addr[1] = 0;
	rc = dwfl_getthread_frames(p->dwfl, (pid_t)h->tid, frame_cb, &w);
	*cfi_end = rc == 0;
	*stop_sp = w.have_sp ? w.sp : 0;
	if (rc == -1 && t->nframes == 0) {
		/* Not even the first frame: start the frame-pointer walk from
		 * the captured registers. */
		t->frames[t->nframes++] = h->regs[STK_REG_IP];
		w.bp = h->regs[STK_REG_BP];
		w.have_bp = true;
	}
	if (rc != -1)
		return false;
	last = t->frames[t->nframes - 1] - (t->nframes > 1);
	if (w.have_bp)
		fp_walk(p, &w);
	return !dwfl_addrmodule(p->dwfl, last);
}

static bool unwind_once(struct unw_proc *p, const struct stk_rec *h, struct bpfstack_thread *t)
{
	bool end;
	Dwarf_Word sp;

	return unwind_walk(p, h, t, &end, &sp);
}

/* The pages of h's window, from the one sp is in, that hold the words up
 * to hi (1 at least); all of them when the unwind read past it. */
static uint8_t window_pages(const struct stk_rec *h, uint64_t hi, bool past)
{
	uint64_t first = h->ustack_base & ~(uint64_t)(STK_PAGE_SIZE - 1);
	uint64_t n = hi > first ? (hi - first + STK_PAGE_SIZE - 1) / STK_PAGE_SIZE : 1;

	return past || n > STK_PAGES ? STK_PAGES : (uint8_t)(n ? n : 1);
}

/* The window pages of h's thread when its remembered unwind answered:
 * those holding the words it read. */
static uint8_t memo_window_pages(struct unw_proc *p, const struct stk_rec *h)
{
	const struct unw_memo *m = memo_slot(p, h->tid);
	const struct memo_read *r = (const struct memo_read *)(m->frames + m->nframes);
	uint64_t hi = 0;

	for (unsigned i = 0; i < m->nreads; i++)
		if (r[i].addr + 8 > hi)
			hi = r[i].addr + 8;
	return window_pages(h, hi, false);
}

int bpfs_unwind(struct bpfs_unwinder *u, pid_t pid, const struct stk_rec *h,
		const unsigned char *ustack, struct bpfstack_thread *t)
{
	struct unw_proc *p;
	int err = 0;

	p = proc_get(u, pid, h, &err);
	if (!p)
		return err;
	if (memo_take(u, p, h, ustack, MEMO_FULL, t, NULL)) {
		t->window_pages = memo_window_pages(p, h);
		return 0;
	}
	p->cur = h;
	p->ustack = ustack;
	p->nreads = 0;
	p->reads_lost = false;
	p->read_hi = 0;
	p->read_past = false;
	/* Code mapped without moving exec_vm (a library swapped for one of the
	 * same size): the map is stale, rebuild it and try once more.  An
	 * unwind that still ends in no module is not remembered: the next may
	 * rebuild the map. */
	bool unknown = unwind_once(p, h, t);
	if (unknown && mono_ns() - p->built_ns > REBUILD_MIN_NS) {
		err = proc_build(p, pid, h);
		if (!err) {
			p->cur = h;
			p->ustack = ustack;
			p->nreads = 0;
			p->reads_lost = false;
			p->read_hi = 0;
			p->read_past = false;
			unknown = unwind_once(p, h, t);
		}
	}
	t->window_pages = window_pages(h, p->read_hi, p->read_past || unknown);
	if (!err && !unknown)
		memo_put(u, p, h, MEMO_FULL, t, false);
	if (!err) {
		p->cur = NULL;
		p->ustack = NULL;
	}
	return err;
}

/* How far above the stack pointer of the frame CFI stopped at a saved
 * frame pointer is looked for, and how many candidates are tried. */
#define FP_SCAN_BYTES 4096
#define FP_TRIES 6

/* Whether addr lies in an executable segment of a module (code, where a
 * return address must point; not the data a stale pointer points into). */
static bool in_code(struct unw_proc *p, Dwarf_Addr addr)
{
	Dwfl_Module *mod = dwfl_addrmodule(p->dwfl, addr);
	GElf_Addr bias;
	Elf *elf = mod ? dwfl_module_getelf(mod, &bias) : NULL;
	size_t n;

	if (!elf || elf_getphdrnum(elf, &n) != 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X) &&
		    addr - bias >= ph.p_vaddr && addr - bias < ph.p_vaddr + ph.p_memsz)
			return true;
	}
	return false;
}

/* Whether a slot at a looks like a frame pointer's link: a saved frame
 * pointer of 0 or a little above it, then a return address into a known
 * module; and the frame it links to looks the same (or ends the chain). */
static bool looks_like_link(struct unw_proc *p, Dwarf_Word a)
{
	Dwarf_Word link, ra, link2, ra2;

	if (!cb_memory_read(p->dwfl, a, &link, p) || !cb_memory_read(p->dwfl, a + 8, &ra, p))
		return false;
	if (ra <= 4096 || !in_code(p, ra))
		return false;
	if (link == 0)
		return true;
	if (link <= a || link - a > FP_MAX_STEP || (link & 7))
		return false;
	if (!cb_memory_read(p->dwfl, link, &link2, p) ||
	    !cb_memory_read(p->dwfl, link + 8, &ra2, p))
		return false;
	return link2 == 0 || ra2 == 0 ||
	       (link2 > link && link2 - link <= FP_MAX_STEP && in_code(p, ra2));
}

/* Whether the unwind ended where a thread's stack ends: at the function a
 * thread or the process starts in (their CFI marks the return address
 * undefined), so there is no frame pointer to look for. */
static bool at_outermost(struct unw_proc *p, const struct bpfstack_thread *t)
{
	static const char *const entries[] = {"__clone3",
					      "clone3",
					      "__clone",
					      "clone",
					      "_start",
					      "__libc_start_main",
					      "__libc_start_main_impl",
					      "start_thread"};
	Dwarf_Addr pc = t->frames[t->nframes - 1] - (t->nframes > 1);
	size_t slot = (size_t)(pc ^ (pc >> 7)) % 16;
	Dwfl_Module *mod;
	const char *name;
	bool outer = false;

	if (p->end_pc[slot] == pc && pc)
		return p->end_outermost[slot];
	/* A symbol table lookup is a linear search in libdw: once per address. */
	mod = dwfl_addrmodule(p->dwfl, pc);
	name = mod ? dwfl_module_addrname(mod, pc) : NULL;
	for (size_t i = 0; name && i < sizeof(entries) / sizeof(entries[0]); i++)
		if (strcmp(name, entries[i]) == 0)
			outer = true;
	/* libc's own symbol table (.dynsym) names neither clone3 nor
	 * start_thread: a stack that ends in libc ends where threads and the
	 * process start. */
	const char *file =
	    mod ? dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL) : NULL;
	const char *base = file ? strrchr(file, '/') : NULL;
	if (base && strncmp(base + 1, "libc.so", 7) == 0)
		outer = true;
	p->end_pc[slot] = pc;
	p->end_outermost[slot] = outer;
	return outer;
}

int bpfs_unwind_sp_ip(struct bpfs_unwinder *u, pid_t pid, const struct stk_rec *h,
		      const unsigned char *ustack, struct bpfstack_thread *t, bool *inferred)
{
	struct unw_proc *p;
	struct stk_rec g;
	struct bpfstack_thread *again = NULL, *best = NULL;
	bool end, best_whole = false;
	Dwarf_Word sp, sp2;
	int err = 0, tries = 0;

	*inferred = false;
	p = proc_get(u, pid, h, &err);
	if (!p)
		return err;
	if (memo_take(u, p, h, ustack, MEMO_SP_IP, t, inferred)) {
		t->window_pages = memo_window_pages(p, h);
		return 0;
	}
	p->cur = h;
	p->ustack = ustack;
	p->nreads = 0;
	p->reads_lost = false;
	p->read_hi = 0;
	p->read_past = false;
	unwind_walk(p, h, t, &end, &sp);
	if (t->nframes == 0 || at_outermost(p, t))
		sp = 0;
	/* CFI may stop at a frame whose caller it finds through the frame
	 * pointer, which the kernel did not give: no frame below that one
	 * saved it, so it still holds that frame's value.  Find the frame's
	 * link on the stack and unwind again from the start with it; a
	 * candidate counts only when the unwind then goes past where the
	 * first one stopped, through the same frames. */
	for (Dwarf_Word a = (sp + 7) & ~(Dwarf_Word)7;
	     sp && t->nframes < BPFSTACK_MAX_FRAMES && a < sp + FP_SCAN_BYTES && tries < FP_TRIES;
	     a += 8) {
		if (!looks_like_link(p, a))
			continue;
		tries++;
		if (!again && !(again = malloc(sizeof(*again)))) {
			p->reads_lost = true; /* not the unwind a retry makes */
			break;
		}
		g = *h;
		g.regs[STK_REG_BP] = a;
		p->cur = &g;
		unwind_walk(p, &g, again, &end, &sp2);
		bool code = again->nframes > t->nframes;
		for (size_t k = t->nframes; code && k < again->nframes; k++)
			code = in_code(p, again->frames[k] - 1);
		if (!code ||
		    memcmp(again->frames, t->frames, t->nframes * sizeof(t->frames[0])) != 0)
			continue;
		/* One that reaches the thread's first function is the chain;
		 * else the longest is kept, and the stack is approximate. */
		bool whole = at_outermost(p, again);
		if (whole || !best || again->nframes > best->nframes) {
			if (!best && !(best = malloc(sizeof(*best)))) {
				p->reads_lost = true;
				break;
			}
			memcpy(best, again, sizeof(*best));
			best_whole = whole;
		}
		if (whole)
			break;
	}
	if (best) {
		memcpy(t->frames, best->frames, best->nframes * sizeof(t->frames[0]));
		t->nframes = best->nframes;
		*inferred = !best_whole;
		free(best);
	}
	free(again);
	t->window_pages = window_pages(h, p->read_hi, p->read_past || t->nframes == 0);
	memo_put(u, p, h, MEMO_SP_IP, t, *inferred);
	p->cur = NULL;
	p->ustack = NULL;
	return 0;
}
