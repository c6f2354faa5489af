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
#include <time.h>
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

/* The CPU quota of one cgroup directory: cgroup v2's cpu.max, or v1's
 * cpu.cfs_quota_us over cpu.cfs_period_us; 0 when none is set. */
static double quota_at(const char *root, const char *dir, bool v1)
{
	char file[4400], buf[128];
	long long q, p;
	if (!v1) {
		snprintf(file, sizeof file, "%s%s/cpu.max", root, dir);
		if (slurp(file, buf, sizeof buf) > 0 && sscanf(buf, "%lld %lld", &q, &p) == 2 &&
		    q > 0 && p > 0)
			return (double)q / (double)p;
		return 0;
	}
	snprintf(file, sizeof file, "%s%s/cpu.cfs_quota_us", root, dir);
	if (slurp(file, buf, sizeof buf) <= 0 || sscanf(buf, "%lld", &q) != 1 || q <= 0)
		return 0;
	snprintf(file, sizeof file, "%s%s/cpu.cfs_period_us", root, dir);
	if (slurp(file, buf, sizeof buf) <= 0 || sscanf(buf, "%lld", &p) != 1 || p <= 0)
		return 0;
	return (double)q / (double)p;
}

/* The quota of cgroup directory dir under root in CPUs, the lowest of it
 * and its ancestors'; 0 when none is set. */
static double cgroup_quota(const char *root, const char *dir, bool v1)
{
	char path[4096];
	double best = 0;
	snprintf(path, sizeof path, "%s", dir);
	for (int depth = 0; depth < 64; depth++) {
		double c = quota_at(root, path, v1);
		if (c > 0 && (best == 0 || c < best))
			best = c;
		char *slash = strrchr(path, '/');
		if (!slash || slash == path) {
			if (path[0] && strcmp(path, "/") != 0) {
				c = quota_at(root, "", v1);
				if (c > 0 && (best == 0 || c < best))
					best = c;
			}
			break;
		}
		*slash = 0;
	}
	return best;
}

/* Whether the controller list of a v1 line ("cpu,cpuacct") names cpu. */
static bool names_cpu(const char *list, size_t len)
{
	for (size_t i = 0; i + 3 <= len; i++)
		if ((i == 0 || list[i - 1] == ',') && memcmp(list + i, "cpu", 3) == 0 &&
		    (i + 3 == len || list[i + 3] == ','))
			return true;
	return false;
}

/* The lowest quota of pid's cgroups, v2 and v1 (a hybrid host has both);
 * which into *v1. */
static double proc_quota(pid_t pid, bool *v1)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
	if (slurp(path, buf, sizeof buf) <= 0)
		return 0;
	double best = 0;
	for (char *line = buf, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		/* "hierarchy-id:controllers:path" */
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		double q = 0;
		bool is_v1 = false;
		if (c2 == c1 + 1 && strncmp(line, "0:", 2) == 0) {
			q = cgroup_quota("/sys/fs/cgroup", c2 + 1, false);
		} else if (names_cpu(c1 + 1, (size_t)(c2 - c1 - 1))) {
			static const char *const roots[] = {"/sys/fs/cgroup/cpu,cpuacct",
							    "/sys/fs/cgroup/cpu"};
			for (size_t r = 0; r < 2 && q == 0; r++)
				q = cgroup_quota(roots[r], c2 + 1, true);
			is_v1 = true;
		}
		if (q > 0 && (best == 0 || q < best)) {
			best = q;
			*v1 = is_v1;
		}
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
	bool v1 = false;
	double quota = proc_quota(pid, &v1);
	if (quota > 0 && quota < n) {
		snprintf(why, len, "cgroup %s quota %.2f CPUs (affinity %.0f)",
			 v1 ? "v1 cpu.cfs_quota_us" : "cpu.max", quota, n);
		return quota;
	}
	snprintf(why, len, "%s: %.0f CPUs", src, n);
	return n;
}

int64_t adv_cpu_now(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
