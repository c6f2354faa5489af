/* crasher.c - a libscope program that crashes, on a line from stdin, in a
 * subtask of a scope, in a function named after the crash: segv (a null
 * write), abort, fpe (an integer division by zero), ill (a trap
 * instruction), bus (a store past the end of a file mapping) or overflow
 * (endless recursion).  Prints "ready <tid of the crashing worker>" first. */
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "scope.h"

#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

static const char *kind;
static _Atomic int worker_tid;
static volatile int zero, seven = 7; /* read at run time: no division the compiler sees */

static void __attribute__((noinline)) crash_segv(void)
{
	*(volatile int *)(uintptr_t)zero = 1;
	KEEP_FRAME();
}

static void __attribute__((noinline)) crash_abort(void)
{
	abort();
}

static void __attribute__((noinline)) crash_fpe(void)
{
	volatile int x = seven / zero;
	(void)x;
	KEEP_FRAME();
}

static void __attribute__((noinline)) crash_ill(void)
{
	__builtin_trap();
}

static void __attribute__((noinline)) crash_bus(void)
{
	char path[] = "/tmp/crasher.XXXXXX";
	int fd = mkstemp(path);
	unlink(path);
	/* A page mapped over an empty file: touching it is SIGBUS. */
	volatile char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p != MAP_FAILED)
		p[0] = 1;
	KEEP_FRAME();
}

static int __attribute__((noinline)) crash_overflow(int depth)
{
	volatile char pad[512];
	if (depth < 0)
		return 0; /* never: the stack ends long before the int does */
	pad[0] = (char)depth;
	int r = crash_overflow(depth + 1) + pad[0];
	KEEP_FRAME();
	return r;
}

static int crash_task(void *arg, void **res)
{
	(void)arg, (void)res;
	worker_tid = gettid();
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		return 0;
	if (!strcmp(kind, "segv"))
		crash_segv();
	else if (!strcmp(kind, "abort"))
		crash_abort();
	else if (!strcmp(kind, "fpe"))
		crash_fpe();
	else if (!strcmp(kind, "ill"))
		crash_ill();
	else if (!strcmp(kind, "bus"))
		crash_bus();
	else if (!strcmp(kind, "overflow"))
		crash_overflow(0);
	return 0;
}

static void *announce(void *arg)
{
	(void)arg;
	while (!worker_tid)
		usleep(1000);
	printf("ready %d\n", worker_tid);
	fflush(stdout);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: crasher segv|abort|fpe|ill|bus|overflow\n");
		return 2;
	}
	kind = argv[1];
	pthread_t a;
	pthread_create(&a, NULL, announce, NULL);
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	cfg.name = "doomed";
	if (scope_open(&s, &cfg) < 0)
		return 1;
	scope_fork(s, crash_task, NULL, NULL);
	/* Join only once a worker runs the task: a join that came first could
	 * run it inline on this thread, and the test wants a worker's crash
	 * while the owner waits in scope_join. */
	while (!worker_tid)
		usleep(1000);
	scope_join(s);
	scope_close(s);
	return 0;
}
