/* bpf_target.c - a process whose threads sit blocked in known functions, for
 * the BPF stack tests and benchmark to capture; it counts every signal and
 * EINTR it sees, since a BPF capture must cause neither.
 *
 * usage: bpf_target [-s] [-a] [EXTRA]   (-s adds a thread spinning on a CPU;
 * -a leaves the real-time signals to libscope's agent; EXTRA more threads
 * wait on a condition variable)
 * stdout: "<role> <tid>" per thread, then "ready".  stdin: "z" starts a
 * thread blocked inside libz, loaded only then (its role line, "ready");
 * "c" starts a thread that creates and joins threads without pause (its
 * role line, "ready"); any other line or EOF: "signals N eintr N", exit. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "scope.h"

#define MAX_EXTRA 4000

static pthread_mutex_t cv_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER; /* main holds it */
static int quit_pipe[2];
static atomic_int signals, eintrs, started, quitting, spin_tid;

static void on_signal(int sig)
{
	(void)sig;
	atomic_fetch_add(&signals, 1);
}

static void announce(const char *role)
{
	printf("%s %ld\n", role, (long)syscall(SYS_gettid));
	atomic_fetch_add(&started, 1);
}

__attribute__((noinline)) void bpf_target_wait_futex(void)
{
	pthread_mutex_lock(&cv_mu);
	while (!atomic_load(&quitting))
		pthread_cond_wait(&cv, &cv_mu);
	pthread_mutex_unlock(&cv_mu);
}

__attribute__((noinline)) void bpf_target_timedwait(void)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 100000;
	pthread_mutex_lock(&cv_mu);
	while (!atomic_load(&quitting))
		pthread_cond_timedwait(&cv, &cv_mu, &until);
	pthread_mutex_unlock(&cv_mu);
}

__attribute__((noinline)) void bpf_target_sleep(void)
{
	struct timespec ts = {.tv_sec = 100000};

	while (!atomic_load(&quitting))
		if (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			atomic_fetch_add(&eintrs, 1);
}

__attribute__((noinline)) void bpf_target_read(void)
{
	char c;

	for (;;) {
		ssize_t n = read(quit_pipe[0], &c, 1);

		if (n < 0 && errno == EINTR)
			atomic_fetch_add(&eintrs, 1);
		else
			break;
	}
}

__attribute__((noinline)) void bpf_target_lock(void)
{
	pthread_mutex_lock(&held);
	pthread_mutex_unlock(&held);
}

__attribute__((noinline)) void bpf_target_epoll(void)
{
	struct epoll_event ev = {.events = EPOLLIN}, out;
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, quit_pipe[0], &ev) != 0)
		return;
	while (epoll_wait(ep, &out, 1, -1) < 0)
		if (errno == EINTR)
			atomic_fetch_add(&eintrs, 1);
	close(ep);
}

__attribute__((noinline)) void bpf_target_spin(void)
{
	volatile unsigned long n = 0;

	atomic_store(&spin_tid, (int)syscall(SYS_gettid));
	while (!atomic_load(&quitting))
		n++;
}

/* Recurses DEEP_LEVELS times with 256-byte frames (~40 KiB, more than the
 * captured window) before blocking, so unwinding must read past it. */
#define DEEP_LEVELS 150

__attribute__((noinline)) int bpf_target_deep_level(int n, volatile char *up)
{
	volatile char pad[256];

	pad[0] = (char)n;
	pad[255] = up ? up[0] : 0;
	if (n == 0)
		bpf_target_read();
	else
		bpf_target_deep_level(n - 1, pad);
	return pad[0] + pad[255]; /* keeps the call from being a tail call */
}

__attribute__((noinline)) void bpf_target_deep(void)
{
	bpf_target_deep_level(DEEP_LEVELS, NULL);
}

static void *bpf_target_zalloc(void *opaque, unsigned items, unsigned size)
{
	(void)opaque;
	bpf_target_wait_futex();
	return calloc(items, size);
}

static void bpf_target_zfree(void *opaque, void *p)
{
	(void)opaque;
	free(p);
}

/* Blocks inside a library that was not mapped when the process started,
 * so a stale module map would cut the stack at the libz frame. */
__attribute__((noinline)) void bpf_target_zlib(void)
{
	typedef int (*init_fn)(z_stream *, const char *, int);
	void *lib = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
	init_fn init = lib ? (init_fn)dlsym(lib, "inflateInit_") : NULL;
	z_stream z;

	if (!init)
		return;
	memset(&z, 0, sizeof(z));
	z.zalloc = bpf_target_zalloc;
	z.zfree = bpf_target_zfree;
	init(&z, ZLIB_VERSION, (int)sizeof(z));
}

static void *churn_child(void *arg)
{
	return arg;
}

/* Threads appear and exit all through a capture. */
__attribute__((noinline)) void bpf_target_churn(void)
{
	while (!atomic_load(&quitting)) {
		pthread_t t;

		if (pthread_create(&t, NULL, churn_child, NULL) == 0)
			pthread_join(t, NULL);
	}
}

/* Roles started at once (copies: 1, or -s / EXTRA), then those started by
 * a command on stdin. */
static const struct role {
	const char *name;
	void (*fn)(void);
	char command;
} roles[] = {
    {"futex", bpf_target_wait_futex, 0}, {"timedwait", bpf_target_timedwait, 0},
    {"sleep", bpf_target_sleep, 0},	 {"read", bpf_target_read, 0},
    {"mutex", bpf_target_lock, 0},	 {"epoll", bpf_target_epoll, 0},
    {"deep", bpf_target_deep, 0},	 {"spin", bpf_target_spin, 0},
    {"extra", bpf_target_wait_futex, 0}, {"zlib", bpf_target_zlib, 'z'},
    {"churn", bpf_target_churn, 'c'},
};
#define NROLES (sizeof(roles) / sizeof(roles[0]))

static void *thread_main(void *arg)
{
	const struct role *r = arg;

	announce(r->name);
	r->fn();
	return NULL;
}

/* Whether every thread of this process but the caller and the spinner is
 * asleep (a sanitizer's own threads included), so that "ready" means the
 * threads are where their role says. */
static int all_asleep(void)
{
	char path[96], buf[512];
	long self = (long)syscall(SYS_gettid);
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int awake = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		long tid = atol(e->d_name);
		int fd;
		ssize_t n;
		char *p;

		if (tid <= 0 || tid == self || tid == atomic_load(&spin_tid))
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%ld/stat", tid);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		buf[n > 0 ? n : 0] = '\0';
		p = strrchr(buf, ')');
		if (!p || p[1] != ' ' || p[2] != 'S')
			awake++;
	}
	closedir(d);
	return awake == 0;
}

static void rename_thread(long tid)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%ld/comm", tid);
	fd = open(path, O_WRONLY);
	if (fd >= 0) {
		if (write(fd, "renamed", 7) != 7)
			fprintf(stderr, "bpf_target: renaming %ld failed\n", tid);
		close(fd);
	}
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	pthread_attr_t attr;
	int spin = 0, extra = 0, nthreads = 0, agent = 0;
	char line[64];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-s") == 0)
			spin = 1;
		else if (strcmp(argv[i], "-a") == 0)
			agent = 1;
		else
			extra = atoi(argv[i]);
	}
	/* Any call keeps libscope (and so its agent, unless SCOPED_DISABLE is
	 * set) linked in. */
	if (!scope_version())
		return 1;
	if (extra < 0 || extra > MAX_EXTRA) {
		fprintf(stderr, "bpf_target: EXTRA must be 0..%d\n", MAX_EXTRA);
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal; /* no SA_RESTART: a signal shows as EINTR */
	for (int s = 1; s < (agent ? SIGRTMIN : NSIG); s++)
		if (s != SIGKILL && s != SIGSTOP && s != SIGINT && s != SIGTERM)
			sigaction(s, &sa, NULL);
	if (pipe(quit_pipe) != 0)
		return 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	pthread_mutex_lock(&held);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 << 10);
	for (size_t i = 0; i < NROLES; i++) {
		int copies = roles[i].command			   ? 0
			     : roles[i].fn == bpf_target_spin	   ? spin
			     : strcmp(roles[i].name, "extra") == 0 ? extra
								   : 1;

		for (int c = 0; c < copies; c++) {
			pthread_t t;

			if (pthread_create(&t, &attr, thread_main, (void *)&roles[i]) != 0) {
				fprintf(stderr, "bpf_target: pthread_create failed\n");
				return 1;
			}
			pthread_detach(t);
			nthreads++;
		}
	}
	while (atomic_load(&started) < nthreads)
		usleep(1000);
	while (!all_asleep())
		usleep(2000);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin)) {
		const struct role *r = NULL;
		pthread_t t;

		if (line[0] == 'n') {
			/* "n TID": that thread renamed from here, while it
			 * sleeps on. */
			rename_thread(atol(line + 1));
			printf("ready\n");
			continue;
		}

		for (size_t i = 0; i < NROLES; i++)
			if (roles[i].command && roles[i].command == line[0])
				r = &roles[i];
		if (!r || pthread_create(&t, &attr, thread_main, (void *)r) != 0)
			break;
		pthread_detach(t);
		nthreads++;
		while (atomic_load(&started) < nthreads)
			usleep(1000);
		/* The churner never sleeps: once it runs, it is where it should be. */
		while (r->fn != bpf_target_churn && !all_asleep())
			usleep(2000);
		printf("ready\n");
	}
	printf("signals %d eintr %d\n", atomic_load(&signals), atomic_load(&eintrs));
	fflush(stdout);
	_exit(0);
}
