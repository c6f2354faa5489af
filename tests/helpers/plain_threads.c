/* plain_threads.c - a program that never links libscope, with named threads
 * parked in known functions: a sleep, a read from a pipe, a mutex that main
 * holds, a condition variable, and (with -s) a busy loop; for the tests and
 * the benchmark that dump processes without an agent.
 *
 * usage: plain_threads [-s] [-t] [EXTRA]   (EXTRA more threads, named
 * "idle-N", wait on the condition variable, up to 20000; -t adds a thread
 * "ticker" that wakes every millisecond)
 * stdout: "main <pid>", "<name> <tid>" per named thread, then "ready"; exits at EOF on
 * stdin or any line, releasing every thread first. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_EXTRA 20000

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER; /* main holds it */
static pthread_mutex_t cv_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pipefd[2];
static atomic_int quitting, started;

/* Keeps the call above it a call, not a jump: each park function stays a
 * frame of its own at -O2. */
#define NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

static void announce(const char *name)
{
	pthread_setname_np(pthread_self(), name);
	printf("%s %ld\n", name, (long)syscall(SYS_gettid));
	fflush(stdout);
	atomic_fetch_add(&started, 1);
}

__attribute__((noinline)) void plain_park_sleep(void)
{
	while (!atomic_load(&quitting)) {
		struct timespec ts = {3600, 0};
		nanosleep(&ts, NULL);
		NO_TAIL_CALL();
	}
}

__attribute__((noinline)) void plain_park_read(void)
{
	char c;
	while (read(pipefd[0], &c, 1) < 0)
		NO_TAIL_CALL();
	NO_TAIL_CALL();
}

__attribute__((noinline)) void plain_park_mutex(void)
{
	pthread_mutex_lock(&held);
	NO_TAIL_CALL();
	pthread_mutex_unlock(&held);
}

__attribute__((noinline)) void plain_park_cond(void)
{
	pthread_mutex_lock(&cv_mu);
	while (!atomic_load(&quitting))
		pthread_cond_wait(&cv, &cv_mu);
	pthread_mutex_unlock(&cv_mu);
	NO_TAIL_CALL();
}

__attribute__((noinline)) void plain_spin(void)
{
	volatile unsigned long n = 0;
	while (!atomic_load(&quitting))
		n++;
	NO_TAIL_CALL();
}

__attribute__((noinline)) void plain_tick(void)
{
	while (!atomic_load(&quitting)) {
		struct timespec ts = {0, 1000 * 1000};
		nanosleep(&ts, NULL);
		NO_TAIL_CALL();
	}
}

struct role {
	const char *name;
	void (*park)(void);
};

static const struct role roles[] = {
    {"sleeper", plain_park_sleep}, {"reader", plain_park_read}, {"locker", plain_park_mutex},
    {"waiter", plain_park_cond},   {"spinner", plain_spin},
};
static const struct role ticker = {"ticker", plain_tick};

static void *role_main(void *arg)
{
	const struct role *r = arg;
	announce(r->name);
	r->park();
	NO_TAIL_CALL();
	return NULL;
}

static void *idle_main(void *arg)
{
	char name[16];
	snprintf(name, sizeof name, "idle-%ld", (long)(intptr_t)arg);
	pthread_setname_np(pthread_self(), name);
	atomic_fetch_add(&started, 1);
	plain_park_cond();
	NO_TAIL_CALL();
	return NULL;
}

int main(int argc, char **argv)
{
	bool spin = false, tick = false;
	long extra = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-s"))
			spin = true;
		else if (!strcmp(argv[i], "-t"))
			tick = true;
		else
			extra = strtol(argv[i], NULL, 10);
	}
	if (extra < 0 || extra > MAX_EXTRA || pipe(pipefd) < 0)
		return 2;
	printf("main %ld\n", (long)getpid());
	fflush(stdout);
	pthread_mutex_lock(&held);
	size_t nroles = sizeof roles / sizeof *roles - (spin ? 0 : 1);
	pthread_t *th = calloc(nroles + (size_t)extra, sizeof *th);
	pthread_attr_t small;
	pthread_attr_init(&small);
	pthread_attr_setstacksize(&small, 64 * 1024);
	if (!th)
		return 2;
	for (size_t i = 0; i < nroles; i++)
		if (pthread_create(&th[i], NULL, role_main, (void *)&roles[i]) != 0)
			return 3;
	for (long i = 0; i < extra; i++)
		if (pthread_create(&th[nroles + (size_t)i], &small, idle_main,
				   (void *)(intptr_t)i) != 0)
			return 3;
	pthread_t tick_th;
	if (tick && pthread_create(&tick_th, NULL, role_main, (void *)&ticker) != 0)
		return 3;
	while (atomic_load(&started) < (int)(nroles + (size_t)extra + tick))
		usleep(1000);
	usleep(20000); /* every thread into its wait */
	printf("ready\n");
	fflush(stdout);
	char line[64];
	(void)!fgets(line, sizeof line, stdin);
	atomic_store(&quitting, 1);
	pthread_mutex_unlock(&held);
	pthread_mutex_lock(&cv_mu);
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&cv_mu);
	(void)!write(pipefd[1], "x", 1);
	for (size_t i = 0; i < nroles + (size_t)extra; i++)
		if (i != 0) /* the sleeper sleeps an hour: the exit ends it */
			pthread_join(th[i], NULL);
	if (tick)
		pthread_join(tick_th, NULL);
	return 0;
}
