/* bpfs_iter.c - runs one pass of the task iterator over one process, in
 * bounded batches so the ring buffer is drained before it can fill. */
#include "bpfs_int.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "stacks.skel.h"

/* Threads per read of the iterator: each batch must fit the 4 MiB ring
 * buffer (a record is at most ~17 KiB) before it is drained.  Draining on a
 * second thread while the kernel produces the next batch was tried: on two
 * shared cores it saved nothing and lost under load. */
#define BATCH 128

int bpfs_rec_valid(const void *data, size_t size)
{
	const struct stk_rec *h = data;

	return size >= sizeof(*h) && h->ustack_len <= STK_WINDOW &&
	       size - sizeof(*h) >= h->ustack_len;
}

/* The task iterator restricted by the kernel (6.1+) to pid's threads, or
 * to the thread tid alone; on older kernels, for a whole process, walking
 * every task with the program's own tgid check (a tid alone is then
 * refused: EINVAL). */
static struct bpf_link *attach_iter(struct stacks_bpf *skel, pid_t pid, pid_t tid)
{
	union bpf_iter_link_info linfo;
	struct bpf_link *link;

	memset(&linfo, 0, sizeof(linfo));
	if (tid)
		linfo.task.tid = (__u32)tid;
	else
		linfo.task.pid = (__u32)pid;
	LIBBPF_OPTS(bpf_iter_attach_opts, opts, .link_info = &linfo,
		    .link_info_len = sizeof(linfo));
	skel->bss->cfg.check_tgid = 0;
	link = bpf_program__attach_iter(skel->progs.capture, &opts);
	if (!link && errno == EINVAL && !tid) {
		skel->bss->cfg.check_tgid = 1;
		link = bpf_program__attach_iter(skel->progs.capture, NULL);
	}
	return link;
}

int bpfs_iter_pass(struct stacks_bpf *skel, struct ring_buffer *rb, pid_t pid, pid_t tid,
		   uint32_t mode, bpfs_mark_fn on_mark, void *ctx, char *err, size_t errlen)
{
	struct stk_mark marks[BATCH];
	size_t have = 0;
	struct bpf_link *link;
	int fd, rc = 0;

	skel->bss->cfg.tgid = (__u32)pid;
	skel->bss->cfg.mode = mode;
	link = attach_iter(skel, pid, tid);
	if (!link && (errno == ENOENT || errno == ESRCH)) {
		if (tid)
			snprintf(err, errlen, "no thread %d (has it exited?)", (int)tid);
		else
			snprintf(err, errlen, "no process %d (has it exited?)", (int)pid);
		return -ESRCH;
	}
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
			snprintf(err, errlen, "draining the BPF ring buffer for pid %d failed",
				 (int)pid);
			break;
		}
		have += (size_t)n;
		for (size_t i = 0; i < have / sizeof(marks[0]); i++)
			on_mark(ctx, &marks[i]);
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
