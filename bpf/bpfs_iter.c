/* bpfs_iter.c - runs the task iterator over one process: a full pass whose
 * records come through the ring buffer in bounded batches, then a cheap
 * counters pass that tells which threads ran meanwhile. */
#include "bpfs_int.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stacks.skel.h"

/* Threads per read of the iterator: each batch must fit the 4 MiB ring
 * buffer (a record is at most ~17 KiB) before it is drained. */
#define BATCH 128

static int grow(void **p, size_t *cap, size_t need, size_t elem, size_t first)
{
	size_t ncap = *cap ? *cap : first;
	void *q;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	q = realloc(*p, ncap * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = ncap;
	return 0;
}

static struct bpfs_rec *new_rec(struct bpfs_cap *cap)
{
	struct bpfs_rec *r;

	if (cap->n >= cap->max_threads) {
		cap->truncated = 1;
		return NULL;
	}
	if (grow((void **)&cap->recs, &cap->cap, cap->n + 1, sizeof(*cap->recs), 256))
		return NULL;
	r = &cap->recs[cap->n++];
	memset(r, 0, sizeof(*r));
	return r;
}

int bpfs_iter_on_record(void *ctx, void *data, size_t size)
{
	struct bpfs_cap *cap = ctx;
	const struct stk_rec *h = data;
	struct bpfs_rec *r;

	/* The kernel side is ours, but a record that does not add up must
	 * still never be read past its end. */
	if (size < sizeof(*h) || h->ustack_len > STK_WINDOW || size - sizeof(*h) < h->ustack_len) {
		cap->bad_records++;
		return 0;
	}
	if (grow((void **)&cap->arena, &cap->arena_cap, cap->arena_used + h->ustack_len, 1,
		 1 << 20))
		return 0;
	r = new_rec(cap);
	if (!r)
		return 0;
	r->hdr = *h;
	r->ustack_off = cap->arena_used;
	memcpy(cap->arena + cap->arena_used, (const unsigned char *)data + sizeof(*h),
	       h->ustack_len);
	cap->arena_used += h->ustack_len;
	return 0;
}

static int rec_cmp(const void *a, const void *b)
{
	const struct bpfs_rec *x = a, *y = b;

	return (x->hdr.tid > y->hdr.tid) - (x->hdr.tid < y->hdr.tid);
}

static struct bpfs_rec *find_rec(struct bpfs_cap *cap, uint32_t tid)
{
	struct bpfs_rec key = {.hdr.tid = tid};

	return bsearch(&key, cap->recs, cap->n, sizeof(*cap->recs), rec_cmp);
}

/* What one pass does with each mark it reads. */
typedef void (*mark_fn)(struct bpfs_cap *cap, const struct stk_mark *m);

static void mark_full(struct bpfs_cap *cap, const struct stk_mark *m)
{
	struct bpfs_rec *r;

	if (m->status != STK_MARK_DROPPED)
		return;
	r = new_rec(cap);
	if (!r)
		return;
	r->hdr.tid = m->tid;
	r->hdr.nvcsw = m->nvcsw;
	r->hdr.nivcsw = m->nivcsw;
	r->dropped = 1;
}

static void mark_counters(struct bpfs_cap *cap, const struct stk_mark *m)
{
	struct bpfs_rec *r = find_rec(cap, m->tid);

	if (!r)
		return;
	r->seen_again = 1;
	r->nvcsw2 = m->nvcsw;
	r->nivcsw2 = m->nivcsw;
}

/* The task iterator restricted to pid's threads by the kernel (6.1+), or
 * walking every task with the program's own tgid check on older kernels. */
static struct bpf_link *attach_iter(struct stacks_bpf *skel, pid_t pid)
{
	union bpf_iter_link_info linfo;
	struct bpf_link *link;

	memset(&linfo, 0, sizeof(linfo));
	linfo.task.pid = (__u32)pid;
	LIBBPF_OPTS(bpf_iter_attach_opts, opts, .link_info = &linfo,
		    .link_info_len = sizeof(linfo));
	link = bpf_program__attach_iter(skel->progs.capture, &opts);
	if (!link && errno == EINVAL)
		link = bpf_program__attach_iter(skel->progs.capture, NULL);
	return link;
}

/* One pass in the given mode: reads marks in batches, draining the ring
 * buffer after each batch so it never overflows. */
static int run_pass(struct stacks_bpf *skel, struct ring_buffer *rb, struct bpfs_cap *cap,
		    pid_t pid, uint32_t mode, mark_fn on_mark, char *err, size_t errlen)
{
	struct stk_mark marks[BATCH];
	size_t have = 0;
	struct bpf_link *link;
	int fd, rc = 0;

	skel->bss->cfg.tgid = (__u32)pid;
	skel->bss->cfg.mode = mode;
	link = attach_iter(skel, pid);
	if (!link) {
		rc = -errno;
		snprintf(err, errlen, "cannot attach the BPF task iterator for pid %d: %s",
			 (int)pid, strerror(errno));
		return rc;
	}
	fd = bpf_iter_create(bpf_link__fd(link));
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot create a BPF task iterator for pid %d: %s", (int)pid,
			 strerror(errno));
		bpf_link__destroy(link);
		return rc;
	}
	for (;;) {
		ssize_t n = read(fd, (char *)marks + have, sizeof(marks) - have);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			snprintf(err, errlen, "reading the BPF task iterator for pid %d failed: %s",
				 (int)pid, strerror(errno));
			break;
		}
		if (mode == STK_MODE_FULL && ring_buffer__consume(rb) < 0) {
			rc = -EIO;
			snprintf(err, errlen, "draining the BPF ring buffer for pid %d failed", (int)pid);
			break;
		}
		have += (size_t)n;
		for (size_t i = 0; i < have / sizeof(marks[0]); i++)
			on_mark(cap, &marks[i]);
		/* Keep a mark split across reads for the next round. */
		memmove(marks, (char *)marks + have - have % sizeof(marks[0]),
			have % sizeof(marks[0]));
		have %= sizeof(marks[0]);
		if (n == 0)
			break;
	}
	close(fd);
	bpf_link__destroy(link);
	return rc;
}

int bpfs_iter_capture(struct stacks_bpf *skel, struct ring_buffer *rb, struct bpfs_cap *cap,
		      pid_t pid, char *err, size_t errlen)
{
	int rc;

	cap->n = 0;
	cap->arena_used = 0;
	cap->truncated = 0;
	cap->bad_records = 0;
	rc = run_pass(skel, rb, cap, pid, STK_MODE_FULL, mark_full, err, errlen);
	if (rc)
		return rc;
	if (cap->n == 0) {
		snprintf(err, errlen, "no threads found for pid %d (has it exited?)", (int)pid);
		return -ESRCH;
	}
	qsort(cap->recs, cap->n, sizeof(*cap->recs), rec_cmp);
	for (size_t i = 0; i < cap->n; i++)
		cap->recs[i].ustack = cap->arena + cap->recs[i].ustack_off;
	return run_pass(skel, rb, cap, pid, STK_MODE_COUNTERS, mark_counters, err, errlen);
}

void bpfs_cap_free(struct bpfs_cap *cap)
{
	free(cap->recs);
	free(cap->arena);
	memset(cap, 0, sizeof(*cap));
}
