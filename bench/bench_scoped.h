/* bench_scoped.h - the real scoped daemon on a private socket, for the
 * benchmarks that measure with the agent connected (bench_agent,
 * bench_sched).  The daemon is build/bin/scoped beside the benchmark's
 * directory, or BENCH_SCOPED; it dies with the process that started it. */
#ifndef BENCH_SCOPED_H
#define BENCH_SCOPED_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

struct bench_daemon {
	char path[108]; /* its agent socket */
	char dir[64];	/* its private directory, removed after it */
	pid_t pid;
};

/* Starts it and waits until it listens; 0, or -1 with the reason on
 * stderr (who names the benchmark). */
static inline int bench_daemon_start(struct bench_daemon *d, const char *who)
{
	char exe[4096], scoped[4200];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	char *slash;
	pid_t parent = getpid();

	if (n <= 0)
		return -1;
	exe[n] = 0;
	slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = 0;
	snprintf(scoped, sizeof scoped, "%s/../bin/scoped", exe);
	if (getenv("BENCH_SCOPED")) /* another build of the daemon, for an A/B */
		snprintf(scoped, sizeof scoped, "%s", getenv("BENCH_SCOPED"));
	if (access(scoped, X_OK)) {
		fprintf(stderr, "%s: no daemon at %s (make all)\n", who, scoped);
		return -1;
	}
	snprintf(d->dir, sizeof d->dir, "/tmp/scoped-bench-%d", (int)getpid());
	snprintf(d->path, sizeof d->path, "%s/agent.sock", d->dir);
	d->pid = fork();
	if (d->pid < 0)
		return -1;
	if (d->pid == 0) {
		/* BENCH_SCOPED_ARGS: more options for the daemon, separated
		 * by spaces (for experiments, e.g. "--max-retained 4096"). */
		char *argv[24] = {"scoped",   "--foreground", "--socket",    d->path,
				  "--stacks", "signal",	      "--log-level", "warn"};
		int argc = 8;
		char *extra = getenv("BENCH_SCOPED_ARGS");

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		for (char *tok = extra ? strtok(extra, " ") : NULL; tok && argc < 23;
		     tok = strtok(NULL, " "))
			argv[argc++] = tok;
		argv[argc] = NULL;
		execv(scoped, argv);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		int ok;

		snprintf(sa.sun_path, sizeof sa.sun_path, "%s", d->path);
		ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
		if (fd >= 0)
			close(fd);
		if (ok)
			return 0;
		usleep(10000);
	}
	fprintf(stderr, "%s: the daemon did not listen on %s\n", who, d->path);
	return -1;
}

/* The daemon's CPU time so far (user + system, in clock ticks); -1 when
 * it cannot be read. */
static inline long long bench_daemon_cpu(const struct bench_daemon *d)
{
	char path[64], buf[1024];
	unsigned long long ut, st;
	FILE *f;
	size_t n;
	const char *p;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)d->pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (long long)(ut + st);
}

/* Waits (at most 5 s) until the daemon has used no CPU for 50 ms: done
 * with what the last agent round sent, so that the next round has the
 * host's cores to itself. */
static inline void bench_daemon_settle(const struct bench_daemon *d)
{
	long long last = bench_daemon_cpu(d);

	for (int i = 0; i < 100 && last >= 0; i++) {
		usleep(50000);
		long long now = bench_daemon_cpu(d);
		if (now == last)
			return;
		last = now;
	}
}

static inline void bench_daemon_stop(struct bench_daemon *d)
{
	char ctl[sizeof d->dir + 16];

	if (d->pid <= 0)
		return;
	kill(d->pid, SIGCONT);
	kill(d->pid, SIGTERM);
	waitpid(d->pid, NULL, 0);
	d->pid = 0;
	unlink(d->path);
	/* The daemon removed its sockets on SIGTERM; a control socket it left
	 * behind on a crash goes here too. */
	snprintf(ctl, sizeof ctl, "%s/control.sock", d->dir);
	unlink(ctl);
	rmdir(d->dir);
}

#endif /* BENCH_SCOPED_H */
