/* bpfs_int.h - what the files of the BPF stack source share inside bpf/:
 * the kernel symbol table, the thread classifier, the iterator passes and
 * the per-process unwinder cache.  Not for use outside bpf/. */
#ifndef BPFS_INT_H
#define BPFS_INT_H

#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "bpfstack.h"
#include "stacks.h"

/* ---- kernel symbols (bpfs_ksym.c) ---------------------------------------- */

struct bpfs_ksyms;

/* Reads /proc/kallsyms once.  Returns 0 or a negative errno with the reason
 * in err; *out is new (bpfs_ksyms_free). */
int bpfs_ksyms_load(struct bpfs_ksyms **out, const char *path, char *err, size_t errlen);
/* Name of the text symbol containing addr, or NULL.  Borrowed from ks. */
const char *bpfs_ksyms_find(const struct bpfs_ksyms *ks, uint64_t addr);
size_t bpfs_ksyms_count(const struct bpfs_ksyms *ks);
void bpfs_ksyms_free(struct bpfs_ksyms *ks);

/* ---- classification (bpfs_classify.c) ----------------------------------- */

/* /proc-style state letter for task __state and exit_state. */
char bpfs_state_letter(uint32_t state, uint32_t exit_state);

/* Remembers which classifier row kernel addresses map to, since the same
 * few kernel return addresses recur in every thread. */
#define BPFS_KCACHE 1024
struct bpfs_kcache {
	uint64_t addr[BPFS_KCACHE];
	int16_t row[BPFS_KCACHE]; /* -1: no row */
};

/* Fills t->blocked_in and t->jstate from the record's state, syscall and
 * kernel stack (t->kframes, already copied).  kc may be NULL. */
void bpfs_classify(const struct bpfs_ksyms *ks, struct bpfs_kcache *kc, const struct stk_rec *r,
		   struct bpfstack_thread *t);

/* The same from the syscall number and arguments alone (r->syscall_nr,
 * r->args; t->sched_state and t->on_cpu set): for sources that have no
 * kernel stack. */
void bpfs_classify_syscall(const struct stk_rec *r, struct bpfstack_thread *t);

/* Only t->lock_addr and t->lock_how, from the syscall and its arguments
 * (t->sched_state and t->on_cpu set). */
void bpfs_lock_wait(const struct stk_rec *r, struct bpfstack_thread *t);

/* ---- iterator passes (bpfs_iter.c) -------------------------------------- */

struct stacks_bpf;
struct ring_buffer;

typedef void (*bpfs_mark_fn)(void *ctx, const struct stk_mark *m);

/* One pass of the task iterator over pid's threads (or, tid not 0, over
 * that thread alone: -EINVAL on a kernel older than 6.1, -ESRCH when it is
 * gone) in mode (STK_MODE_*): every mark read goes to on_mark(ctx, ...),
 * and in STK_MODE_FULL the ring buffer rb is drained after each bounded
 * batch, so its callback sees each record before the next batch is
 * produced.  Returns 0 or a negative errno with the reason in err. */
int bpfs_iter_pass(struct stacks_bpf *skel, struct ring_buffer *rb, pid_t pid, pid_t tid,
		   uint32_t mode, bpfs_mark_fn on_mark, void *ctx, char *err, size_t errlen);

/* Whether a ring buffer record of size bytes holds a whole stk_rec and the
 * user stack it announces. */
int bpfs_rec_valid(const void *data, size_t size);

/* ---- on-CPU threads (bpfs_perf.c) -------------------------------------- */

#define BPFS_PERF_MAX 64 /* threads sampled per capture at most */

/* Called once per sampled thread with its registers (h->regs, tid,
 * ustack_base, ustack_len set; the rest zero) and stack window. */
typedef void (*bpfs_sample_fn)(void *ctx, const struct stk_rec *h, const unsigned char *ustack);

/* Takes one user-mode perf sample of each of tids (at most BPFS_PERF_MAX),
 * waiting at most timeout_ms in all.  Returns how many were sampled, or a
 * negative errno when perf events cannot be opened at all. */
int bpfs_perf_sample(const pid_t *tids, size_t n, int timeout_ms, bpfs_sample_fn fn, void *ctx);

/* Copies a thread's entry: the frames it has, not the whole arrays (an
 * entry is about 1.4 KiB, mostly room for frames). */
static inline void bpfs_thread_copy(struct bpfstack_thread *to, const struct bpfstack_thread *from)
{
	size_t tail = offsetof(struct bpfstack_thread, blocked_in);
	size_t nf = from->nframes < BPFSTACK_MAX_FRAMES ? from->nframes : BPFSTACK_MAX_FRAMES;
	size_t nk = from->nkframes < BPFSTACK_MAX_KFRAMES ? from->nkframes : BPFSTACK_MAX_KFRAMES;

	memcpy(to, from, offsetof(struct bpfstack_thread, frames));
	to->nframes = nf;
	memcpy(to->frames, from->frames, nf * sizeof(from->frames[0]));
	to->nkframes = nk;
	memcpy(to->kframes, from->kframes, nk * sizeof(from->kframes[0]));
	memcpy((char *)to + tail, (const char *)from + tail, sizeof(*to) - tail);
}

/* ---- unwinding (bpfs_unwind.c) ------------------------------------------ */

struct bpfs_unwinder;

struct bpfs_unwinder *bpfs_unwinder_new(void);
void bpfs_unwinder_free(struct bpfs_unwinder *u);

/* Unwinds one captured thread of pid into t->frames (return addresses, top
 * first).  Returns 0 or a negative errno (also left in t->error by the
 * caller). */
int bpfs_unwind(struct bpfs_unwinder *u, pid_t pid, const struct stk_rec *h,
		const unsigned char *ustack, struct bpfstack_thread *t);

/* The same for a thread of which only the stack and instruction pointers
 * are known (h->regs holds those two; the rest are 0): where CFI needs the
 * frame pointer, it is guessed from the stack and the unwind run again.
 * *inferred: the guess was used and did not lead CFI to the outermost
 * frame (the stack is then approximate). */
int bpfs_unwind_sp_ip(struct bpfs_unwinder *u, pid_t pid, const struct stk_rec *h,
		      const unsigned char *ustack, struct bpfstack_thread *t, bool *inferred);

/* Unwinds both calls above answered from a thread's remembered unwind (the
 * same registers and the same words where it read the stack), since the
 * unwinder was made.  Those memories hold 24 MiB at most in all. */
size_t bpfs_unwinder_memo_hits(const struct bpfs_unwinder *u);

#endif /* BPFS_INT_H */
