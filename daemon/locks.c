/* locks.c - the owners of the pthread mutexes that threads of a process wait
 * for, read from the target's memory.
 *
 * glibc 2.36's struct __pthread_mutex_s on 64-bit Linux (x86-64's
 * bits/struct_mutex.h, and the generic one for __WORDSIZE 64) starts with
 *   int __lock;            offset 0: the futex word
 *   unsigned int __count;  4: recursion count
 *   int __owner;           8: the owner's tid, set once it holds the lock
 *   unsigned int __nusers; 12
 *   int __kind;            16: PTHREAD_MUTEX_* type and flag bits
 * and a thread that waits for it sleeps in futex() on __lock: FUTEX_WAIT for
 * the value 2 (a normal, recursive, error-checking or adaptive mutex,
 * locked with waiters), FUTEX_WAIT for the owner's tid | FUTEX_WAITERS (a
 * robust mutex), or FUTEX_LOCK_PI (a priority-inheritance mutex, whose word
 * is the owner's tid).  glibc's internal locks and other programs' futexes
 * can wait the same way, so a word is taken for a held mutex only when
 * every field agrees: a plausible __kind, a __lock that says locked, and an
 * owner that is a live thread of the same process.  Condition variables and
 * semaphores wait for other values and never get this far. */
#include "locks.h"

#include "../bpf/bpfstack.h"
#include "../bpf/procstack.h"
#include "daemon.h"
#include "jfield.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define MUTEX_LOCK_OFF 0
#define MUTEX_OWNER_OFF 8
#define MUTEX_KIND_OFF 16
#define MUTEX_READ 20

/* __kind bits glibc defines (nptl/pthreadP.h): the type (0..3), robust 16,
 * priority inheritance 32, priority protection 64, process-shared 128,
 * elision 256 and 512, and the priority ceiling in the top 13 bits. */
#define KIND_KNOWN 0xfff803f3u
#define KIND_ROBUST 16u
#define KIND_PI 32u
#define KIND_PP 64u
#define FUTEX_TID_BITS 0x3fffffffu

/* Words already judged in this capture: many threads often wait for one lock. */
#define SEEN_MAX 64

struct seen {
	uint64_t addr;
	int how;
	uint32_t owner; /* 0: not a held lock */
	const char *class;
	char comm[16];
};

static int32_t word_at(const unsigned char *m, size_t off)
{
	int32_t v;
	memcpy(&v, m + off, sizeof v);
	return v;
}

bool locks_thread_comm(pid_t pid, uint32_t tid, char comm[16])
{
	char path[64], buf[32];
	snprintf(path, sizeof path, "/proc/%d/task/%u/comm", (int)pid, (unsigned)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n < 0)
		return false;
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n > 15)
		n = 15;
	memcpy(comm, buf, (size_t)n);
	comm[n] = '\0';
	for (char *c = comm; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return true;
}

/* Judges the word at s->addr: fills s->owner, s->class and s->comm when it
 * is a lock held by a thread of pid. */
static void judge(pid_t pid, struct seen *s)
{
	unsigned char m[MUTEX_READ];
	struct iovec local = {m, sizeof m}, remote = {(void *)(uintptr_t)s->addr, sizeof m};
	s->owner = 0;
	if (s->addr % 4 || process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof m)
		return;
	uint32_t lock = (uint32_t)word_at(m, MUTEX_LOCK_OFF);
	int32_t owner = word_at(m, MUTEX_OWNER_OFF);
	uint32_t kind = (uint32_t)word_at(m, MUTEX_KIND_OFF);
	bool mutex_kind = (kind & ~KIND_KNOWN) == 0 && (kind & 3u) <= 3;
	uint32_t who = 0;
	switch (s->how) {
	case BPFSTACK_LOCK_LLL:
		/* Locked (1) or locked with waiters (2), and a plain mutex. */
		if ((lock == 1 || lock == 2) && owner > 0 && mutex_kind &&
		    !(kind & (KIND_ROBUST | KIND_PI | KIND_PP))) {
			who = (uint32_t)owner;
			s->class = "pthread_mutex_t";
		}
		break;
	case BPFSTACK_LOCK_ROBUST:
		if ((lock & FUTEX_TID_BITS) && mutex_kind && (kind & KIND_ROBUST) &&
		    !(kind & KIND_PI)) {
			who = lock & FUTEX_TID_BITS;
			s->class = "pthread_mutex_t";
		}
		break;
	case BPFSTACK_LOCK_PI:
		/* The kernel's PI protocol: the word is the owner, mutex or not. */
		who = lock & FUTEX_TID_BITS;
		s->class = mutex_kind && (kind & KIND_PI) ? "pthread_mutex_t" : "PI futex";
		break;
	}
	if (who && locks_thread_comm(pid, who, s->comm))
		s->owner = who;
}

void locks_resolve(pid_t pid, struct stack_thread *t, size_t n, bool from_proc)
{
	struct seen seen[SEEN_MAX];
	size_t nseen = 0, next = 0;
	for (size_t i = 0; i < n; i++) {
		t[i].lock_owner = 0;
		t[i].lock_class = NULL;
		if (from_proc && !t[i].state) {
			uint64_t addr = 0;
			int how = BPFSTACK_LOCK_NONE;
			if (procstack_lock_wait(pid, t[i].tid, &addr, &how) == 1) {
				t[i].lock_addr = addr;
				t[i].lock_how = how;
			}
		}
		if (!t[i].lock_addr || t[i].lock_how == BPFSTACK_LOCK_NONE)
			continue;
		struct seen *s = NULL;
		for (size_t k = 0; k < nseen && !s; k++)
			if (seen[k].addr == t[i].lock_addr && seen[k].how == t[i].lock_how)
				s = &seen[k];
		if (!s) {
			/* Past SEEN_MAX distinct words, the oldest is judged again if met. */
			s = &seen[nseen < SEEN_MAX ? nseen++ : next++ % SEEN_MAX];
			*s = (struct seen){.addr = t[i].lock_addr, .how = t[i].lock_how};
			judge(pid, s);
		}
		if (s->owner) {
			t[i].lock_owner = s->owner;
			t[i].lock_class = s->class;
			memcpy(t[i].lock_owner_comm, s->comm, sizeof t[i].lock_owner_comm);
		}
		/* What the other sources say of such a wait, for a thread whose
		 * source said nothing (signal mode), or a robust mutex's waiter,
		 * which the syscall alone does not tell from another futex. */
		if (s->owner || (!t[i].state && t[i].lock_how != BPFSTACK_LOCK_ROBUST)) {
			t[i].state = "BLOCKED";
			t[i].blocked_in = "mutex";
		}
	}
}

static int waiter_cmp(const void *a, const void *b)
{
	const struct stack_thread *x = *(const struct stack_thread *const *)a;
	const struct stack_thread *y = *(const struct stack_thread *const *)b;
	if (x->lock_owner != y->lock_owner)
		return (x->lock_owner > y->lock_owner) - (x->lock_owner < y->lock_owner);
	if (x->lock_addr != y->lock_addr)
		return (x->lock_addr > y->lock_addr) - (x->lock_addr < y->lock_addr);
	return (x->tid > y->tid) - (x->tid < y->tid);
}

int locks_index_build(struct locks_index *ix, const struct stack_thread *t, size_t n)
{
	size_t w = 0;
	ix->w = NULL;
	ix->n = 0;
	for (size_t i = 0; i < n; i++)
		w += t[i].lock_owner != 0;
	if (!w)
		return 0;
	ix->w = malloc(w * sizeof *ix->w);
	if (!ix->w)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (t[i].lock_owner)
			ix->w[ix->n++] = &t[i];
	qsort(ix->w, ix->n, sizeof *ix->w, waiter_cmp);
	return 0;
}

void locks_index_free(struct locks_index *ix)
{
	free(ix->w);
	ix->w = NULL;
	ix->n = 0;
}

static void addr_json(struct jbuf *b, uint64_t addr)
{
	char hex[24];
	snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)addr);
	jf_str(b, "addr", hex);
}

void locks_waiting_json(struct jbuf *b, const struct stack_thread *t, const char *owner_name)
{
	if (!t->lock_owner)
		return;
	jb_key(b, "waiting_to_lock");
	jb_obj(b);
	addr_json(b, t->lock_addr);
	jf_str(b, "class", t->lock_class);
	jf_u64(b, "owner", t->lock_owner);
	jf_str(b, "owner_name", owner_name);
	jb_obj_end(b);
}

void locks_held_json(struct jbuf *b, const struct locks_index *ix, const struct stack_thread *t)
{
	/* The first waiter whose owner is t (the index is sorted by owner). */
	size_t lo = 0, hi = ix->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ix->w[mid]->lock_owner < t->tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == ix->n || ix->w[lo]->lock_owner != t->tid)
		return;
	jb_key(b, "locks_held");
	jb_arr(b);
	for (size_t i = lo; i < ix->n && ix->w[i]->lock_owner == t->tid;) {
		uint64_t addr = ix->w[i]->lock_addr;
		jb_obj(b);
		addr_json(b, addr);
		jf_str(b, "class", ix->w[i]->lock_class);
		jb_key(b, "waiters");
		jb_arr(b);
		for (; i < ix->n && ix->w[i]->lock_owner == t->tid && ix->w[i]->lock_addr == addr;
		     i++)
			jb_u64(b, ix->w[i]->tid);
		jb_arr_end(b);
		jb_obj_end(b);
	}
	jb_arr_end(b);
}
