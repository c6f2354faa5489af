/* bpfstack.c - the BPF stack source the daemon uses: loads the task
 * iterator once, and per capture runs it over one process, unwinds every
 * thread's user stack and classifies what each thread is blocked in. */
#include "bpfs_int.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "stacks.skel.h"

/* Threads one capture returns at most; past it the capture is truncated. */
#define MAX_THREADS 32768
/* How long on-CPU threads get to show up in a perf sample, in all. */
#define PERF_TIMEOUT_MS 10
/* Threads of the last capture kept for the next one (about 1.4 KiB each). */
#define MAX_KEPT 10240
/* Threads read afresh up to which the counters pass goes over each alone. */
#define FEW_FRESH 16

/* The capture in progress: threads are unwound as their records arrive. */
struct capture {
	pid_t pid;
	struct bpfstack_thread *t;
	size_t n, cap;
	unsigned char *seen;	   /* per thread: found again by the counters pass */
	struct stk_rec key;	   /* the address space's identity, for perf samples */
	pid_t busy[BPFS_PERF_MAX]; /* still on a CPU at the counters pass */
	size_t nbusy;
	/* Marks of records the full ring dropped, added once the pass is
	 * over so that every entry of t comes from one place at a time. */
	struct stk_mark *dropped;
	size_t ndropped, dropped_cap;
	int dropped_nomem;
	int stale;	/* a thread the iterator skipped is not in prev: pass again */
	size_t nreused; /* entries taken from the last capture */
	int truncated;
	int bad_records;
	int nomem;
};

struct bpfstack {
	struct stacks_bpf *skel;
	struct ring_buffer *rb;
	struct bpfs_ksyms *ks;
	struct bpfs_unwinder *unw;
	struct bpfs_kcache kcache;
	struct capture cur;
	size_t last_n; /* threads in the last capture: the next one's first guess */
	/* The last capture's result, sorted by tid: threads that have not
	 * run since keep their entries, and the iterator copies nothing of
	 * them (stk_cfg.reuse). */
	pid_t prev_pid;
	struct bpfstack_thread *prev;
	size_t nprev;
	/* The sweep program loaded (kernel 6.7+), and pids here are the
	 * root namespace's, as it takes them. */
	bool sweep;
	uint64_t swept;
	pthread_mutex_t lock; /* one pass at a time: the BPF side has one scratch slot */
};

static int on_record(void *ctx, void *data, size_t size);

/* libbpf reports load failures (verifier logs included) through its print
 * hook; a library must not print, so keep the reason for the error: the
 * verifier's last word when there is a log, else libbpf's first warning. */
static _Thread_local char libbpf_reason[256];
static _Thread_local bool libbpf_reason_is_log;

static void keep_line(const char *start, size_t len, bool from_log)
{
	if (libbpf_reason_is_log || (libbpf_reason[0] && !from_log) || len == 0)
		return;
	if (len >= sizeof(libbpf_reason))
		len = sizeof(libbpf_reason) - 1;
	memcpy(libbpf_reason, start, len);
	libbpf_reason[len] = '\0';
	libbpf_reason_is_log = from_log;
}

static int keep_libbpf_msg(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	static const char end_marker[] = "-- END PROG LOAD LOG --";
	char *msg, *end;
	va_list ap2;
	int len;

	if (level == LIBBPF_DEBUG)
		return 0;
	/* A verifier log can be long; its last line is the one we want. */
	va_copy(ap2, ap);
	len = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (len <= 0 || !(msg = malloc((size_t)len + 1)))
		return 0;
	vsnprintf(msg, (size_t)len + 1, fmt, ap);
	end = strstr(msg, end_marker);
	if (end) {
		char *stop = end, *line;

		/* Walk back over the statistics lines the log ends with. */
		for (;;) {
			while (stop > msg && (stop[-1] == '\n' || stop[-1] == ' '))
				stop--;
			line = stop;
			while (line > msg && line[-1] != '\n')
				line--;
			if (line == msg || (strncmp(line, "processed ", 10) != 0 &&
					    strncmp(line, "verification time", 17) != 0 &&
					    strncmp(line, "stack depth", 11) != 0))
				break;
			stop = line;
		}
		keep_line(line, (size_t)(stop - line), true);
	} else {
		keep_line(msg, strcspn(msg, "\n"), false);
	}
	free(msg);
	return 0;
}

/* Whether this process may load tracing BPF: CAP_BPF with CAP_PERFMON, or
 * CAP_SYS_ADMIN (read from /proc, to avoid a libcap dependency).  A refusal
 * despite them is the verifier's or the kernel's, not a permission issue. */
static bool has_bpf_caps(void)
{
	enum { CAP_SYS_ADMIN_BIT = 21, CAP_PERFMON_BIT = 38, CAP_BPF_BIT = 39 };
	unsigned long long eff = 0;
	char line[128];
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return geteuid() == 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return (eff >> CAP_SYS_ADMIN_BIT & 1) ||
	       ((eff >> CAP_BPF_BIT & 1) && (eff >> CAP_PERFMON_BIT & 1));
}

static void explain_load_failure(int rc, char *err, size_t errlen)
{
	struct utsname u;

	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		snprintf(err, errlen,
			 "BPF stacks need kernel BTF, and /sys/kernel/btf/vmlinux is missing "
			 "(kernel built without CONFIG_DEBUG_INFO_BTF)");
	} else if (!has_bpf_caps()) {
		snprintf(err, errlen, "BPF needs CAP_BPF and CAP_PERFMON (running as uid %u)",
			 (unsigned)geteuid());
	} else {
		if (uname(&u) != 0)
			snprintf(u.release, sizeof(u.release), "unknown");
		/* EACCES is the verifier's refusal, which names its reason;
		 * a kernel that lacks what the programs call says EINVAL. */
		snprintf(err, errlen, "the kernel (%s) refused the BPF task iterator%s: %s%s%s",
			 u.release,
			 rc == -EACCES ? "" : " (needs 5.18+ for bpf_copy_from_user_task)",
			 strerror(-rc), libbpf_reason[0] ? ": " : "", libbpf_reason);
	}
}

/* Whether this process sees pids as the root pid namespace does (its
 * NSpid line has one pid): the sweep takes the target's pid that way. */
static bool root_pid_ns(void)
{
	char line[256];
	bool root = false;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "NSpid:", 6) == 0) {
			char *p = line + 6;
			int n = 0;

			while (*p) {
				while (*p == ' ' || *p == '\t')
					p++;
				if (*p >= '0' && *p <= '9')
					n++;
				while (*p && *p != ' ' && *p != '\t')
					p++;
			}
			root = n == 1;
		}
	fclose(f);
	return root;
}

static int open_and_load(struct bpfstack *b, bool sweep)
{
	b->skel = stacks_bpf__open();
	if (!b->skel)
		return -errno;
	if (!sweep)
		bpf_program__set_autoload(b->skel->progs.sweep, false);
	return stacks_bpf__load(b->skel);
}

static int load(struct bpfstack *b, char *err, size_t errlen)
{
	libbpf_print_fn_t old = libbpf_set_print(keep_libbpf_msg);
	int rc = 0;

	libbpf_reason[0] = '\0';
	libbpf_reason_is_log = false;
	/* A kernel without the open-coded task iterator refuses the sweep:
	 * the iterator alone then does the whole capture. */
	b->sweep = root_pid_ns();
	rc = open_and_load(b, b->sweep);
	if (rc && b->sweep) {
		stacks_bpf__destroy(b->skel);
		b->sweep = false;
		libbpf_reason[0] = '\0';
		libbpf_reason_is_log = false;
		rc = open_and_load(b, false);
	}
	libbpf_set_print(old);
	if (rc) {
		explain_load_failure(rc, err, errlen);
		return rc;
	}
	b->rb = ring_buffer__new(bpf_map__fd(b->skel->maps.records), on_record, b, NULL);
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

/* A new entry at the end of the capture, or NULL past the cap; zeroed when
 * clear (else the caller writes every field, as bpfs_thread_copy does). */
static struct bpfstack_thread *new_entry(struct capture *c, bool clear)
{
	if (c->n >= MAX_THREADS) {
		c->truncated = 1;
		return NULL;
	}
	if (c->n == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 64;
		struct bpfstack_thread *t = realloc(c->t, ncap * sizeof(*t));

		if (!t) {
			c->nomem = 1;
			return NULL;
		}
		c->t = t;
		c->cap = ncap;
	}
	if (clear)
		memset(&c->t[c->n], 0, sizeof(c->t[0]));
	return &c->t[c->n++];
}

/* A new zeroed entry at the end of the capture, or NULL past the cap. */
static struct bpfstack_thread *new_thread(struct capture *c)
{
	return new_entry(c, true);
}

static void fill_thread(struct bpfstack *b, const struct stk_rec *h, const unsigned char *ustack,
			struct bpfstack_thread *t)
{
	size_t nk;

	t->tid = h->tid;
	memcpy(t->comm, h->comm, sizeof(t->comm));
	t->comm[sizeof(t->comm) - 1] = '\0';
	t->sched_state = bpfs_state_letter(h->state, h->exit_state);
	t->on_cpu = (h->flags & STK_F_ON_CPU) != 0;
	/* On a CPU its registers are those of its last kernel entry. */
	t->approximate = t->on_cpu;
	t->approximate_why =
	    t->on_cpu ? "on a CPU: the user stack as of its last kernel entry" : NULL;
	t->ran_during_capture = t->on_cpu;
	t->nvcsw = h->nvcsw;
	t->nivcsw = h->nivcsw;
	t->window_bytes = h->ustack_len;
	nk = h->kstack_len > 0 ? (size_t)h->kstack_len / sizeof(uint64_t) : 0;
	if (nk > BPFSTACK_MAX_KFRAMES)
		nk = BPFSTACK_MAX_KFRAMES;
	memcpy(t->kframes, h->kstack, nk * sizeof(t->kframes[0]));
	t->nkframes = nk;
	bpfs_classify(b->ks, &b->kcache, h, t);
	if (h->flags & STK_F_NO_MM)
		t->error = -ESRCH;
	else if (h->flags & STK_F_NO_REGS)
		t->error = -ENODATA;
	else
		t->error = bpfs_unwind(b->unw, b->cur.pid, h, ustack, t);
}

/* Ring buffer callback: unwinds the thread while its record is still in
 * the ring, so no stack window is ever copied again. */
static int on_record(void *ctx, void *data, size_t size)
{
	struct bpfstack *b = ctx;
	const struct stk_rec *h = data;
	struct bpfstack_thread *t;

	/* No tgid check: in a pid namespace the record's (global) tgid is not
	 * the pid the caller knows; the kernel filtered by pid already. */
	if (!bpfs_rec_valid(data, size)) {
		b->cur.bad_records++;
		return 0;
	}
	if (!b->cur.key.start_code && !(h->flags & STK_F_NO_MM))
		b->cur.key = *h;
	t = new_thread(&b->cur);
	if (t)
		fill_thread(b, h, (const unsigned char *)data + sizeof(*h), t);
	return 0;
}

static int tid_cmp(const void *a, const void *b);

/* A thread that has not run since the last capture: its entry from there,
 * when that was a whole one of the same counters. */
static void reuse_thread(struct bpfstack *b, const struct stk_mark *m)
{
	struct bpfstack_thread key = {.tid = m->tid}, *p, *t;

	p = bsearch(&key, b->prev, b->nprev, sizeof(key), tid_cmp);
	if (!p || p->error || p->on_cpu || p->nvcsw != m->nvcsw || p->nivcsw != m->nivcsw) {
		b->cur.stale = 1;
		return;
	}
	t = new_entry(&b->cur, false);
	if (!t)
		return;
	bpfs_thread_copy(t, p);
	t->on_cpu = false;
	t->ran_during_capture = false;
	t->reused = true;
	b->cur.nreused++;
}

/* Full pass: a thread whose record found the ring buffer full still gets
 * an entry (added after the pass), marked as missing its stack; one the
 * iterator skipped as unchanged takes its last entry. */
static void on_full_mark(void *ctx, const struct stk_mark *m)
{
	struct capture *c = &((struct bpfstack *)ctx)->cur;

	if (m->status == STK_MARK_SAME) {
		reuse_thread(ctx, m);
		return;
	}
	if (m->status != STK_MARK_DROPPED || c->ndropped >= MAX_THREADS)
		return;
	if (c->ndropped == c->dropped_cap) {
		size_t ncap = c->dropped_cap ? c->dropped_cap * 2 : 16;
		struct stk_mark *p = realloc(c->dropped, ncap * sizeof(*p));

		if (!p) {
			c->dropped_nomem = 1;
			return;
		}
		c->dropped = p;
		c->dropped_cap = ncap;
	}
	c->dropped[c->ndropped++] = *m;
}

static void add_dropped(struct capture *c)
{
	for (size_t i = 0; i < c->ndropped; i++) {
		struct bpfstack_thread *t = new_thread(c);

		if (!t)
			return;
		t->tid = c->dropped[i].tid;
		t->nvcsw = c->dropped[i].nvcsw;
		t->nivcsw = c->dropped[i].nivcsw;
		t->error = -ENOBUFS;
		t->jstate = "RUNNABLE";
	}
}

static int tid_cmp(const void *a, const void *b)
{
	const struct bpfstack_thread *x = a, *y = b;

	return (x->tid > y->tid) - (x->tid < y->tid);
}

/* Counters pass: a thread switched since its record was taken ran during
 * the capture. */
static void on_counters_mark(void *ctx, const struct stk_mark *m)
{
	struct bpfstack *b = ctx;
	struct bpfstack_thread key = {.tid = m->tid}, *t;

	t = bsearch(&key, b->cur.t, b->cur.n, sizeof(key), tid_cmp);
	if (!t)
		return;
	b->cur.seen[t - b->cur.t] = 1;
	if (t->nvcsw != m->nvcsw || t->nivcsw != m->nivcsw)
		t->ran_during_capture = true;
	if (t->approximate && m->on_cpu && !t->error && b->cur.nbusy < BPFS_PERF_MAX &&
	    m->tid != (uint32_t)gettid())
		b->cur.busy[b->cur.nbusy++] = (pid_t)m->tid;
}

/* A perf sample of a thread that was on a CPU replaces its approximate
 * stack with an exact one. */
static void on_sample(void *ctx, const struct stk_rec *h, const unsigned char *ustack)
{
	struct bpfstack *b = ctx;
	struct bpfstack_thread key = {.tid = h->tid}, *t, tmp;
	struct stk_rec r = *h;

	t = bsearch(&key, b->cur.t, b->cur.n, sizeof(key), tid_cmp);
	if (!t)
		return;
	r.exec_vm = b->cur.key.exec_vm;
	r.start_code = b->cur.key.start_code;
	r.leader_start_ns = b->cur.key.leader_start_ns;
	tmp = *t;
	if (bpfs_unwind(b->unw, b->cur.pid, &r, ustack, &tmp) == 0 && tmp.nframes > 0) {
		memcpy(t->frames, tmp.frames, tmp.nframes * sizeof(t->frames[0]));
		t->nframes = tmp.nframes;
		t->approximate = false;
		t->approximate_why = NULL;
	}
}

/* The program's slot for thread tid when it holds that thread (its last
 * record), else NULL. */
static struct stk_last *last_slot(struct bpfstack *b, uint32_t tid)
{
	struct stk_last *l = &b->skel->bss->last_slots[tid & (STK_SLOTS - 1)];

	return l->tid == tid ? l : NULL;
}

/* Keeps a copy of a capture's result for the next capture of pid.  The
 * iterator forgets the threads whose entries cannot be reused (no stack,
 * or taken on a CPU), so that they get a record again. */
static void keep(struct bpfstack *b, pid_t pid, const struct bpfstack_thread *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].error || t[i].on_cpu) {
			struct stk_last *l = last_slot(b, t[i].tid);
			if (l)
				l->tid = 0;
		}
	free(b->prev);
	b->prev = NULL;
	b->nprev = 0;
	b->prev_pid = 0;
	if (n > MAX_KEPT || !(b->prev = malloc(n * sizeof(*t))))
		return;
	for (size_t i = 0; i < n; i++)
		bpfs_thread_copy(&b->prev[i], &t[i]);
	b->nprev = n;
	b->prev_pid = pid;
}

/* Tells the program how much window each thread read afresh needed (its
 * unwind's pages): the next record of a thread that waits where it waited
 * before copies that much, not all STK_WINDOW (a capture of 1,005 threads
 * that all moved: 11.6-12.1 ms with four pages each, 8.5-8.7 ms with one).
 * Written into the threads' slots in the program's table, through the
 * skeleton's mapping: no system call.  A thread whose slot another has
 * taken gets the whole window. */
static void send_hints(struct bpfstack *b)
{
	struct capture *c = &b->cur;

	for (size_t i = 0; i < c->n; i++) {
		const struct bpfstack_thread *t = &c->t[i];
		struct stk_last *l;

		if (!t->reused && t->window_pages && (l = last_slot(b, t->tid)))
			l->pages = t->window_pages;
	}
}

/* The counters of every thread of pid from one run of the sweep program,
 * each handed to on_counters_mark as a counters pass's mark would be: one
 * program run, where the pass costs a seq_file step and a program run per
 * thread (0.6-0.75 ms for 1,012).  false, with nothing marked, when the
 * sweep cannot stand for the pass (none here, the process not found, or
 * more threads than it holds). */
static bool sweep_counters(struct bpfstack *b, pid_t pid)
{
	const struct stk_sweep *res = &b->skel->bss->sweep_res;
	const struct stk_mark *marks = b->skel->bss->sweep_marks;
	LIBBPF_OPTS(bpf_test_run_opts, opts);

	if (!b->sweep)
		return false;
	b->skel->bss->cfg.tgid = (__u32)pid;
	b->skel->bss->cfg.counters_only = 1;
	int rc = bpf_prog_test_run_opts(bpf_program__fd(b->skel->progs.sweep), &opts);
	b->skel->bss->cfg.counters_only = 0;
	if (rc != 0 || opts.retval != 0 || !res->found || res->truncated || res->many ||
	    res->n > STK_SWEEP_MAX)
		return false;
	for (size_t i = 0; i < res->n; i++)
		on_counters_mark(b, &marks[i]);
	return true;
}

/* The counters pass, over the threads read afresh by the full pass: a
 * thread that kept its last entry (it had not run since the last capture)
 * is of the moment its mark was read, and has no stack taken on a CPU to
 * sample.  None read afresh: no pass.  A few: a pass over each alone (a
 * whole pass walks every thread of the process in the kernel, 0.6-0.75 ms
 * for 1,012, where a pass over one thread takes 0.03 ms); a thread gone by
 * its pass stays unseen.  More, or a kernel that cannot iterate one
 * thread: the sweep's counters (sweep_counters), else one pass over all. */
static int counters_pass(struct bpfstack *b, pid_t pid, char *err, size_t errlen)
{
	struct capture *c = &b->cur;
	size_t fresh = c->n - c->nreused;

	for (size_t i = 0; i < c->n; i++)
		c->seen[i] = c->t[i].reused;
	if (fresh == 0)
		return 0;
	if (fresh <= FEW_FRESH) {
		int rc = 0;

		for (size_t i = 0; i < c->n && rc != -EINVAL; i++)
			if (!c->t[i].reused)
				rc = bpfs_iter_pass(b->skel, b->rb, pid, (pid_t)c->t[i].tid,
						    STK_MODE_COUNTERS, on_counters_mark, b, err,
						    errlen);
		if (rc != -EINVAL)
			return 0;
		memset(c->seen, 0, c->n);
		c->nbusy = 0;
	}
	if (sweep_counters(b, pid))
		return 0;
	return bpfs_iter_pass(b->skel, b->rb, pid, 0, STK_MODE_COUNTERS, on_counters_mark, b, err,
			      errlen);
}

/* A capture from the sweep: the last capture's entry for each thread that
 * has not run since, and a pass of its own for each of the few that did
 * (0.03 ms each, where a pass over 1,012 threads costs 0.7-0.9 ms).  false,
 * with nothing captured, when it cannot stand for the full pass: no sweep,
 * nothing from the last capture to keep, many threads that ran, or one
 * marked unchanged that the last capture lacks. */
static bool sweep_capture(struct bpfstack *b, pid_t pid, int *rc, char *err, size_t errlen)
{
	struct capture *c = &b->cur;
	const struct stk_sweep *res = &b->skel->bss->sweep_res;
	const struct stk_mark *marks = b->skel->bss->sweep_marks;
	size_t need = 0;
	LIBBPF_OPTS(bpf_test_run_opts, opts);

	if (!b->sweep || b->prev_pid != pid || !b->nprev)
		return false;
	b->skel->bss->cfg.tgid = (__u32)pid;
	/* Past FEW_FRESH threads to record, the full pass below is what it
	 * comes to: the sweep stops there rather than look at the rest. */
	b->skel->bss->cfg.max_need = FEW_FRESH;
	int trc = bpf_prog_test_run_opts(bpf_program__fd(b->skel->progs.sweep), &opts);
	b->skel->bss->cfg.max_need = 0;
	if (trc != 0 || opts.retval != 0 || !res->found || res->truncated || res->many ||
	    res->n > STK_SWEEP_MAX)
		return false;
	for (size_t i = 0; i < res->n; i++)
		need += marks[i].status != STK_MARK_SAME;
	if (need > FEW_FRESH)
		return false;
	for (size_t i = 0; i < res->n && !c->stale; i++)
		if (marks[i].status == STK_MARK_SAME)
			reuse_thread(b, &marks[i]);
	b->skel->bss->cfg.reuse = 0;
	for (size_t i = 0; i < res->n && !c->stale && !*rc; i++) {
		if (marks[i].status == STK_MARK_SAME)
			continue;
		*rc = bpfs_iter_pass(b->skel, b->rb, pid, (pid_t)marks[i].tid, STK_MODE_FULL,
				     on_full_mark, b, err, errlen);
		if (*rc == -ESRCH)
			*rc = 0; /* it ended since the sweep */
	}
	if (c->stale || *rc == -EINVAL) {
		c->n = c->ndropped = c->nreused = 0;
		c->stale = 0;
		*rc = 0;
		return false;
	}
	return true;
}

int bpfstack_capture(struct bpfstack *b, pid_t pid, struct bpfstack_thread **threads, size_t *n,
		     char *err, size_t errlen)
{
	struct capture *c;
	int rc;

	*threads = NULL;
	*n = 0;
	if (!b || pid <= 0) {
		snprintf(err, errlen, "bpfstack_capture: invalid pid %d", (int)pid);
		return -EINVAL;
	}
	pthread_mutex_lock(&b->lock);
	c = &b->cur;
	memset(c, 0, sizeof(*c));
	c->pid = pid;
	/* Sized from the last capture, the array rarely grows (and is copied)
	 * during this one. */
	if (b->last_n > 0 && (c->t = malloc((b->last_n + 16) * sizeof(*c->t))))
		c->cap = b->last_n + 16;
	/* Unchanged threads are taken from the last capture of the same
	 * process; when one of them is not there after all (that capture
	 * failed, or dropped it), the pass is made again copying everything. */
	rc = 0;
	if (sweep_capture(b, pid, &rc, err, errlen)) {
		b->swept++;
		goto passed;
	}
	b->skel->bss->cfg.reuse = b->prev_pid == pid && b->nprev;
	rc = bpfs_iter_pass(b->skel, b->rb, pid, 0, STK_MODE_FULL, on_full_mark, b, err, errlen);
	if (!rc && c->stale) {
		c->n = c->ndropped = c->nreused = 0;
		c->stale = 0;
		b->skel->bss->cfg.reuse = 0;
		rc = bpfs_iter_pass(b->skel, b->rb, pid, 0, STK_MODE_FULL, on_full_mark, b, err,
				    errlen);
	}
passed:
	add_dropped(c);
	if (!rc && (c->nomem || c->dropped_nomem)) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory for the thread stacks of pid %d", (int)pid);
	}
	if (!rc && c->n == 0) {
		rc = -ESRCH;
		snprintf(err, errlen, "no process %d (has it exited?)", (int)pid);
	}
	if (!rc && !(c->seen = calloc(c->n, 1))) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory for the thread stacks of pid %d", (int)pid);
	}
	if (!rc) {
		if (c->n > 1)
			qsort(c->t, c->n, sizeof(*c->t), tid_cmp);
		rc = counters_pass(b, pid, err, errlen);
	}
	if (!rc && c->nbusy)
		bpfs_perf_sample(c->busy, c->nbusy, PERF_TIMEOUT_MS, on_sample, b);
	if (!rc) {
		/* Gone by the second pass: it ran (to its end). */
		for (size_t i = 0; i < c->n; i++)
			if (!c->seen[i])
				c->t[i].ran_during_capture = true;
		if (c->truncated)
			snprintf(err, errlen,
				 "pid %d has more than %d threads; the first %d are captured",
				 (int)pid, MAX_THREADS, MAX_THREADS);
		send_hints(b);
		*threads = c->t;
		*n = c->n;
		b->last_n = c->n;
		keep(b, pid, c->t, c->n);
		c->t = NULL;
	}
	free(c->t);
	free(c->seen);
	free(c->dropped);
	memset(c, 0, sizeof(*c));
	pthread_mutex_unlock(&b->lock);
	return rc;
}

int bpfstack_set_window_hint(struct bpfstack *b, uint32_t tid, unsigned pages)
{
	struct stk_last *l;

	if (!b || pages < 1 || pages > STK_PAGES)
		return -EINVAL;
	pthread_mutex_lock(&b->lock);
	if ((l = last_slot(b, tid)))
		l->pages = pages;
	pthread_mutex_unlock(&b->lock);
	return l ? 0 : -ENOENT;
}

uint64_t bpfstack_swept(const struct bpfstack *b, bool *available)
{
	*available = b && b->sweep;
	return b ? b->swept : 0;
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
	free(b->prev);
	pthread_mutex_destroy(&b->lock);
	free(b);
}
