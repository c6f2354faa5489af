/* procstack.c - the stack source without BPF: each blocked thread's stack
 * and instruction pointers from /proc/PID/task/TID/syscall, its stack window
 * copied in one batched process_vm_readv per chunk of threads, the same
 * file read again to tell an exact stack from one that moved, and libdw's
 * unwinder (bpfs_unwind.c) on the copy.  Nothing stops the target and no
 * signal reaches it. */
#include "procstack.h"

#include "bpfs_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

/* Threads one capture returns at most (as the BPF source). */
#define MAX_THREADS 32768
/* Threads whose files are open at once: bounds the descriptors a capture
 * holds, and the time between a thread's two reads. */
#define CHUNK 256
/* Bytes of stack copied above sp; the unwinder reads past it page by page
 * from /proc/PID/mem when a stack is deeper. */
#define WINDOW (2 * STK_PAGE_SIZE)
/* How long threads running on a CPU get to show up in a perf sample. */
#define PERF_TIMEOUT_MS 10
/* Threads of the last capture kept for the next one (about 1.4 KiB each). */
#define MAX_KEPT 10240
/* Of the descriptor limit, the share the kept status files may hold. */
#define FD_SHARE 4

struct range {
	uint64_t start, end;
};

/* A thread's last unwind, kept for the next capture of the same process:
 * the same stack pointer, instruction pointer and window bytes unwind to
 * the same frames, so a thread that did not move costs a hash, not an
 * unwind. */
struct unw_memo {
	uint32_t tid; /* 0: free */
	uint64_t key;
	uint16_t nframes;
	uint64_t *frames;
};

/* A thread's status file, kept open between captures of one process: a
 * capture then reads it with one pread, not an open, a read and a close
 * (half the cost of the pass that finds the threads that did not move). */
struct status_fd {
	uint32_t tid;
	int fd;
	uint32_t seen; /* the capture that last read it */
};

struct slot {
	int fd;		    /* /proc/PID/task/TID/syscall, open for the re-read */
	int state;	    /* SLOT_* */
	char line[160];	    /* what the first read gave */
	struct stk_rec rec; /* registers and syscall from it */
};

enum { SLOT_NONE, SLOT_BLOCKED, SLOT_RUNNING, SLOT_REUSED };

struct procstack {
	struct bpfs_unwinder *unw;
	unsigned char *win; /* CHUNK windows */
	struct slot slots[CHUNK];
	char *maps;
	size_t maps_cap;
	struct range *stacks; /* writable mappings, by start: where a sp may lie */
	size_t nstacks, stacks_cap;
	struct unw_memo *memo; /* open addressing by tid */
	size_t memo_cap;
	pid_t memo_pid;
	uint64_t memo_space; /* the address space the memo is of */
	size_t memo_hits, memo_used;
	/* The last capture's result, sorted by tid, and whose it is (pid and
	 * start time): a thread whose name, state and switch counters are
	 * those of its entry there has not run since, and keeps that entry
	 * without a read of its registers or stack. */
	struct bpfstack_thread *prev;
	size_t nprev;
	pid_t prev_pid;
	unsigned long long prev_start, start;
	size_t reused;
	/* Status files of the process of the last capture, by tid, and those
	 * the capture in progress opened (merged in at its end). */
	struct status_fd *sfd, *added;
	size_t nsfd, nadded, capadded, fd_budget;
	pid_t sfd_pid;
	unsigned long long sfd_start;
	uint32_t gen;
	bool keep_fds; /* new status files may be kept (not in a retry) */
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
	if (ps->fd_budget > MAX_KEPT)
		ps->fd_budget = MAX_KEPT;
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
	bpfs_unwinder_free(ps->unw);
	for (size_t i = 0; i < ps->nsfd; i++)
		close(ps->sfd[i].fd);
	for (size_t i = 0; i < ps->nadded; i++)
		close(ps->added[i].fd);
	free(ps->sfd);
	free(ps->added);
	for (size_t i = 0; i < ps->memo_cap; i++)
		free(ps->memo[i].frames);
	free(ps->memo);
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

/* The value of the "key:\t" line of a /proc status file, or NULL. */
static const char *status_field(const char *buf, const char *key)
{
	size_t k = strlen(key);
	for (const char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, k) && p[k] == ':' && p[k + 1] == '\t')
			return p + k + 2;
	return NULL;
}

static int sfd_cmp(const void *a, const void *b)
{
	const struct status_fd *x = a, *y = b;
	return (x->tid > y->tid) - (x->tid < y->tid);
}

/* Reads tid's status file into buf: through its kept descriptor when it
 * has one, else opened afresh (and kept, within the budget). */
static ssize_t status_text(struct procstack *ps, int taskfd, const char *tid, uint32_t id,
			   char *buf, size_t len)
{
	struct status_fd key = {.tid = id};
	struct status_fd *k =
	    ps->nsfd ? bsearch(&key, ps->sfd, ps->nsfd, sizeof(key), sfd_cmp) : NULL;
	char path[48];
	ssize_t n = -1;

	if (k && k->fd >= 0) {
		n = pread(k->fd, buf, len - 1, 0);
		if (n >= 0) {
			k->seen = ps->gen;
			buf[n] = '\0';
			return n;
		}
		/* The thread exited (or its tid was taken again). */
		close(k->fd);
		k->fd = -1;
	}
	snprintf(path, sizeof(path), "%s/status", tid);
	int fd = openat(taskfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	n = n < 0 ? -errno : n;
	if (n >= 0)
		buf[n] = '\0';
	bool room = ps->keep_fds && ps->nsfd + ps->nadded < ps->fd_budget;
	if (n >= 0 && room && ps->nadded == ps->capadded) {
		size_t ncap = ps->capadded ? 2 * ps->capadded : 256;
		struct status_fd *a = realloc(ps->added, ncap * sizeof(*a));
		if (a) {
			ps->added = a;
			ps->capadded = ncap;
		}
	}
	if (n >= 0 && room && ps->nadded < ps->capadded)
		ps->added[ps->nadded++] = (struct status_fd){id, fd, ps->gen};
	else
		close(fd);
	return n;
}

/* Begins a capture of pid: status files kept from another process (or
 * from an earlier one with this pid) are closed. */
static void status_begin(struct procstack *ps, pid_t pid, unsigned long long start)
{
	if (ps->sfd_pid != pid || ps->sfd_start != start || !start) {
		for (size_t i = 0; i < ps->nsfd; i++)
			close(ps->sfd[i].fd);
		ps->nsfd = 0;
	}
	ps->sfd_pid = pid;
	ps->sfd_start = start;
	ps->gen++;
	ps->keep_fds = true;
}

/* Ends it: the files of threads that are gone are closed, those opened
 * join the rest. */
static void status_end(struct procstack *ps)
{
	size_t n = 0;
	for (size_t i = 0; i < ps->nsfd; i++) {
		if (ps->sfd[i].fd >= 0 && ps->sfd[i].seen == ps->gen)
			ps->sfd[n++] = ps->sfd[i];
		else if (ps->sfd[i].fd >= 0)
			close(ps->sfd[i].fd);
	}
	ps->nsfd = n;
	if (ps->nadded) {
		struct status_fd *all = realloc(ps->sfd, (n + ps->nadded) * sizeof(*all));
		if (!all) {
			for (size_t i = 0; i < ps->nadded; i++)
				close(ps->added[i].fd);
		} else {
			memcpy(all + n, ps->added, ps->nadded * sizeof(*all));
			ps->sfd = all;
			ps->nsfd = n + ps->nadded;
			qsort(ps->sfd, ps->nsfd, sizeof(*all), sfd_cmp);
		}
		ps->nadded = 0;
	}
	ps->keep_fds = false;
}

/* Name, scheduler state and context-switch counters from
 * /proc/PID/task/TID/status (one read: the counters tell whether the
 * thread ran since the last capture). */
static int read_status(struct procstack *ps, int taskfd, const char *tid, struct bpfstack_thread *t)
{
	char buf[4096];
	const char *name, *state, *vol, *invol;
	ssize_t n;

	n = status_text(ps, taskfd, tid, t->tid, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	name = status_field(buf, "Name");
	state = status_field(buf, "State");
	vol = status_field(buf, "voluntary_ctxt_switches");
	invol = status_field(buf, "nonvoluntary_ctxt_switches");
	if (!name || !state || !vol || !invol)
		return -EINVAL;
	/* The kernel writes a newline in a name as "\n" and a backslash as
	 * "\\" here. */
	size_t o = 0;
	for (const char *c = name; *c && *c != '\n' && o < sizeof(t->comm) - 1; c++) {
		if (*c == '\\' && (c[1] == 'n' || c[1] == '\\'))
			t->comm[o++] = *++c == 'n' ? '\n' : '\\';
		else
			t->comm[o++] = *c;
	}
	t->comm[o] = '\0';
	t->sched_state = *state;
	t->nvcsw = strtoull(vol, NULL, 10);
	t->nivcsw = strtoull(invol, NULL, 10);
	return 0;
}

/* The start time of the process (field 22 of its main thread's stat file:
 * /proc/PID/stat would sum every thread's times too), 0 when it cannot be
 * read: with the pid it names one process. */
static unsigned long long proc_start(int procfd, pid_t pid)
{
	char buf[1024], path[48];
	const char *p;
	snprintf(path, sizeof(path), "task/%d/stat", (int)pid);
	ssize_t n = read_at(procfd, path, buf, sizeof(buf));

	if (n < 0 || !(p = strrchr(buf, ')')))
		return 0;
	/* Fields 3 .. 21 before it. */
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

static int tid_cmp(const void *a, const void *b);

/* The last capture's entry for t, when t has not run since: the same
 * process, and the same name, state and switch counters. */
static const struct bpfstack_thread *unchanged(const struct procstack *ps,
					       const struct bpfstack_thread *t)
{
	struct bpfstack_thread key = {.tid = t->tid};
	const struct bpfstack_thread *p;

	if (ps->prev_pid != ps->pid || !ps->start || ps->prev_start != ps->start)
		return NULL;
	p = bsearch(&key, ps->prev, ps->nprev, sizeof(key), tid_cmp);
	if (!p || p->error || p->on_cpu || p->nvcsw != t->nvcsw || p->nivcsw != t->nivcsw ||
	    p->sched_state != t->sched_state || strcmp(p->comm, t->comm) != 0)
		return NULL;
	return p;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v;
	h *= 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

/* What a thread's unwind depends on: its registers and its window. */
static uint64_t memo_key(const struct stk_rec *r, const unsigned char *win)
{
	uint64_t h = mix(mix(r->regs[STK_REG_SP], r->regs[STK_REG_IP]), r->ustack_len);
	size_t n = r->ustack_len / 8;

	for (size_t i = 0; i < n; i++) {
		uint64_t w;

		memcpy(&w, win + i * 8, 8);
		h = mix(h, w);
	}
	return h;
}

/* The memo slot of tid (its own, or the free one it would take); NULL when
 * there is no memo. */
static struct unw_memo *memo_slot(struct procstack *ps, uint32_t tid)
{
	if (!ps->memo_cap)
		return NULL;
	for (size_t i = (tid * 2654435761u) % ps->memo_cap, k = 0; k < ps->memo_cap;
	     i = (i + 1) % ps->memo_cap, k++)
		if (ps->memo[i].tid == tid || ps->memo[i].tid == 0)
			return &ps->memo[i];
	return NULL;
}

/* Starts the memo for this capture: kept for the same process and address
 * space, else emptied; sized for twice the threads. */
static void memo_begin(struct procstack *ps, size_t nthreads)
{
	uint64_t space = mix(ps->key.exec_vm, ps->key.start_code);
	/* Threads come and go: a memo filled by tids past their use starts
	 * again. */
	bool keep = ps->memo_pid == ps->pid && ps->memo_space == space &&
		    ps->memo_cap >= 2 * nthreads && ps->memo_used <= ps->memo_cap * 3 / 4;

	ps->memo_hits = 0;
	if (keep)
		return;
	for (size_t i = 0; i < ps->memo_cap; i++)
		free(ps->memo[i].frames);
	free(ps->memo);
	ps->memo_used = 0;
	ps->memo_cap = 2 * nthreads + 16;
	ps->memo = calloc(ps->memo_cap, sizeof(*ps->memo));
	if (!ps->memo)
		ps->memo_cap = 0;
	ps->memo_pid = ps->pid;
	ps->memo_space = space;
}

static void fail_thread(struct bpfstack_thread *t, int err, const char *why)
{
	t->error = err;
	t->error_why = why;
	t->nframes = 0;
}

/* Copies the stack windows of the chunk's blocked threads: one
 * process_vm_readv for all, and again from past the first window that
 * failed (a mapping that went away) until every window was tried. */
static void copy_windows(struct procstack *ps, struct bpfstack_thread *t, size_t n)
{
	struct iovec local[CHUNK], remote[CHUNK];
	size_t idx[CHUNK], k = 0;

	for (size_t i = 0; i < n; i++) {
		struct slot *s = &ps->slots[i];
		uint64_t sp = s->rec.regs[STK_REG_SP], end;

		if (s->state != SLOT_BLOCKED)
			continue;
		end = stack_end(ps, sp);
		if (!end) {
			fail_thread(&t[i], -EFAULT,
				    "its stack pointer lies in no writable mapping");
			s->state = SLOT_NONE;
			continue;
		}
		s->rec.ustack_base = sp;
		s->rec.ustack_len = (uint32_t)(end - sp < WINDOW ? end - sp : WINDOW);
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
				fail_thread(&t[idx[j]], -errno,
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
				fail_thread(&t[idx[from]], -EFAULT, "its stack could not be read");
				s->state = SLOT_NONE;
			}
			from++;
		}
	}
}

static void continue_close(struct slot *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

/* One chunk of threads (names in tids): first read, copy, second read,
 * unwind. */
static void capture_chunk(struct procstack *ps, int taskfd, char (*tids)[16],
			  struct bpfstack_thread *t, size_t n)
{
	char path[48], again[sizeof(ps->slots[0].line)];

	for (size_t i = 0; i < n; i++) {
		struct slot *s = &ps->slots[i];
		ssize_t len = -1;

		memset(&s->rec, 0, sizeof(s->rec));
		s->state = SLOT_NONE;
		t[i].tid = (uint32_t)strtoul(tids[i], NULL, 10);
		s->fd = -1;
		if (read_status(ps, taskfd, tids[i], &t[i]) < 0) {
			fail_thread(&t[i], -ESRCH, "the thread exited during the capture");
			t[i].sched_state = 'X';
			continue;
		}
		const struct bpfstack_thread *same = unchanged(ps, &t[i]);
		if (same) {
			t[i] = *same;
			t[i].reused = true;
			t[i].ran_during_capture = false;
			s->state = SLOT_REUSED;
			ps->reused++;
			continue;
		}
		snprintf(path, sizeof(path), "%s/syscall", tids[i]);
		s->fd = openat(taskfd, path, O_RDONLY | O_CLOEXEC);
		if (s->fd >= 0)
			len = pread(s->fd, s->line, sizeof(s->line) - 1, 0);
		if (len < 0) {
			int e = errno;
			fail_thread(&t[i], e == EACCES || e == EPERM ? -EPERM : -e,
				    e == EACCES || e == EPERM
					? "the kernel refuses scoped its registers (ptrace rules)"
					: "its registers could not be read");
			continue;
		}
		s->line[len] = '\0';
		s->state = parse_syscall(s->line, &s->rec);
		s->rec.tid = t[i].tid;
		if (s->state == SLOT_RUNNING) {
			t[i].on_cpu = true;
			t[i].sched_state = 'R';
			if (ps->nbusy < BPFS_PERF_MAX)
				ps->busy[ps->nbusy++] = (pid_t)t[i].tid;
			fail_thread(
			    &t[i], -EBUSY,
			    "running on a CPU throughout the capture; its stack cannot be read "
			    "without stopping it");
		} else if (s->state == SLOT_NONE) {
			fail_thread(&t[i], -ENODATA, "the kernel gave no registers for it");
		}
	}
	copy_windows(ps, t, n);
	for (size_t i = 0; i < n; i++) {
		struct slot *s = &ps->slots[i];
		ssize_t len;

		if (s->state == SLOT_BLOCKED) {
			/* The same call at the same place: the copy is of that
			 * moment. */
			len = pread(s->fd, again, sizeof(again) - 1, 0);
			if (len < 0 || (again[len] = '\0', strcmp(again, s->line) != 0)) {
				t[i].approximate = true;
				t[i].approximate_why = "it ran while its stack was read";
			}
			s->rec.exec_vm = ps->key.exec_vm;
			s->rec.start_code = ps->key.start_code;
			s->rec.leader_start_ns = ps->key.leader_start_ns;
			bpfs_classify_syscall(&s->rec, &t[i]);
			bool inferred = false;
			uint64_t key = memo_key(&s->rec, ps->win + i * WINDOW);
			struct unw_memo *m = memo_slot(ps, t[i].tid);
			if (m && m->tid == t[i].tid && m->key == key) {
				memcpy(t[i].frames, m->frames, m->nframes * sizeof(t[i].frames[0]));
				t[i].nframes = m->nframes;
				ps->memo_hits++;
				continue_close(s);
				continue;
			}
			t[i].error = bpfs_unwind_sp_ip(ps->unw, ps->pid, &s->rec,
						       ps->win + i * WINDOW, &t[i], &inferred);
			if (t[i].error)
				t[i].error_why = "its stack could not be unwound";
			if (inferred && !t[i].approximate) {
				t[i].approximate = true;
				t[i].approximate_why =
				    "its frame pointer was found on the stack, and the "
				    "unwind did not reach the thread's first function";
			}
			uint64_t *copy = !t[i].error && m && t[i].nframes
					     ? malloc(t[i].nframes * sizeof(*copy))
					     : NULL;
			if (copy) {
				memcpy(copy, t[i].frames, t[i].nframes * sizeof(*copy));
				free(m->frames);
				ps->memo_used += m->tid == 0;
				*m = (struct unw_memo){t[i].tid, key, (uint16_t)t[i].nframes, copy};
			}
		} else if (t[i].sched_state != 'X' && s->state != SLOT_REUSED) {
			bpfs_classify_syscall(&s->rec, &t[i]);
		}
		if (s->fd >= 0)
			close(s->fd);
		s->fd = -1;
	}
}

static int tid_cmp(const void *a, const void *b)
{
	const struct bpfstack_thread *x = a, *y = b;

	return (x->tid > y->tid) - (x->tid < y->tid);
}

static int name_cmp(const void *a, const void *b)
{
	unsigned long x = strtoul(a, NULL, 10), y = strtoul(b, NULL, 10);

	return (x > y) - (x < y);
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
	if (bpfs_unwind(ps->unw, ps->pid, &r, ustack, &tmp) == 0 && tmp.nframes > 0) {
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
	char names[BPFS_PERF_MAX][16];
	struct bpfstack_thread *again = calloc(BPFS_PERF_MAX, sizeof(*again));
	struct bpfstack_thread *orig[BPFS_PERF_MAX];
	size_t n = 0;

	if (!again)
		return;
	for (size_t i = 0; i < ps->n && n < BPFS_PERF_MAX; i++)
		if (ps->t[i].error == -EBUSY) {
			snprintf(names[n], sizeof(names[n]), "%u", ps->t[i].tid);
			orig[n++] = &ps->t[i];
		}
	ps->nbusy = 0;
	if (n)
		capture_chunk(ps, taskfd, names, again, n);
	for (size_t i = 0; i < n; i++)
		if (again[i].error != -EBUSY && again[i].sched_state != 'X' && !again[i].error)
			*orig[i] = again[i];
	free(again);
}

/* The thread directory names of pid, sorted by tid; *n of them. */
static int list_tids(int taskfd, char (**names)[16], size_t *n, bool *truncated)
{
	int fd = dup(taskfd);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	size_t cap = 0;

	*names = NULL;
	*n = 0;
	*truncated = false;
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((de = readdir(dir))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9' || strlen(de->d_name) > 15)
			continue;
		if (*n == MAX_THREADS) {
			*truncated = true;
			break;
		}
		if (*n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			char(*p)[16] = realloc(*names, ncap * sizeof(**names));

			if (!p) {
				closedir(dir);
				return -ENOMEM;
			}
			*names = p;
			cap = ncap;
		}
		memcpy((*names)[(*n)++], de->d_name, strlen(de->d_name) + 1);
	}
	closedir(dir);
	if (*n > 1) /* qsort wants an array, and no entries may mean none */
		qsort(*names, *n, sizeof(**names), name_cmp);
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
	memcpy(ps->prev, t, n * sizeof(*t));
	ps->nprev = n;
	ps->prev_pid = ps->pid;
	ps->prev_start = ps->start;
}

int procstack_capture(struct procstack *ps, pid_t pid, struct bpfstack_thread **threads, size_t *n,
		      char *err, size_t errlen)
{
	char path[64], (*names)[16] = NULL;
	size_t count = 0;
	bool truncated;
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
	rc = taskfd < 0 ? -errno : list_tids(taskfd, &names, &count, &truncated);
	if (rc == 0)
		rc = read_maps(ps, procfd);
	if (rc == -EACCES || rc == -EPERM) {
		snprintf(
		    err, errlen,
		    "the kernel refuses scoped (uid %u) the memory of process %d (ptrace rules: "
		    "another user's or a setuid process)",
		    (unsigned)geteuid(), (int)pid);
		rc = -EPERM;
	} else if (rc < 0) {
		snprintf(err, errlen, "cannot read process %d: %s", (int)pid, strerror(-rc));
		rc = rc == -ENOENT ? -ESRCH : rc;
	}
	ps->pid = pid;
	ps->key.leader_start_ns = 0;
	ps->nbusy = 0;
	ps->reused = 0;
	ps->start = rc == 0 ? proc_start(procfd, pid) : 0;
	ps->t = rc == 0 ? calloc(count ? count : 1, sizeof(*ps->t)) : NULL;
	if (rc == 0 && !ps->t) {
		snprintf(err, errlen, "out of memory for %zu threads", count);
		rc = -ENOMEM;
	}
	if (rc == 0) {
		ps->n = count;
		memo_begin(ps, count);
		status_begin(ps, pid, ps->start);
		for (size_t i = 0; i < count; i += CHUNK)
			capture_chunk(ps, taskfd, names + i, ps->t + i,
				      count - i < CHUNK ? count - i : CHUNK);
		status_end(ps);
		if (ps->n > 1)
			qsort(ps->t, ps->n, sizeof(*ps->t), tid_cmp);
		if (ps->nbusy > 0) {
			bpfs_perf_sample(ps->busy, ps->nbusy, PERF_TIMEOUT_MS, on_sample, ps);
			retry_running(ps, taskfd);
		}
		/* Every thread refused: the process, not a thread, is out of reach. */
		size_t refused = 0;
		for (size_t i = 0; i < ps->n; i++)
			refused += ps->t[i].error == -EPERM;
		if (ps->n && refused == ps->n) {
			snprintf(err, errlen,
				 "the kernel refuses scoped (uid %u) the registers and memory of "
				 "process %d (ptrace rules: another user's or a setuid process)",
				 (unsigned)geteuid(), (int)pid);
			free(ps->t);
			rc = -EPERM;
		} else {
			keep(ps, ps->t, ps->n);
			*threads = ps->t;
			*n = ps->n;
			if (truncated)
				snprintf(
				    err, errlen,
				    "pid %d has more than %d threads; the first %d are captured",
				    (int)pid, MAX_THREADS, MAX_THREADS);
		}
		ps->t = NULL;
		ps->n = 0;
	}
	free(names);
	if (taskfd >= 0)
		close(taskfd);
	close(procfd);
	return rc;
}
