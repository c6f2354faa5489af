/* fork_tree.c - a libscope program that fork()s children while it holds a
 * tree, for the fork e2e test.  The parent's main thread (named fork-main)
 * opens "parent-outer" on pool "ptree" and forks 2 subtasks; each opens
 * "parent-inner" and forks a leaf that sleeps.  Once all 4 run it prints
 * "ready PID" ("ready PID tsan" under ThreadSanitizer) and then runs one
 * command per line on stdin:
 *   quiet   fork a child that _exits at once, without touching libscope
 *   exec    fork a child that execs /bin/true
 *   child   fork a child that opens "child-outer" (inside the inherited
 *           "parent-outer", the main thread's open scope) and forks 2
 *           subtasks that sleep; the child prints "child PID" once both run
 *   subchild one of the leaves (a pool worker, in a task of a "parent-inner"
 *           another worker owns) forks a child that opens "subchild-inner"
 *           inside that task and forks 2 subtasks that sleep; the child
 *           prints "subchild PID" once both run, and on SIGUSR1 cancels,
 *           joins and closes its scope, prints "subchild-done PID" and ends
 *           the leaf task
 *   violate fork a child whose first runtime event is a structure violation:
 *           the main thread opens and joins "joined", forks, and the child
 *           joins it again (DOUBLE_JOIN); the child prints "violator PID"
 *           and lives until killed
 * For quiet and exec the parent prints "reaped PID STATUS" once the child is
 * gone.  EOF ends the program (the children of "child", "subchild" and
 * "violate" live until killed). */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scope.h"

#define PARENT_TASKS 2
#define CHILD_TASKS 2
#define FOREVER (3600LL * 1000000000)

static scope_pool_t *pool;
static _Atomic int leaves, child_running, subfork_req;

static void wait_for(_Atomic int *counter, int n)
{
	while (atomic_load(counter) < n)
		usleep(1000);
}

static void subchild_main(void);

/* Sleeps until cancelled; the first leaf to see a "subchild" request forks
 * the child from inside its task. */
static int leaf(void *arg, void **res)
{
	(void)arg, (void)res;
	atomic_fetch_add(&leaves, 1);
	for (;;) {
		if (atomic_exchange(&subfork_req, 0)) {
			fflush(stdout);
			if (fork() == 0) {
				subchild_main();
				return 0; /* the leaf task ends, in the child */
			}
		}
		int rc = scope_sleep(10 * 1000000LL);
		if (rc)
			return rc;
	}
}

static int parent_task(void *arg, void **res)
{
	(void)arg, (void)res;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	int rc;

	cfg.name = "parent-inner";
	cfg.pool = pool;
	rc = scope_open(&s, &cfg);
	if (rc < 0)
		return rc;
	scope_fork(s, leaf, NULL, NULL);
	/* Joined only once every leaf runs: a leaf still queued would run
	 * inline here, and the tree would have one thread fewer. */
	wait_for(&leaves, PARENT_TASKS);
	rc = scope_join(s);
	scope_close(s);
	return rc;
}

static int child_task(void *arg, void **res)
{
	(void)arg, (void)res;
	atomic_fetch_add(&child_running, 1);
	return scope_sleep(FOREVER);
}

static _Atomic int subchild_end;

static void on_usr1(int sig)
{
	(void)sig;
	atomic_store(&subchild_end, 1);
}

/* The body of a child that uses libscope: opens scope name, forks
 * CHILD_TASKS subtasks that sleep onto the inherited pool (it starts new
 * workers here), says "what PID" once they run.  Then, with ends, it waits
 * for SIGUSR1, cancels, joins and closes the scope, says "what-done PID" and
 * returns; without, it never returns. */
static void child_body(const char *name, const char *what, int ends)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;

	if (ends)
		signal(SIGUSR1, on_usr1);
	cfg.name = name;
	cfg.pool = pool;
	if (scope_open(&s, &cfg) < 0)
		_exit(2);
	for (int i = 0; i < CHILD_TASKS; i++)
		if (scope_fork(s, child_task, NULL, NULL) < 0)
			_exit(3);
	wait_for(&child_running, CHILD_TASKS);
	printf("%s %d\n", what, (int)getpid());
	fflush(stdout);
	if (!ends)
		for (;;)
			pause();
	wait_for(&subchild_end, 1);
	scope_cancel(s);
	(void)scope_join(s);
	scope_close(s);
	printf("%s-done %d\n", what, (int)getpid());
	fflush(stdout);
}

/* The "subchild" child, on the forking leaf's thread, inside its task. */
static void subchild_main(void)
{
	child_body("subchild-inner", "subchild", 1);
}

/* "violate": the child's very first event is the violation, so the event
 * is what starts the child's agent. */
static void fork_violator(void)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;

	cfg.name = "joined";
	if (scope_open(&s, &cfg) < 0 || scope_join(s) != 0) {
		printf("error joined\n");
		return;
	}
	fflush(stdout);
	if (fork() == 0) {
		if (scope_join(s) != SCOPE_EJOINED)
			_exit(2);
		printf("violator %d\n", (int)getpid());
		fflush(stdout);
		for (;;)
			pause();
	}
	scope_close(s);
}

static void fork_and_reap(const char *what)
{
	int status = 0;
	pid_t pid;

	fflush(stdout); /* nothing buffered may be written twice */
	pid = fork();
	if (pid < 0) {
		printf("error fork\n");
	} else if (pid == 0) {
		if (strcmp(what, "exec") == 0)
			execl("/bin/true", "true", (char *)NULL);
		_exit(0);
	} else {
		waitpid(pid, &status, 0);
		printf("reaped %d %d\n", (int)pid, status);
	}
	fflush(stdout);
}

int main(void)
{
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	char line[64];
	scope_t *s;

	scope_thread_name("fork-main");
	pc.name = "ptree";
	pc.core_size = pc.max_size = 2 * PARENT_TASKS + CHILD_TASKS + 1;
	if (scope_pool_create(&pool, &pc) < 0) {
		fprintf(stderr, "fork_tree: cannot create the pool\n");
		return 1;
	}
	cfg.name = "parent-outer";
	cfg.pool = pool;
	if (scope_open(&s, &cfg) < 0)
		return 1;
	for (int i = 0; i < PARENT_TASKS; i++)
		scope_fork(s, parent_task, NULL, NULL);
	wait_for(&leaves, PARENT_TASKS);
#if defined(__SANITIZE_THREAD__)
	/* ThreadSanitizer ends a child of a threaded process that makes threads. */
	printf("ready %d tsan\n", (int)getpid());
#else
	printf("ready %d\n", (int)getpid());
#endif
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (strcmp(line, "child") == 0) {
			fflush(stdout);
			if (fork() == 0)
				child_body("child-outer", "child", 0);
		} else if (strcmp(line, "subchild") == 0) {
			atomic_store(&subfork_req, 1);
		} else if (strcmp(line, "violate") == 0) {
			fork_violator();
		} else {
			fork_and_reap(line);
		}
	}
	/* The leaves sleep for an hour: end without joining them. */
	_exit(0);
}
