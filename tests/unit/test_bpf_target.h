/* test_bpf_target.h - starts tests/helpers/bpf_target for the BPF tests and
 * benchmark, reads which thread plays which role, and stops it. */
#ifndef TEST_BPF_TARGET_H
#define TEST_BPF_TARGET_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BT_MAX_ROLES 16

struct bt_target {
	pid_t pid;
	int in, out; /* its stdin (write end) and stdout (read end) */
	struct {
		char role[16];
		pid_t tid;
	} roles[BT_MAX_ROLES];
	int nroles;
	int signals, eintr; /* what it reported when stopped; -1 before */
};

/* Path of a helper program built beside this test binary:
 * $BUILD/tests/test_x -> $BUILD/tests/helpers/<name>, or for the bench
 * $BUILD/bench/bench_x -> $BUILD/tests/helpers/<name>. */
static inline int bt_helper_path(char *buf, size_t len, const char *name)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;
	int r;

	if (n <= 0)
		return -1;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	slash = strrchr(self, '/');
	if (slash && strcmp(slash, "/bench") == 0) {
		*slash = '\0';
		r = snprintf(buf, len, "%s/tests/helpers/%s", self, name);
	} else {
		r = snprintf(buf, len, "%s/helpers/%s", self, name);
	}
	if (r < 0 || (size_t)r >= len)
		return -1;
	return access(buf, X_OK);
}

/* Reads one line from fd with a deadline; returns its length or -1. */
static inline int bt_read_line(int fd, char *buf, size_t len, int timeout_ms)
{
	size_t used = 0;

	while (used + 1 < len) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		char c;

		if (poll(&p, 1, timeout_ms) <= 0 || read(fd, &c, 1) != 1)
			return -1;
		if (c == '\n')
			break;
		buf[used++] = c;
	}
	buf[used] = '\0';
	return (int)used;
}

/* Waits (up to 5 s) for the target's main thread to sleep in its read of
 * stdin, which it enters just after printing "ready". */
static inline int bt_wait_asleep(pid_t pid)
{
	char path[64], buf[512];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (int i = 0; i < 5000; i++) {
		int fd = open(path, O_RDONLY);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		char *p;

		if (fd >= 0)
			close(fd);
		if (n <= 0)
			return -1;
		buf[n] = '\0';
		p = strrchr(buf, ')');
		if (p && p[1] == ' ' && p[2] == 'S')
			return 0;
		usleep(1000);
	}
	return -1;
}

/* Reads "<role> <tid>" lines up to "ready", then waits for the main
 * thread to block again. */
static inline int bt_read_roles(struct bt_target *t)
{
	char line[128];

	while (bt_read_line(t->out, line, sizeof(line), 30000) >= 0) {
		char role[16];
		int tid;

		if (strcmp(line, "ready") == 0)
			return bt_wait_asleep(t->pid);
		if (sscanf(line, "%15s %d", role, &tid) == 2 && strcmp(role, "extra") != 0 &&
		    t->nroles < BT_MAX_ROLES) {
			snprintf(t->roles[t->nroles].role, sizeof(t->roles[0].role), "%s", role);
			t->roles[t->nroles++].tid = tid;
		}
	}
	return -1;
}

/* Starts the target with args (such as "-s", "1000", NULL); returns 0 once
 * it says every thread is blocked, or -1.  With agent, libscope's agent
 * runs in it (pass "-a" too) and connects to $SCOPED_SOCKET. */
static inline int bt_start_agent(struct bt_target *t, const char *const *args, int agent)
{
	char path[PATH_MAX];
	int to[2], from[2];
	const char *argv[8] = {"bpf_target"};
	int argc = 1;

	memset(t, 0, sizeof(*t));
	t->signals = t->eintr = -1;
	if (bt_helper_path(path, sizeof(path), "bpf_target") != 0)
		return -1;
	for (; args && args[argc - 1] && argc < 7; argc++)
		argv[argc] = args[argc - 1];
	argv[argc] = NULL;
	if (pipe2(to, O_CLOEXEC) != 0 || pipe2(from, O_CLOEXEC) != 0)
		return -1;
	t->pid = fork();
	if (t->pid < 0)
		return -1;
	if (t->pid == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		/* libscope's agent thread would wake on its own and blur the
		 * "nothing woke" checks of the tests that need no daemon. */
		if (!agent)
			setenv("SCOPED_DISABLE", "1", 1);
		execv(path, (char *const *)argv);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	t->in = to[1];
	t->out = from[0];
	return bt_read_roles(t);
}

/* Sends a command line ("z") and reads the roles it adds up to "ready". */
static inline int bt_command(struct bt_target *t, const char *cmd)
{
	size_t len = strlen(cmd);

	if (write(t->in, cmd, len) != (ssize_t)len || write(t->in, "\n", 1) != 1)
		return -1;
	return bt_read_roles(t);
}

static inline int bt_start(struct bt_target *t, const char *const *args)
{
	return bt_start_agent(t, args, 0);
}

static inline pid_t bt_tid(const struct bt_target *t, const char *role)
{
	for (int i = 0; i < t->nroles; i++)
		if (strcmp(t->roles[i].role, role) == 0)
			return t->roles[i].tid;
	return -1;
}

/* Tells the target to report and exit; fills signals and eintr. */
static inline void bt_stop(struct bt_target *t)
{
	char line[128];

	if (t->pid <= 0)
		return;
	if (write(t->in, "q\n", 2) == 2 && bt_read_line(t->out, line, sizeof(line), 10000) >= 0)
		sscanf(line, "signals %d eintr %d", &t->signals, &t->eintr);
	close(t->in);
	close(t->out);
	kill(t->pid, SIGKILL); /* only if it did not exit by itself */
	waitpid(t->pid, NULL, 0);
	t->pid = 0;
}

#endif /* TEST_BPF_TARGET_H */
