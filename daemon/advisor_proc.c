/* advisor_proc.c - what the advisor reads from /proc and cgroupfs: a thread's
 * schedstat, a process's CPU time, and the CPUs a process may use. */
#include "advisor.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Reads a small file whole into buf (NUL-terminated); bytes read or -errno. */
static ssize_t slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, len - 1);
	int err = errno;
	close(fd);
	if (n < 0)
		return -err;
	buf[n] = 0;
	return n;
}

int adv_read_schedstat(void *ctx, pid_t pid, uint32_t tid, int64_t *cpu_ns, int64_t *runq_ns)
{
	(void)ctx;
	char path[64], buf[128];
	snprintf(path, sizeof path, "/proc/%d/task/%u/schedstat", (int)pid, tid);
	ssize_t n = slurp(path, buf, sizeof buf);
	if (n < 0)
		return (int)n;
	long long c, r;
	if (sscanf(buf, "%lld %lld", &c, &r) != 2 || c < 0 || r < 0)
		return -EINVAL;
	*cpu_ns = c;
	*runq_ns = r;
	return 0;
}

int64_t adv_read_proc_cpu(void *ctx, pid_t pid)
{
	(void)ctx;
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (slurp(path, buf, sizeof buf) < 0)
		return -1;
	/* After the command name, whatever it holds: fields 14 and 15. */
	const char *s = strrchr(buf, ')');
	unsigned long long ut, st;
	if (!s ||
	    sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	long tck = sysconf(_SC_CLK_TCK);
	if (tck <= 0)
		tck = 100;
	return (int64_t)((ut + st) * (1000000000ULL / (unsigned long long)tck));
}

/* The quota of cgroup v2 directory dir in CPUs (cpu.max), the lowest of it
 * and its ancestors'; 0 when none is set. */
static double cgroup_quota(const char *dir)
{
	char path[4096], buf[128];
	double best = 0;
	snprintf(path, sizeof path, "%s", dir);
	for (int depth = 0; depth < 64; depth++) {
		char file[4200];
		snprintf(file, sizeof file, "/sys/fs/cgroup%s/cpu.max", path);
		long long q, p;
		if (slurp(file, buf, sizeof buf) > 0 && sscanf(buf, "%lld %lld", &q, &p) == 2 &&
		    q > 0 && p > 0) {
			double c = (double)q / (double)p;
			if (best == 0 || c < best)
				best = c;
		}
		char *slash = strrchr(path, '/');
		if (!slash || slash == path)
			break;
		*slash = 0;
	}
	return best;
}

double adv_read_ncpu(void *ctx, pid_t pid, char *why, size_t len)
{
	(void)ctx;
	cpu_set_t set;
	double n = 0;
	if (sched_getaffinity(pid, sizeof set, &set) == 0)
		n = CPU_COUNT(&set);
	const char *src = "affinity";
	if (n <= 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		n = c > 0 ? (double)c : 1;
		src = "online CPUs";
	}
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
	double quota = 0;
	if (slurp(path, buf, sizeof buf) > 0) {
		/* The v2 line: "0::/path". */
		char *line = strstr(buf, "0::");
		if (line == buf || (line && line[-1] == '\n')) {
			char *end = strchr(line, '\n');
			if (end)
				*end = 0;
			quota = cgroup_quota(line + 3);
		}
	}
	if (quota > 0 && quota < n) {
		snprintf(why, len, "cgroup cpu.max quota %.2f CPUs (affinity %.0f)", quota, n);
		return quota;
	}
	snprintf(why, len, "%s: %.0f CPUs", src, n);
	return n;
}
