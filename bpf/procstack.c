/* procstack.c - the stack source without BPF: each blocked thread's stack
 * and instruction pointers from /proc/PID/task/TID/syscall, its stack window
 * copied in one batched process_vm_readv per chunk of threads, the same
 * file read again to tell an exact stack from one that moved, and libdw's
 * unwinder (bpfs_unwind.c) on the copy.  Between captures of one process a
 * thread that did not run keeps its last entry: its schedstat file (time on
 * a CPU, times scheduled in) says whether it ran.  Nothing stops the target
 * and no signal reaches it. */
#include "procstack.h"

#include "bpfs_int.h"
#include "halves.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Threads one capture returns at most (as the BPF source). */
#define MAX_THREADS 32768
/* Threads whose files are open at once: bounds the descriptors a capture
 * holds, and the time between a thread's two reads. */
#define CHUNK 256
/* Threads a loop of reads must have before its second half goes to the
 * helper thread (halves.h): a hand-off costs a few microseconds, a thread's
 * reads 3 to 10. */
#define HALVES_MIN 32
/* Bytes of stack copied above sp at most, and for a thread with no hint
 * from its last unwind (window_len); the unwinder reads past it page by
 * page from /proc/PID/mem when a stack is deeper. */
#define WINDOW (2 * STK_PAGE_SIZE)
/* How long threads running on a CPU get to show up in a perf sample. */
#define PERF_TIMEOUT_MS 10
/* Threads of the last capture kept for the next one (about 1.4 KiB each). */
#define MAX_KEPT 10240
/* Of the descriptor limit, the share the kept files may hold; and at most
 * this many (each open /proc file also holds a page of kernel memory). */
#define FD_SHARE 4
#define MAX_KEPT_FDS 8192
/* PF_IO_WORKER in a thread's stat flags: an io_uring worker (or SQPOLL)
 * thread, which writes files for other threads without a write system
 * call of its own. */
#define PF_IO_WORKER_FLAG 0x10u
/* Names kept while threads ran, on the process's write count alone, are
 * read again at least this often (see names_hold). */
#define NAMES_MAX_AGE_NS (5 * 1000000000LL)

struct range {
	uint64_t start, end;
};

/* The files of a thread kept open between captures of one process, read
 * with one pread each instead of an open, a read and a close. */
enum { TF_SCHED, TF_COMM, TF_STAT, TF_SYSCALL, TF_N };
static const char *const tf_file[TF_N] = {"schedstat", "comm", "stat", "syscall"};

/* One thread of the process of the last capture. */
struct tfiles {
	uint32_t tid;
	bool known;   /* run_ns and slices are of the entry in prev */
	int fd[TF_N]; /* -1: not kept */
	/* From its schedstat file: time on a CPU and times scheduled in.
	 * Either moves whenever the thread runs. */
	uint64_t run_ns, slices;
	bool io_worker; /* an io_uring worker, by its stat flags (fixed for a thread) */
};

struct slot {
	int fd;		    /* /proc/PID/task/TID/syscall, open for the re-read */
	bool own;	    /* fd is this capture's to close (not kept) */
	int state;	    /* SLOT_* */
	char line[160];	    /* what the first read gave */
	struct stk_rec rec; /* registers and syscall from it */
};

enum { SLOT_NONE, SLOT_BLOCKED, SLOT_RUNNING };

static const char ran_while_read[] = "it ran while its stack was read";

struct procstack {
	struct bpfs_unwinder *unw;
	unsigned char *win; /* CHUNK windows */
	struct slot slots[CHUNK];
	char *maps;
	size_t maps_cap;
	struct range *stacks; /* writable mappings, by start: where a sp may lie */
	size_t nstacks, stacks_cap;
	size_t memo_hits0; /* the unwinder's count when this capture began */
	/* The last capture's result, sorted by tid, and whose it is (pid and
	 * start time): a thread whose name, state and switch counters are
	 * those of its entry there has not run since, and keeps that entry
	 * without a read of its registers or stack. */
	struct bpfstack_thread *prev;
	size_t nprev;
	pid_t prev_pid;
	unsigned long long prev_start, start;
	/* Files of the threads of the last capture, by tid (one entry per
	 * thread of ps->t while a capture runs), and whose. */
	struct tfiles *files;
	size_t nfiles, fd_budget;
	/* Descriptors kept: counted by both halves of a loop (halves.h). */
	_Atomic size_t nfds;
	/* The helper that reads the second half of each chunk of threads, made
	 * at the first capture with enough to read (NULL: none, or off). */
	struct halves *halves;
	bool halves_off; /* procstack_parallel(ps, false) */
	pid_t files_pid;
	unsigned long long files_start;
	bool have_schedstat; /* the kernel has /proc/PID/task/TID/schedstat */
	/* The write system calls of the process (syscw of /proc/PID/io: all
	 * its threads', those that exited too), read by this capture (when a
	 * thread ran, came or went: after the probes, before any name is
	 * read) and by the last capture that read it; *_ok: read (a kernel
	 * without CONFIG_TASK_IO_ACCOUNTING has no such file). */
	bool have_io, syscw_read;
	uint64_t syscw, prev_syscw;
	bool syscw_ok, prev_syscw_ok;
	/* When this capture began, and when the last one that read every
	 * thread's name (in full or again) began. */
	int64_t began_ns, names_ns;
	bool all_names; /* this capture read every name */
	struct procstack_stats stats;
	/* The capture in progress. */
	pid_t pid;
	struct stk_rec key; /* the address space's identity */
	struct bpfstack_thread *t;
	size_t n;
	pid_t busy[BPFS_PERF_MAX];
	size_t nbusy;
};

struct procstack *procstack_open(void)
{
	struct procstack *ps = calloc(1, sizeof(*ps));

	if (!ps)
		return NULL;
	struct rlimit rl;
	ps->fd_budget = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
			    ? rl.rlim_cur / FD_SHARE
			    : 256;
	if (ps->fd_budget > MAX_KEPT_FDS)
		ps->fd_budget = MAX_KEPT_FDS;
	ps->have_schedstat = access("/proc/self/schedstat", R_OK) == 0;
	ps->have_io = access("/proc/self/io", R_OK) == 0;
	ps->unw = bpfs_unwinder_new();
	ps->win = malloc((size_t)CHUNK * WINDOW);
	if (!ps->unw || !ps->win) {
		procstack_close(ps);
		return NULL;
	}
	return ps;
}

void procstack_close(struct procstack *ps)
{
	if (!ps)
		return;
	halves_free(ps->halves);
	bpfs_unwinder_free(ps->unw);
	procstack_release(ps);
	free(ps->prev);
	free(ps->win);
	free(ps->maps);
	free(ps->stacks);
	free(ps);
}

/* Reads a whole small file at dirfd/path into buf (NUL-terminated);
 * returns its length or -errno. */
static ssize_t read_at(int dirfd, const char *path, char *buf, size_t len)
{
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	n = n < 0 ? -errno : n;
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The write system calls of every thread of the process, those that exited
 * too (syscw in /proc/PID/io); false when it cannot be read. */
static bool read_syscw(int procfd, uint64_t *syscw)
{
	char buf[512];
	ssize_t n = read_at(procfd, "io", buf, sizeof(buf));
	const char *p = n > 0 ? strstr(buf, "\nsyscw: ") : NULL;

	if (!p)
		return false;
	*syscw = strtoull(p + 8, NULL, 10);
	return true;
}

static uint64_t hex_at(const char **s)
{
	uint64_t v = 0;
	const char *p = *s;

	for (;; p++) {
		unsigned d;

		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			d = (unsigned)(*p - 'a' + 10);
		else
			break;
		v = v << 4 | d;
	}
	*s = p;
	return v;
}

static int range_cmp(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return (x->start > y->start) - (x->start < y->start);
}

/* Reads /proc/PID/maps: the writable mappings (where stacks live) and the
 * identity of the address space (its executable bytes and first mapping),
 * which tells the unwinder when its module map went stale. */
static int read_maps(struct procstack *ps, int procfd)
{
	int fd = openat(procfd, "maps", O_RDONLY | O_CLOEXEC);
	size_t len = 0;
	uint64_t exec = 0, first = 0;
	const char *p, *end;

	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n;

		if (ps->maps_cap - len < 4096) {
			size_t cap = ps->maps_cap ? ps->maps_cap * 2 : 65536;
			char *m = realloc(ps->maps, cap);

			if (!m) {
				close(fd);
				return -ENOMEM;
			}
			ps->maps = m;
			ps->maps_cap = cap;
		}
		n = read(fd, ps->maps + len, ps->maps_cap - len - 1);
		if (n < 0) {
			n = -errno;
			close(fd);
			return (int)n;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	ps->maps[len] = '\0';
	ps->nstacks = 0;
	for (p = ps->maps, end = ps->maps + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		uint64_t a = hex_at(&p), b;

		if (*p++ != '-')
			return -EINVAL;
		b = hex_at(&p);
		if (*p == ' ' && p + 4 < end) {
			if (!first)
				first = a;
			if (p[3] == 'x')
				exec += b - a;
			if (p[2] == 'w') {
				if (ps->nstacks == ps->stacks_cap) {
					size_t cap = ps->stacks_cap ? ps->stacks_cap * 2 : 256;
					struct range *r = realloc(ps->stacks, cap * sizeof(*r));

					if (!r)
						return -ENOMEM;
					ps->stacks = r;
					ps->stacks_cap = cap;
				}
				ps->stacks[ps->nstacks++] = (struct range){a, b};
			}
		}
		p = nl ? nl + 1 : end;
	}
	if (ps->nstacks > 1) /* a kernel thread maps nothing, and NULL is no array */
		qsort(ps->stacks, ps->nstacks, sizeof(*ps->stacks), range_cmp);
	ps->key.exec_vm = exec;
	ps->key.start_code = first;
	return 0;
}

/* End of the writable mapping that holds addr, or 0. */
static uint64_t stack_end(const struct procstack *ps, uint64_t addr)
{
	size_t lo = 0, hi = ps->nstacks;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (ps->stacks[mid].end <= addr)
			lo = mid + 1;
		else if (ps->stacks[mid].start > addr)
			hi = mid;
		else
			return ps->stacks[mid].end;
	}
	return 0;
}

/* Parses a syscall line: "NR a1 .. a6 SP PC", "-1 SP PC" (in the kernel,
 * not by a syscall) or "running".  Returns the slot state. */
static int parse_syscall(const char *line, struct stk_rec *r)
{
	uint64_t v[9];
	int nv = 0;
	long long nr;
	char *e;

	if (strncmp(line, "running", 7) == 0)
		return SLOT_RUNNING;
	nr = strtoll(line, &e, 10);
	if (e == line)
		return SLOT_NONE;
	for (const char *p = e; nv < 9;) {
		while (*p == ' ')
			p++;
		if (p[0] != '0' || p[1] != 'x')
			break;
		p += 2;
		v[nv++] = hex_at(&p);
	}
	if (nv < 2)
		return SLOT_NONE;
	r->syscall_nr = nr;
	for (int i = 0; i < 5 && i < nv - 2; i++)
		r->args[i] = v[i];
	r->regs[STK_REG_SP] = v[nv - 2];
	r->regs[STK_REG_IP] = v[nv - 1];
	return SLOT_BLOCKED;
}

int procstack_lock_wait(pid_t pid, uint32_t tid, uint64_t *addr, int *how)
{
	char path[64], line[160];
	struct stk_rec rec;
	struct bpfstack_thread t;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%u/syscall", (int)pid, (unsigned)tid);
	n = read_at(AT_FDCWD, path, line, sizeof(line));
	if (n < 0)
		return (int)n;
	memset(&rec, 0, sizeof(rec));
	if (parse_syscall(line, &rec) != SLOT_BLOCKED)
		return 0;
	/* The file names a syscall only while the thread sleeps in it. */
	t.sched_state = 'S';
	t.on_cpu = false;
	bpfs_lock_wait(&rec, &t);
	*addr = t.lock_addr;
	*how = t.lock_how;
	return t.lock_how != BPFSTACK_LOCK_NONE;
}

/* Closes one kept file of a thread. */
static void tf_drop(struct procstack *ps, struct tfiles *f, int k)
{
	if (f->fd[k] >= 0) {
		close(f->fd[k]);
		f->fd[k] = -1;
		atomic_fetch_sub_explicit(&ps->nfds, 1, memory_order_relaxed);
	}
}

static void tf_close(struct procstack *ps, struct tfiles *f)
{
	for (int k = 0; k < TF_N; k++)
		tf_drop(ps, f, k);
	f->known = false;
	f->io_worker = false;
}

void procstack_release(struct procstack *ps)
{
	if (!ps)
		return;
	for (size_t i = 0; i < ps->nfiles; i++)
		tf_close(ps, &ps->files[i]);
	free(ps->files);
	ps->files = NULL;
	ps->nfiles = 0;
	ps->files_pid = 0;
	free(ps->prev);
	ps->prev = NULL;
	ps->nprev = 0;
	ps->prev_pid = 0;
	ps->prev_syscw_ok = false;
}

void procstack_last_stats(const struct procstack *ps, struct procstack_stats *st)
{
	*st = ps ? ps->stats : (struct procstack_stats){0};
}

void procstack_parallel(struct procstack *ps, bool on)
{
	if (!ps)
		return;
	if (!on) {
		halves_free(ps->halves);
		ps->halves = NULL;
	}
	ps->halves_off = !on;
}

size_t procstack_kept_fds(const struct procstack *ps)
{
	return ps ? atomic_load_explicit(&ps->nfds, memory_order_relaxed) : 0;
}

/* Counts one more descriptor kept, if the budget has room for it (both
 * halves of a loop keep them). */
static bool fd_keep(struct procstack *ps)
{
	size_t was = atomic_fetch_add_explicit(&ps->nfds, 1, memory_order_relaxed);
	if (was < ps->fd_budget)
		return true;
	atomic_fetch_sub_explicit(&ps->nfds, 1, memory_order_relaxed);
	return false;
}

/* Reads one of a thread's files into buf (NUL-terminated): through its
 * kept descriptor when it has one, else opened afresh (and kept, within
 * the budget).  A kept descriptor that fails is of a thread that exited:
 * all of its files are closed, and with reopen the file is opened afresh
 * (a new thread may have the tid); else -ESRCH. */
static ssize_t tf_read(struct procstack *ps, int taskfd, struct tfiles *f, int k, bool reopen,
		       char *buf, size_t len)
{
	char path[48];
	ssize_t n;

	if (f->fd[k] >= 0) {
		n = pread(f->fd[k], buf, len - 1, 0);
		if (n >= 0) {
			buf[n] = '\0';
			return n;
		}
		tf_close(ps, f);
		if (!reopen)
			return -ESRCH;
	}
	snprintf(path, sizeof(path), "%u/%s", (unsigned)f->tid, tf_file[k]);
	int fd = openat(taskfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	n = n < 0 ? -errno : n;
	if (n >= 0)
		buf[n] = '\0';
	if (n >= 0 && fd_keep(ps)) {
		f->fd[k] = fd;
	} else {
		close(fd);
	}
	return n;
}

/* Reads a thread's schedstat file: *same when it did not run since the
 * last capture read it (false when that cannot be told: no earlier
 * reading, a kernel without the file or with its values all zero); *gone
 * when the thread is gone. */
static void probe(struct procstack *ps, int taskfd, struct tfiles *f, bool *same, bool *gone)
{
	char buf[96];
	char *e;
	uint64_t run, slices;

	*same = false;
	*gone = false;
	if (!ps->have_schedstat)
		return;
	/* A kept file that fails was another thread's: known is then false
	 * (tf_close). */
	ssize_t n = tf_read(ps, taskfd, f, TF_SCHED, true, buf, sizeof(buf));
	bool was = f->known;
	f->known = false;
	if (n < 0) {
		*gone = n == -ESRCH || n == -ENOENT;
		return;
	}
	run = strtoull(buf, &e, 10);
	(void)strtoull(e, &e, 10);
	slices = strtoull(e, NULL, 10);
	if (!run && !slices)
		return;
	*same = was && f->run_ns == run && f->slices == slices;
	f->run_ns = run;
	f->slices = slices;
	f->known = true;
}

/* Name and scheduler state from /proc/PID/task/TID/stat. */
static int read_stat(struct procstack *ps, int taskfd, struct tfiles *f, struct bpfstack_thread *t)
{
	char buf[1024];
	/* A kept file that fails may be of a thread whose tid another took
	 * since the probe opened its schedstat file afresh: read that one. */
	ssize_t n = tf_read(ps, taskfd, f, TF_STAT, true, buf, sizeof(buf));
	const char *open_paren, *close_paren;

	if (n < 0)
		return (int)n;
	open_paren = strchr(buf, '(');
	/* The name may hold ") ": the state follows the last one. */
	close_paren = strrchr(buf, ')');
	if (!open_paren || !close_paren || close_paren < open_paren || close_paren[1] != ' ')
		return -EINVAL;
	size_t len = (size_t)(close_paren - open_paren - 1);
	if (len > sizeof(t->comm) - 1)
		len = sizeof(t->comm) - 1;
	memcpy(t->comm, open_paren + 1, len);
	t->comm[len] = '\0';
	t->sched_state = close_paren[2];
	/* Field 9, flags: the state is field 3. */
	const char *p = close_paren + 2;
	for (int field = 3; field < 9 && p; field++)
		p = strchr(p + 1, ' ');
	f->io_worker = p && (strtoul(p + 1, NULL, 10) & PF_IO_WORKER_FLAG);
	return 0;
}

/* The name of a thread from its comm file (the name as set, then a
 * newline). */
static int read_comm(struct procstack *ps, int taskfd, struct tfiles *f, char *comm, size_t len)
{
	char buf[64];
	ssize_t n = tf_read(ps, taskfd, f, TF_COMM, false, buf, sizeof(buf));

	if (n < 0)
		return (int)n;
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	if ((size_t)n > len - 1)
		n = (ssize_t)len - 1;
	memcpy(comm, buf, (size_t)n);
	comm[n] = '\0';
	return 0;
}

/* Takes the files of the last capture into one entry per thread of this
 * one (tids sorted); files of threads that are gone, or of another
 * process, are closed. */
static int files_begin(struct procstack *ps, const uint32_t *tids, size_t n,
		       unsigned long long start)
{
	struct tfiles *nf = calloc(n ? n : 1, sizeof(*nf));
	size_t j = 0;

	if (!nf)
		return -ENOMEM;
	if (ps->files_pid != ps->pid || ps->files_start != start || !start)
		for (size_t i = 0; i < ps->nfiles; i++)
			tf_close(ps, &ps->files[i]);
	for (size_t i = 0; i < n; i++) {
		while (j < ps->nfiles && ps->files[j].tid < tids[i])
			tf_close(ps, &ps->files[j++]);
		if (j < ps->nfiles && ps->files[j].tid == tids[i]) {
			nf[i] = ps->files[j++];
			continue;
		}
		nf[i].tid = tids[i];
		for (int k = 0; k < TF_N; k++)
			nf[i].fd[k] = -1;
	}
	while (j < ps->nfiles)
		tf_close(ps, &ps->files[j++]);
	free(ps->files);
	ps->files = nf;
	ps->nfiles = n;
	ps->files_pid = ps->pid;
	ps->files_start = start;
	return 0;
}

/* The start time of the process (field 22 of its main thread's stat file:
 * /proc/PID/stat would sum every thread's times too), 0 when it cannot be
 * read: with the pid it names one process.  *threads: its thread count
 * (field 20), -1 when unknown. */
static unsigned long long proc_start(int procfd, pid_t pid, long *threads)
{
	char buf[1024], path[48];
	const char *p;
	snprintf(path, sizeof(path), "task/%d/stat", (int)pid);
	ssize_t n = read_at(procfd, path, buf, sizeof(buf));

	*threads = -1;
	if (n < 0 || !(p = strrchr(buf, ')')))
		return 0;
	/* Fields 3 .. 21 before it. */
	for (int field = 2; field < 22 && p; field++) {
		p = strchr(p + 1, ' ');
		if (field == 19 && p)
			*threads = strtol(p + 1, NULL, 10);
	}
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

static int tid_cmp(const void *a, const void *b);

/* The last capture's entry for tid, when this capture is of the same
 * process, else NULL. */
static const struct bpfstack_thread *prev_entry(const struct procstack *ps, uint32_t tid)
{
	struct bpfstack_thread key = {.tid = tid};

	if (ps->prev_pid != ps->pid || !ps->start || ps->prev_start != ps->start)
		return NULL;
	return bsearch(&key, ps->prev, ps->nprev, sizeof(key), tid_cmp);
}

/* The last capture's entry for tid when it can stand for a thread that did
 * not run since (it has a stack, was not on a CPU, and was not read while
 * it ran: read again, it is exact). */
static const struct bpfstack_thread *last_entry(const struct procstack *ps, uint32_t tid)
{
	const struct bpfstack_thread *p = prev_entry(ps, tid);

	return p && !p->error && !p->on_cpu && p->approximate_why != ran_while_read ? p : NULL;
}

static void fail_thread(struct bpfstack_thread *t, int err, const char *why)
{
	t->error = err;
	t->error_why = why;
	t->nframes = 0;
}

/* Bytes of stack to copy from sp for thread tid (end: where its mapping
 * ends): as many pages from sp's as the thread's unwind read in the last
 * capture of the process (an idle thread of 1,005 needed 1, the rest of
 * sp's page, where WINDOW copied 4.7 KiB), else WINDOW.  A thread that
 * waits elsewhere now and needs more reads past it, page by page, from
 * /proc/PID/mem (bpfs_unwind.c), and its next window is the larger. */
static uint32_t window_len(const struct procstack *ps, uint32_t tid, uint64_t sp, uint64_t end)
{
	uint64_t len = end - sp < WINDOW ? end - sp : WINDOW;
	const struct bpfstack_thread *p = prev_entry(ps, tid);

	if (p && p->window_pages) {
		uint64_t hint = (sp & ~(uint64_t)(STK_PAGE_SIZE - 1)) +
				(uint64_t)p->window_pages * STK_PAGE_SIZE - sp;

		if (hint < len)
			len = hint;
	}
	return (uint32_t)len;
}

/* Copies the stack windows of the blocked threads of slots lo..hi: one
 * process_vm_readv for all, and again from past the first window that
 * failed (a mapping that went away) until every window was tried. */
static void copy_windows(struct procstack *ps, struct bpfstack_thread **t, size_t lo, size_t hi)
{
	struct iovec local[CHUNK], remote[CHUNK];
	size_t idx[CHUNK], k = 0;

	for (size_t i = lo; i < hi; i++) {
		struct slot *s = &ps->slots[i];
		uint64_t sp = s->rec.regs[STK_REG_SP], end;

		if (s->state != SLOT_BLOCKED)
			continue;
		end = stack_end(ps, sp);
		if (!end) {
			fail_thread(t[i], -EFAULT, "its stack pointer lies in no writable mapping");
			s->state = SLOT_NONE;
			continue;
		}
		s->rec.ustack_base = sp;
		s->rec.ustack_len = window_len(ps, t[i]->tid, sp, end);
		local[k] = (struct iovec){ps->win + i * WINDOW, s->rec.ustack_len};
		remote[k] = (struct iovec){(void *)(uintptr_t)sp, s->rec.ustack_len};
		idx[k++] = i;
	}
	for (size_t from = 0; from < k;) {
		ssize_t got =
		    process_vm_readv(ps->pid, local + from, k - from, remote + from, k - from, 0);
		size_t done = 0;

		if (got < 0 && (errno == EPERM || errno == ESRCH)) {
			for (size_t j = from; j < k; j++)
				fail_thread(t[idx[j]], -errno,
					    errno == EPERM
						? "the kernel refuses to let scoped read its memory"
						: "the process exited during the capture");
			for (size_t j = from; j < k; j++)
				ps->slots[idx[j]].state = SLOT_NONE;
			return;
		}
		/* Windows read whole, then the one that stopped the read. */
		while (from + done < k && got >= (ssize_t)local[from + done].iov_len) {
			got -= (ssize_t)local[from + done].iov_len;
			done++;
		}
		from += done;
		if (from < k) {
			struct slot *s = &ps->slots[idx[from]];

			if (got > 0) {
				s->rec.ustack_len = (uint32_t)got; /* what could be read */
			} else {
				fail_thread(t[idx[from]], -EFAULT, "its stack could not be read");
				s->state = SLOT_NONE;
			}
			from++;
		}
	}
}

static void slot_close(struct slot *s)
{
	if (s->own && s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->own = false;
}

/* Runs fn over [0, n), its second half on the helper thread when the loop
 * is long enough and the process is not this one (captured, the helper
 * would be a thread on a CPU: sampled, and waited for); 1 when it did. */
static int run_halves(struct procstack *ps, halves_fn *fn, void *ctx, size_t n)
{
	if (n < HALVES_MIN || ps->halves_off || ps->pid == getpid()) {
		fn(ctx, 0, n);
		return 0;
	}
	if (!ps->halves && !(ps->halves = halves_new()))
		ps->halves_off = true; /* one CPU, or no thread: not again */
	int took = halves_run(ps->halves, fn, ctx, n, HALVES_MIN);
	ps->stats.halves += (size_t)took;
	return took;
}

/* A chunk of threads: their entries in t, their files in f, their slots
 * the first of ps->slots. */
struct chunk {
	struct procstack *ps;
	int taskfd;
	struct bpfstack_thread **t;
	struct tfiles **f;
};

/* Slots lo..hi of a chunk: name and state, first read, copy, second read.
 * A half of a chunk (run_halves) writes only its own threads' entries,
 * files and slots, and the count of descriptors kept. */
static void chunk_read(void *ctx, size_t lo, size_t hi)
{
	struct chunk *c = ctx;
	struct procstack *ps = c->ps;
	struct bpfstack_thread **t = c->t;
	struct tfiles **f = c->f;
	char path[48], again[sizeof(ps->slots[0].line)];

	for (size_t i = lo; i < hi; i++) {
		struct slot *s = &ps->slots[i];
		ssize_t len = -1;

		memset(&s->rec, 0, sizeof(s->rec));
		s->state = SLOT_NONE;
		t[i]->tid = f[i]->tid;
		s->fd = -1;
		s->own = false;
		if (read_stat(ps, c->taskfd, f[i], t[i]) < 0) {
			fail_thread(t[i], -ESRCH, "the thread exited during the capture");
			t[i]->sched_state = 'X';
			f[i]->known = false;
			continue;
		}
		s->fd = f[i]->fd[TF_SYSCALL];
		s->own = false;
		if (s->fd < 0) {
			snprintf(path, sizeof(path), "%u/syscall", (unsigned)t[i]->tid);
			s->fd = openat(c->taskfd, path, O_RDONLY | O_CLOEXEC);
			if (s->fd >= 0 && fd_keep(ps)) {
				f[i]->fd[TF_SYSCALL] = s->fd;
			} else {
				s->own = s->fd >= 0;
			}
		}
		if (s->fd >= 0)
			len = pread(s->fd, s->line, sizeof(s->line) - 1, 0);
		if (len < 0) {
			int e = errno;
			if (s->fd >= 0 && !s->own) {
				/* Read afresh next time (the thread may be gone). */
				tf_close(ps, f[i]);
				s->fd = -1;
			}
			fail_thread(t[i], e == EACCES || e == EPERM ? -EPERM : -e,
				    e == EACCES || e == EPERM
					? "the kernel refuses scoped its registers (ptrace rules)"
					: "its registers could not be read");
			continue;
		}
		s->line[len] = '\0';
		s->state = parse_syscall(s->line, &s->rec);
		s->rec.tid = t[i]->tid;
		if (s->state == SLOT_RUNNING) {
			t[i]->on_cpu = true;
			t[i]->sched_state = 'R';
			fail_thread(
			    t[i], -EBUSY,
			    "running on a CPU throughout the capture; its stack cannot be read "
			    "without stopping it");
		} else if (s->state == SLOT_NONE) {
			fail_thread(t[i], -ENODATA, "the kernel gave no registers for it");
		}
	}
	copy_windows(ps, t, lo, hi);
	for (size_t i = lo; i < hi; i++) {
		struct slot *s = &ps->slots[i];

		if (s->state != SLOT_BLOCKED)
			continue;
		/* The same call at the same place: the copy is of that moment. */
		ssize_t len = pread(s->fd, again, sizeof(again) - 1, 0);
		if (len < 0 || (again[len] = '\0', strcmp(again, s->line) != 0)) {
			t[i]->approximate = true;
			t[i]->approximate_why = ran_while_read;
		}
	}
}

/* One chunk of threads (their entries in t, their files in f): the reads
 * (chunk_read, in two halves at once), then the unwinds, here. */
static void capture_chunk(struct procstack *ps, int taskfd, struct bpfstack_thread **t,
			  struct tfiles **f, size_t n)
{
	struct chunk c = {ps, taskfd, t, f};

	run_halves(ps, chunk_read, &c, n);
	for (size_t i = 0; i < n; i++) {
		struct slot *s = &ps->slots[i];

		if (s->state == SLOT_RUNNING && ps->nbusy < BPFS_PERF_MAX)
			ps->busy[ps->nbusy++] = (pid_t)t[i]->tid;
		if (s->state == SLOT_BLOCKED) {
			s->rec.exec_vm = ps->key.exec_vm;
			s->rec.start_code = ps->key.start_code;
			s->rec.leader_start_ns = ps->key.leader_start_ns;
			bpfs_classify_syscall(&s->rec, t[i]);
			/* A thread that ran and came back to where it was: the
			 * unwinder's memory of it answers (see bpfs_unwind.c). */
			bool inferred = false;
			int64_t u0 = mono_ns();
			t[i]->window_bytes = s->rec.ustack_len;
			t[i]->error = bpfs_unwind_sp_ip(ps->unw, ps->pid, &s->rec,
							ps->win + i * WINDOW, t[i], &inferred);
			if (t[i]->error)
				t[i]->error_why = "its stack could not be unwound";
			if (inferred && !t[i]->approximate) {
				t[i]->approximate = true;
				t[i]->approximate_why =
				    "its frame pointer was found on the stack, and the "
				    "unwind did not reach the thread's first function";
			}
			ps->stats.unwound++;
			ps->stats.unwind_ns += mono_ns() - u0;
		} else if (t[i]->sched_state != 'X') {
			bpfs_classify_syscall(&s->rec, t[i]);
		}
		slot_close(s);
	}
}

static int tid_cmp(const void *a, const void *b)
{
	const struct bpfstack_thread *x = a, *y = b;

	return (x->tid > y->tid) - (x->tid < y->tid);
}

/* A perf sample of a thread that ran throughout: its exact stack at that
 * tick, replacing "not captured". */
static void on_sample(void *ctx, const struct stk_rec *h, const unsigned char *ustack)
{
	struct procstack *ps = ctx;
	struct bpfstack_thread key = {.tid = h->tid}, *t, tmp;
	struct stk_rec r = *h;

	t = bsearch(&key, ps->t, ps->n, sizeof(key), tid_cmp);
	if (!t)
		return;
	r.exec_vm = ps->key.exec_vm;
	r.start_code = ps->key.start_code;
	r.leader_start_ns = ps->key.leader_start_ns;
	tmp = *t;
	int64_t u0 = mono_ns();
	int rc = bpfs_unwind(ps->unw, ps->pid, &r, ustack, &tmp);
	ps->stats.unwound++;
	ps->stats.unwind_ns += mono_ns() - u0;
	if (rc == 0 && tmp.nframes > 0) {
		memcpy(t->frames, tmp.frames, tmp.nframes * sizeof(t->frames[0]));
		t->nframes = tmp.nframes;
		t->error = 0;
		t->error_why = NULL;
		t->approximate = false;
		t->approximate_why = NULL;
	}
}

/* Threads that ran throughout and had no perf sample may be blocked by
 * now (they were starting, or between two waits): read them once more. */
static void retry_running(struct procstack *ps, int taskfd)
{
	struct bpfstack_thread *again = calloc(BPFS_PERF_MAX, sizeof(*again));
	struct bpfstack_thread *orig[BPFS_PERF_MAX], *tp[BPFS_PERF_MAX];
	struct tfiles *fp[BPFS_PERF_MAX];
	size_t n = 0;

	if (!again)
		return;
	for (size_t i = 0; i < ps->n && n < BPFS_PERF_MAX; i++)
		if (ps->t[i].error == -EBUSY) {
			orig[n] = &ps->t[i];
			tp[n] = &again[n];
			fp[n++] = &ps->files[i];
		}
	ps->nbusy = 0;
	if (n)
		capture_chunk(ps, taskfd, tp, fp, n);
	for (size_t i = 0; i < n; i++)
		if (again[i].error != -EBUSY && again[i].sched_state != 'X' && !again[i].error)
			*orig[i] = again[i];
	free(again);
}

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* The thread ids of pid, sorted; *n of them. */
static int list_tids(int taskfd, uint32_t **tids, size_t *n, bool *truncated)
{
	int fd = dup(taskfd);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	size_t cap = 0;
	bool sorted = true;

	*tids = NULL;
	*n = 0;
	*truncated = false;
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((de = readdir(dir))) {
		char *e;
		unsigned long v;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		v = strtoul(de->d_name, &e, 10);
		if (*e || v == 0 || v > UINT32_MAX)
			continue;
		if (*n == MAX_THREADS) {
			*truncated = true;
			break;
		}
		if (*n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			uint32_t *p = realloc(*tids, ncap * sizeof(**tids));

			if (!p) {
				closedir(dir);
				return -ENOMEM;
			}
			*tids = p;
			cap = ncap;
		}
		sorted = sorted && (*n == 0 || (*tids)[*n - 1] < (uint32_t)v);
		(*tids)[(*n)++] = (uint32_t)v;
	}
	closedir(dir);
	/* The kernel lists threads in the order they were made: by tid until
	 * the tids wrap. */
	if (!sorted)
		qsort(*tids, *n, sizeof(**tids), u32_cmp);
	return 0;
}

/* Keeps a copy of a capture's result for the next capture of the same
 * process. */
static void keep(struct procstack *ps, const struct bpfstack_thread *t, size_t n)
{
	free(ps->prev);
	ps->prev = NULL;
	ps->nprev = 0;
	ps->prev_pid = 0;
	if (n > MAX_KEPT || !ps->start || !(ps->prev = malloc(n * sizeof(*t))))
		return;
	for (size_t i = 0; i < n; i++)
		bpfs_thread_copy(&ps->prev[i], &t[i]);
	ps->nprev = n;
	ps->prev_pid = ps->pid;
	ps->prev_start = ps->start;
	if (ps->syscw_read) {
		ps->prev_syscw = ps->syscw;
		ps->prev_syscw_ok = ps->syscw_ok;
	}
	if (ps->all_names)
		ps->names_ns = ps->began_ns;
}

static int list_tids(int taskfd, uint32_t **tids, size_t *n, bool *truncated);

/* Every thread's schedstat file (probe), in two halves at once: *same and
 * *gone per thread. */
struct probes {
	struct procstack *ps;
	int taskfd;
	bool *same, *gone;
};

static void probe_range(void *ctx, size_t lo, size_t hi)
{
	struct probes *p = ctx;
	for (size_t i = lo; i < hi; i++)
		probe(p->ps, p->taskfd, &p->ps->files[i], &p->same[i], &p->gone[i]);
}

/* The names of the threads that keep their last entry, read again (in two
 * halves at once); a thread whose name cannot be read is gone. */
static void comm_range(void *ctx, size_t lo, size_t hi)
{
	struct probes *p = ctx;
	struct procstack *ps = p->ps;
	for (size_t i = lo; i < hi; i++) {
		struct bpfstack_thread *t = &ps->t[i];
		if (!t->reused)
			continue;
		if (read_comm(ps, p->taskfd, &ps->files[i], t->comm, sizeof(t->comm)) < 0) {
			t->reused = false;
			fail_thread(t, -ESRCH, "the thread exited during the capture");
			t->sched_state = 'X';
			ps->files[i].known = false;
		}
	}
}

/* Whether the names of the threads that did not run since the last capture
 * still hold although some thread ran.  A name changes without its thread
 * running only by a write to its comm file from another thread of the
 * process (the kernel refuses other processes; prctl(PR_SET_NAME) names the
 * caller).  Every write(2) and writev(2) counts in the writer's syscw, and
 * /proc/PID/io sums it over the threads, those that exited too; pwrite,
 * sendfile, splice, copy_file_range and AIO fail on a comm file.  The one
 * write that escapes syscw is io_uring's: an io-wq worker thread of the
 * process writes it.  A worker that lives on is a thread of the process
 * (its stat flags say so): while the process has one, names are read
 * again.  What remains: a thread that starts after one capture and ends
 * before the next, having renamed another through io_uring (its workers
 * end with it); so names kept this way are read again at least every
 * NAMES_MAX_AGE_NS. */
static bool names_hold(const struct procstack *ps, bool io_worker)
{
	return ps->syscw_ok && ps->prev_syscw_ok && ps->syscw == ps->prev_syscw && !io_worker &&
	       ps->names_ns && ps->began_ns - ps->names_ns < NAMES_MAX_AGE_NS;
}

/* Every thread of the capture in progress: those that did not run since the
 * last capture keep its entry (and, when a thread of the process came or
 * went, or one ran and the names may have changed (names_hold), their name
 * is read again); the rest are read in full.  The threads are the last capture's unless listed (the
 * process has as many): when one of them went, the process's list is read, and when it differs the
 * capture must start again from it (1; the threads found moved stay so).  Returns 0, 1, or the
 * error of reading the process's mappings. */
static int capture_threads(struct procstack *ps, int procfd, int taskfd, bool listed)
{
	struct bpfstack_thread **todo = malloc((ps->n ? ps->n : 1) * sizeof(*todo));
	struct tfiles **files = malloc((ps->n ? ps->n : 1) * sizeof(*files));
	bool *flags = malloc(2 * (ps->n ? ps->n : 1));
	size_t ntodo = 0;
	int rc = 0;

	if (!todo || !files || !flags) {
		free(todo);
		free(files);
		free(flags);
		return -ENOMEM;
	}
	struct probes pr = {ps, taskfd, flags, flags + ps->n};
	/* Threads came or went, or another process: not one unchanged set. */
	bool changed = ps->prev_pid != ps->pid || ps->prev_start != ps->start || ps->nprev != ps->n;
	bool ran = false, io_worker = false;
	/* The thread running this capture, when it captures its own process:
	 * it runs throughout, and the kernel moves its counters only when it
	 * leaves the CPU. */
	uint32_t self = ps->pid == getpid() ? (uint32_t)syscall(SYS_gettid) : 0;
	bool went = false;
	/* Known io_uring workers count even when gone by now (names_hold). */
	for (size_t i = 0; i < ps->n; i++)
		io_worker = io_worker || ps->files[i].io_worker;
	run_halves(ps, probe_range, &pr, ps->n);
	for (size_t i = 0; i < ps->n; i++) {
		struct bpfstack_thread *t = &ps->t[i];
		struct tfiles *f = &ps->files[i];
		bool same = pr.same[i], gone = pr.gone[i];

		t->tid = f->tid;
		changed = changed || ps->prev[i].tid != t->tid;
		const struct bpfstack_thread *p =
		    same && t->tid != self ? last_entry(ps, t->tid) : NULL;
		if (gone) {
			fail_thread(t, -ESRCH, "the thread exited during the capture");
			t->sched_state = 'X';
			went = changed = true;
		} else if (p) {
			bpfs_thread_copy(t, p);
			t->reused = true;
			t->ran_during_capture = false;
		} else {
			todo[ntodo] = t;
			files[ntodo++] = f;
			ran = true;
		}
	}
	if (went && !listed) {
		/* The threads are the last capture's, as many as the process
		 * has (the caller checked): while none of them is gone no thread
		 * came either, and the list holds.  One is gone: read it. */
		uint32_t *now = NULL;
		size_t nnow = 0;
		bool truncated, differ = true;
		rc = list_tids(taskfd, &now, &nnow, &truncated);
		if (rc == 0 && nnow == ps->n) {
			differ = false;
			for (size_t i = 0; i < nnow && !differ; i++)
				differ = now[i] != ps->t[i].tid;
		}
		free(now);
		if (rc < 0 || differ) {
			for (size_t i = 0; i < ntodo; i++)
				files[i]->known = false;
			free(todo);
			free(files);
			free(flags);
			return rc < 0 ? rc : 1;
		}
	}
	if (changed || ran) {
		/* Before any name is read: a rename that returned before this
		 * moment counts here (names_hold), one after it in the next
		 * capture's.  When nothing ran, the last reading stays the
		 * baseline. */
		ps->syscw_ok = ps->have_io && read_syscw(procfd, &ps->syscw);
		ps->syscw_read = true;
	}
	bool reread = changed || (ran && !names_hold(ps, io_worker));
	ps->all_names = reread || ntodo == ps->n;
	if (reread) {
		for (size_t i = 0; i < ps->n; i++)
			ps->stats.names_read += ps->t[i].reused;
		run_halves(ps, comm_range, &pr, ps->n);
	}
	for (size_t i = 0; i < ps->n; i++)
		ps->stats.reused += ps->t[i].reused;
	if (ntodo)
		rc = read_maps(ps, procfd);
	for (size_t i = 0; rc == 0 && i < ntodo; i += CHUNK)
		capture_chunk(ps, taskfd, todo + i, files + i,
			      ntodo - i < CHUNK ? ntodo - i : CHUNK);
	/* Each thread keeps the files its kind of capture reads next time: one
	 * that did not run its name, one read in full its stat and syscall
	 * files (each open /proc file holds a page of kernel memory). */
	for (size_t i = 0; rc == 0 && i < ps->n; i++) {
		tf_drop(ps, &ps->files[i], ps->t[i].reused ? TF_STAT : TF_COMM);
		if (ps->t[i].reused)
			tf_drop(ps, &ps->files[i], TF_SYSCALL);
	}
	free(todo);
	free(files);
	free(flags);
	return rc;
}

int procstack_capture(struct procstack *ps, pid_t pid, struct bpfstack_thread **threads, size_t *n,
		      char *err, size_t errlen)
{
	char path[64];
	uint32_t *tids = NULL;
	size_t count = 0;
	long nthreads;
	bool truncated = false;
	int procfd, taskfd, rc;

	*threads = NULL;
	*n = 0;
	if (!ps || pid <= 0) {
		snprintf(err, errlen, "procstack_capture: invalid pid %d", (int)pid);
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	procfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (procfd < 0) {
		snprintf(err, errlen, "no process %d", (int)pid);
		return -ESRCH;
	}
	taskfd = openat(procfd, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ps->pid = pid;
	ps->key.leader_start_ns = 0;
	ps->nbusy = 0;
	ps->began_ns = mono_ns();
	ps->stats = (struct procstack_stats){0};
	ps->memo_hits0 = bpfs_unwinder_memo_hits(ps->unw);
	ps->all_names = false;
	ps->syscw_read = ps->syscw_ok = false;
	ps->start = proc_start(procfd, pid, &nthreads);
	/* As many threads as the last capture of this process found: the
	 * same ones, unless one of them ran or went (capture_threads). */
	bool listed = !(ps->prev_pid == pid && ps->start && ps->prev_start == ps->start &&
			ps->nprev && nthreads == (long)ps->nprev);
	rc = taskfd < 0 ? -errno : 0;
	for (int pass = 0; rc == 0 && pass < 2; pass++, listed = true) {
		free(tids);
		tids = NULL;
		free(ps->t);
		ps->t = NULL;
		ps->n = 0;
		ps->stats.reused = ps->stats.names_read = 0;
		truncated = false;
		if (listed) {
			rc = list_tids(taskfd, &tids, &count, &truncated);
		} else if ((tids = malloc(ps->nprev * sizeof(*tids)))) {
			count = ps->nprev;
			for (size_t i = 0; i < count; i++)
				tids[i] = ps->prev[i].tid;
		} else {
			rc = -ENOMEM;
		}
		ps->t = rc == 0 ? calloc(count ? count : 1, sizeof(*ps->t)) : NULL;
		if (rc == 0 && (!ps->t || files_begin(ps, tids, count, ps->start) < 0))
			rc = -ENOMEM;
		if (rc == 0) {
			ps->n = count;
			rc = capture_threads(ps, procfd, taskfd, listed);
		}
		if (rc != 1)
			break;
		rc = 0;
	}
	if (rc == 0 && ps->nbusy > 0) {
		bpfs_perf_sample(ps->busy, ps->nbusy, PERF_TIMEOUT_MS, on_sample, ps);
		retry_running(ps, taskfd);
	}
	if (rc == -EACCES || rc == -EPERM) {
		snprintf(
		    err, errlen,
		    "the kernel refuses scoped (uid %u) the memory of process %d (ptrace rules: "
		    "another user's or a setuid process)",
		    (unsigned)geteuid(), (int)pid);
		rc = -EPERM;
	} else if (rc == -ENOMEM) {
		snprintf(err, errlen, "out of memory for %zu threads", count);
	} else if (rc < 0) {
		snprintf(err, errlen, "cannot read process %d: %s", (int)pid, strerror(-rc));
		rc = rc == -ENOENT ? -ESRCH : rc;
	}
	if (rc == 0) {
		/* Every thread refused: the process, not a thread, is out of reach. */
		size_t refused = 0;
		for (size_t i = 0; i < ps->n; i++)
			refused += ps->t[i].error == -EPERM;
		if (ps->n && refused == ps->n) {
			snprintf(err, errlen,
				 "the kernel refuses scoped (uid %u) the registers and memory of "
				 "process %d (ptrace rules: another user's or a setuid process)",
				 (unsigned)geteuid(), (int)pid);
			rc = -EPERM;
		}
	}
	ps->stats.threads = rc == 0 ? ps->n : 0;
	/* Unwinds the unwinder answered from memory are not counted as made. */
	ps->stats.memo_hits = bpfs_unwinder_memo_hits(ps->unw) - ps->memo_hits0;
	ps->stats.unwound -= ps->stats.memo_hits;
	ps->stats.read_ns = mono_ns() - ps->began_ns - ps->stats.unwind_ns;
	if (rc == 0) {
		keep(ps, ps->t, ps->n);
		*threads = ps->t;
		*n = ps->n;
		if (truncated)
			snprintf(err, errlen,
				 "pid %d has more than %d threads; the first %d are captured",
				 (int)pid, MAX_THREADS, MAX_THREADS);
	} else {
		/* Nothing of a process out of reach is kept. */
		free(ps->t);
		procstack_release(ps);
	}
	ps->t = NULL;
	ps->n = 0;
	free(tids);
	if (taskfd >= 0)
		close(taskfd);
	close(procfd);
	return rc;
}

void procstack_forget_gone(struct procstack *ps)
{
	char path[48];
	int procfd;

	if (!ps || !ps->files_pid)
		return;
	snprintf(path, sizeof(path), "/proc/%d", (int)ps->files_pid);
	procfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	long threads;
	if (procfd < 0 || proc_start(procfd, ps->files_pid, &threads) != ps->files_start)
		procstack_release(ps);
	if (procfd >= 0)
		close(procfd);
}
