/* test_agent_altstack.c - alternate signal stacks: the fatal-signal handlers
 * run on them (SA_ONSTACK), every thread the runtime registers gets one with
 * a guard page below it, it is unmapped when the thread exits, and a stack
 * the application installed itself is never replaced nor taken down.  The
 * stack-capture handler runs on them too: a thread at the end of its stack
 * still answers with its own frames, and one whose own alternate stack is
 * too small for the unwinder answers with an error instead of crashing.
 * The crash itself is tests/e2e/agent_overflow.sh. */
#include <alloca.h>
#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent.h"
#include "rt.h"
#include "scope.h"
#include "test_util.h"

static long page;

/* The permissions /proc/self/maps gives the mapping holding addr ("rw-p"),
 * or "" when nothing is mapped there. */
static void perms_at(const void *addr, char out[5])
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	uintptr_t a = (uintptr_t)addr;

	out[0] = 0;
	assert_non_null(f);
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		char p[5];
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, p) == 3 && a >= lo && a < hi) {
			memcpy(out, p, 5);
			break;
		}
	}
	fclose(f);
}

static int mapped(const void *addr)
{
	void *pg = (void *)((uintptr_t)addr & ~(uintptr_t)(page - 1));
	return msync(pg, (size_t)page, MS_ASYNC) == 0 || errno != ENOMEM;
}

/* Whether the calling thread had an alternate stack before the runtime saw
 * it: then a sanitizer's runtime installed one, and ours never appears. */
static int has_altstack(stack_t *ss)
{
	return sigaltstack(NULL, ss) == 0 && !(ss->ss_flags & SS_DISABLE);
}

static void check_ours(const stack_t *ss)
{
	char p[5];

	assert_true(ss->ss_size >= 64 * 1024);
	perms_at(ss->ss_sp, p);
	assert_string_equal(p, "rw-p");
	perms_at((char *)ss->ss_sp + ss->ss_size - 1, p);
	assert_string_equal(p, "rw-p");
	/* The page below is the guard. */
	perms_at((char *)ss->ss_sp - 1, p);
	assert_string_equal(p, "---p");
}

static int preinstalled;
/* SIGSEGV's action as sc_exit_init left it: cmocka installs its own while
 * the tests run. */
static struct sigaction segv;
/* Whether SIGSEGV was the default before: only then is the handler ours,
 * and only then are alternate stacks turned on. */
static int segv_was_default;

static void skip_unless_ours(void)
{
	if (!segv_was_default) {
		print_message("skip: SIGSEGV had a handler before libscope's (a sanitizer's?)\n");
		skip();
	}
}

static void test_handlers_on_stack(void **state)
{
	(void)state;
	stack_t ss;

	skip_unless_ours();
	assert_true(segv.sa_flags & SA_SIGINFO);
	assert_true(segv.sa_flags & SA_ONSTACK);
	if (preinstalled) {
		print_message(
		    "skip: the main thread had an alternate stack already (a sanitizer's)\n");
		skip();
	}
	/* The thread that started the agent (the main thread) got one. */
	assert_true(has_altstack(&ss));
	check_ours(&ss);
}

/* What a thread saw; asserted on the main thread, where cmocka can fail. */
struct seen {
	int had_before;	  /* it had an alternate stack before the runtime saw it */
	int named;	  /* scope_thread_name's result */
	stack_t ss;	  /* what it had while registered */
	stack_t own;	  /* the application's own stack (the keep test) */
	stack_t after;	  /* what it had after leaving the runtime */
	char perms[3][5]; /* bottom, top, guard page below */
};

static void *registered_thread(void *arg)
{
	struct seen *s = arg;
	s->had_before = has_altstack(&s->ss);
	s->named = scope_thread_name("alt-test"); /* registers the thread */
	if (has_altstack(&s->ss)) {
		perms_at(s->ss.ss_sp, s->perms[0]);
		perms_at((char *)s->ss.ss_sp + s->ss.ss_size - 1, s->perms[1]);
		perms_at((char *)s->ss.ss_sp - 1, s->perms[2]);
	}
	return NULL;
}

static void test_registered_thread_gets_one(void **state)
{
	(void)state;
	struct seen s;
	pthread_t th;

	skip_unless_ours();
	memset(&s, 0, sizeof s);
	assert_int_equal(pthread_create(&th, NULL, registered_thread, &s), 0);
	pthread_join(th, NULL);
	if (s.had_before) {
		print_message("skip: new threads start with an alternate stack (a sanitizer's)\n");
		skip();
	}
	assert_int_equal(s.named, 0);
	assert_true(s.ss.ss_size >= 64 * 1024);
	assert_string_equal(s.perms[0], "rw-p");
	assert_string_equal(s.perms[1], "rw-p");
	assert_string_equal(s.perms[2], "---p"); /* the guard */
	/* The thread has exited: its stack is unmapped, guard and all. */
	assert_false(mapped(s.ss.ss_sp));
	assert_false(mapped((char *)s.ss.ss_sp + s.ss.ss_size - 1));
	assert_false(mapped((char *)s.ss.ss_sp - 1));
}

static void *own_stack_thread(void *arg)
{
	struct seen *s = arg;
	stack_t mine = {.ss_size = 128 * 1024, .ss_flags = 0}, off = {.ss_flags = SS_DISABLE};

	/* A sanitizer's stack is its runtime's to take down at thread exit:
	 * not replaced here. */
	if ((s->had_before = has_altstack(&s->ss)))
		return NULL;
	mine.ss_sp = malloc(mine.ss_size);
	if (!mine.ss_sp || sigaltstack(&mine, NULL) != 0)
		return NULL;
	s->own = mine;
	s->named = scope_thread_name("alt-own");
	(void)has_altstack(&s->ss);
	sc_thread_unregister(); /* leaving the runtime must not take it down */
	(void)has_altstack(&s->after);
	(void)sigaltstack(&off, NULL);
	free(mine.ss_sp);
	return NULL;
}

static void test_own_stack_kept(void **state)
{
	(void)state;
	struct seen s;
	pthread_t th;

	memset(&s, 0, sizeof s);
	assert_int_equal(pthread_create(&th, NULL, own_stack_thread, &s), 0);
	pthread_join(th, NULL);
	if (s.had_before) {
		print_message("skip: new threads start with an alternate stack (a sanitizer's)\n");
		skip();
	}
	assert_non_null(s.own.ss_sp);
	assert_int_equal(s.named, 0);
	assert_ptr_equal(s.ss.ss_sp, s.own.ss_sp);
	assert_int_equal(s.ss.ss_size, s.own.ss_size);
	assert_ptr_equal(s.after.ss_sp, s.own.ss_sp);
	assert_false(s.after.ss_flags & SS_DISABLE);
}

/* ---- stack capture on the alternate stack ----
 *
 * Each case runs in a child process (this program with a mode argument):
 * the failure it guards against is the death of the process. */

#if defined(__SANITIZE_THREAD__)
#define TSAN 1
#else
#define TSAN 0
#endif

#define THREAD_STACK (256u * 1024)
#define NEAR_ROOM 512	      /* left below the parked frames: less than any signal frame */
#define SMALL_ALT (6u * 1024) /* a thread's own alternate stack, too small for the unwinder */

/* The captured thread, as the capturing one sees it. */
struct deep {
	char *lo;    /* the lowest byte of the thread's stack */
	int own_alt; /* the thread brings its own small alternate stack */
	int had_alt; /* it ran with an alternate stack (-1: could not set its own) */
	_Atomic uint32_t tid;
	_Atomic uint32_t parked;
	_Atomic uint32_t go; /* futex word */
};

static long futex(_Atomic uint32_t *word, int op, uint32_t val)
{
	return syscall(SYS_futex, (uint32_t *)word, op, val, NULL, NULL, 0);
}

/* The thread's functions are global and never inlined: the test finds them
 * by name (dladdr; the tests link with -rdynamic) in the captured frames. */
__attribute__((noinline)) void altstack_test_park(struct deep *d)
{
	atomic_store(&d->parked, 1);
	futex(&d->parked, FUTEX_WAKE_PRIVATE, 1);
	while (!atomic_load(&d->go))
		futex(&d->go, FUTEX_WAIT_PRIVATE, 0);
}

/* Descends in 4 KiB frames, then takes all but NEAR_ROOM of what is left
 * in one alloca(), and parks there. */
__attribute__((noinline)) void altstack_test_descend(struct deep *d)
{
	volatile char pad[4096];
	/* Measured from the frame's lowest local: a sanitizer widens frames. */
	size_t left = (size_t)((uintptr_t)pad - (uintptr_t)d->lo);

	pad[0] = 1;
	if (left > 4 * sizeof pad) {
		altstack_test_descend(d);
	} else {
		char *rest = alloca(left - NEAR_ROOM);
		rest[0] = 0;
		altstack_test_park(d);
		__asm__ volatile("" : : "r"(rest) : "memory"); /* rest lives past the call */
	}
	pad[1] = pad[0]; /* no tail call: every frame stays on the stack */
}

/* Makes the calls the bottom frames make, so that they are bound now: a
 * lazy binding there (syscall(), or a sanitizer's alloca hooks) would
 * need more stack than is left. */
static __attribute__((noinline)) void bind_now(struct deep *d)
{
	char *p = alloca(16);

	p[0] = 0;
	futex(&d->tid, FUTEX_WAKE_PRIVATE, 1);
	__asm__ volatile("" : : "r"(p) : "memory");
}

__attribute__((noinline)) void *altstack_test_thread(void *arg)
{
	struct deep *d = arg;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = page + (SMALL_ALT + page - 1) / page * page;
	stack_t ss, prev;
	char *alt = NULL;

	if (d->own_alt) {
		/* Set before the runtime sees the thread, which then keeps it.
		 * A guard page right below: an overflow faults. */
		alt = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		d->had_alt = -1;
		if (alt != MAP_FAILED && mprotect(alt, page, PROT_NONE) == 0) {
			ss = (stack_t){.ss_sp = alt + page, .ss_size = SMALL_ALT};
			if (sigaltstack(&ss, &prev) == 0)
				d->had_alt = 0;
		}
		if (d->had_alt < 0) {
			altstack_test_park(d);
			return NULL;
		}
	}
	(void)scope_thread_name("deep"); /* registers: the runtime's alternate stack */
	d->had_alt = sigaltstack(NULL, &ss) == 0 && !(ss.ss_flags & SS_DISABLE);
	atomic_store(&d->tid, sc_gettid());
	bind_now(d);
	if (!d->own_alt) {
		altstack_test_descend(d);
		return NULL;
	}
	altstack_test_park(d);
	/* Back to the one it had before (a sanitizer's: its runtime unmaps
	 * whatever is installed when the thread exits). */
	(void)sigaltstack(&prev, NULL);
	munmap(alt, len);
	return NULL;
}

static int frame_is(uint64_t addr, const char *name)
{
	Dl_info info;

	return dladdr((void *)(uintptr_t)addr, &info) && info.dli_sname &&
	       strcmp(info.dli_sname, name) == 0;
}

/* The child's side: starts the thread, captures its stack with
 * sc_stack_answer() as the agent would, checks the reply.  0 when it is
 * right, 77 when this build cannot tell, 1 otherwise (with a message). */
static int capture_child(int own_alt)
{
	struct deep d = {.own_alt = own_alt};
	struct sc_buf out = {.max = 1u << 20};
	struct proto_msg req = {.type = PROTO_STACK_REQUEST, .req = 7}, m;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), used, at;
	int park = 0, descend = 0, start = 0, rc = 1;
	uint8_t raw[4];
	pthread_attr_t attr;
	pthread_t th;
	char *stack;

	sc_exit_init(); /* alternate stacks on, as sc_agent_start does */
	if (sc_stack_init() != 0) {
		fprintf(stderr, "sc_stack_init failed\n");
		return 1;
	}
	/* The thread's stack, with a guard page below: its end is known. */
	stack =
	    mmap(NULL, THREAD_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	d.lo = stack + page;
	pthread_attr_init(&attr);
	if (stack == MAP_FAILED || mprotect(stack, page, PROT_NONE) != 0 ||
	    pthread_attr_setstack(&attr, d.lo, THREAD_STACK - page) != 0 ||
	    pthread_create(&th, &attr, altstack_test_thread, &d) != 0) {
		fprintf(stderr, "cannot start a thread on a stack of our own\n");
		return 1;
	}
	while (!atomic_load(&d.parked))
		futex(&d.parked, FUTEX_WAIT_PRIVATE, 0);
	if (d.had_alt < 0) {
		fprintf(stderr, "cannot give the thread a %u-byte alternate stack\n", SMALL_ALT);
		goto out;
	}
	if (!d.had_alt) {
		fprintf(stderr,
			"skip: the thread has no alternate stack (SIGSEGV is not libscope's)\n");
		rc = 77;
		goto out;
	}

	uint32_t tid = atomic_load(&d.tid);
	memcpy(raw, &tid, sizeof raw);
	req.ntids = 1;
	req.tids_raw = raw;
	req.max_frames = PROTO_MAX_FRAMES;
	sc_stack_answer(&req, &out, sc_gettid());
	if (proto_decode(out.p, out.len, &m, &used) != PROTO_OK || m.type != PROTO_STACK_REPLY ||
	    m.tid != tid) {
		fprintf(stderr, "no STACK_REPLY for thread %u\n", tid);
		goto out;
	}
	if (own_alt) {
		/* Too small to unwind on: an error, and the thread lives on. */
		if (m.error == -ENOSPC && m.nframes == 0)
			rc = 0;
		else
			fprintf(stderr,
				"own %u-byte alternate stack: error %d, %u frames (want %d, 0)\n",
				SMALL_ALT, (int)m.error, m.nframes, -ENOSPC);
		goto out;
	}
	/* The frames are the thread's own: the walk went from the interrupted
	 * context up its real stack, to the function it started in. */
	for (at = 0; at < m.nframes; at++) {
		uint64_t a = proto_addr_at(&m, at) - (at > 0); /* a return address: the call */
		park |= frame_is(a, "altstack_test_park");
		descend += frame_is(a, "altstack_test_descend");
		start |= frame_is(a, "altstack_test_thread");
	}
	if (m.error == 0 && park && descend > 1 && start)
		rc = 0;
	else
		fprintf(
		    stderr,
		    "near its stack's end: error %d, %u frames; park %d, descend %d, thread %d\n",
		    (int)m.error, m.nframes, park, descend, start);
out:
	atomic_store(&d.go, 1);
	futex(&d.go, FUTEX_WAKE_PRIVATE, 1);
	pthread_join(th, NULL);
	sc_buf_free(&out);
	return rc;
}

/* Runs this program in mode; fails unless it exits 0, skips on 77. */
static void run_capture(const char *mode)
{
	int status;
	pid_t pid;

	if (TSAN) {
		/* TSan holds an asynchronous signal back until the thread enters
		 * one of its interceptors (this one parks in a raw futex: the
		 * capture times out), and SIGSEGV is TSan's, so the runtime gives
		 * no thread an alternate stack. */
		print_message("skip: ThreadSanitizer holds the signal back from a thread parked "
			      "outside its interceptors\n");
		skip();
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl("/proc/self/exe", "test_agent_altstack", mode, (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("%s: the process died of signal %d (the capture overflowed a stack)", mode,
			 WTERMSIG(status));
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77) {
		print_message("skip: %s: SIGSEGV or the alternate stack is a sanitizer's\n", mode);
		skip();
	}
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* A thread with almost no stack left is asked for its stack: the handler
 * runs on the alternate stack, and the frames are still the thread's. */
static void test_capture_near_stack_end(void **state)
{
	(void)state;
	run_capture("--near-end");
}

/* A thread whose own alternate stack is too small for the unwinder answers
 * with an error instead of overflowing it. */
static void test_capture_small_own_altstack(void **state)
{
	(void)state;
	run_capture("--small-altstack");
}

/* ---- a late start: threads the runtime knew before stacks were on ----
 *
 * In a child process of its own (this program with --late), where nothing
 * turned alternate stacks on yet: an application thread and a pool worker
 * register first, then sc_exit_init() (what sc_agent_start does) turns
 * them on.  Each gets one at its next runtime call (the worker before its
 * next task), with the guard page below. */

static _Atomic int late_stage; /* 1: the app thread registered; 2: stacks are on */

/* 0 when the calling thread has one of ours; else a reason bit. */
static int late_check(void)
{
	stack_t ss;
	char p[3][5];

	if (!has_altstack(&ss))
		return 1;
	perms_at(ss.ss_sp, p[0]);
	perms_at((char *)ss.ss_sp + ss.ss_size - 1, p[1]);
	perms_at((char *)ss.ss_sp - 1, p[2]);
	if (ss.ss_size < 64 * 1024 || strcmp(p[0], "rw-p") || strcmp(p[1], "rw-p") ||
	    strcmp(p[2], "---p"))
		return 2;
	return 0;
}

static void *late_app_thread(void *arg)
{
	int *rc = arg;
	stack_t ss;
	scope_t *s;

	if (scope_thread_name("late-app") != 0 || has_altstack(&ss)) {
		*rc = 4; /* registered with one: the start was not late */
		atomic_store(&late_stage, 1);
		return NULL;
	}
	atomic_store(&late_stage, 1);
	while (atomic_load(&late_stage) < 2)
		usleep(1000);
	/* The next runtime call. */
	if (scope_open(&s, NULL) != 0) {
		*rc = 8;
		return NULL;
	}
	*rc = late_check();
	scope_close(s);
	return NULL;
}

/* -1 when the joiner ran it itself (it helps): then it proves nothing. */
static int late_task(void *arg, void **res)
{
	(void)res;
	*(int *)arg = sc_gettid() == (uint32_t)getpid() ? -1 : late_check();
	return 0;
}

static int late_worker_probe(void *arg, void **res)
{
	(void)res;
	stack_t ss;
	*(int *)arg = sc_gettid() == (uint32_t)getpid() ? -1 : has_altstack(&ss);
	return 0;
}

static int late_child(void)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	struct sigaction segv_now;
	int app_rc = -1, worker_before = -1, worker_rc = -1;
	scope_pool_t *pool;
	pthread_t th;
	scope_t *s;
	stack_t ss;

	if (sigaction(SIGSEGV, NULL, &segv_now) != 0 || segv_now.sa_handler != SIG_DFL ||
	    (segv_now.sa_flags & SA_SIGINFO) || has_altstack(&ss))
		return 77; /* a sanitizer's handler or stack: ours never appear */
	pc.name = "late";
	pc.core_size = pc.max_size = 1;
	if (scope_pool_create(&pool, &pc) != 0)
		return 10;
	cfg.pool = pool;
	/* The worker registers and runs a task with no stack on. */
	if (scope_open(&s, &cfg) != 0 ||
	    scope_fork(s, late_worker_probe, &worker_before, NULL) != 0 || scope_join(s) != 0)
		return 11;
	scope_close(s);
	if (pthread_create(&th, NULL, late_app_thread, &app_rc) != 0)
		return 12;
	while (atomic_load(&late_stage) < 1)
		usleep(1000);
	sc_exit_init(); /* the late start */
	atomic_store(&late_stage, 2);
	pthread_join(th, NULL);
	/* The same worker (the pool's only one), its next task. */
	for (int i = 0; i < 100 && worker_rc < 0; i++) {
		if (scope_open(&s, &cfg) != 0 || scope_fork(s, late_task, &worker_rc, NULL) != 0)
			return 13;
		usleep(1000); /* for the worker, not the joiner, to take it */
		if (scope_join(s) != 0)
			return 13;
		scope_close(s);
	}
	scope_pool_destroy(pool);
	if (app_rc || worker_before || worker_rc || late_check())
		fprintf(stderr,
			"late start: app thread %d, worker before %d, worker after %d, "
			"main %d\n",
			app_rc, worker_before, worker_rc, late_check());
	if (worker_before)
		return 14; /* it had one before: the start was not late */
	if (app_rc)
		return 20 + app_rc;
	return worker_rc ? 40 + worker_rc : 0;
}

/* Threads registered before a late agent start get their alternate stacks
 * too (the crash of their stack overflow is then reported). */
static void test_late_start(void **state)
{
	int status;
	pid_t pid;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl("/proc/self/exe", "test_agent_altstack", "--late", (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77) {
		print_message("skip: SIGSEGV or the alternate stack is a sanitizer's\n");
		skip();
	}
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv)
{
	stack_t ss;

	/* The constructor's agent would dial the user's real daemon: off. */
	test_without_agent(argv);
	if (argc == 2 && strcmp(argv[1], "--near-end") == 0)
		return capture_child(0);
	if (argc == 2 && strcmp(argv[1], "--small-altstack") == 0)
		return capture_child(1);
	if (argc == 2 && strcmp(argv[1], "--late") == 0)
		return late_child();
	page = sysconf(_SC_PAGESIZE);
	preinstalled = has_altstack(&ss);
	if (sigaction(SIGSEGV, NULL, &segv) != 0)
		return 1;
	segv_was_default = segv.sa_handler == SIG_DFL && !(segv.sa_flags & SA_SIGINFO);
	sc_exit_init(); /* what sc_agent_start does on this thread */
	if (sigaction(SIGSEGV, NULL, &segv) != 0)
		return 1;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_handlers_on_stack),
	    cmocka_unit_test(test_registered_thread_gets_one),
	    cmocka_unit_test(test_own_stack_kept),
	    cmocka_unit_test(test_capture_near_stack_end),
	    cmocka_unit_test(test_capture_small_own_altstack),
	    cmocka_unit_test(test_late_start),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
