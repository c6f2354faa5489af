/* late_times.c - a libscope program that keeps its own record of when
 * things happened (realtime ms, each as a [before, after] bracket around
 * the call): its start, a scope's open (with a one-hour timeout), a fork,
 * the task's start and the owner's join.  Prints the record as one JSON line
 * once all of it has happened, then waits until killed, so that a daemon
 * started late or restarted can be checked against the program's own clock. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "scope.h"

#define HOUR_NS (3600LL * 1000000000)

static double real_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static _Atomic double task_began; /* read by the task first thing */
static double fork_after;

static int waits(void *arg, void **res)
{
	(void)arg, (void)res;
	task_began = real_ms();
	return scope_sleep(HOUR_NS);
}

/* Prints the record once the task runs and the join has begun. */
static void *announce(void *arg)
{
	double *t = arg;
	while (task_began == 0)
		usleep(1000);
	usleep(200000); /* the owner is in scope_join by now */
	printf("{\"pid\":%d,\"main\":[%.3f,%.3f],\"open\":[%.3f,%.3f],\"fork\":[%.3f,%.3f],"
	       "\"start\":[%.3f,%.3f],\"join\":[%.3f,%.3f]}\n",
	       getpid(), t[0], t[1], t[2], t[3], t[4], fork_after, t[4], (double)task_began, t[5],
	       real_ms());
	fflush(stdout);
	return NULL;
}

int main(void)
{
	double t[6];
	t[0] = real_ms();
	scope_thread_name("late-main");
	t[1] = real_ms();
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s;
	cfg.name = "late";
	cfg.joiner = SCOPE_JOIN_AWAIT_ALL;
	cfg.timeout_ns = HOUR_NS;
	t[2] = real_ms();
	if (scope_open(&s, &cfg) < 0)
		return 1;
	t[3] = real_ms();
	t[4] = real_ms();
	if (scope_fork(s, waits, NULL, NULL) < 0)
		return 1;
	fork_after = real_ms();
	while (task_began == 0)
		usleep(1000);
	t[5] = real_ms();
	pthread_t a;
	pthread_create(&a, NULL, announce, t);
	scope_join(s);
	scope_close(s);
	return 0;
}
