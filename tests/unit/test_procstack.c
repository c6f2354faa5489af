/* test_procstack.c - tests of the /proc stack tier: the classifier from a
 * system call alone, and real captures of threads of this test parked in
 * known functions (names, states, frames that libdw names as the parking
 * function, the same frames from the second capture's memo), a thread
 * created between captures, a thread that moved or renamed itself between
 * captures, the unwinder's memory of a thread that came back to the same
 * wait (and not of one that waits there called from elsewhere), the files kept between captures,
 * their bound and their closing when the process exits, names kept while another thread ran and
 * read again after a rename (by write(2) and by io_uring), and a pid that does not exist. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../bpf/bpfs_int.h"
#include "../../bpf/procstack.h"

static void test_classify_syscall(void **state)
{
	(void)state;
	struct stk_rec r;
	struct bpfstack_thread t;
	static const struct {
		int64_t nr;
		uint64_t a1, a2, a3;
		char sched;
		const char *blocked, *jstate;
	} cases[] = {
	    {230, 0, 0, 0, 'S', "sleep", "TIMED_WAITING"},
	    {0, 3, 0, 1, 'S', "read", "WAITING"},
	    {202, 0x1000, 0x80, 2, 'S', "mutex", "BLOCKED"},  /* FUTEX_WAIT on a contended lock */
	    {202, 0x1000, 0x189, 0, 'S', "futex", "WAITING"}, /* a condition wait, no timeout */
	    {7, 0, 1, 100, 'S', "poll", "TIMED_WAITING"},
	    {7, 0, 1, (uint64_t)-1, 'S', "poll", "WAITING"},
	    {-1, 0, 0, 0, 'S', NULL, "RUNNABLE"}, /* in the kernel, not by a call */
	    {0, 0, 0, 0, 'R', NULL, "RUNNABLE"},
	    {0, 0, 0, 0, 'Z', NULL, "TERMINATED"},
	    {9999, 0, 0, 0, 'S', NULL, "WAITING"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		memset(&r, 0, sizeof r);
		memset(&t, 0, sizeof t);
		r.syscall_nr = cases[i].nr;
		r.args[0] = cases[i].a1;
		r.args[1] = cases[i].a2;
		r.args[2] = cases[i].a3;
		t.sched_state = cases[i].sched;
		bpfs_classify_syscall(&r, &t);
		if (cases[i].blocked)
			assert_non_null(t.blocked_in),
			    assert_string_equal(t.blocked_in, cases[i].blocked);
		else
			assert_null(t.blocked_in);
		assert_string_equal(t.jstate, cases[i].jstate);
	}
}

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static atomic_int parked, quit;
static atomic_long sleeper_tid, locker_tid;

__attribute__((noinline)) void procstack_test_sleep(void)
{
	atomic_store(&sleeper_tid, (long)syscall(SYS_gettid));
	atomic_fetch_add(&parked, 1);
	while (!atomic_load(&quit)) {
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
		__asm__ volatile("" ::: "memory");
	}
}

__attribute__((noinline)) void procstack_test_lock(void)
{
	atomic_store(&locker_tid, (long)syscall(SYS_gettid));
	atomic_fetch_add(&parked, 1);
	pthread_mutex_lock(&held);
	__asm__ volatile("" ::: "memory");
	pthread_mutex_unlock(&held);
}

static void *sleeper(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "ps-sleeper");
	procstack_test_sleep();
	return NULL;
}

static void *locker(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "ps-locker");
	procstack_test_lock();
	return NULL;
}

/* Whether one of t's frames is in the function called name. */
static bool has_function(Dwfl *dwfl, const struct bpfstack_thread *t, const char *name)
{
	for (size_t i = 0; i < t->nframes; i++) {
		Dwarf_Addr pc = t->frames[i] - (i > 0);
		Dwfl_Module *m = dwfl_addrmodule(dwfl, pc);
		const char *fn = m ? dwfl_module_addrname(m, pc) : NULL;
		if (fn && strcmp(fn, name) == 0)
			return true;
	}
	return false;
}

static const struct bpfstack_thread *find_tid(const struct bpfstack_thread *t, size_t n, long tid)
{
	for (size_t i = 0; i < n; i++)
		if ((long)t[i].tid == tid)
			return &t[i];
	return NULL;
}

/* libdw's view of this process, for naming the captured frames. */
static Dwfl *own_dwfl(void)
{
	static const Dwfl_Callbacks cb = {.find_elf = dwfl_linux_proc_find_elf,
					  .find_debuginfo = dwfl_standard_find_debuginfo};
	Dwfl *dwfl = dwfl_begin(&cb);
	assert_non_null(dwfl);
	dwfl_report_begin(dwfl);
	assert_int_equal(dwfl_linux_proc_report(dwfl, getpid()), 0);
	dwfl_report_end(dwfl, NULL, NULL);
	return dwfl;
}

/* Captures until the parked threads are seen in their waits (a thread can
 * be between two sleeps, or not yet at the lock). */
static struct bpfstack_thread *capture_parked(struct procstack *ps, size_t *n)
{
	char err[256];
	for (int tries = 0; tries < 100; tries++) {
		struct bpfstack_thread *t = NULL;
		assert_int_equal(procstack_capture(ps, getpid(), &t, n, err, sizeof err), 0);
		const struct bpfstack_thread *s = find_tid(t, *n, atomic_load(&sleeper_tid));
		const struct bpfstack_thread *l = find_tid(t, *n, atomic_load(&locker_tid));
		if (s && l && s->blocked_in && !strcmp(s->blocked_in, "sleep") && l->blocked_in &&
		    !strcmp(l->blocked_in, "mutex") && !s->approximate && !l->approximate)
			return t;
		free(t);
		usleep(5000);
	}
	fail_msg("the parked threads were never seen in their waits");
	return NULL;
}

static void test_capture_self(void **state)
{
	(void)state;
	pthread_t a, b;
	pthread_mutex_lock(&held);
	assert_int_equal(pthread_create(&a, NULL, sleeper, NULL), 0);
	assert_int_equal(pthread_create(&b, NULL, locker, NULL), 0);
	while (atomic_load(&parked) < 2)
		usleep(1000);

	Dwfl *dwfl = own_dwfl();

	struct procstack *ps = procstack_open();
	assert_non_null(ps);
	size_t n1, n2;
	struct bpfstack_thread *t1 = capture_parked(ps, &n1);
	const struct bpfstack_thread *s = find_tid(t1, n1, atomic_load(&sleeper_tid));
	const struct bpfstack_thread *l = find_tid(t1, n1, atomic_load(&locker_tid));
	assert_string_equal(s->comm, "ps-sleeper");
	assert_string_equal(s->jstate, "TIMED_WAITING");
	assert_true(has_function(dwfl, s, "procstack_test_sleep"));
	assert_string_equal(l->comm, "ps-locker");
	assert_string_equal(l->jstate, "BLOCKED");
	assert_true(has_function(dwfl, l, "procstack_test_lock"));
	/* The capturing thread itself runs: sorted by tid, every thread once. */
	for (size_t i = 1; i < n1; i++)
		assert_true(t1[i - 1].tid < t1[i].tid);

	/* Again: the locker did not move, so its frames come back the same
	 * (from the memo or a fresh unwind alike). */
	struct bpfstack_thread *t2 = capture_parked(ps, &n2);
	const struct bpfstack_thread *l2 = find_tid(t2, n2, atomic_load(&locker_tid));
	assert_int_equal(l2->nframes, l->nframes);
	assert_memory_equal(l2->frames, l->frames, l->nframes * sizeof l->frames[0]);
	/* It has not run since (same name, state and switch counters): its
	 * entry is the last capture's, with no read of its registers. */
	assert_true(l2->reused);
	assert_string_equal(l2->jstate, "BLOCKED");
	assert_string_equal(l2->blocked_in, "mutex");
	/* Renamed by another thread while it waits: it did not run, so its
	 * stack is the same, under its new name. */
	assert_int_equal(pthread_setname_np(b, "ps-renamed"), 0);
	size_t n3;
	struct bpfstack_thread *t3 = capture_parked(ps, &n3);
	const struct bpfstack_thread *l3 = find_tid(t3, n3, atomic_load(&locker_tid));
	assert_string_equal(l3->comm, "ps-renamed");
	assert_string_equal(l3->blocked_in, "mutex");
	assert_int_equal(l3->nframes, l->nframes);
	assert_memory_equal(l3->frames, l->frames, l->nframes * sizeof l->frames[0]);
	free(t3);

	atomic_store(&quit, 1);
	pthread_mutex_unlock(&held);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	free(t1);
	free(t2);
	procstack_close(ps);
	dwfl_end(dwfl);
}

static atomic_int napping_stop;

/* A thread that naps under the name it is given until told to stop. */
static void *napper(void *name)
{
	pthread_setname_np(pthread_self(), name);
	while (!atomic_load(&napping_stop))
		usleep(2000);
	return NULL;
}

static size_t open_fds(void)
{
	char path[64];
	size_t n = 0;
	for (int fd = 0; fd < 4096; fd++) {
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
		n += access(path, F_OK) == 0;
	}
	return n;
}

/* Descriptors open on files of this process's threads. */
static size_t task_fds(void)
{
	char path[64], to[256];
	size_t n = 0;
	for (int fd = 0; fd < 4096; fd++) {
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
		ssize_t len = readlink(path, to, sizeof to - 1);
		if (len > 0) {
			to[len] = '\0';
			n += strstr(to, "/task/") != NULL;
		}
	}
	return n;
}

static bool has_name(const struct bpfstack_thread *t, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(t[i].comm, name))
			return true;
	return false;
}

/* The files kept open between captures: a thread that exited is gone from
 * the next capture, one created since is in it under its name (even when it
 * took the old one's tid), and closing the state leaves no descriptor
 * behind. */
static void test_kept_files(void **state)
{
	(void)state;
	char err[256];
	size_t base = open_fds(), n;
	struct bpfstack_thread *t;
	struct procstack *ps = procstack_open();
	pthread_t a, b;
	assert_non_null(ps);
	atomic_store(&napping_stop, 0);
	assert_int_equal(pthread_create(&a, NULL, napper, "ps-old"), 0);
	for (int tries = 0; tries < 200; tries++) {
		assert_int_equal(procstack_capture(ps, getpid(), &t, &n, err, sizeof err), 0);
		bool seen = has_name(t, n, "ps-old");
		free(t);
		if (seen)
			break;
		usleep(5000);
	}
	assert_true(open_fds() > base);
	atomic_store(&napping_stop, 1);
	pthread_join(a, NULL);
	atomic_store(&napping_stop, 0);
	assert_int_equal(pthread_create(&b, NULL, napper, "ps-new"), 0);
	bool ok = false;
	for (int tries = 0; tries < 200 && !ok; tries++) {
		assert_int_equal(procstack_capture(ps, getpid(), &t, &n, err, sizeof err), 0);
		assert_false(has_name(t, n, "ps-old"));
		ok = has_name(t, n, "ps-new");
		for (size_t i = 1; i < n; i++)
			assert_true(t[i - 1].tid < t[i].tid);
		free(t);
		if (!ok)
			usleep(5000);
	}
	assert_true(ok);
	atomic_store(&napping_stop, 1);
	pthread_join(b, NULL);
	procstack_close(ps);
	assert_int_equal(open_fds(), base);
}

static pthread_mutex_t move_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t move_cv = PTHREAD_COND_INITIALIZER;
static int move_step; /* under move_mu: 0 park in a, 1 move to b, 2 quit */
static atomic_long mover_tid;

/* The mover waits while the step is still `step`. */
static void wait_past(int step)
{
	pthread_mutex_lock(&move_mu);
	while (move_step == step)
		pthread_cond_wait(&move_cv, &move_mu);
	pthread_mutex_unlock(&move_mu);
}

/* Two waits the stacks tell apart. */
__attribute__((noinline)) void procstack_test_park_a(void)
{
	wait_past(0);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void procstack_test_park_b(void)
{
	wait_past(1);
	__asm__ volatile("" ::: "memory");
}

static void *mover(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "ps-mover");
	atomic_store(&mover_tid, (long)syscall(SYS_gettid));
	procstack_test_park_a();
	prctl(PR_SET_NAME, "ps-moved");
	procstack_test_park_b();
	return NULL;
}

/* Tells the mover to go on to step (its next wait, or its end). */
static void move_to(int step)
{
	pthread_mutex_lock(&move_mu);
	move_step = step;
	pthread_cond_broadcast(&move_cv);
	pthread_mutex_unlock(&move_mu);
}

/* Captures until the mover is seen, exact, in the function called fn. */
static struct bpfstack_thread *capture_mover(struct procstack *ps, Dwfl *dwfl, const char *fn,
					     size_t *n)
{
	char err[256];
	for (int tries = 0; tries < 200; tries++) {
		struct bpfstack_thread *t = NULL;
		assert_int_equal(procstack_capture(ps, getpid(), &t, n, err, sizeof err), 0);
		const struct bpfstack_thread *m = find_tid(t, *n, atomic_load(&mover_tid));
		if (m && !m->error && !m->approximate && has_function(dwfl, m, fn))
			return t;
		free(t);
		usleep(5000);
	}
	fail_msg("the mover was never seen in %s", fn);
	return NULL;
}

/* A thread that did not run keeps its entry; one that ran since (to
 * another wait, under a name it gave itself) is read afresh: the entry
 * kept from before it ran is never shown again. */
static void test_moved_thread(void **state)
{
	(void)state;
	Dwfl *dwfl = own_dwfl();
	pthread_t th;
	move_step = 0;
	atomic_store(&mover_tid, 0);
	assert_int_equal(pthread_create(&th, NULL, mover, NULL), 0);
	while (!atomic_load(&mover_tid))
		usleep(1000);
	struct procstack *ps = procstack_open();
	assert_non_null(ps);
	size_t n;
	struct bpfstack_thread *t = capture_mover(ps, dwfl, "procstack_test_park_a", &n);
	free(t);
	char err[256];
	assert_int_equal(procstack_capture(ps, getpid(), &t, &n, err, sizeof err), 0);
	const struct bpfstack_thread *m = find_tid(t, n, atomic_load(&mover_tid));
	assert_non_null(m);
	assert_true(m->reused);
	assert_string_equal(m->comm, "ps-mover");
	assert_true(has_function(dwfl, m, "procstack_test_park_a"));
	free(t);

	move_to(1);
	t = capture_mover(ps, dwfl, "procstack_test_park_b", &n);
	m = find_tid(t, n, atomic_load(&mover_tid));
	assert_string_equal(m->comm, "ps-moved");
	assert_false(has_function(dwfl, m, "procstack_test_park_a"));
	free(t);

	move_to(2);
	pthread_join(th, NULL);
	procstack_close(ps);
	dwfl_end(dwfl);
}

/* Two waits on a pipe the stacks tell apart, with frames alike: the stack
 * and instruction pointers of the read can be the same in both, and only
 * the return address on the stack says which function waits.  (syscall(2),
 * not read(3): the sanitizers' interceptor of read has CFI libdw cannot
 * unwind through.) */
__attribute__((noinline)) char procstack_test_via_a(int fd)
{
	char c = 0;
	if (syscall(SYS_read, fd, &c, 1) != 1)
		c = 'q';
	__asm__ volatile("" ::: "memory");
	return c;
}

__attribute__((noinline)) char procstack_test_via_b(int fd)
{
	char c = 0;
	if (syscall(SYS_read, fd, &c, 1) != 1)
		c = 'q';
	__asm__ volatile("" ::: "memory");
	return c == 'z' ? 'y' : c;
}

/* The bouncer: a thread of a child process (its stack shallow, so the
 * copied window holds all of it) that says its tid, then waits in via_a or
 * via_b as the byte last read says and acknowledges each byte. */
static int bounce_in, bounce_ack;

static void *bouncer(void *arg)
{
	(void)arg;
	int32_t tid = (int32_t)syscall(SYS_gettid);
	char next = 'a';
	if (write(bounce_ack, &tid, sizeof tid) != sizeof tid)
		return NULL;
	while (next == 'a' || next == 'b') {
		next =
		    next == 'a' ? procstack_test_via_a(bounce_in) : procstack_test_via_b(bounce_in);
		if (write(bounce_ack, "k", 1) != 1)
			break;
	}
	return NULL;
}

/* Captures the bouncer until it is seen exact in fn and not in other;
 * returns that capture's count of unwinds the unwinder's memory answered,
 * and (window, when not NULL) the bytes of stack it copied for it. */
static size_t capture_bouncer(struct procstack *ps, Dwfl *dwfl, pid_t pid, int32_t tid,
			      const char *fn, const char *other, uint32_t *window)
{
	char err[256];
	for (int tries = 0; tries < 200; tries++) {
		struct bpfstack_thread *t = NULL;
		struct procstack_stats st;
		size_t n;
		assert_int_equal(procstack_capture(ps, pid, &t, &n, err, sizeof err), 0);
		procstack_last_stats(ps, &st);
		const struct bpfstack_thread *b = find_tid(t, n, tid);
		assert_non_null(b);
		bool seen = !b->error && !b->approximate && has_function(dwfl, b, fn);
		if (seen && has_function(dwfl, b, other))
			fail_msg("the bouncer is shown in %s and in %s", fn, other);
		if (window)
			*window = b->window_bytes;
		free(t);
		if (seen)
			return st.memo_hits;
		usleep(5000);
	}
	fail_msg("the bouncer was never seen in %s", fn);
	return 0;
}

/* A thread that ran and came back to the same wait is answered from the
 * unwinder's memory (the same registers, the same words where the unwind
 * read the stack); one that waits at the same place called from another
 * function is unwound afresh, never given the frames remembered. */
static void test_unwind_memo(void **state)
{
	(void)state;
	int in[2], ack[2];
	char k;
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(ack), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		pthread_t th;
		close(in[1]);
		close(ack[0]);
		bounce_in = in[0];
		bounce_ack = ack[1];
		if (pthread_create(&th, NULL, bouncer, NULL) == 0)
			pthread_join(th, NULL);
		_exit(0);
	}
	close(in[0]);
	close(ack[1]);
	int32_t tid;
	assert_int_equal(read(ack[0], &tid, sizeof tid), sizeof tid);
	/* fork keeps the layout: this process's map names the child's frames. */
	Dwfl *dwfl = own_dwfl();
	struct procstack *ps = procstack_open();
	assert_non_null(ps);
	capture_bouncer(ps, dwfl, pid, tid, "procstack_test_via_a", "procstack_test_via_b", NULL);
	size_t hits = 0;
	uint32_t window = 0;
	for (int i = 0; i < 5 && !hits; i++) {
		assert_int_equal(write(in[1], "a", 1), 1);
		assert_int_equal(read(ack[0], &k, 1), 1);
		hits = capture_bouncer(ps, dwfl, pid, tid, "procstack_test_via_a",
				       "procstack_test_via_b", &window);
	}
	assert_true(hits > 0);
	/* Read again, its window was what its last unwind read: the rest of
	 * sp's page (its stack is shallow), not WINDOW's two pages. */
	assert_true(window > 0 && window <= 4096);
	assert_int_equal(write(in[1], "b", 1), 1);
	assert_int_equal(read(ack[0], &k, 1), 1);
	capture_bouncer(ps, dwfl, pid, tid, "procstack_test_via_b", "procstack_test_via_a", NULL);
	assert_int_equal(write(in[1], "a", 1), 1);
	assert_int_equal(read(ack[0], &k, 1), 1);
	capture_bouncer(ps, dwfl, pid, tid, "procstack_test_via_a", "procstack_test_via_b", NULL);
	close(in[1]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	close(ack[0]);
	procstack_close(ps);
	dwfl_end(dwfl);
}

/* The descriptors kept are within a quarter of RLIMIT_NOFILE, and threads
 * past that bound are still captured (their files opened and closed). */
static void test_fd_bound(void **state)
{
	(void)state;
	struct rlimit old, low;
	enum { NAPPERS = 24 };
	pthread_t th[NAPPERS];
	char names[NAPPERS][24], err[256];
	size_t base = open_fds();
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = base + 64 < old.rlim_cur ? base + 64 : old.rlim_cur;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	struct procstack *ps = procstack_open();
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	assert_non_null(ps);
	atomic_store(&napping_stop, 0);
	for (int i = 0; i < NAPPERS; i++) {
		snprintf(names[i], sizeof names[i], "ps-nap-%d", i);
		assert_int_equal(pthread_create(&th[i], NULL, napper, names[i]), 0);
	}
	for (int round = 0; round < 3; round++) {
		struct bpfstack_thread *t;
		size_t n;
		bool all = false;
		for (int tries = 0; tries < 200 && !all; tries++) {
			assert_int_equal(procstack_capture(ps, getpid(), &t, &n, err, sizeof err),
					 0);
			all = true;
			for (int i = 0; i < NAPPERS; i++)
				all = all && has_name(t, n, names[i]);
			free(t);
			if (!all)
				usleep(5000);
		}
		assert_true(all);
		assert_true(procstack_kept_fds(ps) <= low.rlim_cur / 4);
		assert_true(procstack_kept_fds(ps) > 0);
		assert_true(task_fds() <= low.rlim_cur / 4);
	}
	atomic_store(&napping_stop, 1);
	for (int i = 0; i < NAPPERS; i++)
		pthread_join(th[i], NULL);
	procstack_release(ps);
	assert_int_equal(procstack_kept_fds(ps), 0);
	assert_int_equal(task_fds(), 0);
	procstack_close(ps);
	assert_int_equal(open_fds(), base);
}

/* The files kept for a process that exited are closed by
 * procstack_forget_gone(), and only then. */
static void test_forget_gone(void **state)
{
	(void)state;
	char err[256];
	struct bpfstack_thread *t = NULL;
	size_t n = 0;
	int ready[2];
	assert_int_equal(pipe(ready), 0);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		close(ready[0]);
		(void)!write(ready[1], "x", 1);
		for (;;)
			pause();
	}
	close(ready[1]);
	char c;
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	struct procstack *ps = procstack_open();
	int rc = ps ? procstack_capture(ps, child, &t, &n, err, sizeof err) : -ENOMEM;
	size_t kept = procstack_kept_fds(ps);
	procstack_forget_gone(ps); /* still there: kept */
	size_t still = procstack_kept_fds(ps);
	/* The child goes before any assertion can leave it behind. */
	kill(child, SIGKILL);
	assert_int_equal(waitpid(child, NULL, 0), child);
	assert_int_equal(rc, 0);
	assert_true(n >= 1); /* a sanitizer's runtime may add a thread */
	free(t);
	assert_true(kept > 0);
	assert_int_equal(still, kept);
	procstack_forget_gone(ps);
	assert_int_equal(procstack_kept_fds(ps), 0);
	procstack_close(ps);
}

/* A thread that waits for commands on its own condition variable (a
 * futex: no write system call), runs each, counts it done, and waits
 * again. */
struct cmd_thread {
	const char *name;
	void (*fn)(struct cmd_thread *);
	const char *arg;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int asked, done; /* under mu */
	bool quit;	 /* under mu */
	atomic_long tid;
	int result;
};

static void *cmd_main(void *arg)
{
	struct cmd_thread *c = arg;
	pthread_setname_np(pthread_self(), c->name); /* itself: prctl, no write */
	atomic_store(&c->tid, (long)syscall(SYS_gettid));
	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (c->asked == c->done && !c->quit)
			pthread_cond_wait(&c->cv, &c->mu);
		if (c->quit)
			break;
		pthread_mutex_unlock(&c->mu);
		c->fn(c);
		pthread_mutex_lock(&c->mu);
		c->done++;
		pthread_cond_broadcast(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

static void cmd_start(struct cmd_thread *c)
{
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->asked = c->done = 0;
	c->quit = false;
	atomic_store(&c->tid, 0);
	assert_int_equal(pthread_create(&c->th, NULL, cmd_main, c), 0);
	while (!atomic_load(&c->tid))
		usleep(1000);
}

/* Runs c's command once, with arg, and waits until it is done. */
static int cmd_run(struct cmd_thread *c, const char *arg)
{
	pthread_mutex_lock(&c->mu);
	c->arg = arg;
	c->asked++;
	pthread_cond_broadcast(&c->cv);
	while (c->done < c->asked)
		pthread_cond_wait(&c->cv, &c->mu);
	pthread_mutex_unlock(&c->mu);
	return c->result;
}

static void cmd_stop(struct cmd_thread *c)
{
	pthread_mutex_lock(&c->mu);
	c->quit = true;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->th, NULL);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
}

static void spin_a_while(struct cmd_thread *c)
{
	volatile unsigned long n = 0;
	for (int i = 0; i < 200000; i++)
		n += (unsigned long)i;
	c->result = (int)(n & 1);
}

static struct cmd_thread keeper = {.name = "ps-keep"};

static void idle_cmd(struct cmd_thread *c)
{
	(void)c;
}

/* pthread_setname_np on another thread: a write(2) to its comm file. */
static void rename_keeper(struct cmd_thread *c)
{
	c->result = pthread_setname_np(keeper.th, c->arg);
}

/* Captures this process; *k: the keeper's entry (must be there). */
static struct bpfstack_thread *
capture_keeper(struct procstack *ps, const struct bpfstack_thread **k, struct procstack_stats *st)
{
	char err[256];
	struct bpfstack_thread *t = NULL;
	size_t n;
	assert_int_equal(procstack_capture(ps, getpid(), &t, &n, err, sizeof err), 0);
	procstack_last_stats(ps, st);
	assert_int_equal(st->threads, n);
	*k = find_tid(t, n, atomic_load(&keeper.tid));
	assert_non_null(*k);
	return t;
}

/* Captures until the keeper keeps its entry (it has settled in its wait). */
static void settle_keeper(struct procstack *ps)
{
	for (int tries = 0; tries < 200; tries++) {
		struct procstack_stats st;
		const struct bpfstack_thread *k;
		struct bpfstack_thread *t = capture_keeper(ps, &k, &st);
		bool kept = k->reused;
		free(t);
		if (kept)
			return;
		usleep(5000);
	}
	fail_msg("the keeper never kept its entry");
}

/* Names of threads that did not run are kept when the threads that ran
 * made no write system call (their names cannot have changed), and read
 * again after one renamed another. */
static void test_names_kept(void **state)
{
	(void)state;
	struct cmd_thread runner = {.name = "ps-runner", .fn = spin_a_while};
	struct cmd_thread namer = {.name = "ps-namer", .fn = rename_keeper};
	keeper.fn = idle_cmd;
	cmd_start(&keeper);
	cmd_start(&runner);
	cmd_start(&namer);
	struct procstack *ps = procstack_open();
	assert_non_null(ps);
	struct procstack_stats st;
	const struct bpfstack_thread *k, *r;
	struct bpfstack_thread *t;
	settle_keeper(ps);

	/* A thread ran without writing: the keeper's entry and name are kept,
	 * no name is read again. */
	for (int i = 0; i < 3; i++) {
		cmd_run(&runner, NULL);
		t = capture_keeper(ps, &k, &st);
		r = find_tid(t, st.threads, atomic_load(&runner.tid));
		assert_non_null(r);
		assert_false(r->reused); /* it ran */
		assert_true(k->reused);
		assert_string_equal(k->comm, "ps-keep");
		assert_true(st.reused > 0);
		assert_int_equal(st.names_read, 0);
		free(t);
	}

	/* Another thread renames the keeper, which does not run: the name is
	 * read again, the entry kept. */
	assert_int_equal(cmd_run(&namer, "ps-keep-2"), 0);
	t = capture_keeper(ps, &k, &st);
	assert_true(k->reused);
	assert_string_equal(k->comm, "ps-keep-2");
	assert_true(st.names_read > 0);
	free(t);
	/* And the rename is kept: a thread runs, nothing is written. */
	cmd_run(&runner, NULL);
	t = capture_keeper(ps, &k, &st);
	assert_string_equal(k->comm, "ps-keep-2");
	assert_int_equal(st.names_read, 0);
	free(t);

	procstack_close(ps);
	cmd_stop(&namer);
	cmd_stop(&runner);
	cmd_stop(&keeper);
}

/* A ring of one entry, set up with the raw system calls. */
struct ring {
	int fd;
	void *sq, *cq;
	size_t sq_len, cq_len, sqes_len;
	struct io_uring_sqe *sqes;
	struct io_uring_params p;
};

static int ring_open(struct ring *r)
{
	memset(r, 0, sizeof *r);
	r->fd = (int)syscall(SYS_io_uring_setup, 1, &r->p);
	if (r->fd < 0)
		return -errno;
	r->sq_len = r->p.sq_off.array + r->p.sq_entries * sizeof(unsigned);
	r->cq_len = r->p.cq_off.cqes + r->p.cq_entries * sizeof(struct io_uring_cqe);
	r->sqes_len = r->p.sq_entries * sizeof(struct io_uring_sqe);
	r->sq =
	    mmap(NULL, r->sq_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, IORING_OFF_SQ_RING);
	r->cq =
	    mmap(NULL, r->cq_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, IORING_OFF_CQ_RING);
	r->sqes =
	    mmap(NULL, r->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, IORING_OFF_SQES);
	if (r->sq == MAP_FAILED || r->cq == MAP_FAILED || r->sqes == MAP_FAILED)
		return -ENOMEM;
	return 0;
}

static void ring_close(struct ring *r)
{
	munmap(r->sq, r->sq_len);
	munmap(r->cq, r->cq_len);
	munmap(r->sqes, r->sqes_len);
	close(r->fd);
}

/* Writes buf to fd through the ring and waits: the write's result. */
static int ring_write(struct ring *r, int fd, const char *buf, size_t len)
{
	unsigned *tail = (unsigned *)((char *)r->sq + r->p.sq_off.tail);
	unsigned mask = *(unsigned *)((char *)r->sq + r->p.sq_off.ring_mask);
	unsigned *array = (unsigned *)((char *)r->sq + r->p.sq_off.array);
	unsigned at = *tail & mask;
	memset(&r->sqes[at], 0, sizeof r->sqes[at]);
	r->sqes[at].opcode = IORING_OP_WRITE;
	r->sqes[at].fd = fd;
	r->sqes[at].addr = (uint64_t)(uintptr_t)buf;
	r->sqes[at].len = (unsigned)len;
	array[at] = at;
	__atomic_store_n(tail, *tail + 1, __ATOMIC_RELEASE);
	if (syscall(SYS_io_uring_enter, r->fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
		return -errno;
	unsigned *head = (unsigned *)((char *)r->cq + r->p.cq_off.head);
	unsigned cmask = *(unsigned *)((char *)r->cq + r->p.cq_off.ring_mask);
	struct io_uring_cqe *cqes = (struct io_uring_cqe *)((char *)r->cq + r->p.cq_off.cqes);
	int res = cqes[__atomic_load_n(head, __ATOMIC_ACQUIRE) & cmask].res;
	__atomic_store_n(head, *head + 1, __ATOMIC_RELEASE);
	return res;
}

static struct ring uring;

/* Renames the keeper through io_uring: an io-wq worker thread of this
 * process writes its comm file; no thread makes a write system call. */
static void uring_rename_keeper(struct cmd_thread *c)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/task/%ld/comm", atomic_load(&keeper.tid));
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	c->result = fd < 0 ? -errno : ring_write(&uring, fd, c->arg, strlen(c->arg));
	if (fd >= 0)
		close(fd);
}

/* The rename no write system call counts: while the process has an
 * io_uring worker thread, names are read again whenever a thread ran. */
static void test_names_io_uring(void **state)
{
	(void)state;
	int rc = ring_open(&uring);
	if (rc < 0) {
		if (uring.fd >= 0)
			ring_close(&uring);
		print_message(
		    "io_uring unavailable here (%s): the rename through it is not tried\n",
		    strerror(-rc));
		skip();
	}
	struct cmd_thread namer = {.name = "ps-uring", .fn = uring_rename_keeper};
	keeper.fn = idle_cmd;
	cmd_start(&keeper);
	cmd_start(&namer);
	struct procstack *ps = procstack_open();
	assert_non_null(ps);
	struct procstack_stats st;
	const struct bpfstack_thread *k;
	struct bpfstack_thread *t;
	settle_keeper(ps);
	/* The first makes the worker (a thread came), the second is done by
	 * the worker made then: the names of both show. */
	const char *names[] = {"ps-uring-1", "ps-uring-2", "ps-uring-3"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		assert_int_equal(cmd_run(&namer, names[i]), (int)strlen(names[i]));
		t = capture_keeper(ps, &k, &st);
		assert_string_equal(k->comm, names[i]);
		if (i > 0) {
			assert_true(k->reused);
			assert_true(st.names_read > 0);
		}
		free(t);
	}
	procstack_close(ps);
	/* The worker ends with the thread that made it. */
	cmd_stop(&namer);
	cmd_stop(&keeper);
	ring_close(&uring);
}

/* ---- the reads in two halves at once (halves.h) */

/* tests/helpers/plain_threads with `extra` idle threads, its stdin held
 * (it exits at EOF); *pid once it said "ready". */
static FILE *plain_start(int extra, pid_t *pid, int *in)
{
	const char *top = getenv("TOP"), *build = getenv("BUILD");
	char path[PATH_MAX], arg[16], line[128];
	int p_in[2], p_out[2];
	snprintf(path, sizeof path, "%s/%s/tests/helpers/plain_threads", top ? top : ".",
		 build ? build : "build");
	if (access(path, X_OK) != 0)
		fail_msg("%s is not built (make builds it with the tests)", path);
	snprintf(arg, sizeof arg, "%d", extra);
	assert_int_equal(pipe(p_in), 0);
	assert_int_equal(pipe(p_out), 0);
	*pid = fork();
	assert_true(*pid >= 0);
	if (*pid == 0) {
		dup2(p_in[0], 0);
		dup2(p_out[1], 1);
		close(p_in[1]);
		close(p_out[0]);
		alarm(60); /* never outlives a broken test */
		execl(path, path, arg, (char *)NULL);
		_exit(127);
	}
	close(p_in[0]);
	close(p_out[1]);
	*in = p_in[1];
	FILE *out = fdopen(p_out[0], "r");
	assert_non_null(out);
	while (fgets(line, sizeof line, out))
		if (!strcmp(line, "ready\n"))
			return out;
	fail_msg("plain_threads did not start");
	return NULL;
}

static void plain_stop(FILE *out, pid_t pid, int in)
{
	close(in);
	fclose(out);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Whether a thread of plain_threads is one of its own parked threads: the
 * idle ones and the roles that wait for good. Its main thread and what a
 * sanitizer's runtime adds (TSan's background thread wakes every 100 ms)
 * may move between two captures, so only these are compared frame by
 * frame. */
static bool plain_parked(const char *comm)
{
	static const char *const parked[] = {"sleeper", "reader", "locker", "waiter"};
	if (!strncmp(comm, "idle-", 5))
		return true;
	for (size_t i = 0; i < sizeof parked / sizeof parked[0]; i++)
		if (!strcmp(comm, parked[i]))
			return true;
	return false;
}

/* Whether two captures of one process agree thread by thread: the same
 * tids and names, and for the threads that stay parked the same states,
 * frames and exactness. Returns how many were compared in full. */
static size_t assert_same_capture(const struct bpfstack_thread *a, size_t na,
				  const struct bpfstack_thread *b, size_t nb)
{
	size_t full = 0;
	assert_int_equal(na, nb);
	for (size_t i = 0; i < na; i++) {
		assert_int_equal(a[i].tid, b[i].tid);
		assert_string_equal(a[i].comm, b[i].comm);
		if (!plain_parked(a[i].comm))
			continue;
		assert_int_equal(a[i].sched_state, b[i].sched_state);
		assert_int_equal(a[i].error, b[i].error);
		assert_int_equal(a[i].approximate, b[i].approximate);
		assert_int_equal(a[i].nframes, b[i].nframes);
		assert_memory_equal(a[i].frames, b[i].frames,
				    a[i].nframes * sizeof(a[i].frames[0]));
		full++;
	}
	return full;
}

/* A capture whose reads run in two halves at once gives what one thread's
 * reads give, the first capture of a process and the next one (whose
 * threads did not run: each keeps its entry), and the helper took halves
 * of both where two CPUs are there to run them. */
static void test_parallel_reads(void **state)
{
	(void)state;
	char err[256];
	pid_t pid;
	int in;
	FILE *out = plain_start(300, &pid, &in);
	struct procstack *par = procstack_open(), *one = procstack_open();
	assert_non_null(par);
	assert_non_null(one);
	procstack_parallel(one, false);
	cpu_set_t cpus;
	bool two = sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) >= 2;
	for (int round = 0; round < 2; round++) {
		struct bpfstack_thread *tp = NULL, *to = NULL;
		size_t np = 0, no = 0;
		struct procstack_stats sp, so;
		/* The threads are parked: neither capture moves them, so the
		 * two see the same stacks. */
		assert_int_equal(procstack_capture(one, pid, &to, &no, err, sizeof err), 0);
		procstack_last_stats(one, &so);
		assert_int_equal(procstack_capture(par, pid, &tp, &np, err, sizeof err), 0);
		procstack_last_stats(par, &sp);
		assert_true(np >= 305);
		assert_true(assert_same_capture(tp, np, to, no) >= 304);
		size_t exact = 0;
		for (size_t i = 0; i < np; i++)
			exact += !tp[i].error && !tp[i].approximate && tp[i].nframes > 2;
		assert_true(exact >= 300);
		assert_int_equal(so.halves, 0);
		if (two)
			assert_true(sp.halves >= 1);
		else
			assert_int_equal(sp.halves, 0);
		if (round == 1)
			assert_true(sp.reused >= 300 && so.reused >= 300);
		free(tp);
		free(to);
	}
	procstack_close(par);
	procstack_close(one);
	plain_stop(out, pid, in);
	if (!two) {
		print_message("one CPU to run on: the serial path alone was compared\n");
		skip();
	}
}

static void test_no_such_process(void **state)
{
	(void)state;
	char err[256];
	struct bpfstack_thread *t = (void *)1;
	size_t n = 1;
	struct procstack *ps = procstack_open();
	pid_t gone = 4194303;
	while (kill(gone, 0) == 0 || errno != ESRCH)
		gone--;
	assert_int_equal(procstack_capture(ps, gone, &t, &n, err, sizeof err), -ESRCH);
	assert_null(t);
	assert_int_equal(n, 0);
	assert_non_null(strstr(err, "no process"));
	assert_int_equal(procstack_capture(ps, -1, &t, &n, err, sizeof err), -EINVAL);
	procstack_close(ps);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_classify_syscall), cmocka_unit_test(test_capture_self),
	    cmocka_unit_test(test_kept_files),	     cmocka_unit_test(test_moved_thread),
	    cmocka_unit_test(test_unwind_memo),	     cmocka_unit_test(test_fd_bound),
	    cmocka_unit_test(test_forget_gone),	     cmocka_unit_test(test_no_such_process),
	    cmocka_unit_test(test_names_kept),	     cmocka_unit_test(test_names_io_uring),
	    cmocka_unit_test(test_parallel_reads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
