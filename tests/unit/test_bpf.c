/* test_bpf.c - tests of the BPF stack source: kernel symbol lookup and the
 * blocked-in/state classifier on made-up input, then (as root, where BPF
 * loads) real captures of tests/helpers/bpf_target checked against libdw's
 * own symbolization and the target's signal and switch counters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <elfutils/libdwfl.h>

#include "../../bpf/bpfs_int.h"
#include "test_bpf_target.h"

static char ksyms_path[] = "/tmp/test_bpf_ksyms.XXXXXX";

/* A fake kallsyms: addresses spaced 0x100 apart, one name per row the
 * classifier knows plus a few it must ignore. */
static const char *fake_syms[] = {
    "__schedule",    "schedule",	  "futex_do_wait",  "__futex_wait",   "do_futex",
    "do_epoll_wait", "hrtimer_nanosleep", "anon_pipe_read", "vfs_read",	      "ksys_read",
    "do_syscall_64", "exc_page_fault",	  "io_schedule",    "__sys_recvfrom", "sock_recvmsg",
};
#define NFAKE (sizeof(fake_syms) / sizeof(fake_syms[0]))
#define FAKE_BASE 0xffffffff81000000ull

static uint64_t fake_addr(const char *name)
{
	for (size_t i = 0; i < NFAKE; i++)
		if (strcmp(fake_syms[i], name) == 0)
			return FAKE_BASE + i * 0x100 + 0x10;
	fail_msg("no fake symbol %s", name);
	return 0;
}

static struct bpfs_ksyms *fake_ksyms;

static int setup_ksyms(void **state)
{
	char err[256];
	int fd = mkstemp(ksyms_path);
	FILE *f;

	(void)state;
	if (fd < 0)
		return -1;
	f = fdopen(fd, "w");
	/* Out of order, with data symbols and junk the parser must skip. */
	for (size_t i = NFAKE; i-- > 0;)
		fprintf(f, "%016llx %c %s\n", FAKE_BASE + i * 0x100, i % 2 ? 't' : 'T',
			fake_syms[i]);
	fprintf(f, "%016llx d some_data\n", FAKE_BASE + 0x50);
	fprintf(f, "not a line\nffffffff81000000\n\n%016llx t mod_func\t[somemod]\n",
		FAKE_BASE + NFAKE * 0x100);
	fclose(f);
	return bpfs_ksyms_load(&fake_ksyms, ksyms_path, err, sizeof(err));
}

static int teardown_ksyms(void **state)
{
	(void)state;
	bpfs_ksyms_free(fake_ksyms);
	unlink(ksyms_path);
	return 0;
}

static void test_ksyms_lookup(void **state)
{
	(void)state;
	assert_int_equal(bpfs_ksyms_count(fake_ksyms), NFAKE + 1);
	assert_string_equal(bpfs_ksyms_find(fake_ksyms, FAKE_BASE), "__schedule");
	assert_string_equal(bpfs_ksyms_find(fake_ksyms, FAKE_BASE + 0x1ff), "schedule");
	assert_string_equal(bpfs_ksyms_find(fake_ksyms, fake_addr("ksys_read")), "ksys_read");
	/* The data symbol inside __schedule's range was skipped. */
	assert_string_equal(bpfs_ksyms_find(fake_ksyms, FAKE_BASE + 0x60), "__schedule");
	assert_string_equal(bpfs_ksyms_find(fake_ksyms, FAKE_BASE + NFAKE * 0x100 + 8), "mod_func");
	assert_null(bpfs_ksyms_find(fake_ksyms, FAKE_BASE - 1));
	assert_null(bpfs_ksyms_find(fake_ksyms, FAKE_BASE + NFAKE * 0x100 + 0x10000));
	assert_null(bpfs_ksyms_find(NULL, FAKE_BASE));
}

static void test_ksyms_restricted(void **state)
{
	char path[] = "/tmp/test_bpf_kzero.XXXXXX", err[256] = "";
	struct bpfs_ksyms *ks = (void *)1;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	/* What kallsyms shows a reader without CAP_SYSLOG. */
	assert_true(write(fd, "0000000000000000 T _text\n0000000000000000 t foo\n", 48) == 48);
	close(fd);
	assert_int_equal(bpfs_ksyms_load(&ks, path, err, sizeof(err)), -EPERM);
	assert_null(ks);
	assert_non_null(strstr(err, "kptr_restrict"));
	unlink(path);
	assert_int_equal(bpfs_ksyms_load(&ks, "/nonexistent/kallsyms", err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/kallsyms"));
}

static void test_state_letters(void **state)
{
	static const struct {
		uint32_t state, exit_state;
		char letter;
	} cases[] = {
	    {0, 0, 'R'},     {1, 0, 'S'},    {2, 0, 'D'},      {0x402, 0, 'I'},
	    {0x104, 0, 'T'}, {0x8, 0, 't'},  {0x40, 0, 'P'},   {0x102, 0, 'D'},
	    {0, 0x20, 'Z'},  {0, 0x10, 'X'}, {0x2001, 0, 'S'},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(bpfs_state_letter(cases[i].state, cases[i].exit_state),
				 cases[i].letter);
}

/* One made-up thread for the classifier: state, syscall and kernel stack. */
static const struct classify_case {
	const char *what;
	uint32_t state;
	bool on_cpu;
	int64_t nr;
	uint64_t args[5];
	const char *kstack[6];
	const char *blocked_in, *jstate;
} classify_cases[] = {
    {"cond wait",
     1,
     false,
     202,
     {0x1000, 0x189, 0, 0, 0},
     {"__schedule", "futex_do_wait", "__futex_wait", "do_futex", "do_syscall_64"},
     "futex",
     "WAITING"},
    {"timed cond wait",
     1,
     false,
     202,
     {0x1000, 0x189, 0, 0x7ffd0000, 0},
     {"__schedule", "futex_do_wait", "do_futex", "do_syscall_64"},
     "futex",
     "TIMED_WAITING"},
    {"mutex lock",
     1,
     false,
     202,
     {0x1000, 0x80, 2, 0, 0},
     {"__schedule", "futex_do_wait", "do_futex", "do_syscall_64"},
     "mutex",
     "BLOCKED"},
    {"epoll forever",
     1,
     false,
     232,
     {3, 0x7ffd0000, 1, (uint64_t)-1, 0},
     {"schedule", "do_epoll_wait", "do_syscall_64"},
     "epoll",
     "WAITING"},
    {"epoll 100ms",
     1,
     false,
     232,
     {3, 0x7ffd0000, 1, 100, 0},
     {"schedule", "do_epoll_wait", "do_syscall_64"},
     "epoll",
     "TIMED_WAITING"},
    {"nanosleep",
     1,
     false,
     230,
     {0},
     {"schedule", "hrtimer_nanosleep", "do_syscall_64"},
     "sleep",
     "TIMED_WAITING"},
    {"pipe read",
     1,
     false,
     0,
     {0},
     {"schedule", "anon_pipe_read", "vfs_read", "ksys_read", "do_syscall_64"},
     "read",
     "WAITING"},
    {"recvfrom",
     1,
     false,
     45,
     {0},
     {"schedule", "sock_recvmsg", "__sys_recvfrom", "do_syscall_64"},
     "recv",
     "WAITING"},
    /* A fault's error code sits where a syscall number would: 7 is not poll. */
    {"page fault",
     2,
     false,
     7,
     {0, 0, 5, 0, 0},
     {"schedule", "io_schedule", "exc_page_fault"},
     "page_fault",
     "WAITING"},
    {"running", 0, true, -1, {0}, {"__schedule"}, NULL, "RUNNABLE"},
    {"preempted", 0, false, -1, {0}, {0}, NULL, "RUNNABLE"},
    {"on cpu, state S", 1, true, 202, {0}, {"futex_do_wait"}, NULL, "RUNNABLE"},
    {"unknown sleep", 1, false, 999, {0}, {"schedule", "do_syscall_64"}, NULL, "WAITING"},
};

static void test_classify(void **state)
{
	static struct bpfs_kcache kc;

	(void)state;
	for (int pass = 0; pass < 2; pass++) { /* cold, then warm kernel cache */
		for (size_t i = 0; i < sizeof(classify_cases) / sizeof(classify_cases[0]); i++) {
			const struct classify_case *c = &classify_cases[i];
			struct stk_rec r = {.state = c->state, .syscall_nr = c->nr};
			struct bpfstack_thread t = {.on_cpu = c->on_cpu};

			memcpy(r.args, c->args, sizeof(r.args));
			t.sched_state = bpfs_state_letter(c->state, 0);
			for (size_t k = 0; k < 6 && c->kstack[k]; k++)
				t.kframes[t.nkframes++] = fake_addr(c->kstack[k]);
			bpfs_classify(fake_ksyms, pass ? &kc : NULL, &r, &t);
			if ((c->blocked_in == NULL) != (t.blocked_in == NULL) ||
			    (c->blocked_in && strcmp(c->blocked_in, t.blocked_in) != 0) ||
			    strcmp(c->jstate, t.jstate) != 0)
				fail_msg("%s: got %s/%s, want %s/%s", c->what,
					 t.blocked_in ? t.blocked_in : "NULL", t.jstate,
					 c->blocked_in ? c->blocked_in : "NULL", c->jstate);
		}
	}
}

static void test_bad_records(void **state)
{
	struct stk_rec h = {.ustack_len = 64};
	unsigned char buf[sizeof(h) + 64];

	(void)state;
	memcpy(buf, &h, sizeof(h));
	assert_true(bpfs_rec_valid(buf, sizeof(buf)));
	assert_false(bpfs_rec_valid(buf, sizeof(buf) - 1));
	assert_false(bpfs_rec_valid(buf, sizeof(h) - 1));
	h.ustack_len = STK_WINDOW + 1;
	memcpy(buf, &h, sizeof(h));
	assert_false(bpfs_rec_valid(buf, sizeof(buf)));
}

/* ---- live captures (root, BPF) ------------------------------------------ */

static struct bpfstack *bs;
static char skip_reason[256];
/* The verifier refused the programs (EACCES) where BPF is there to load
 * them (root, kernel BTF): a bug in stacks.bpf.c, which must fail the
 * captures' tests, not skip them as a machine without BPF does. */
static bool bpf_refused;

static int setup_bpf(void **state)
{
	(void)state;
	int rc = bpfstack_open(&bs, skip_reason, sizeof(skip_reason));
	if (rc != 0) {
		bs = NULL;
		bpf_refused =
		    rc == -EACCES && geteuid() == 0 && access("/sys/kernel/btf/vmlinux", R_OK) == 0;
		fprintf(stderr, "test_bpf: live captures %s: %s\n",
			bpf_refused ? "fail" : "skipped", skip_reason);
	}
	return 0;
}

static int teardown_bpf(void **state)
{
	(void)state;
	bpfstack_close(bs);
	return 0;
}

#define NEED_BPF()                                                                                 \
	do {                                                                                       \
		if (!bs && bpf_refused)                                                            \
			fail_msg("the kernel's verifier refused the BPF programs: %s",             \
				 skip_reason);                                                     \
		if (!bs) {                                                                         \
			print_message("skipped: BPF cannot load: %s\n", skip_reason);              \
			skip();                                                                    \
		}                                                                                  \
	} while (0)

static void start_target(struct bt_target *tg, const char *const *args)
{
	char path[PATH_MAX];

	if (bt_helper_path(path, sizeof(path), "bpf_target") != 0)
		fail_msg("tests/helpers/bpf_target is not built beside this test "
			 "(make test builds it)");
	if (bt_start(tg, args) != 0)
		fail_msg("%s did not report its threads ready", path);
}

static const struct bpfstack_thread *find_thread(const struct bpfstack_thread *th, size_t n,
						 pid_t tid)
{
	for (size_t i = 0; i < n; i++)
		if ((pid_t)th[i].tid == tid)
			return &th[i];
	return NULL;
}

static Dwfl *target_dwfl(pid_t pid)
{
	static char *debuginfo_path;
	static const Dwfl_Callbacks cbs = {
	    .find_elf = dwfl_linux_proc_find_elf,
	    .find_debuginfo = dwfl_standard_find_debuginfo,
	    .debuginfo_path = &debuginfo_path,
	};
	Dwfl *d = dwfl_begin(&cbs);

	assert_non_null(d);
	dwfl_report_begin(d);
	assert_int_equal(dwfl_linux_proc_report(d, pid), 0);
	assert_int_equal(dwfl_report_end(d, NULL, NULL), 0);
	return d;
}

/* Function name and module of frame i, symbolized independently of the
 * code under test (a return address is looked up one byte back). */
static const char *frame_name(Dwfl *d, const struct bpfstack_thread *t, size_t i,
			      const char **module)
{
	Dwarf_Addr pc = t->frames[i] - (i > 0);
	Dwfl_Module *m = dwfl_addrmodule(d, pc);
	const char *name = m ? dwfl_module_addrname(m, pc) : NULL;

	*module = m ? dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL, NULL, NULL) : "";
	return name ? name : "?";
}

static void print_stack(Dwfl *d, const struct bpfstack_thread *t)
{
	const char *mod;

	print_message("tid %u state %c %s blocked_in %s, %zu frames:\n", t->tid, t->sched_state,
		      t->jstate, t->blocked_in ? t->blocked_in : "-", t->nframes);
	for (size_t i = 0; i < t->nframes; i++) {
		const char *name = frame_name(d, t, i, &mod);

		print_message("  %s (%s)\n", name, mod);
	}
}

/* The frame index where fn appears below glibc frames: every frame above
 * it is in glibc (or, in sanitizer builds, a sanitizer's interceptor), and
 * at least one is in glibc. */
static int frame_below_glibc(Dwfl *d, const struct bpfstack_thread *t, const char *fn)
{
	bool glibc = false;

	for (size_t i = 0; i < t->nframes; i++) {
		const char *mod, *name = frame_name(d, t, i, &mod);

		if (strcmp(name, fn) == 0)
			return glibc ? (int)i : -1;
		glibc |= strstr(mod, "libc.so") != NULL;
		if (!strstr(mod, "libc.so") && !strstr(mod, "libasan") && !strstr(mod, "libtsan") &&
		    !strstr(mod, "libubsan"))
			return -1;
	}
	return -1;
}

static size_t proc_threads(pid_t pid)
{
	char path[64];
	struct dirent *e;
	size_t n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	assert_non_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static long proc_counter(pid_t pid, pid_t tid, const char *key)
{
	char path[96], line[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == ':')
			v = strtol(line + strlen(key) + 1, NULL, 10);
	fclose(f);
	return v;
}

static const struct role_expect {
	const char *role, *fn, *blocked_in, *jstate;
} role_expects[] = {
    {"futex", "bpf_target_wait_futex", "futex", "WAITING"},
    {"timedwait", "bpf_target_timedwait", "futex", "TIMED_WAITING"},
    {"sleep", "bpf_target_sleep", "sleep", "TIMED_WAITING"},
    {"read", "bpf_target_read", "read", "WAITING"},
    {"mutex", "bpf_target_lock", "mutex", "BLOCKED"},
    {"epoll", "bpf_target_epoll", "epoll", "WAITING"},
};
#define NROLES (sizeof(role_expects) / sizeof(role_expects[0]))

static void test_capture_known_functions(void **state)
{
	const char *args[] = {"-s", NULL};
	long before[NROLES], after[NROLES];
	struct bpfstack_thread *th;
	struct bt_target tg;
	char err[256];
	size_t n;
	Dwfl *d;

	(void)state;
	NEED_BPF();
	start_target(&tg, args);
	for (size_t i = 0; i < NROLES; i++)
		before[i] = proc_counter(tg.pid, bt_tid(&tg, role_expects[i].role),
					 "voluntary_ctxt_switches");
	for (int round = 0; round < 3; round++) { /* cold, then warm caches */
		assert_int_equal(bpfstack_capture(bs, tg.pid, &th, &n, err, sizeof(err)), 0);
		/* The roles, main and the spinner (and libscope's agent, if
		 * it runs). */
		assert_int_equal(n, proc_threads(tg.pid));
		assert_true(n >= NROLES + 2);
		free(th);
	}
	assert_int_equal(bpfstack_capture(bs, tg.pid, &th, &n, err, sizeof(err)), 0);
	d = target_dwfl(tg.pid);
	for (size_t i = 0; i < NROLES; i++) {
		const struct role_expect *e = &role_expects[i];
		const struct bpfstack_thread *t = find_thread(th, n, bt_tid(&tg, e->role));

		assert_non_null(t);
		if (t->error || frame_below_glibc(d, t, e->fn) < 1 || !t->blocked_in ||
		    strcmp(t->blocked_in, e->blocked_in) != 0 ||
		    strcmp(t->jstate, e->jstate) != 0) {
			print_stack(d, t);
			fail_msg("role %s: want %s below glibc frames, %s/%s", e->role, e->fn,
				 e->blocked_in, e->jstate);
		}
		assert_false(t->on_cpu);
		assert_false(t->approximate);
		assert_false(t->ran_during_capture);
		/* A read may sleep anywhere in the kernel: its kernel stack is
		 * walked.  The others sleep interruptibly in a plain wait (a
		 * futex, a sleep, an epoll wait), which their system call
		 * names: no walk, and still the right blocked_in above. */
		if (!strcmp(e->role, "read")) {
			assert_true(t->nkframes > 0);
			assert_non_null(bpfstack_ksym(bs, t->kframes[0]));
		} else {
			assert_int_equal(t->nkframes, 0);
		}
	}
	{
		const struct bpfstack_thread *t = find_thread(th, n, bt_tid(&tg, "spin"));
		const char *mod;
		bool found = false;

		assert_non_null(t);
		assert_string_equal(t->jstate, "RUNNABLE");
		if (t->on_cpu)
			assert_true(t->ran_during_capture);
		/* Preempted, its registers are exact; on a CPU, a perf sample
		 * makes them exact, or it stays approximate (as of its last
		 * kernel entry, which may be before it started spinning). */
		if (!t->approximate) {
			for (size_t i = 0; i < t->nframes; i++)
				found |= strcmp(frame_name(d, t, i, &mod), "bpf_target_spin") == 0;
			if (!found)
				print_stack(d, t);
			assert_true(found);
		} else {
			assert_true(t->on_cpu);
		}
	}
	{
		/* ~40 KiB of recursion: all but the top frames come from past
		 * the 16 KiB window, through /proc/PID/mem. */
		const struct bpfstack_thread *t = find_thread(th, n, bt_tid(&tg, "deep"));
		const char *mod;
		size_t first = 0, deep = 0;

		assert_non_null(t);
		for (size_t i = 0; i < t->nframes; i++) {
			const char *name = frame_name(d, t, i, &mod);
			bool level = strcmp(name, "bpf_target_deep_level") == 0;

			if (level && !deep)
				first = i;
			deep += level;
		}
		/* read, maybe a sanitizer's interceptor, bpf_target_read, then
		 * nothing but levels down to the frame cap. */
		if (t->nframes != BPFSTACK_MAX_FRAMES || first > 3 || deep != t->nframes - first)
			print_stack(d, t);
		assert_int_equal(t->nframes, BPFSTACK_MAX_FRAMES);
		assert_true(first >= 2 && first <= 3);
		assert_int_equal(deep, t->nframes - first);
	}
	{
		const struct bpfstack_thread *t = find_thread(th, n, tg.pid);
		const char *mod;
		bool found = false;

		assert_non_null(t);
		for (size_t i = 0; i < t->nframes; i++)
			found |= strcmp(frame_name(d, t, i, &mod), "main") == 0;
		assert_true(found);
		assert_non_null(t->blocked_in);
		assert_string_equal(t->blocked_in, "read");
	}
	dwfl_end(d);
	free(th);
	/* Nothing woke the blocked threads: no signal, no stop, no ptrace. */
	for (size_t i = 0; i < NROLES; i++) {
		after[i] = proc_counter(tg.pid, bt_tid(&tg, role_expects[i].role),
					"voluntary_ctxt_switches");
		assert_true(before[i] >= 0);
		assert_int_equal(after[i], before[i]);
	}
	bt_stop(&tg);
	assert_int_equal(tg.signals, 0);
	assert_int_equal(tg.eintr, 0);
}

static void test_capture_1000_threads(void **state)
{
	const char *args[] = {"1000", NULL};
	struct bpfstack_thread *th;
	struct bt_target tg;
	size_t n, with_fn = 0;
	char err[256];
	Dwfl *d;

	(void)state;
	NEED_BPF();
	start_target(&tg, args);
	assert_int_equal(bpfstack_capture(bs, tg.pid, &th, &n, err, sizeof(err)), 0);
	assert_int_equal(n, proc_threads(tg.pid));
	assert_true(n >= 1000 + NROLES + 1);
	d = target_dwfl(tg.pid);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(th[i].error, 0);
		if (th[i].nframes < 3) {
			print_stack(d, &th[i]);
			fail_msg("thread %u: stack too short", th[i].tid);
		}
		if (i > 0)
			assert_true(th[i].tid > th[i - 1].tid);
		with_fn += frame_below_glibc(d, &th[i], "bpf_target_wait_futex") > 0;
	}
	/* The 1000 extra threads and the futex role all wait there. */
	assert_int_equal(with_fn, 1001);
	/* The counters read after the records (the sweep's, with this many
	 * threads read afresh) saw the parked threads unchanged. */
	size_t still = 0;
	for (size_t i = 0; i < n; i++)
		still += !th[i].ran_during_capture;
	assert_true(still >= 1000);
	/* Again: the threads that have not run since keep their entries,
	 * frames and all, without their stacks being copied again. */
	struct bpfstack_thread *again;
	size_t n2, reused = 0;
	assert_int_equal(bpfstack_capture(bs, tg.pid, &again, &n2, err, sizeof(err)), 0);
	assert_int_equal(n2, n);
	for (size_t i = 0; i < n2; i++) {
		assert_int_equal(again[i].tid, th[i].tid);
		assert_int_equal(again[i].error, 0);
		if (!again[i].reused)
			continue;
		reused++;
		assert_int_equal(again[i].nframes, th[i].nframes);
		assert_memory_equal(again[i].frames, th[i].frames,
				    th[i].nframes * sizeof(th[i].frames[0]));
		assert_int_equal(again[i].nvcsw, th[i].nvcsw);
		assert_false(again[i].on_cpu);
	}
	assert_true(reused >= 1000);
	free(again);
	dwfl_end(d);
	free(th);
	bt_stop(&tg);
	assert_int_equal(tg.signals, 0);
	assert_int_equal(tg.eintr, 0);
}

/* A capture after one: the threads that have not run since keep their
 * entries; one renamed by another thread while it slept, and the thread
 * that ran (the target's main thread, which read the command), are read
 * afresh. */
static void test_capture_again_moved(void **state)
{
	const char *args[] = {"20", NULL};
	struct bpfstack_thread *th;
	const struct bpfstack_thread *t;
	struct bt_target tg;
	char err[256], cmd[32];
	size_t n, reused = 0;
	Dwfl *d;

	(void)state;
	NEED_BPF();
	start_target(&tg, args);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(bpfstack_capture(bs, tg.pid, &th, &n, err, sizeof(err)), 0);
		free(th);
	}
	pid_t futex = bt_tid(&tg, "futex");
	snprintf(cmd, sizeof(cmd), "n%d", (int)futex);
	assert_int_equal(bt_command(&tg, cmd), 0);
	bool sweep;
	uint64_t swept = bpfstack_swept(bs, &sweep);
	assert_int_equal(bpfstack_capture(bs, tg.pid, &th, &n, err, sizeof(err)), 0);
	/* Where the kernel has it, the sweep served this capture. */
	if (sweep)
		assert_int_equal(bpfstack_swept(bs, &sweep), swept + 1);
	else
		print_message("note: no sweep on this kernel: the iterator alone captured\n");
	d = target_dwfl(tg.pid);
	t = find_thread(th, n, futex);
	assert_non_null(t);
	assert_string_equal(t->comm, "renamed");
	assert_false(t->reused);
	assert_true(frame_below_glibc(d, t, "bpf_target_wait_futex") >= 1);
	/* A shallow wait: its next record needs less than the whole window. */
	assert_in_range(t->window_pages, 1, 3);
	t = find_thread(th, n, tg.pid);
	assert_non_null(t);
	assert_false(t->reused);
	assert_int_equal(t->error, 0);
	for (size_t i = 0; i < n; i++)
		reused += th[i].reused;
	assert_true(reused >= 20); /* the extra threads, at least */
	dwfl_end(d);
	free(th);
	bt_stop(&tg);
}

/* A thread recorded again with a window smaller than its stack needs (its
 * hint, from an unwind that needed less) is unwound whole all the same:
 * what the window lacks comes from /proc/PID/mem; and its next hint asks
 * for the whole window. */
static void test_capture_small_window(void **state)
{
	struct bpfstack_thread *th, *again;
	const struct bpfstack_thread *a, *b;
	struct bt_target tg;
	char err[256], cmd[32];
	size_t n, n2;

	(void)state;
	NEED_BPF();
	start_target(&tg, NULL);
	pid_t deep = bt_tid(&tg, "deep");
	assert_int_equal(bpfstack_capture(bs, tg.pid, &th, &n, err, sizeof(err)), 0);
	a = find_thread(th, n, deep);
	assert_non_null(a);
	assert_int_equal(a->nframes, BPFSTACK_MAX_FRAMES);
	assert_int_equal(a->window_pages, 4);
	assert_int_equal(bpfstack_set_window_hint(bs, (uint32_t)deep, 1), 0);
	snprintf(cmd, sizeof(cmd), "n%d", (int)deep); /* renamed: recorded again */
	assert_int_equal(bt_command(&tg, cmd), 0);
	assert_int_equal(bpfstack_capture(bs, tg.pid, &again, &n2, err, sizeof(err)), 0);
	b = find_thread(again, n2, deep);
	assert_non_null(b);
	assert_false(b->reused);
	assert_string_equal(b->comm, "renamed");
	assert_int_equal(b->nframes, a->nframes);
	assert_memory_equal(b->frames, a->frames, a->nframes * sizeof(a->frames[0]));
	assert_int_equal(b->window_pages, 4);
	assert_true(b->window_bytes <= 4096); /* the hint was taken */
	free(again);
	free(th);
	bt_stop(&tg);
}

/* A library mapped after the unwinder cached the process's modules must be
 * picked up: otherwise the stack stops at the first frame inside it. */
static void test_capture_after_dlopen(void **state)
{
	struct bpfstack_thread *th;
	const struct bpfstack_thread *t;
	struct bt_target tg;
	char err[256];
	size_t n;
	Dwfl *d;
	int zalloc, zlib;

	(void)state;
	NEED_BPF();
	start_target(&tg, NULL);
	assert_int_equal(bpfstack_capture(bs, tg.pid, &th, &n, err, sizeof(err)), 0);
	free(th);
	assert_int_equal(bt_command(&tg, "z"), 0);
	assert_true(bt_tid(&tg, "zlib") > 0);
	assert_int_equal(bpfstack_capture(bs, tg.pid, &th, &n, err, sizeof(err)), 0);
	d = target_dwfl(tg.pid);
	t = find_thread(th, n, bt_tid(&tg, "zlib"));
	assert_non_null(t);
	zalloc = frame_below_glibc(d, t, "bpf_target_wait_futex");
	zlib = -1;
	for (size_t i = 0; i < t->nframes; i++) {
		const char *mod, *name = frame_name(d, t, i, &mod);

		if (strcmp(name, "bpf_target_zlib") == 0)
			zlib = (int)i;
	}
	if (zalloc < 1 || zlib <= zalloc + 2)
		print_stack(d, t);
	assert_true(zalloc >= 1);
	assert_true(zlib > zalloc + 2); /* zalloc and libz's frame between */
	dwfl_end(d);
	free(th);
	bt_stop(&tg);
	assert_int_equal(tg.signals, 0);
}

/* Threads created and exiting all through the captures: every capture
 * succeeds, the steady threads keep their stacks, and what the churn leaves
 * behind is either a stack, an error or a flag, never garbage. */
static void test_capture_churn(void **state)
{
	struct bt_target tg;
	size_t transient = 0;
	char err[256];
	Dwfl *d;

	(void)state;
	NEED_BPF();
	start_target(&tg, NULL);
	assert_int_equal(bt_command(&tg, "c"), 0);
	d = target_dwfl(tg.pid);
	for (int round = 0; round < 30; round++) {
		struct bpfstack_thread *th;
		const struct bpfstack_thread *t;
		size_t n;

		assert_int_equal(bpfstack_capture(bs, tg.pid, &th, &n, err, sizeof(err)), 0);
		t = find_thread(th, n, bt_tid(&tg, "futex"));
		assert_non_null(t);
		assert_true(frame_below_glibc(d, t, "bpf_target_wait_futex") >= 1);
		for (size_t i = 0; i < n; i++) {
			bool known = (pid_t)th[i].tid == tg.pid;

			for (int r = 0; r < tg.nroles; r++)
				known |= (pid_t)th[i].tid == tg.roles[r].tid;
			transient += !known;
			assert_true(th[i].nframes <= BPFSTACK_MAX_FRAMES);
			assert_true(th[i].nkframes <= BPFSTACK_MAX_KFRAMES);
			assert_non_null(th[i].jstate);
			if (th[i].error == 0 && !known && th[i].nframes == 0)
				assert_true(th[i].ran_during_capture || th[i].sched_state != 'S');
		}
		free(th);
	}
	dwfl_end(d);
	bt_stop(&tg);
	assert_int_equal(tg.signals, 0);
	print_message("churn: %zu short-lived threads caught in 30 captures\n", transient);
}

static void test_capture_bad_pids(void **state)
{
	struct bpfstack_thread *th = (void *)1;
	char err[256];
	size_t n = 1;
	pid_t gone;

	(void)state;
	NEED_BPF();
	assert_int_equal(bpfstack_capture(bs, 0, &th, &n, err, sizeof(err)), -EINVAL);
	assert_null(th);
	assert_int_equal(n, 0);
	assert_int_equal(bpfstack_capture(bs, -5, &th, &n, err, sizeof(err)), -EINVAL);
	/* A pid that just exited and was reaped. */
	gone = fork();
	if (gone == 0)
		_exit(0);
	waitpid(gone, NULL, 0);
	assert_int_equal(bpfstack_capture(bs, gone, &th, &n, err, sizeof(err)), -ESRCH);
	assert_null(th);
	assert_non_null(strstr(err, "no process"));
	/* A kernel thread has no user stack: an entry with an error, no crash. */
	if (bpfstack_capture(bs, 2, &th, &n, err, sizeof(err)) == 0) {
		assert_int_equal(n, 1);
		assert_int_equal(th[0].error, -ESRCH);
		assert_int_equal(th[0].nframes, 0);
		free(th);
	}
	assert_null(bpfstack_ksym(NULL, 0));
	bpfstack_close(NULL);
}

static void test_capture_self(void **state)
{
	const struct bpfstack_thread *t;
	struct bpfstack_thread *th;
	char err[256];
	size_t n;

	(void)state;
	NEED_BPF();
	/* The capturing thread itself is on a CPU inside read().  (A
	 * sanitizer may run a thread of its own beside it.) */
	assert_int_equal(bpfstack_capture(bs, getpid(), &th, &n, err, sizeof(err)), 0);
	assert_true(n >= 1);
	t = find_thread(th, n, gettid());
	assert_non_null(t);
	assert_true(t->on_cpu);
	assert_true(t->approximate);
	assert_string_equal(t->jstate, "RUNNABLE");
	free(th);
}

static atomic_int spin_stop;
static atomic_int spin_tid;

/* Spins on registers only, so that even in sanitizer builds (which route
 * memory accesses through their runtime) the thread is nearly always at an
 * instruction of this function. */
__attribute__((noinline)) void test_bpf_spin(void)
{
	unsigned long x = 0;

	while (!atomic_load(&spin_stop))
		for (int i = 0; i < 1000000; i++)
			__asm__ volatile("" : "+r"(x));
}

static void *spin_main(void *arg)
{
	(void)arg;
	atomic_store(&spin_tid, (int)gettid());
	test_bpf_spin();
	return NULL;
}

struct sample_seen {
	int calls;
	bool in_spin;
	uint32_t len;
};

static void on_test_sample(void *ctx, const struct stk_rec *h, const unsigned char *ustack)
{
	struct sample_seen *seen = ctx;
	Dl_info info;

	(void)ustack;
	seen->calls++;
	seen->len = h->ustack_len;
	seen->in_spin = dladdr((void *)(uintptr_t)h->regs[STK_REG_IP], &info) && info.dli_sname &&
			strcmp(info.dli_sname, "test_bpf_spin") == 0;
}

static void test_perf_sample_on_cpu(void **state)
{
	struct sample_seen seen = {0};
	pthread_t th;
	pid_t tid;
	int rc;

	(void)state;
	NEED_BPF();
	atomic_store(&spin_stop, 0);
	assert_int_equal(pthread_create(&th, NULL, spin_main, NULL), 0);
	while (!(tid = atomic_load(&spin_tid)))
		usleep(100);
	rc = bpfs_perf_sample(&tid, 1, 2000, on_test_sample, &seen);
	atomic_store(&spin_stop, 1);
	pthread_join(th, NULL);
	if (rc < 0) {
		print_message("skipped: perf events unavailable: %s\n", strerror(-rc));
		skip();
	}
	assert_int_equal(rc, 1);
	assert_int_equal(seen.calls, 1);
	assert_true(seen.in_spin);
	assert_true(seen.len > 0);
}

int main(void)
{
	const struct CMUnitTest offline[] = {
	    cmocka_unit_test(test_ksyms_lookup),  cmocka_unit_test(test_ksyms_restricted),
	    cmocka_unit_test(test_state_letters), cmocka_unit_test(test_classify),
	    cmocka_unit_test(test_bad_records),
	};
	const struct CMUnitTest live[] = {
	    cmocka_unit_test(test_capture_known_functions),
	    cmocka_unit_test(test_capture_1000_threads),
	    cmocka_unit_test(test_capture_again_moved),
	    cmocka_unit_test(test_capture_small_window),
	    cmocka_unit_test(test_capture_after_dlopen),
	    cmocka_unit_test(test_capture_churn),
	    cmocka_unit_test(test_capture_bad_pids),
	    cmocka_unit_test(test_capture_self),
	    cmocka_unit_test(test_perf_sample_on_cpu),
	};
	int rc = cmocka_run_group_tests_name("bpf offline", offline, setup_ksyms, teardown_ksyms);

	return rc | cmocka_run_group_tests_name("bpf live", live, setup_bpf, teardown_bpf);
}
