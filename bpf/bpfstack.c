/* bpfstack.c - the BPF stack source the daemon uses: loads the task
 * iterator once, and per capture runs it over one process, unwinds every
 * thread's user stack and classifies what each thread is blocked in. */
#include "bpfs_int.h"

#include <bpf/libbpf.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "stacks.skel.h"

/* Threads one capture returns at most; past it the capture is truncated. */
#define MAX_THREADS 32768

struct bpfstack {
	struct stacks_bpf *skel;
	struct ring_buffer *rb;
	struct bpfs_ksyms *ks;
	struct bpfs_unwinder *unw;
	struct bpfs_cap cap;
	pthread_mutex_t lock; /* one pass at a time: the BPF side has one scratch slot */
};

/* libbpf reports load failures (verifier logs included) through its print
 * hook; a library must not print, so keep the last line for the reason. */
static _Thread_local char last_libbpf_msg[256];

static int keep_libbpf_msg(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[1024];
	size_t len;

	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	len = strcspn(line, "\n");
	if (len == 0)
		return 0;
	if (len >= sizeof(last_libbpf_msg))
		len = sizeof(last_libbpf_msg) - 1;
	memcpy(last_libbpf_msg, line, len);
	last_libbpf_msg[len] = '\0';
	return 0;
}

static void explain_load_failure(int rc, char *err, size_t errlen)
{
	struct utsname u;

	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		snprintf(err, errlen,
			 "BPF stacks need kernel BTF, and /sys/kernel/btf/vmlinux is missing "
			 "(kernel built without CONFIG_DEBUG_INFO_BTF)");
	} else if (rc == -EPERM || rc == -EACCES) {
		snprintf(err, errlen, "BPF needs CAP_BPF and CAP_PERFMON (running as uid %u)",
			 (unsigned)geteuid());
	} else {
		if (uname(&u) != 0)
			snprintf(u.release, sizeof(u.release), "unknown");
		snprintf(err, errlen,
			 "the kernel (%s) refused the BPF task iterator (needs 5.18+ for "
			 "bpf_copy_from_user_task): %s%s%s",
			 u.release, strerror(-rc), last_libbpf_msg[0] ? ": " : "", last_libbpf_msg);
	}
}

static int load(struct bpfstack *b, char *err, size_t errlen)
{
	libbpf_print_fn_t old = libbpf_set_print(keep_libbpf_msg);
	int rc = 0;

	last_libbpf_msg[0] = '\0';
	b->skel = stacks_bpf__open();
	if (!b->skel)
		rc = -errno;
	else
		rc = stacks_bpf__load(b->skel);
	libbpf_set_print(old);
	if (rc) {
		explain_load_failure(rc, err, errlen);
		return rc;
	}
	b->rb = ring_buffer__new(bpf_map__fd(b->skel->maps.records), bpfs_iter_on_record, &b->cap,
				 NULL);
	if (!b->rb) {
		rc = -errno;
		snprintf(err, errlen, "cannot map the BPF ring buffer: %s", strerror(errno));
	}
	return rc;
}

int bpfstack_open(struct bpfstack **out, char *err, size_t errlen)
{
	struct bpfstack *b;
	char kerr[256];
	int rc;

	*out = NULL;
	b = calloc(1, sizeof(*b));
	if (!b) {
		snprintf(err, errlen, "out of memory loading BPF stack capture");
		return -ENOMEM;
	}
	pthread_mutex_init(&b->lock, NULL);
	b->cap.max_threads = MAX_THREADS;
	rc = load(b, err, errlen);
	if (!rc) {
		b->unw = bpfs_unwinder_new();
		if (!b->unw) {
			rc = -ENOMEM;
			snprintf(err, errlen, "out of memory loading BPF stack capture");
		}
	}
	if (rc) {
		bpfstack_close(b);
		return rc;
	}
	/* Without kernel symbols stacks still work; only blocked_in is lost. */
	if (bpfs_ksyms_load(&b->ks, "/proc/kallsyms", kerr, sizeof(kerr)) != 0)
		b->ks = NULL;
	*out = b;
	return 0;
}

static void fill_thread(struct bpfstack *b, pid_t pid, const struct bpfs_rec *r,
			struct bpfstack_thread *t)
{
	const struct stk_rec *h = &r->hdr;
	size_t nk;

	t->tid = h->tid;
	memcpy(t->comm, h->comm, sizeof(t->comm));
	t->comm[sizeof(t->comm) - 1] = '\0';
	t->sched_state = bpfs_state_letter(h->state, h->exit_state);
	t->on_cpu = (h->flags & STK_F_ON_CPU) != 0;
	/* On a CPU its registers are those of its last kernel entry. */
	t->approximate = t->on_cpu;
	t->nvcsw = h->nvcsw;
	t->nivcsw = h->nivcsw;
	t->ran_during_capture = t->on_cpu || !r->seen_again || r->nvcsw2 != h->nvcsw ||
				r->nivcsw2 != h->nivcsw;
	if (r->dropped) {
		t->error = -ENOBUFS;
		t->jstate = "RUNNABLE";
		return;
	}
	nk = h->kstack_len > 0 ? (size_t)h->kstack_len / sizeof(uint64_t) : 0;
	if (nk > BPFSTACK_MAX_KFRAMES)
		nk = BPFSTACK_MAX_KFRAMES;
	for (size_t i = 0; i < nk; i++)
		t->kframes[i] = h->kstack[i];
	t->nkframes = nk;
	bpfs_classify(b->ks, h, t);
	if (h->flags & STK_F_NO_MM)
		t->error = -ESRCH;
	else if (h->flags & STK_F_NO_REGS)
		t->error = -ENODATA;
	else
		t->error = bpfs_unwind(b->unw, pid, r, t);
}

int bpfstack_capture(struct bpfstack *b, pid_t pid, struct bpfstack_thread **threads, size_t *n,
		     char *err, size_t errlen)
{
	struct bpfstack_thread *out;
	int rc;

	*threads = NULL;
	*n = 0;
	if (!b || pid <= 0) {
		snprintf(err, errlen, "bpfstack_capture: invalid pid %d", (int)pid);
		return -EINVAL;
	}
	pthread_mutex_lock(&b->lock);
	rc = bpfs_iter_capture(b->skel, b->rb, &b->cap, pid, err, errlen);
	if (rc)
		goto out;
	out = calloc(b->cap.n, sizeof(*out));
	if (!out) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory for %zu thread stacks of pid %d", b->cap.n,
			 (int)pid);
		goto out;
	}
	for (size_t i = 0; i < b->cap.n; i++)
		fill_thread(b, pid, &b->cap.recs[i], &out[i]);
	if (b->cap.truncated)
		snprintf(err, errlen, "pid %d has more than %d threads; the first %d are captured",
			 (int)pid, MAX_THREADS, MAX_THREADS);
	*threads = out;
	*n = b->cap.n;
out:
	pthread_mutex_unlock(&b->lock);
	return rc;
}

const char *bpfstack_ksym(struct bpfstack *b, uint64_t addr)
{
	return b ? bpfs_ksyms_find(b->ks, addr) : NULL;
}

void bpfstack_close(struct bpfstack *b)
{
	if (!b)
		return;
	ring_buffer__free(b->rb);
	stacks_bpf__destroy(b->skel);
	bpfs_unwinder_free(b->unw);
	bpfs_ksyms_free(b->ks);
	bpfs_cap_free(&b->cap);
	pthread_mutex_destroy(&b->lock);
	free(b);
}
