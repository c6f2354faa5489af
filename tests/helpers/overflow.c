/* overflow.c - a libscope program that overflows a thread's stack, for the
 * crash e2e test: opens scope "doomed", prints "ready PID handler=H
 * altstack=A" (H: "onstack" when SIGSEGV has an SA_ONSTACK handler, which
 * is libscope's; "other" otherwise and under a sanitizer, which catches the
 * signal first; A: whether the crashing thread has an alternate stack),
 * waits for a line on stdin, then recurses without bound, by mode:
 *   main   on the main thread
 *   task   in a subtask, on a pool worker the runtime registered */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "scope.h"

static volatile long never = -1; /* keeps the compiler from proving the recursion endless */

static long __attribute__((noinline)) recurse(long depth)
{
	volatile char pad[512];

	if (depth == never)
		return 0;
	pad[0] = (char)depth;
	/* Used after the call, so the call cannot become a jump. */
	return recurse(depth + 1) + pad[0] + pad[511];
}

/* Says what the crashing thread has, then waits for the test's go. */
static void ready_then_wait(void)
{
	struct sigaction sa;
	stack_t ss;
	char line[16];
	int onstack = sigaction(SIGSEGV, NULL, &sa) == 0 && (sa.sa_flags & SA_ONSTACK) &&
		      (sa.sa_flags & SA_SIGINFO);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* The sanitizer's runtime catches SIGSEGV first, whatever sigaction()
	 * says, and reports the overflow itself. */
	onstack = 0;
#endif
	int alt = sigaltstack(NULL, &ss) == 0 && !(ss.ss_flags & SS_DISABLE);

	printf("ready %d handler=%s altstack=%d\n", (int)getpid(), onstack ? "onstack" : "other",
	       alt);
	fflush(stdout);
	if (!fgets(line, sizeof line, stdin))
		return; /* the test went away: crash anyway, nobody waits */
}

static int crash_task(void *arg, void **res)
{
	(void)arg, (void)res;
	ready_then_wait();
	return (int)recurse(0);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "main";
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;

	cfg.name = "doomed";
	if (scope_open(&s, &cfg) < 0) {
		fprintf(stderr, "overflow: cannot open a scope\n");
		return 1;
	}
	if (strcmp(mode, "task") == 0) {
		if (scope_fork(s, crash_task, NULL, NULL) < 0) {
			fprintf(stderr, "overflow: cannot fork\n");
			return 1;
		}
		scope_join(s);
	} else {
		ready_then_wait();
		recurse(0);
	}
	scope_close(s);
	return 0;
}
