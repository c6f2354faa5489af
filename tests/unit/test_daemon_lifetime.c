/* test_daemon_lifetime.c - scoped's processes and their agent connections
 * live and die together: a connection never outlives the process entry it
 * feeds (a fork child that keeps its parent's agent socket after the pid was
 * reused and the old entry evicted), and a process that changes credentials
 * between two HELLOs is a new identity, not the old entry revived.  The
 * daemon runs in this process; its peers are real child processes, made
 * with chosen pids where the scenario needs a pid reused (clone3 set_tid,
 * which needs root: skipped, saying so, without it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../daemon/daemon.h"
#include "../../daemon/log.h"
#include "../../daemon/loop.h"
#include "../../daemon/sock.h"

#include <errno.h>
#include <jansson.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEADLINE_MS 5000 /* a passing run never waits this long */

struct fixture {
	struct daemon d;
	char dir[64];
	ino_t ino[2];
};

static void on_agent_listen(struct loop *l, int fd, unsigned ev, void *ctx)
{
	(void)l, (void)fd, (void)ev;
	agent_accept(ctx);
}

static void on_ctl_listen(struct loop *l, int fd, unsigned ev, void *ctx)
{
	(void)l, (void)fd, (void)ev;
	client_accept(ctx);
}

static struct fixture *start(const char *keep_exited)
{
	struct fixture *f = calloc(1, sizeof *f);
	assert_non_null(f);
	log_setup(LOG_LVL_ERROR, 0);
	char *argv[] = {"scoped", "--stacks=signal", "--keep-exited", (char *)keep_exited, NULL};
	char err[256];
	assert_int_equal(options_parse(&f->d.opt, 4, argv, err, sizeof err), 0);
	snprintf(f->dir, sizeof f->dir, "/tmp/scoped-life-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->d.agent_path, sizeof f->d.agent_path, "%s/agent.sock", f->dir);
	snprintf(f->d.ctl_path, sizeof f->d.ctl_path, "%s/control.sock", f->dir);
	pid_t other;
	f->d.agent_fd = sock_listen(f->d.agent_path, &other, &f->ino[0], err, sizeof err);
	f->d.ctl_fd = sock_listen(f->d.ctl_path, &other, &f->ino[1], err, sizeof err);
	assert_true(f->d.agent_fd >= 0 && f->d.ctl_fd >= 0);
	f->d.loop = loop_new();
	assert_non_null(f->d.loop);
	loop_add(f->d.loop, f->d.agent_fd, LOOP_READ, on_agent_listen, &f->d);
	loop_add(f->d.loop, f->d.ctl_fd, LOOP_READ, on_ctl_listen, &f->d);
	f->d.started_ns = loop_now_ns();
	return f;
}

static void stop(struct fixture *f)
{
	while (f->d.clients)
		client_close(f->d.clients);
	while (f->d.conns)
		aconn_close(&f->d, f->d.conns);
	while (f->d.procs)
		proc_free(&f->d, f->d.procs);
	sock_remove(f->d.agent_path, f->ino[0]);
	sock_remove(f->d.ctl_path, f->ino[1]);
	close(f->d.agent_fd);
	close(f->d.ctl_fd);
	loop_free(f->d.loop);
	rmdir(f->dir);
	free(f);
}

struct until {
	bool (*done)(struct fixture *f, const void *arg);
	struct fixture *f;
	const void *arg;
	bool met;
};

static int64_t check_cb(struct loop *l, void *ctx)
{
	struct until *u = ctx;
	if (!u->done(u->f, u->arg))
		return 1;
	u->met = true;
	loop_stop(l);
	return -1;
}

static int64_t deadline_cb(struct loop *l, void *ctx)
{
	(void)ctx;
	loop_stop(l);
	return -1;
}

/* Runs the daemon until done holds; fails the test after DEADLINE_MS. */
static void pump_until(struct fixture *f, bool (*done)(struct fixture *, const void *),
		       const void *arg, const char *what)
{
	struct until u = {done, f, arg, false};
	if (done(f, arg))
		return;
	int64_t check = loop_timer_add(f->d.loop, 1, check_cb, &u);
	int64_t deadline = loop_timer_add(f->d.loop, DEADLINE_MS, deadline_cb, NULL);
	assert_true(check > 0 && deadline > 0);
	loop_run(f->d.loop);
	if (!u.met) {
		loop_timer_del(f->d.loop, check);
		fail_msg("after %d ms the daemon still has not: %s", DEADLINE_MS, what);
	}
	loop_timer_del(f->d.loop, deadline);
}

/* Whether the daemon closed its side of fd (without consuming anything). */
static bool hung_up(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static bool fd_hung_up(struct fixture *f, const void *arg)
{
	(void)f;
	return hung_up(*(const int *)arg);
}

static void frame_to(int fd, const struct proto_msg *m)
{
	uint8_t buf[4096];
	int n = proto_encode(buf, sizeof buf, m, NULL, NULL);
	assert_true(n > 0);
	if (write(fd, buf, (size_t)n) != n)
		_exit(3);
}

static const char *hello_name = "life";

static void hello_to(int fd)
{
	struct proto_msg m = {.type = PROTO_HELLO, .version = PROTO_VERSION, .pid = 1};
	m.program = (struct proto_str){hello_name, (uint16_t)strlen(hello_name)};
	m.runtime_version = (struct proto_str){"0.1.0", 5};
	frame_to(fd, &m);
}

static int agent_socket(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	return fd;
}

/* In a child: closes every descriptor but fd and keep (-1: none), so that
 * the child holds none of the daemon's ends, which would keep them open. */
static void only_fds(int fd, int keep)
{
	for (int i = 3; i < 4096; i++)
		if (i != fd && i != keep)
			close(i);
}

/* Connects fd to the daemon and says HELLO: run in the child whose
 * credentials the daemon must record. */
static void connect_and_hello(int fd, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		_exit(2);
	hello_to(fd);
}

/* A child with exactly pid want (clone3 with set_tid), or -errno. */
static pid_t spawn_with_pid(pid_t want)
{
	struct clone_args ca;
	memset(&ca, 0, sizeof ca);
	ca.exit_signal = SIGCHLD;
	ca.set_tid = (uint64_t)(uintptr_t)&want;
	ca.set_tid_size = 1;
	long rc = syscall(SYS_clone3, &ca, sizeof ca);
	return rc < 0 ? -errno : (pid_t)rc;
}

struct pid_state {
	pid_t pid;
	unsigned long long starttime; /* 0: any */
	uid_t uid;
};

static bool registered(struct fixture *f, const void *arg)
{
	const struct pid_state *w = arg;
	for (struct proc *p = f->d.procs; p; p = p->next)
		if (p->pid == w->pid && p->state == PROC_LIVE && p->conn &&
		    (!w->starttime || p->starttime == w->starttime) && p->uid == w->uid)
			return true;
	return false;
}

static bool ended(struct fixture *f, const void *arg)
{
	const pid_t *pid = arg;
	for (struct proc *p = f->d.procs; p; p = p->next)
		if (p->pid == *pid && p->state != PROC_LIVE)
			return true;
	return false;
}

static bool entry_gone(struct fixture *f, const void *arg)
{
	const struct pid_state *w = arg;
	for (struct proc *p = f->d.procs; p; p = p->next)
		if (p->pid == w->pid && p->starttime == w->starttime)
			return false;
	return true;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

/* The scenario: process A registers; a fork child (here: this test,
 * which shares A's socket) keeps A's agent socket after A exits; a new process
 * B gets A's pid and says HELLO; short-lived processes push A's entry out of
 * --keep-exited; then the child writes on A's old socket.  The daemon must
 * have let go of that connection when B replaced A, and touch no freed
 * entry when the bytes come. */
static void test_pid_reuse_old_socket(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		skip(); /* clone3 with set_tid needs CAP_SYS_ADMIN: run as root */
		return;
	}
	struct fixture *f = start("2");
	int old = -1;
	pid_t b = -1;
	int release[2];
	assert_int_equal(pipe(release), 0);
	for (int attempt = 0; attempt < 5 && b < 0; attempt++) {
		old = agent_socket();
		pid_t a = fork();
		assert_true(a >= 0);
		if (a == 0) {
			only_fds(old, -1);
			connect_and_hello(old, f->d.agent_path);
			_exit(0);
		}
		assert_int_equal(waitpid(a, NULL, 0), a);
		struct pid_state wa = {a, 0, geteuid()};
		pump_until(f, registered, &wa, "registered process A");
		unsigned long long a_start = proc_find(&f->d, a)->starttime;
		/* Another start time for B: it is counted in clock ticks. */
		sleep_ms(30);
		b = spawn_with_pid(a);
		if (b == -EEXIST) { /* someone else took the pid first */
			close(old);
			continue;
		}
		if (b == -EPERM || b == -ENOSYS) {
			close(old);
			stop(f);
			print_message("skip: clone3 with set_tid is refused here (%s)\n",
				      strerror(-b));
			skip();
			return;
		}
		assert_true(b >= 0);
		if (b == 0) {
			only_fds(release[0], -1);
			int fd = agent_socket();
			connect_and_hello(fd, f->d.agent_path);
			char c;
			if (read(release[0], &c, 1) < 0)
				_exit(4);
			_exit(0);
		}
		assert_int_equal(b, a);
		struct pid_state wb = {b, proc_starttime(b), geteuid()};
		assert_true(wb.starttime != 0 && wb.starttime != a_start);
		pump_until(f, registered, &wb, "registered process B with A's pid");
		/* Short-lived processes push A's ended entry out. */
		for (int i = 0; i < 4; i++) {
			int fd = agent_socket();
			pid_t s = fork();
			assert_true(s >= 0);
			if (s == 0) {
				only_fds(fd, -1);
				connect_and_hello(fd, f->d.agent_path);
				_exit(0);
			}
			close(fd);
			assert_int_equal(waitpid(s, NULL, 0), s);
			pump_until(f, ended, &s, "saw a short-lived process end");
		}
		proc_evict(&f->d, loop_now_ns());
		struct pid_state gone = {a, a_start, geteuid()};
		pump_until(f, entry_gone, &gone, "evicted A's entry");

		/* The fork child's write on A's old socket. */
		struct proto_msg o = {.type = PROTO_EV_SCOPE_OPEN, .scope = 7, .ts = 10};
		o.name = (struct proto_str){"s", 1};
		uint8_t buf[256];
		int n = proto_encode(buf, sizeof buf, &o, NULL, NULL);
		assert_true(n > 0);
		(void)!send(old, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
		/* The daemon let go of A's connection (when B replaced A). */
		pump_until(f, fd_hung_up, &old, "closed A's old connection");
		/* B is untouched. */
		pump_until(f, registered, &wb, "kept process B registered");
	}
	if (b < 0) {
		stop(f);
		print_message("skip: could not get a pid reused in 5 attempts\n");
		skip();
		return;
	}
	assert_int_equal(write(release[1], "x", 1), 1);
	assert_int_equal(waitpid(b, NULL, 0), b);
	close(old);
	close(release[0]);
	close(release[1]);
	stop(f);
}

static bool line_ready(struct fixture *f, const void *arg)
{
	(void)f;
	char buf[4096];
	ssize_t n = recv(*(const int *)arg, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
	return n > 0 && memchr(buf, '\n', (size_t)n);
}

static bool client_in(struct fixture *f, const void *arg)
{
	(void)arg;
	return f->d.clients != NULL;
}

/* Sends line as a client of uid viewer; returns the reply line (static). */
static const char *ask_as(struct fixture *f, uid_t viewer, const char *line)
{
	static char buf[65536];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%.*s", (int)sizeof sa.sun_path - 1,
		 f->d.ctl_path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	pump_until(f, client_in, NULL, "accepted the control client");
	f->d.clients->uid = viewer; /* as if that user had connected */
	assert_int_equal(write(fd, line, strlen(line)), (ssize_t)strlen(line));
	pump_until(f, line_ready, &fd, "answered the request");
	ssize_t got = recv(fd, buf, sizeof buf - 1, 0);
	assert_true(got > 0);
	buf[got] = '\0';
	close(fd);
	while (f->d.clients)
		client_close(f->d.clients);
	return buf;
}

static const char *stacks_as(struct fixture *f, uid_t viewer, pid_t pid)
{
	char line[96];
	snprintf(line, sizeof line, "{\"id\":1,\"cmd\":\"stacks\",\"pid\":%d}\n", (int)pid);
	return ask_as(f, viewer, line);
}

static struct proc *live_entry(struct fixture *f, pid_t pid, uid_t uid)
{
	for (struct proc *p = f->d.procs; p; p = p->next)
		if (p->pid == pid && p->uid == uid && p->state == PROC_LIVE)
			return p;
	return NULL;
}

/* Identity is pid + start time + uid: a process registered as nobody that
 * then becomes root (as exec of a setuid program would make it, the old
 * socket kept) can no longer be read by nobody, whatever its entry says,
 * and its HELLO as root is a new entry, not the nobody entry revived; once
 * it is gone, its entry's pid reads nothing live. */
static void test_identity_at_use(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		skip(); /* changing uids back and forth needs root */
		return;
	}
	const uid_t nobody = 65534;
	struct fixture *f = start("64");
	/* Open to nobody for this test: scoped makes its sockets the owner's. */
	assert_int_equal(chmod(f->dir, 0711), 0);
	assert_int_equal(chmod(f->d.agent_path, 0666), 0);
	int go[2], step[2];
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(step), 0);
	pid_t x = fork();
	assert_true(x >= 0);
	if (x == 0) {
		only_fds(go[0], step[1]);
		char c;
		int fd = agent_socket();
		/* Effective nobody, root kept as the saved uid to come back to. */
		if (setresgid(nobody, nobody, 0) < 0 || setresuid(nobody, nobody, 0) < 0)
			_exit(5);
		connect_and_hello(fd, f->d.agent_path);
		if (read(go[0], &c, 1) != 1)
			_exit(4);
		if (setresuid(0, 0, 0) < 0 || setresgid(0, 0, 0) < 0)
			_exit(5);
		if (write(step[1], "x", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(4);
		int fd2 = agent_socket();
		connect_and_hello(fd2, f->d.agent_path);
		if (read(go[0], &c, 1) < 0)
			_exit(4);
		_exit(0);
	}
	close(go[0]);
	close(step[1]);
	struct pid_state as_nobody = {x, 0, nobody};
	pump_until(f, registered, &as_nobody, "registered the process as nobody");
	struct proc *p = live_entry(f, x, nobody);
	char err[256];
	/* Its saved uid is root's: nobody may not read it even now (ptrace's
	 * rule), root may. */
	assert_int_equal(proc_check_live(p, nobody, err, sizeof err), -EPERM);
	assert_int_equal(proc_check_live(p, 0, err, sizeof err), 0);

	/* Root now, the entry still nobody's. */
	char c;
	assert_int_equal(write(go[1], "x", 1), 1);
	assert_int_equal(read(step[0], &c, 1), 1);
	assert_int_equal(proc_check_live(p, nobody, err, sizeof err), -EPERM);
	assert_non_null(strstr(err, "now runs as uid 0"));
	assert_int_equal(proc_check_live(p, 0, err, sizeof err), 0);
	const char *r = stacks_as(f, nobody, x);
	if (!strstr(r, "\"permission_denied\""))
		fail_msg("nobody read the stacks of a process that runs as root now: %s", r);

	/* Its HELLO as root: a new entry of uid 0; nobody's entry is over. */
	assert_int_equal(write(go[1], "x", 1), 1);
	struct pid_state as_root = {x, 0, 0};
	pump_until(f, registered, &as_root, "registered the process again as root");
	assert_null(live_entry(f, x, nobody));
	r = stacks_as(f, nobody, x);
	if (!strstr(r, "\"permission_denied\""))
		fail_msg("nobody was served the root process: %s", r);

	/* Gone: nothing live is read under its entry. */
	close(go[1]);
	assert_int_equal(waitpid(x, NULL, 0), x);
	p = proc_find(&f->d, x);
	assert_non_null(p);
	assert_int_equal(proc_check_live(p, 0, err, sizeof err), -ESRCH);
	close(step[0]);
	stop(f);
}

/* A program named with byte 0xff, an escape sequence and a newline: every
 * viewer's list still parses, and shows none of them raw. */
static void test_hostile_name(void **state)
{
	(void)state;
	struct fixture *f = start("64");
	int fd = agent_socket();
	pid_t x = fork();
	assert_true(x >= 0);
	if (x == 0) {
		only_fds(fd, -1);
		hello_name = "\xff\x1b[2Jevil\nline\xc2\x9b";
		connect_and_hello(fd, f->d.agent_path);
		pause();
		_exit(0);
	}
	close(fd);
	struct pid_state w = {x, 0, geteuid()};
	pump_until(f, registered, &w, "registered the process");
	const char *r = ask_as(f, 0, "{\"id\":1,\"cmd\":\"list\"}\n");
	json_error_t err;
	json_t *j = json_loads(r, JSON_DISABLE_EOF_CHECK, &err);
	if (!j)
		fail_msg("the list does not parse (%s): %s", err.text, r);
	json_t *procs = json_object_get(j, "processes");
	assert_int_equal(json_array_size(procs), 1);
	const char *name = json_string_value(json_object_get(json_array_get(procs, 0), "name"));
	assert_non_null(name);
	assert_string_equal(name, "\xef\xbf\xbd\xef\xbf\xbd[2Jevil\xef\xbf\xbdline\xef\xbf\xbd");
	json_decref(j);
	/* An unknown command of 65+ bytes of two-byte characters, cut in the
	 * error message mid-character: the reply is still UTF-8. */
	char line[256] = "{\"id\":2,\"cmd\":\"x";
	for (int i = 0; i < 40; i++)
		strcat(line, "\xc3\xa9");
	strcat(line, "\"}\n");
	r = ask_as(f, 1000, line);
	j = json_loads(r, JSON_DISABLE_EOF_CHECK, &err);
	if (!j)
		fail_msg("the unknown_command reply does not parse (%s): %s", err.text, r);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
			    "unknown_command");
	json_decref(j);
	kill(x, SIGKILL);
	waitpid(x, NULL, 0);
	stop(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pid_reuse_old_socket),
	    cmocka_unit_test(test_identity_at_use),
	    cmocka_unit_test(test_hostile_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
