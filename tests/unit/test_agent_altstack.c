/* test_agent_altstack.c - alternate signal stacks: the fatal-signal handlers
 * run on them (SA_ONSTACK), every thread the runtime registers gets one with
 * a guard page below it, it is unmapped when the thread exits, and a stack
 * the application installed itself is never replaced nor taken down.  The
 * crash itself is tests/e2e/agent_overflow.sh. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent.h"
#include "rt.h"
#include "scope.h"

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

int main(int argc, char **argv)
{
	stack_t ss;

	(void)argc;
	/* The constructor's agent would dial the user's real daemon: off. */
	if (!getenv("SCOPED_DISABLE")) {
		setenv("SCOPED_DISABLE", "1", 1);
		execv("/proc/self/exe", argv);
		fprintf(stderr, "cannot re-execute /proc/self/exe: %s\n", strerror(errno));
		return 1;
	}
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
