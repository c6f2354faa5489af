/* bpfs_int.h - what the files of the BPF stack source share inside bpf/:
 * the kernel symbol table, the thread classifier, the iterator passes and
 * the per-process unwinder cache.  Not for use outside bpf/. */
#ifndef BPFS_INT_H
#define BPFS_INT_H

#include <linux/types.h>
#include <stddef.h>
#include <stdint.h>
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

/* Fills t->blocked_in and t->jstate from the record's state, syscall and
 * kernel stack (t->kframes, already copied). */
void bpfs_classify(const struct bpfs_ksyms *ks, const struct stk_rec *r,
		   struct bpfstack_thread *t);

/* ---- iterator passes (bpfs_iter.c) -------------------------------------- */

struct stacks_bpf;
struct ring_buffer;

/* One captured thread: its record (header and user stack window) copied out
 * of the ring buffer, and its counters from the second pass. */
struct bpfs_rec {
	struct stk_rec hdr;
	unsigned char *ustack; /* hdr.ustack_len bytes, inside the capture arena */
	size_t ustack_off;     /* where, until the arena stops moving */
	int dropped;           /* the ring buffer had no room: only counters known */
	int seen_again;        /* found by the counters pass */
	uint64_t nvcsw2, nivcsw2;
};

/* Records of one capture, reused from one capture to the next so a warm
 * capture allocates nothing. */
struct bpfs_cap {
	struct bpfs_rec *recs;
	size_t n, cap;
	unsigned char *arena; /* user stack windows, back to back */
	size_t arena_used, arena_cap;
	size_t max_threads;
	int truncated; /* more threads than max_threads */
	int bad_records;
};

/* Ring buffer callback (libbpf ring_buffer_sample_fn); ctx is the
 * struct bpfs_cap being filled. */
int bpfs_iter_on_record(void *ctx, void *data, size_t size);

/* Runs the full pass then the counters pass over pid's threads, consuming
 * rb (made with bpfs_iter_on_record and cap) between reads.  On success
 * cap->recs are sorted by tid.  Returns 0 or a negative errno with the
 * reason in err. */
int bpfs_iter_capture(struct stacks_bpf *skel, struct ring_buffer *rb, struct bpfs_cap *cap,
		      pid_t pid, char *err, size_t errlen);
void bpfs_cap_free(struct bpfs_cap *cap);

/* ---- unwinding (bpfs_unwind.c) ------------------------------------------ */

struct bpfs_unwinder;

struct bpfs_unwinder *bpfs_unwinder_new(void);
void bpfs_unwinder_free(struct bpfs_unwinder *u);

/* Unwinds one captured thread of pid into t->frames (return addresses, top
 * first).  Returns 0 or a negative errno (also left in t->error by the
 * caller). */
int bpfs_unwind(struct bpfs_unwinder *u, pid_t pid, const struct bpfs_rec *r,
		struct bpfstack_thread *t);

#endif /* BPFS_INT_H */
