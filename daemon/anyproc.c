/* anyproc.c - what the daemon knows of a process that never linked libscope,
 * read from /proc when a client asks. */
#include "anyproc.h"

#include "jfield.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Reads the name, thread count and start time from the main thread's stat
 * file: the same fields as /proc/PID/stat, which also sums the times of
 * every thread (a millisecond for a thousand threads, twice a dump). */
static int read_stat(pid_t pid, struct anyproc *a)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -ESRCH;
	buf[n] = '\0';
	char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
	if (!open_paren || !close_paren || close_paren < open_paren)
		return -EINVAL;
	size_t len = (size_t)(close_paren - open_paren - 1);
	if (len > sizeof a->name - 1)
		len = sizeof a->name - 1;
	memcpy(a->name, open_paren + 1, len);
	a->name[len] = '\0';
	for (char *c = a->name; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	/* Fields from 3 (state) on: threads is 20, starttime 22. */
	char *p = close_paren + 2, *save = NULL;
	int field = 3;
	for (char *tok = strtok_r(p, " ", &save); tok; tok = strtok_r(NULL, " ", &save), field++) {
		if (field == 20)
			a->threads = strtol(tok, NULL, 10);
		if (field == 22) {
			a->starttime = strtoull(tok, NULL, 10);
			break;
		}
	}
	return field == 22 ? 0 : -EINVAL;
}

static int read_uids(pid_t pid, uid_t uids[4])
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	int rc = -EINVAL;
	while (fgets(line, sizeof line, f)) {
		unsigned u[4];
		if (sscanf(line, "Uid: %u %u %u %u", &u[0], &u[1], &u[2], &u[3]) == 4) {
			for (int i = 0; i < 4; i++)
				uids[i] = (uid_t)u[i];
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

int anyproc_read(pid_t pid, struct anyproc *a)
{
	memset(a, 0, sizeof *a);
	a->pid = pid;
	int rc = read_stat(pid, a);
	if (rc == 0)
		rc = read_uids(pid, a->uids);
	if (rc < 0)
		return rc;
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(path, a->exe, sizeof a->exe - 1);
	a->exe[n > 0 ? n : 0] = '\0';
	long hz = sysconf(_SC_CLK_TCK);
	if (hz > 0) {
		int64_t since_boot =
		    (int64_t)(a->starttime / (unsigned long long)hz) * 1000000000 +
		    (int64_t)(a->starttime % (unsigned long long)hz) * (1000000000 / hz);
		a->start_real_ns =
		    clock_ns(CLOCK_REALTIME) - (clock_ns(CLOCK_BOOTTIME) - since_boot);
	}
	return 0;
}

bool anyproc_may_inspect(const struct anyproc *a, uid_t viewer, char *why, size_t whylen)
{
	if (viewer == 0)
		return true;
	for (int i = 0; i < 4; i++)
		if (a->uids[i] != viewer) {
			if (a->uids[1] != viewer || a->uids[0] != viewer)
				snprintf(why, whylen,
					 "process %d belongs to uid %u and you are uid %u; run "
					 "scopecmd as that user or as root",
					 (int)a->pid, (unsigned)a->uids[1], (unsigned)viewer);
			else
				snprintf(
				    why, whylen,
				    "process %d has gained privileges (a setuid or setgid "
				    "program: its uids are %u %u %u %u); only root may inspect it",
				    (int)a->pid, (unsigned)a->uids[0], (unsigned)a->uids[1],
				    (unsigned)a->uids[2], (unsigned)a->uids[3]);
			return false;
		}
	return true;
}

bool anyproc_links_libscope(pid_t pid)
{
	char path[64], line[512];
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool found = false;
	while (!found && fgets(line, sizeof line, f))
		found = strstr(line, "/libscope.so") != NULL;
	fclose(f);
	return found;
}

void anyproc_summary_json(struct jbuf *b, const struct anyproc *a)
{
	jb_obj(b);
	jf_i64(b, "pid", a->pid);
	jf_u64(b, "uid", a->uids[1]);
	jf_str(b, "name", a->name);
	jf_str(b, "exe", a->exe[0] ? a->exe : NULL);
	jf_str(b, "runtime_version", NULL);
	jf_ms_if(b, "start_time_ms", a->start_real_ns > 0, a->start_real_ns);
	jf_str(b, "state", "live");
	jf_str(b, "exit_cause", NULL);
	static const char *const absent[] = {"exit_code", "exit_signal"};
	for (size_t i = 0; i < 2; i++) {
		jb_key(b, absent[i]);
		jb_null(b);
	}
	jf_u64(b, "threads", a->threads > 0 ? (uint64_t)a->threads : 0);
	static const char *const none[] = {"pools", "scopes", "tasks", "events", "lost"};
	for (size_t i = 0; i < sizeof none / sizeof *none; i++)
		jf_u64(b, none[i], 0);
	jf_bool(b, "complete", true);
	jf_bool(b, "repaired", false);
	jb_key(b, "uptime_ms");
	int64_t up = clock_ns(CLOCK_REALTIME) - a->start_real_ns;
	jb_ms(b, a->start_real_ns > 0 && up > 0 ? up : 0);
	jf_bool(b, "instrumented", false);
	jb_obj_end(b);
}
