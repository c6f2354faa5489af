/* test_symbolize.c - the libdw symbolizer on this very process: a function of
 * the test binary, one of libc, the cache, and lookups after "exit". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../daemon/symbolize.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <gnu/libc-version.h>
#include <unistd.h>

unsigned long long proc_starttime(pid_t pid);

/* Not inlined and not static, so it has its own symbol and line table entry. */
__attribute__((noinline)) int symbolize_me_please(int x)
{
	return x * 3 + 1;
}

static void test_own_function(void **state)
{
	(void)state;
	struct symbolizer *s = sym_new(0);
	assert_non_null(s);
	pid_t pid = getpid();
	unsigned long long st = proc_starttime(pid);
	assert_int_equal(sym_attach(s, pid, st), 0);
	struct sym_frame f;
	uint64_t addr = (uint64_t)(uintptr_t)&symbolize_me_please;
	assert_true(sym_lookup(s, pid, st, addr, false, &f));
	assert_non_null(f.func);
	assert_string_equal(f.func, "symbolize_me_please");
	assert_non_null(f.file);
	assert_string_equal(f.file, "test_symbolize.c");
	assert_true(f.line >= 18 && f.line <= 22);
	assert_non_null(strstr(f.module, "test_symbolize"));
	/* A return address one byte in resolves to the same function. */
	assert_true(sym_lookup(s, pid, st, addr + 1, true, &f));
	assert_string_equal(f.func, "symbolize_me_please");
	sym_free(s);
}

static void test_libc_function(void **state)
{
	(void)state;
	struct symbolizer *s = sym_new(0);
	pid_t pid = getpid();
	unsigned long long st = proc_starttime(pid);
	assert_int_equal(sym_attach(s, pid, st), 0);
	struct sym_frame f;
	/* A libc function no sanitizer intercepts, so the address is libc's own. */
	uint64_t addr = (uint64_t)(uintptr_t)&gnu_get_libc_version;
	assert_true(sym_lookup(s, pid, st, addr, false, &f));
	assert_non_null(f.module);
	assert_non_null(strstr(f.module, "libc"));
	assert_non_null(f.func);
	assert_string_equal(f.func, "gnu_get_libc_version");
	sym_free(s);
}

/* libc's DWARF read ahead (sym_prewarm) serves the first lookup of a libc
 * address: no file opened for it, and the same frame as without. */
static void test_prewarm(void **state)
{
	(void)state;
	pid_t pid = getpid();
	unsigned long long st = proc_starttime(pid);
	uint64_t addr = (uint64_t)(uintptr_t)&gnu_get_libc_version;
	struct sym_frame f[2][SYM_MAX_INLINE + 1];
	size_t n[2];
	uint64_t opened[2];
	for (int warm = 0; warm < 2; warm++) {
		struct symbolizer *s = sym_new(0);
		if (warm)
			assert_int_equal(sym_prewarm(s), 0);
		n[warm] =
		    sym_lookup_inline(s, pid, st, addr, false, f[warm], SYM_MAX_INLINE + 1, NULL);
		assert_int_equal(sym_prewarm_used(s), warm);
		/* Every module's file, but libc's when the prewarm read it. */
		opened[warm] = sym_files_opened(s);
		if (warm)
			assert_int_equal(opened[1], opened[0] - 1);
		assert_string_equal(f[warm][n[warm] - 1].func, "gnu_get_libc_version");
		/* The strings are the symbolizer's: compared before it goes. */
		if (warm) {
			assert_int_equal(n[0], n[1]);
			for (size_t i = 0; i < n[1]; i++) {
				assert_int_equal(f[0][i].line, f[1][i].line);
				assert_int_equal(!f[0][i].file, !f[1][i].file);
				if (f[1][i].file)
					assert_string_equal(f[0][i].file, f[1][i].file);
			}
		}
		if (!warm) /* keep the strings: dup them */
			for (size_t i = 0; i < n[0]; i++) {
				f[0][i].func = f[0][i].func ? strdup(f[0][i].func) : NULL;
				f[0][i].file = f[0][i].file ? strdup(f[0][i].file) : NULL;
			}
		sym_free(s);
	}
	for (size_t i = 0; i < n[0]; i++) {
		free((char *)f[0][i].func);
		free((char *)f[0][i].file);
	}
}

/* sym_free while the prewarm may still run: it waits for the thread. */
static void test_prewarm_freed_early(void **state)
{
	(void)state;
	for (int i = 0; i < 3; i++) {
		struct symbolizer *s = sym_new(0);
		assert_int_equal(sym_prewarm(s), 0);
		assert_int_equal(sym_prewarm(s), 0); /* once */
		sym_free(s);
	}
}

static void test_cache_and_exited(void **state)
{
	(void)state;
	struct symbolizer *s = sym_new(0);
	pid_t pid = getpid();
	unsigned long long st = proc_starttime(pid);
	uint64_t addr = (uint64_t)(uintptr_t)&symbolize_me_please;
	struct sym_frame f;
	uint64_t hits, misses;
	size_t n;
	/* A lookup without an attach attaches on its own. */
	assert_true(sym_lookup(s, pid, st, addr, false, &f));
	assert_true(sym_lookup(s, pid, st, addr, false, &f));
	sym_stats(s, &hits, &misses, &n);
	assert_int_equal(hits, 1);
	assert_int_equal(misses, 1);
	/* After the process "exits", cached addresses still resolve, others give
	 * the module alone. */
	sym_process_exited(s, pid, st);
	assert_true(sym_lookup(s, pid, st, addr, false, &f));
	assert_string_equal(f.func, "symbolize_me_please");
	assert_true(sym_lookup(s, pid, st, (uint64_t)(uintptr_t)&test_own_function, false, &f));
	assert_null(f.func);
	assert_non_null(f.module);
	/* An address in no module. */
	assert_false(sym_lookup(s, pid, st, 16, false, &f));
	sym_forget(s, pid, st);
	sym_free(s);
}

static void test_cache_cap_flushes(void **state)
{
	(void)state;
	struct symbolizer *s = sym_new(4);
	pid_t pid = getpid();
	unsigned long long st = proc_starttime(pid);
	struct sym_frame f;
	uint64_t base = (uint64_t)(uintptr_t)&symbolize_me_please;
	for (int i = 0; i < 20; i++)
		assert_true(sym_lookup(s, pid, st, base + (uint64_t)i, false, &f));
	uint64_t hits, misses;
	size_t n;
	sym_stats(s, &hits, &misses, &n);
	assert_true(n <= 4);
	assert_true(sym_lookup(s, pid, st, base, false, &f));
	assert_string_equal(f.func, "symbolize_me_please");
	sym_free(s);
}

/* Where the inlined helper below called out from. */
static uint64_t inline_ret;

__attribute__((noinline)) void record_caller(void)
{
	inline_ret = (uint64_t)(uintptr_t)__builtin_return_address(0);
	__asm__ volatile("" ::: "memory");
}

enum { INLINED_CALL_LINE = __LINE__ + 3 };
static inline __attribute__((always_inline)) void inlined_helper(void)
{
	record_caller();
	__asm__ volatile("" ::: "memory");
}

enum { OUTER_CALL_LINE = __LINE__ + 3 };
__attribute__((noinline)) void calls_inlined(void)
{
	inlined_helper();
	__asm__ volatile("" ::: "memory");
}

/* A return address inside inlined code: the inlined function is a frame of
 * its own at its own line, the holder of the code follows at the line of
 * the inlined call; sym_lookup gives the holder alone. */
static void test_inline_chain(void **state)
{
	(void)state;
	struct symbolizer *s = sym_new(0);
	pid_t pid = getpid();
	unsigned long long st = proc_starttime(pid);
	calls_inlined();
	struct sym_frame f[SYM_MAX_INLINE + 1];
	bool found = false;
	for (int pass = 0; pass < 2; pass++) { /* a miss, then the cache */
		size_t n =
		    sym_lookup_inline(s, pid, st, inline_ret, true, f, SYM_MAX_INLINE + 1, &found);
		assert_true(found);
		assert_int_equal(n, 2);
		assert_true(f[0].inlined);
		assert_string_equal(f[0].func, "inlined_helper");
		assert_string_equal(f[0].file, "test_symbolize.c");
		assert_int_equal(f[0].line, INLINED_CALL_LINE);
		assert_false(f[1].inlined);
		assert_string_equal(f[1].func, "calls_inlined");
		assert_string_equal(f[1].file, "test_symbolize.c");
		assert_int_equal(f[1].line, OUTER_CALL_LINE);
		assert_int_equal(f[0].offset, f[1].offset);
	}
	/* Room for one frame: the physical one. */
	assert_int_equal(sym_lookup_inline(s, pid, st, inline_ret, true, f, 1, NULL), 1);
	assert_string_equal(f[0].func, "calls_inlined");
	assert_false(f[0].inlined);
	struct sym_frame one;
	assert_true(sym_lookup(s, pid, st, inline_ret, true, &one));
	assert_string_equal(one.func, "calls_inlined");
	assert_int_equal(one.line, OUTER_CALL_LINE);
	sym_free(s);
}

#include <fcntl.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>

/* Starts exe (this test binary or a copy) parked (see main): its pid, and
 * in *addr where symbolize_me_please is in it.  *in: its stdin, whose end
 * lets it exit. */
static pid_t park(const char *exe, uint64_t *addr, int *in)
{
	int to[2], from[2];
	/* Close-on-exec: the child keeps only the ends dup2() gives it, so it
	 * sees its stdin end. */
	assert_int_equal(pipe2(to, O_CLOEXEC), 0);
	assert_int_equal(pipe2(from, O_CLOEXEC), 0);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed assertion leaves no child behind */
		dup2(to[0], 0);
		dup2(from[1], 1);
		execl(exe, exe, "--park", (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	char line[64] = "";
	ssize_t n = read(from[0], line, sizeof line - 1);
	close(from[0]);
	assert_true(n > 0);
	line[n] = 0;
	*addr = strtoull(line, NULL, 16);
	*in = to[1];
	return child;
}

/* A program built without .debug_aranges (clang's default): this test
 * binary copied with the section taken out, run parked, symbolized from
 * outside to file:line all the same (libdw's address index alone finds
 * nothing there). */
static void test_no_aranges(void **state)
{
	(void)state;
	char dir[] = "/tmp/test_symbolize.XXXXXX", copy[64], cmd[256];
	assert_non_null(mkdtemp(dir));
	snprintf(copy, sizeof copy, "%s/noaranges", dir);
	snprintf(cmd, sizeof cmd,
		 "objcopy --remove-section=.debug_aranges /proc/%d/exe %s 2>/dev/null",
		 (int)getpid(), copy);
	if (system(cmd) != 0) {
		rmdir(dir);
		printf("objcopy (binutils) did not run: no copy without .debug_aranges to try\n");
		skip();
	}
	uint64_t addr;
	int in;
	pid_t child = park(copy, &addr, &in);
	struct symbolizer *s = sym_new(0);
	unsigned long long st = proc_starttime(child);
	assert_int_equal(sym_attach(s, child, st), 0);
	struct sym_frame f;
	bool found = sym_lookup(s, child, st, addr, false, &f);
	close(in); /* the child's stdin ends: it exits */
	waitpid(child, NULL, 0);
	unlink(copy);
	rmdir(dir);
	assert_true(found);
	assert_string_equal(f.func, "symbolize_me_please");
	if (!f.file)
		fail_msg("no file:line for %s without .debug_aranges", f.func);
	assert_string_equal(f.file, "test_symbolize.c");
	assert_true(f.line >= 18 && f.line <= 22);
	sym_free(s);
}

/* Two processes of one program, loaded at different addresses: the second
 * one's addresses the cache has not seen are looked up in the DWARF the
 * first one's opened (one file opened, not two), and come out as they do
 * in the process itself: an inlined frame and its holder, with their lines. */
static void test_file_shared(void **state)
{
	(void)state;
	uint64_t a1, a2;
	int in1, in2;
	pid_t p1 = park("/proc/self/exe", &a1, &in1), p2 = park("/proc/self/exe", &a2, &in2);
	unsigned long long st1 = proc_starttime(p1), st2 = proc_starttime(p2);
	struct symbolizer *s = sym_new(0);
	struct sym_frame f[SYM_MAX_INLINE + 1];
	bool found = false;
	calls_inlined(); /* inline_ret, here; the same offset in the children */
	uint64_t delta = inline_ret - (uint64_t)(uintptr_t)&symbolize_me_please;

	assert_true(sym_lookup(s, p1, st1, a1, false, &f[0]));
	assert_string_equal(f[0].func, "symbolize_me_please");
	uint64_t opened = sym_files_opened(s);
	assert_true(opened >= 1);
	size_t n = sym_lookup_inline(s, p2, st2, a2 + delta, true, f, SYM_MAX_INLINE + 1, &found);
	close(in1);
	close(in2);
	waitpid(p1, NULL, 0);
	waitpid(p2, NULL, 0);
	assert_true(found);
	if (a1 == a2)
		print_message("note: both children were loaded at one address (no ASLR)\n");
	assert_int_equal(sym_files_opened(s), opened);
	assert_int_equal(n, 2);
	assert_true(f[0].inlined);
	assert_string_equal(f[0].func, "inlined_helper");
	assert_string_equal(f[0].file, "test_symbolize.c");
	assert_int_equal(f[0].line, INLINED_CALL_LINE);
	assert_string_equal(f[1].func, "calls_inlined");
	assert_int_equal(f[1].line, OUTER_CALL_LINE);
	sym_free(s);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--park")) {
		/* test_no_aranges's child: says where, waits for its stdin to end. */
		printf("%llx\n", (unsigned long long)(uintptr_t)&symbolize_me_please);
		fflush(stdout);
		char c;
		while (read(0, &c, 1) > 0)
			;
		return symbolize_me_please(0) == 1 ? 0 : 1;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_own_function),	cmocka_unit_test(test_libc_function),
	    cmocka_unit_test(test_cache_and_exited),	cmocka_unit_test(test_cache_cap_flushes),
	    cmocka_unit_test(test_inline_chain),	cmocka_unit_test(test_no_aranges),
	    cmocka_unit_test(test_file_shared),		cmocka_unit_test(test_prewarm),
	    cmocka_unit_test(test_prewarm_freed_early),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
