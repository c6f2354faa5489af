/* bpfs_iter.c - runs one pass of the task iterator over one process, in
 * bounded batches so the ring buffer is drained before it can fill; past
 * the first batch a second thread drains (and so unwinds) one batch while
 * the kernel produces the next. */
#include "bpfs_int.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "stacks.skel.h"

/* Threads per read of the iterator.  Two batches are in the 4 MiB ring
 * buffer at most (one being drained, one being produced), and a record is
 * at most ~17 KiB: 2 * 96 * 17 KiB < 4 MiB. */
#define BATCH 96

/* The drainer: consumes the ring buffer on its own thread so that the
 * record callbacks (the unwinding) overlap the kernel's next batch. */
struct drain {
	struct ring_buffer *rb;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned produced, consumed; /* batches */
	bool done;
	int err;
	bool running;
	pthread_t thread;
};

static void *drain_main(void *arg)
{
	struct drain *d = arg;

	pthread_mutex_lock(&d->mu);
	for (;;) {
		unsigned target;
		bool finish;
		int n;

		while (d->consumed == d->produced && !d->done)
			pthread_cond_wait(&d->cv, &d->mu);
		target = d->produced;
		finish = d->done;
		pthread_mutex_unlock(&d->mu);
		n = ring_buffer__consume(d->rb);
		pthread_mutex_lock(&d->mu);
		if (n < 0)
			d->err = n;
		d->consumed = target;
		pthread_cond_broadcast(&d->cv);
		if (finish && d->consumed == d->produced)
			break;
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* A batch is in the ring: drain it inline, or hand it to the drainer and
 * wait until at most this one batch is left undrained. */
static int drain_batch(struct drain *d)
{
	int rc;

	if (!d->running)
		return ring_buffer__consume(d->rb) < 0 ? -EIO : 0;
	pthread_mutex_lock(&d->mu);
	d->produced++;
	pthread_cond_broadcast(&d->cv);
	while (d->produced - d->consumed > 1)
		pthread_cond_wait(&d->cv, &d->mu);
	rc = d->err;
	pthread_mutex_unlock(&d->mu);
	return rc < 0 ? -EIO : 0;
}

static void drain_start(struct drain *d)
{
	d->running = pthread_create(&d->thread, NULL, drain_main, d) == 0;
}

/* Waits until everything produced is drained and the drainer is gone. */
static int drain_finish(struct drain *d)
{
	if (!d->running)
		return 0;
	pthread_mutex_lock(&d->mu);
	d->done = true;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	pthread_join(d->thread, NULL);
	d->running = false;
	return d->err < 0 ? -EIO : 0;
}

int bpfs_rec_valid(const void *data, size_t size)
{
	const struct stk_rec *h = data;

	return size >= sizeof(*h) && h->ustack_len <= STK_WINDOW &&
	       size - sizeof(*h) >= h->ustack_len;
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
	skel->bss->cfg.check_tgid = 0;
	link = bpf_program__attach_iter(skel->progs.capture, &opts);
	if (!link && errno == EINVAL) {
		skel->bss->cfg.check_tgid = 1;
		link = bpf_program__attach_iter(skel->progs.capture, NULL);
	}
	return link;
}

int bpfs_iter_pass(struct stacks_bpf *skel, struct ring_buffer *rb, pid_t pid, uint32_t mode,
		   bpfs_mark_fn on_mark, void *ctx, char *err, size_t errlen)
{
	struct stk_mark marks[BATCH];
	size_t have = 0;
	struct bpf_link *link;
	struct drain d = {.rb = rb};
	int fd, rc = 0;

	skel->bss->cfg.tgid = (__u32)pid;
	skel->bss->cfg.mode = mode;
	link = attach_iter(skel, pid);
	if (!link && (errno == ENOENT || errno == ESRCH)) {
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
	pthread_mutex_init(&d.mu, NULL);
	pthread_cond_init(&d.cv, NULL);
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
		if (mode == STK_MODE_FULL && drain_batch(&d) < 0) {
			rc = -EIO;
			snprintf(err, errlen, "draining the BPF ring buffer for pid %d failed",
				 (int)pid);
			break;
		}
		/* A full first batch means more will come: worth a second
		 * thread from here on. */
		if (mode == STK_MODE_FULL && !d.running && n == (ssize_t)sizeof(marks))
			drain_start(&d);
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
	if (drain_finish(&d) < 0 && !rc) {
		rc = -EIO;
		snprintf(err, errlen, "draining the BPF ring buffer for pid %d failed", (int)pid);
	}
	pthread_cond_destroy(&d.cv);
	pthread_mutex_destroy(&d.mu);
	close(fd);
	bpf_link__destroy(link);
	return rc;
}
