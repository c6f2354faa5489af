/* test_agent_rx.h - the test side of the agent tests' receiving endpoint
 * (the receiver itself is `test_agent_recv --receiver`): start and stop it, ask
 * it for its model, and compare that model with the truth.  Header-only so
 * that test_agent.c and test_agent_workload.c share it. */
#ifndef TEST_AGENT_RX_H
#define TEST_AGENT_RX_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/writeall.h"
#include "agent.h"
#include "proto.h"

/* Every helper here is static; each test file uses only some of them. */
#define RX_FN __attribute__((unused))

/* A receiver process and its two sockets in a private directory. */
struct rx {
	char dir[40], sock[100], ctl[100];
	pid_t pid;
};

/* Frames of the expected model, encoded as the agent would. */
struct truth {
	uint8_t *p;
	size_t len, cap;
};

/* A failed write shows up as the reader's mismatch, so it is not checked. */
RX_FN static void rx_send_all(int fd, const void *p, size_t n)
{
	(void)write_all(fd, p, n, true);
}

/* In a child just forked by parent: dies with it.  A receiver whose test
 * never reaches rx_cleanup() (an assertion that fails in a setup, after
 * which cmocka runs no teardown; a test that hangs until run.sh's timeout
 * kills it, or dies of a signal) would otherwise listen on forever.  The
 * signal comes when the thread that forked exits (cmocka's tests run on
 * the main thread); a parent gone before prctl() ran is caught by the
 * getppid() check. */
RX_FN static void rx_die_with_parent(pid_t parent)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
		_exit(127);
}

RX_FN static void rx_start(struct rx *rx)
{
	pid_t parent = getpid();

	if (!rx->dir[0]) {
		snprintf(rx->dir, sizeof rx->dir, "/tmp/scoped-agent-test.XXXXXX");
		assert_non_null(mkdtemp(rx->dir));
		snprintf(rx->sock, sizeof rx->sock, "%s/agent.sock", rx->dir);
		snprintf(rx->ctl, sizeof rx->ctl, "%s/recv-ctl.sock", rx->dir);
	}
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	assert_true(n > 0);
	self[n] = 0;
	/* The receiver is test_agent_recv, beside this test binary. */
	char *slash = strrchr(self, '/');
	snprintf(slash + 1, sizeof self - (size_t)(slash + 1 - self), "test_agent_recv");
	unlink(rx->ctl);
	rx->pid = fork();
	assert_true(rx->pid >= 0);
	if (rx->pid == 0) {
		rx_die_with_parent(parent); /* kept across execl() */
		execl(self, self, "--receiver", rx->sock, rx->ctl, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		struct stat st;
		if (stat(rx->ctl, &st) == 0)
			return;
		usleep(2000);
	}
	fail_msg("receiver %s did not start", self);
}

RX_FN static void rx_kill(struct rx *rx, int sig)
{
	if (rx->pid > 0) {
		kill(rx->pid, sig);
		if (sig == SIGKILL || sig == SIGTERM) {
			waitpid(rx->pid, NULL, 0);
			rx->pid = 0;
		}
	}
}

RX_FN static void rx_cleanup(struct rx *rx)
{
	rx_kill(rx, SIGKILL);
	unlink(rx->sock);
	unlink(rx->ctl);
	rmdir(rx->dir);
	rx->dir[0] = 0;
}

/* Sends cmd (and extra bytes), returns the reply up to "end\n" (new). */
RX_FN static char *rx_cmd(struct rx *rx, const char *cmd, const void *extra, size_t nextra)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", rx->ctl);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	rx_send_all(fd, cmd, strlen(cmd));
	rx_send_all(fd, "\n", 1);
	if (nextra)
		rx_send_all(fd, extra, nextra);
	size_t cap = 1 << 16, len = 0;
	char *out = malloc(cap);
	for (;;) {
		if (len + 1 >= cap)
			out = realloc(out, cap *= 2);
		ssize_t k = read(fd, out + len, cap - len - 1);
		if (k <= 0)
			break;
		len += (size_t)k;
	}
	out[len] = 0;
	close(fd);
	return out;
}

/* A number from the receiver's stats line ("key=N"). */
RX_FN static long long rx_stat(struct rx *rx, const char *key)
{
	char *s = rx_cmd(rx, "stats", NULL, 0), pat[64];
	snprintf(pat, sizeof pat, " %s=", key);
	char *p = strstr(s, pat);
	long long v = p ? strtoll(p + strlen(pat), NULL, 10) : -1;
	free(s);
	return v;
}

/* Waits (up to ms) until the agent has a session whose snapshot the
 * receiver holds. */
RX_FN static int rx_wait_session(struct rx *rx, long long sessions, int ms)
{
	for (int i = 0; i < ms / 5; i++) {
		struct sc_agent_stats st;
		sc_agent_get_stats(&st);
		if (st.connected && rx_stat(rx, "sessions") >= sessions &&
		    sc_agent_flush(1000) == 0 && rx_stat(rx, "snapshots") >= sessions)
			return 0;
		usleep(5000);
	}
	return -1;
}

/* Starts a receiver and the agent connected to it: the tests' setup. */
RX_FN static void rx_start_agent(struct rx *rx)
{
	rx_start(rx);
	int rc = sc_agent_start(rx->sock);
	if (rc == 0 && rx_wait_session(rx, 1, 5000) == 0)
		return;
	/* cmocka runs no teardown after a setup that failed: the receiver
	 * and its directory go here. */
	char sock[sizeof rx->sock];
	memcpy(sock, rx->sock, sizeof sock);
	sc_agent_stop();
	rx_cleanup(rx);
	if (rc)
		fail_msg("the agent did not start on %s: %s", sock, strerror(-rc));
	fail_msg("the agent did not connect to %s", sock);
}

RX_FN static void rx_stop_agent(struct rx *rx)
{
	sc_agent_stop();
	rx_cleanup(rx);
}

/* Starts a (new) receiver for the running agent and waits until the agent
 * has connected and sent its snapshot; fails with "the agent did not
 * <what>" otherwise. */
RX_FN static void rx_restart(struct rx *rx, const char *what)
{
	rx_start(rx);
	if (rx_wait_session(rx, 1, 10000))
		fail_msg("the agent did not %s", what);
}

/* Appends n bytes to the truth. */
RX_FN static void truth_put(struct truth *t, const void *p, size_t n)
{
	if (t->len + n > t->cap) {
		t->cap = (t->cap ? t->cap * 2 : 65536) + n;
		t->p = realloc(t->p, t->cap);
		assert_non_null(t->p);
	}
	memcpy(t->p + t->len, p, n);
	t->len += n;
}

/* Frames of the truth: encodes each event as the agent would.  An event that
 * names its call site (SCOPE_OPEN, TASK_FORK) comes right after a SITE that
 * defines its number from the event's own site: the receiver resolves a
 * number when it applies the event, so one number (1) serves every event,
 * and the comparison checks the sites the agent defined against the real
 * ones rather than against the agent's own numbering. */
RX_FN static void truth_add(struct truth *t, const struct sc_ev *ev)
{
	struct sc_enc e;
	if (!sc_enc_measure(ev, &e))
		return;
	/* As the agent does, a site without file and func is no site. */
	if (sc_enc_wants_site(&e) && (ev->site.file || ev->site.func)) {
		struct proto_msg d = {.type = PROTO_SITE, .site = 1, .line = ev->site.line};
		const char *file = ev->site.file ? ev->site.file : "";
		const char *func = ev->site.func ? ev->site.func : "";
		/* Cut as the agent cuts strings. */
		d.file = (struct proto_str){file, (uint16_t)strnlen(file, PROTO_MAX_STR)};
		d.func = (struct proto_str){func, (uint16_t)strnlen(func, PROTO_MAX_STR)};
		uint8_t def[2 * PROTO_MAX_STR + 64];
		int n = proto_encode(def, sizeof def, &d, NULL, NULL);
		assert_true(n > 0);
		truth_put(t, def, (size_t)n);
		e.site = 1;
	}
	uint8_t *frame = malloc(e.size);
	assert_non_null(frame);
	sc_enc_write(ev, &e, PROTO_F_SNAPSHOT, frame);
	truth_put(t, frame, e.size);
	free(frame);
}

/* Asks the receiver to compare its model with the truth; fails with the
 * diff when they differ.  Returns the number of records compared. */
RX_FN static size_t rx_compare(struct rx *rx, const struct truth *t)
{
	char cmd[64];
	snprintf(cmd, sizeof cmd, "compare %zu", t->len);
	char *r = rx_cmd(rx, cmd, t->p, t->len);
	size_t n = 0;
	if (sscanf(r, "same %zu", &n) != 1) {
		fprintf(stderr, "%s", r);
		fail_msg("the receiver's model differs from the truth (see above)");
	}
	assert_non_null(strstr(r, "snap_bad=0 "));
	assert_non_null(strstr(r, "bad_frames=0 "));
	free(r);
	return n;
}

#endif /* TEST_AGENT_RX_H */
