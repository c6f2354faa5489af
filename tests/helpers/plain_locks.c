/* plain_locks.c - threads that hold and wait for locks, and threads that
 * wait on futexes that are not mutexes, for the tests of the dumps' lock
 * owners.  Never links libscope; lock_tasks.c builds the same program with
 * the holder, the waiter and the condition waiter as libscope tasks.
 *
 * Threads: "holder" locks a normal mutex and waits on a pipe, "waiter" waits
 * for that mutex; "pi-holder"/"pi-waiter" the same with a priority-
 * inheritance mutex, "rb-holder"/"rb-waiter" with a robust one; "condwait"
 * waits on a condition variable (its mutex free), "semwait" on a
 * semaphore, "rawfutex" in FUTEX_WAIT for 2 on a word that is no mutex.
 * stdout: "<name> <tid>" per thread, "mutex <0xaddr>", "pi <0xaddr>",
 * "robust <0xaddr>", then "ready" once every waiter has had time to sleep;
 * exits at EOF or any line on stdin. */
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef LOCKS_SCOPE
#include "scope.h"
#endif

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t pi_mu, rb_mu;
static pthread_mutex_t cv_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static sem_t sem;
/* A futex word with a lock's value (2) followed by zeros: a wait on it has
 * a contended lock's shape, but no owner. */
static _Alignas(8) int raw[8] = {2};
static int pipefd[2];
static atomic_int quitting, holding, announced;

#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

static void announce(const char *name)
{
	pthread_setname_np(pthread_self(), name);
	printf("%s %ld\n", name, (long)syscall(SYS_gettid));
	fflush(stdout);
	atomic_fetch_add(&announced, 1);
}

/* Holds m until the program ends (the pipe's write end closes). */
static void __attribute__((noinline)) locks_hold(pthread_mutex_t *m, const char *name)
{
	pthread_mutex_lock(m);
	announce(name);
	atomic_fetch_add(&holding, 1);
	char c;
	while (read(pipefd[0], &c, 1) < 0)
		KEEP_FRAME();
	pthread_mutex_unlock(m);
	KEEP_FRAME();
}

static void __attribute__((noinline)) locks_wait_for(pthread_mutex_t *m, const char *name)
{
	while (atomic_load(&holding) < 3)
		usleep(1000);
	announce(name);
	pthread_mutex_lock(m);
	KEEP_FRAME();
	pthread_mutex_unlock(m);
}

static void __attribute__((noinline)) locks_cond_wait(void)
{
	announce("condwait");
	pthread_mutex_lock(&cv_mu);
	while (!atomic_load(&quitting))
		pthread_cond_wait(&cv, &cv_mu);
	pthread_mutex_unlock(&cv_mu);
	KEEP_FRAME();
}

static void *holder(void *a)
{
	(void)a;
	locks_hold(&mu, "holder");
	return NULL;
}
static void *waiter(void *a)
{
	(void)a;
	locks_wait_for(&mu, "waiter");
	return NULL;
}
static void *pi_holder(void *a)
{
	(void)a;
	locks_hold(&pi_mu, "pi-holder");
	return NULL;
}
static void *pi_waiter(void *a)
{
	(void)a;
	locks_wait_for(&pi_mu, "pi-waiter");
	return NULL;
}
static void *rb_holder(void *a)
{
	(void)a;
	locks_hold(&rb_mu, "rb-holder");
	return NULL;
}
static void *rb_waiter(void *a)
{
	(void)a;
	locks_wait_for(&rb_mu, "rb-waiter");
	return NULL;
}
static void *condwait(void *a)
{
	(void)a;
	locks_cond_wait();
	return NULL;
}
static void *semwait(void *a)
{
	(void)a;
	announce("semwait");
	while (sem_wait(&sem) < 0)
		KEEP_FRAME();
	return NULL;
}
static void *rawfutex(void *a)
{
	(void)a;
	announce("rawfutex");
	while (!atomic_load(&quitting))
		syscall(SYS_futex, &raw[0], FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
	return NULL;
}

#ifdef LOCKS_SCOPE
static int task_holder(void *a, void **res)
{
	(void)res;
	holder(a);
	return 0;
}
static int task_waiter(void *a, void **res)
{
	(void)res;
	waiter(a);
	return 0;
}
static int task_condwait(void *a, void **res)
{
	(void)res;
	condwait(a);
	return 0;
}

/* The three threads of the signal-mode test run as tasks of one scope on
 * pool workers, which the agent knows; main joins it. */
static void *run_scope(void *a)
{
	(void)a;
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	scope_pool_t *pool;
	pc.name = "lockpool";
	pc.core_size = 4;
	pc.max_size = 6;
	pc.prestart = true;
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	cfg.name = "locks";
	if (scope_pool_create(&pool, &pc) < 0)
		exit(1);
	cfg.pool = pool;
	if (scope_open(&s, &cfg) < 0)
		exit(1);
	scope_fork(s, task_holder, NULL, NULL);
	scope_fork(s, task_waiter, NULL, NULL);
	scope_fork(s, task_condwait, NULL, NULL);
	scope_join(s);
	scope_close(s);
	return NULL;
}
#endif

int main(int argc, char **argv)
{
	(void)argv;
	if (argc > 1) {
		fprintf(stderr, "usage: plain_locks (see the comment at the top)\n");
		return 2;
	}
	pthread_mutexattr_t at;
	pthread_mutexattr_init(&at);
	pthread_mutexattr_setprotocol(&at, PTHREAD_PRIO_INHERIT);
	pthread_mutex_init(&pi_mu, &at);
	pthread_mutexattr_destroy(&at);
	pthread_mutexattr_init(&at);
	pthread_mutexattr_setrobust(&at, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&rb_mu, &at);
	pthread_mutexattr_destroy(&at);
	sem_init(&sem, 0, 0);
	if (pipe(pipefd) < 0)
		return 1;
	printf("mutex %p\npi %p\nrobust %p\n", (void *)&mu, (void *)&pi_mu, (void *)&rb_mu);
	fflush(stdout);

	pthread_t th[16];
	int n = 0;
#ifdef LOCKS_SCOPE
	pthread_create(&th[n++], NULL, run_scope, NULL);
#else
	pthread_create(&th[n++], NULL, holder, NULL);
	pthread_create(&th[n++], NULL, waiter, NULL);
	pthread_create(&th[n++], NULL, condwait, NULL);
#endif
	void *(*more[])(void *) = {pi_holder, pi_waiter, rb_holder, rb_waiter, semwait, rawfutex};
	for (size_t i = 0; i < sizeof more / sizeof *more; i++)
		pthread_create(&th[n++], NULL, more[i], NULL);
	while (atomic_load(&announced) < 9)
		usleep(1000);
	usleep(100000); /* the waiters reach their futex calls */
	printf("ready\n");
	fflush(stdout);

	char line[16];
	if (!fgets(line, sizeof line, stdin)) {
		/* EOF ends it as a line does. */
	}
	atomic_store(&quitting, 1);
	_exit(0);
}
