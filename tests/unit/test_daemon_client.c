/* test_daemon_client.c - scoped's connection handling in one process: control
 * requests (a table of bad ones and their error codes, permissions, ids) and
 * agent frames (a table of bad streams, each dropping only its peer; call
 * sites defined over the wire, kept across a reconnect, refused past the cap
 * with one log line). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../daemon/daemon.h"
#include "../../daemon/log.h"
#include "../../daemon/loop.h"
#include "../../daemon/sock.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct fixture {
	struct daemon d;
	char dir[64];
	ino_t ino[2];
	int agent, ctl; /* the test's own peers (start_with_peers), or -1 */
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

/* Generous: a loaded CI machine under a sanitizer can stall for seconds, and
 * a passing run never waits this long. */
#define PUMP_DEADLINE_MS 5000

struct until {
	bool (*done)(struct fixture *f, const void *arg);
	struct fixture *f;
	const void *arg;
	bool met;
};

static int64_t check_cb(struct loop *l, void *ctx)
{
	struct until *u = ctx;
	if (u->done(u->f, u->arg)) {
		u->met = true;
		loop_stop(l);
		return -1;
	}
	return 1;
}

static int64_t deadline_cb(struct loop *l, void *ctx)
{
	(void)ctx;
	loop_stop(l);
	return -1;
}

/* Runs the daemon's loop until done(f, arg) holds, failing the test when it
 * still does not after PUMP_DEADLINE_MS: waiting for the condition rather than
 * for a fixed time keeps the test right however slowly the machine runs. */
static void pump_until(struct fixture *f, bool (*done)(struct fixture *, const void *),
		       const void *arg, const char *what)
{
	struct until u = {done, f, arg, false};
	if (done(f, arg))
		return;
	int64_t check = loop_timer_add(f->d.loop, 1, check_cb, &u);
	int64_t deadline = loop_timer_add(f->d.loop, PUMP_DEADLINE_MS, deadline_cb, NULL);
	assert_true(check > 0 && deadline > 0);
	loop_run(f->d.loop);
	if (!u.met) {
		loop_timer_del(f->d.loop, check);
		fail_msg("after %d ms the daemon still has not: %s", PUMP_DEADLINE_MS, what);
	}
	loop_timer_del(f->d.loop, deadline);
}

/* Whether the daemon has read every byte the test wrote on fd: an AF_UNIX
 * sender's SIOCOUTQ counts what the receiver has not consumed yet. */
static bool consumed(int fd)
{
	int pending = -1;
	return ioctl(fd, SIOCOUTQ, &pending) == 0 && pending == 0;
}

/* Whether the daemon closed its side of fd, without reading from fd. */
static bool hung_up(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static bool fd_consumed(struct fixture *f, const void *arg)
{
	(void)f;
	return consumed(*(const int *)arg);
}

static bool fd_hung_up(struct fixture *f, const void *arg)
{
	(void)f;
	return hung_up(*(const int *)arg);
}

/* A whole reply line is waiting on fd. */
static bool line_ready(struct fixture *f, const void *arg)
{
	(void)f;
	char buf[65536];
	ssize_t n = recv(*(const int *)arg, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
	return n > 0 && memchr(buf, '\n', (size_t)n);
}

static struct fixture *start(void)
{
	struct fixture *f = calloc(1, sizeof *f);
	log_setup(LOG_LVL_ERROR, 0); /* the drops below are expected */
	char *argv[] = {"scoped", "--stacks=signal", NULL};
	char err[256];
	assert_int_equal(options_parse(&f->d.opt, 2, argv, err, sizeof err), 0);
	snprintf(f->dir, sizeof f->dir, "/tmp/scoped-unit-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->d.agent_path, sizeof f->d.agent_path, "%s/agent.sock", f->dir);
	snprintf(f->d.ctl_path, sizeof f->d.ctl_path, "%s/control.sock", f->dir);
	pid_t other;
	f->d.agent_fd = sock_listen(f->d.agent_path, &other, &f->ino[0], err, sizeof err);
	f->d.ctl_fd = sock_listen(f->d.ctl_path, &other, &f->ino[1], err, sizeof err);
	assert_true(f->d.agent_fd >= 0 && f->d.ctl_fd >= 0);
	f->d.loop = loop_new();
	loop_add(f->d.loop, f->d.agent_fd, LOOP_READ, on_agent_listen, &f->d);
	loop_add(f->d.loop, f->d.ctl_fd, LOOP_READ, on_ctl_listen, &f->d);
	f->d.started_ns = loop_now_ns();
	f->agent = f->ctl = -1;
	return f;
}

static void stop(struct fixture *f)
{
	if (f->ctl >= 0)
		close(f->ctl);
	if (f->agent >= 0)
		close(f->agent);
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

static int dial(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	return fd;
}

/* Sends line, lets the daemon answer, returns the reply parsed (new). */
static json_t *ask(struct fixture *f, int fd, const char *line)
{
	assert_int_equal(write(fd, line, strlen(line)), (ssize_t)strlen(line));
	pump_until(f, line_ready, &fd, line);
	char buf[65536];
	ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
	if (n <= 0)
		fail_msg("no reply to %s", line);
	buf[n] = '\0';
	json_error_t err;
	json_t *j = json_loads(buf, JSON_DISABLE_EOF_CHECK, &err);
	if (!j)
		fail_msg("reply is not JSON: %s", buf);
	return j;
}

static const char *code_of(json_t *r)
{
	return json_string_value(json_object_get(json_object_get(r, "error"), "code"));
}

static void send_frame(int fd, const struct proto_msg *m)
{
	uint8_t buf[4096];
	int n = proto_encode(buf, sizeof buf, m, NULL, NULL);
	assert_true(n > 0);
	assert_int_equal(write(fd, buf, (size_t)n), n);
}

static void send_hello(int fd)
{
	struct proto_msg m = {.type = PROTO_HELLO, .version = PROTO_VERSION, .pid = 1};
	m.program = (struct proto_str){"unit", 4};
	m.runtime_version = (struct proto_str){"0.1.0", 5};
	send_frame(fd, &m);
}

static struct proto_msg scope_open(uint64_t id)
{
	struct proto_msg m = {.type = PROTO_EV_SCOPE_OPEN, .scope = id, .ts = 10};
	m.name = (struct proto_str){"s", 1};
	return m;
}

static bool self_has_one_scope(struct fixture *f, const void *arg)
{
	(void)arg;
	struct proc *p = proc_find(&f->d, getpid());
	return p && p->state == PROC_LIVE && model_count(&p->model, ENT_SCOPE) == 1;
}

/* A registered agent connection: returns its fd; the process is this one. */
static int register_agent(struct fixture *f)
{
	int fd = dial(f->d.agent_path);
	struct proto_msg o = scope_open(1);
	send_hello(fd);
	send_frame(fd, &o);
	pump_until(f, self_has_one_scope, NULL, "registered the agent and its scope");
	return fd;
}

static bool client_accepted(struct fixture *f, const void *arg)
{
	(void)arg;
	return f->d.clients != NULL;
}

/* A daemon with this process registered as an agent (f->agent) and one
 * control client connected (f->ctl). */
static struct fixture *start_with_peers(void)
{
	struct fixture *f = start();
	f->agent = register_agent(f);
	f->ctl = dial(f->d.ctl_path);
	pump_until(f, client_accepted, NULL, "accepted the control client");
	return f;
}

static const struct {
	const char *line, *code;
} bad_requests[] = {
    {"nope\n", "bad_request"},
    {"[1,2]\n", "bad_request"},
    {"{\"cmd\":5}\n", "bad_request"},
    {"{\"id\":\"x\",\"cmd\":\"list\"}\n", "bad_request"},
    {"{\"cmd\":\"list\",\"cmd\":\"status\"}\n", "bad_request"},
    {"{\"cmd\":\"frobnicate\"}\n", "unknown_command"},
    {"{\"cmd\":\"tree\"}\n", "bad_request"},
    {"{\"cmd\":\"tree\",\"pid\":-4}\n", "bad_request"},
    {"{\"cmd\":\"tree\",\"pid\":\"12\"}\n", "bad_request"},
    {"{\"cmd\":\"tree\",\"pid\":4294967297}\n", "bad_request"},
    {"{\"cmd\":\"tree\",\"pid\":4194999}\n", "no_such_process"},
    {"{\"cmd\":\"tree\",\"pid\":1}\n", "not_instrumented"},
    {"{\"cmd\":\"stacks\",\"pid\":SELF,\"max_frames\":0}\n", "bad_request"},
    {"{\"cmd\":\"stacks\",\"pid\":SELF,\"tids\":[0]}\n", "bad_request"},
    {"{\"cmd\":\"subscribe\",\"pid\":SELF,\"interval_ms\":6000}\n", "bad_request"},
    {"{\"cmd\":\"subscribe\",\"pid\":SELF,\"interval_ms\":true}\n", "bad_request"},
};

static void test_bad_requests(void **state)
{
	(void)state;
	struct fixture *f = start_with_peers();
	int c = f->ctl;
	for (size_t i = 0; i < sizeof bad_requests / sizeof bad_requests[0]; i++) {
		char line[256], self[16];
		snprintf(self, sizeof self, "%d", (int)getpid());
		const char *at = strstr(bad_requests[i].line, "SELF");
		if (at)
			snprintf(line, sizeof line, "%.*s%s%s", (int)(at - bad_requests[i].line),
				 bad_requests[i].line, self, at + 4);
		else
			snprintf(line, sizeof line, "%s", bad_requests[i].line);
		json_t *r = ask(f, c, line);
		assert_true(json_is_false(json_object_get(r, "ok")));
		if (strcmp(code_of(r), bad_requests[i].code) != 0)
			fail_msg("%s: got %s, want %s", line, code_of(r), bad_requests[i].code);
		json_decref(r);
	}
	/* The connection survived every one of them. */
	json_t *r = ask(f, c, "{\"id\":7,\"cmd\":\"list\"}\n");
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 7);
	assert_int_equal(json_array_size(json_object_get(r, "processes")), 1);
	json_decref(r);
	stop(f);
}

static void test_other_uid(void **state)
{
	(void)state;
	struct fixture *f = start_with_peers();
	int c = f->ctl;
	f->d.clients->uid = 4242; /* as if another user had connected */
	char line[128];
	snprintf(line, sizeof line, "{\"cmd\":\"tree\",\"pid\":%d}\n", (int)getpid());
	json_t *r = ask(f, c, line);
	assert_string_equal(code_of(r), "permission_denied");
	json_decref(r);
	r = ask(f, c, "{\"cmd\":\"list\"}\n");
	assert_int_equal(json_array_size(json_object_get(r, "processes")), 0);
	json_decref(r);
	stop(f);
}

/* Whether the daemon closed its side of fd. */
static bool closed_by_daemon(int fd)
{
	char b[256];
	for (;;) {
		ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
		if (n < 0)
			return false;
	}
}

enum after { DROPPED_NO_PROC, DROPPED_PROC_KEPT, SERVED };

/* Each stream with the decoder's verdict on its bytes (the reason the
 * daemon logs) and what the daemon must do with the peer. */
static const struct {
	const char *name;
	uint8_t bytes[24];
	size_t len;
	int code;
	bool hello_first;
	enum after want;
} bad_streams[] = {
    {"length below the header",
     {3, 0, 0, 0, 0x10, 1, 0, 0},
     8,
     PROTO_ESHORT,
     true,
     DROPPED_PROC_KEPT},
    {"length over the cap", {0, 0, 2, 0, 0x10, 1, 0, 0}, 8, PROTO_ETOOBIG, true, DROPPED_PROC_KEPT},
    {"type in no range", {8, 0, 0, 0, 0x00, 0x7f, 0, 0}, 8, PROTO_ETYPE, true, DROPPED_PROC_KEPT},
    {"short SCOPE_OPEN",
     {12, 0, 0, 0, 0x10, 1, 0, 0, 1, 2, 3, 4},
     12,
     PROTO_ESHORT,
     true,
     DROPPED_PROC_KEPT},
    /* SITE: u32 site, i32 line, then file and func. */
    {"SITE numbered 0",
     {22, 0, 0, 0, 0x13, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0},
     22,
     PROTO_EVALUE,
     true,
     DROPPED_PROC_KEPT},
    {"SITE with its file unterminated",
     {23, 0, 0, 0, 0x13, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 1, 0, 'a', 'b', 0, 0, 0},
     23,
     PROTO_ESTR,
     true,
     DROPPED_PROC_KEPT},
    {"SITE without its func",
     {19, 0, 0, 0, 0x13, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0},
     19,
     PROTO_ESHORT,
     true,
     DROPPED_PROC_KEPT},
    {"event before HELLO", {24, 0, 0, 0, 0x01, 1, 0, 0}, 24, PROTO_OK, false, DROPPED_NO_PROC},
    {"half a frame", {100, 0, 0, 0, 0x10, 1, 0, 0, 1}, 9, PROTO_EAGAIN, true, SERVED},
};

static void test_bad_streams(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof bad_streams / sizeof bad_streams[0]; i++) {
		struct proto_msg m;
		size_t used;
		int code = proto_decode(bad_streams[i].bytes, bad_streams[i].len, &m, &used);
		if (code != bad_streams[i].code)
			fail_msg("%s: the decoder says %s, want %s", bad_streams[i].name,
				 proto_strerror(code), proto_strerror(bad_streams[i].code));
		struct fixture *f = start();
		int fd = dial(f->d.agent_path);
		if (bad_streams[i].hello_first)
			send_hello(fd);
		assert_int_equal(write(fd, bad_streams[i].bytes, bad_streams[i].len),
				 (ssize_t)bad_streams[i].len);
		/* Every case ends with the daemon having read all it was sent; a
		 * dropped peer is also hung up on. */
		pump_until(f, fd_consumed, &fd, bad_streams[i].name);
		if (bad_streams[i].want != SERVED)
			pump_until(f, fd_hung_up, &fd, bad_streams[i].name);
		struct proc *p = proc_find(&f->d, getpid());
		bool closed = closed_by_daemon(fd);
		switch (bad_streams[i].want) {
		case DROPPED_NO_PROC:
			if (!closed || p)
				fail_msg("%s: want the peer dropped before registering",
					 bad_streams[i].name);
			break;
		case DROPPED_PROC_KEPT:
			if (!closed || !p || p->state == PROC_LIVE)
				fail_msg("%s: want the peer dropped and its process kept",
					 bad_streams[i].name);
			assert_string_equal(p->exit_cause, "dropped");
			break;
		case SERVED:
			if (closed || !p || p->state != PROC_LIVE)
				fail_msg("%s: want the peer still served", bad_streams[i].name);
			break;
		}
		close(fd);
		stop(f);
	}
}

/* A whole frame is waiting on fd. */
static bool frame_ready(struct fixture *f, const void *arg)
{
	(void)f;
	uint8_t b[64];
	ssize_t n = recv(*(const int *)arg, b, sizeof b, MSG_PEEK | MSG_DONTWAIT);
	return n >= (ssize_t)PROTO_HDR_SIZE && n >= (ssize_t)(b[0] | b[1] << 8);
}

/* The daemon acks the older of the agent's version and its own: a version-2
 * agent gets a version-2 session (no TASK_RAN); one older than
 * PROTO_VERSION_MIN is refused. */
static void test_hello_versions(void **state)
{
	(void)state;
	for (uint16_t v = PROTO_VERSION_MIN; v <= PROTO_VERSION; v++) {
		struct fixture *f = start();
		int fd = dial(f->d.agent_path);
		struct proto_msg m = {.type = PROTO_HELLO, .version = v, .pid = 1};
		send_frame(fd, &m);
		pump_until(f, frame_ready, &fd, "acked the HELLO");
		uint8_t b[64];
		ssize_t n = recv(fd, b, sizeof b, 0);
		struct proto_msg ack;
		size_t used;
		assert_int_equal(proto_decode(b, (size_t)n, &ack, &used), PROTO_OK);
		assert_int_equal(ack.type, PROTO_HELLO_ACK);
		assert_int_equal(ack.version, v);
		close(fd);
		stop(f);
	}
	struct fixture *f = start();
	int fd = dial(f->d.agent_path);
	uint8_t old[64] = {0};
	struct proto_msg m = {.type = PROTO_HELLO, .version = PROTO_VERSION, .pid = 1};
	int n = proto_encode(old, sizeof old, &m, NULL, NULL);
	assert_true(n > 10);
	old[8] = PROTO_VERSION_MIN - 1; /* the version field, little-endian */
	old[9] = 0;
	assert_int_equal(write(fd, old, (size_t)n), n);
	pump_until(f, fd_hung_up, &fd, "dropped the agent of too old a version");
	assert_null(proc_find(&f->d, getpid()));
	close(fd);
	stop(f);
}

static void test_second_hello_and_reconnect(void **state)
{
	(void)state;
	struct fixture *f = start();
	int a = register_agent(f);
	struct proc *p = proc_find(&f->d, getpid());
	assert_non_null(p);
	assert_int_equal(model_count(&p->model, ENT_SCOPE), 1);
	/* A new connection from the same process takes over and keeps the model. */
	int b = dial(f->d.agent_path);
	send_hello(b);
	pump_until(f, fd_hung_up, &a, "dropped the old connection after the new HELLO");
	pump_until(f, fd_consumed, &b, "read the new connection's HELLO");
	assert_true(closed_by_daemon(a));
	assert_ptr_equal(proc_find(&f->d, getpid()), p);
	assert_int_equal(p->state, PROC_LIVE);
	assert_int_equal(model_count(&p->model, ENT_SCOPE), 1);
	assert_int_equal(f->d.nprocs, 1);
	/* A second HELLO on a registered connection is a protocol error. */
	send_hello(b);
	pump_until(f, fd_hung_up, &b, "dropped the connection that said HELLO twice");
	assert_true(closed_by_daemon(b));
	assert_int_equal(p->state, PROC_DETACHED);
	close(a);
	close(b);
	stop(f);
}

static struct proto_msg site_def(uint32_t site, const char *file, const char *func, int32_t line)
{
	struct proto_msg m = {.type = PROTO_SITE, .site = site, .line = line};
	m.file = (struct proto_str){file, (uint16_t)strlen(file)};
	m.func = (struct proto_str){func, (uint16_t)strlen(func)};
	return m;
}

struct scope_count {
	pid_t pid;
	size_t n;
};

static bool has_scopes(struct fixture *f, const void *arg)
{
	const struct scope_count *c = arg;
	struct proc *p = proc_find(&f->d, c->pid);
	return p && model_count(&p->model, ENT_SCOPE) == c->n;
}

static const struct m_scope *scope_of(struct proc *p, uint64_t id)
{
	const struct m_scope *s = idmap_get(&p->model.ents[ENT_SCOPE], id);
	assert_non_null(s);
	return s;
}

/* How many times needle occurs in the file at path. */
static int count_in_file(const char *path, const char *needle)
{
	char buf[16384];
	FILE *fp = fopen(path, "r");
	assert_non_null(fp);
	size_t n = fread(buf, 1, sizeof buf - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	int k = 0;
	for (const char *p = buf; (p = strstr(p, needle)); p += strlen(needle))
		k++;
	return k;
}

/* Sites sent over the wire name the scopes opened after them; past the cap
 * a SITE is refused with one log line for the process, not a drop; the
 * table outlives the connection, so events after a reconnect (and its
 * snapshot, which here resends no SITE) still find the sites. */
static void test_sites_over_the_wire(void **state)
{
	(void)state;
	struct fixture *f = start();
	int a = register_agent(f);
	struct proc *p = proc_find(&f->d, getpid());
	p->model.lim.max_sites = 2; /* as if 65,534 more had been defined */

	char logpath[96];
	snprintf(logpath, sizeof logpath, "%s/stderr.log", f->dir);
	int logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int saved = dup(2);
	assert_true(logfd >= 0 && saved >= 0);
	fflush(stderr);
	dup2(logfd, 2);
	log_setup(LOG_LVL_WARN, 0);

	struct proto_msg msgs[] = {
	    site_def(1, "wire.c", "open_here", 11),
	    site_def(2, "wire.c", "open_there", 12),
	    site_def(3, "wire.c", "one_too_many", 13),
	    site_def(4, "wire.c", "two_too_many", 14),
	    scope_open(2),
	    scope_open(3),
	    scope_open(4),
	};
	msgs[4].site = 1;
	msgs[5].site = 3;
	msgs[6].site = 77; /* never defined */
	for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++)
		send_frame(a, &msgs[i]);
	struct scope_count four = {getpid(), 4};
	pump_until(f, has_scopes, &four, "applied the scopes naming sites");
	assert_int_equal(p->state, PROC_LIVE); /* refusing a SITE drops nobody */
	assert_int_equal(p->model.sites_refused, 2);
	assert_string_equal(scope_of(p, 2)->func, "open_here");
	assert_int_equal(scope_of(p, 2)->line, 11);
	assert_null(scope_of(p, 3)->func);
	assert_null(scope_of(p, 4)->func);
	assert_null(scope_of(p, 1)->func); /* register_agent's scope names no site */

	/* The agent reconnects: HELLO, then its snapshot of scope 5 naming
	 * site 2 (defined on the old connection), and one more SITE refused. */
	int b = dial(f->d.agent_path);
	send_hello(b);
	struct proto_msg snap[] = {
	    {.type = PROTO_SNAPSHOT_BEGIN, .seq = 1},
	    site_def(5, "wire.c", "three_too_many", 15),
	    scope_open(5),
	    {.type = PROTO_SNAPSHOT_END, .seq = 1, .count = 1},
	};
	snap[2].site = 2;
	snap[2].flags = PROTO_F_SNAPSHOT;
	for (size_t i = 0; i < sizeof snap / sizeof snap[0]; i++)
		send_frame(b, &snap[i]);
	struct scope_count one = {getpid(), 1};
	pump_until(f, has_scopes, &one, "applied the snapshot after the reconnect");
	pump_until(f, fd_consumed, &b, "read the whole snapshot");
	assert_ptr_equal(proc_find(&f->d, getpid()), p);
	assert_true(p->model.complete);
	assert_string_equal(scope_of(p, 5)->func, "open_there");
	assert_int_equal(scope_of(p, 5)->line, 12);
	assert_int_equal(p->model.sites_refused, 3);

	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(logfd);
	log_setup(LOG_LVL_ERROR, 0);
	assert_int_equal(count_in_file(logpath, "refusing site"), 1);
	assert_int_equal(count_in_file(logpath, "defined 2 call sites, the cap; refusing site 3"),
			 1);
	unlink(logpath);
	close(a);
	close(b);
	stop(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_requests),
	    cmocka_unit_test(test_other_uid),
	    cmocka_unit_test(test_bad_streams),
	    cmocka_unit_test(test_second_hello_and_reconnect),
	    cmocka_unit_test(test_hello_versions),
	    cmocka_unit_test(test_sites_over_the_wire),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
