/* plain_procfloor.c - the kernel's floor under the /proc stack source, for
 * bench_plain: with every thread's files of a process open (as scoped keeps
 * them), the time of one pread(2) of each thread's syscall file, and of the
 * four reads a thread that ran costs the source (schedstat, stat, syscall
 * before and after its stack copy), over all threads, on one thread and in
 * two halves on two (as scoped reads them, bpf/halves.c; the second
 * thread's start included); each the median of several passes.  Prints
 * "threads N", "syscall MS", "moved MS" and "moved2 MS".
 *
 *   plain_procfloor PID [PASSES]
 *
 * It reads only; the target is neither stopped nor signalled. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

enum { F_SCHED, F_STAT, F_SYSCALL, F_N };
static const char *const names[F_N] = {"schedstat", "stat", "syscall"};

struct thread {
	int fd[F_N];
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void read_one(int fd)
{
	char buf[1024];

	if (fd >= 0 && pread(fd, buf, sizeof(buf), 0) < 0)
		(void)0; /* a thread that exited: its read costs what it costs */
}

struct range {
	struct thread *t;
	size_t lo, hi;
};

static void *moved_reads(void *arg)
{
	struct range *r = arg;
	for (size_t i = r->lo; i < r->hi; i++) {
		read_one(r->t[i].fd[F_SCHED]);
		read_one(r->t[i].fd[F_STAT]);
		read_one(r->t[i].fd[F_SYSCALL]);
		read_one(r->t[i].fd[F_SYSCALL]);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	char path[320];
	long pid = argc > 1 ? strtol(argv[1], NULL, 10) : 0;
	int passes = argc > 2 ? atoi(argv[2]) : 9;
	struct rlimit rl;
	struct thread *t = NULL;
	size_t n = 0, cap = 0;

	if (pid <= 0 || passes <= 0 || passes > 1000) {
		fprintf(stderr, "usage: plain_procfloor PID [PASSES (1-1000)]\n");
		return 2;
	}
	/* Three descriptors a thread: raise the soft limit to the hard one. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	snprintf(path, sizeof(path), "/proc/%ld/task", pid);
	DIR *dir = opendir(path);
	if (!dir) {
		fprintf(stderr, "plain_procfloor: %s: %s\n", path, strerror(errno));
		return 1;
	}
	for (struct dirent *de; (de = readdir(dir));) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 1024;
			struct thread *g = realloc(t, cap * sizeof(*t));
			if (!g) {
				fprintf(stderr, "plain_procfloor: out of memory\n");
				return 1;
			}
			t = g;
		}
		for (int k = 0; k < F_N; k++) {
			snprintf(path, sizeof(path), "%s/%s", de->d_name, names[k]);
			t[n].fd[k] = openat(dirfd(dir), path, O_RDONLY | O_CLOEXEC);
		}
		n++;
	}
	closedir(dir);
	if (n == 0 || t[0].fd[F_SYSCALL] < 0) {
		fprintf(stderr, "plain_procfloor: cannot read the threads of %ld\n", pid);
		return 1;
	}
	double *one = calloc((size_t)passes, sizeof(double));
	double *moved = calloc((size_t)passes, sizeof(double));
	double *moved2 = calloc((size_t)passes, sizeof(double));
	if (!one || !moved || !moved2) {
		fprintf(stderr, "plain_procfloor: out of memory\n");
		return 1;
	}
	/* The first pass of each kind warms what the kernel caches. */
	for (int p = -1; p < passes; p++) {
		double t0 = now_ms();
		for (size_t i = 0; i < n; i++)
			read_one(t[i].fd[F_SYSCALL]);
		double t1 = now_ms();
		struct range all = {t, 0, n};
		moved_reads(&all);
		double t2 = now_ms();
		struct range first = {t, 0, n / 2}, second = {t, n / 2, n};
		pthread_t helper;
		bool two = pthread_create(&helper, NULL, moved_reads, &second) == 0;
		moved_reads(&first);
		if (two)
			pthread_join(helper, NULL);
		else
			moved_reads(&second);
		double t3 = now_ms();
		if (p >= 0) {
			one[p] = t1 - t0;
			moved[p] = t2 - t1;
			moved2[p] = t3 - t2;
		}
	}
	qsort(one, (size_t)passes, sizeof(double), cmp_double);
	qsort(moved, (size_t)passes, sizeof(double), cmp_double);
	qsort(moved2, (size_t)passes, sizeof(double), cmp_double);
	printf("threads %zu\nsyscall %.3f\nmoved %.3f\nmoved2 %.3f\n", n, one[passes / 2],
	       moved[passes / 2], moved2[passes / 2]);
	return 0;
}
