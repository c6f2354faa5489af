/* fuzz_ctl.c - libFuzzer target for scoped's control path: the input's first
 * byte picks a client uid, the rest is sent as request lines through a real
 * control socket, accept, read and command dispatch of the daemon, which holds
 * processes of several uids.  Every reply line must be a JSON object, and a
 * client that is not root must never be shown a name that only another uid's
 * processes hold. */
#include "../../daemon/daemon.h"
#include "../../daemon/log.h"
#include "../../daemon/loop.h"
#include "../../daemon/sock.h"
#include "../../daemon/stacks.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* The processes' owners; the last uid owns none.  Pids no process has. */
static const uid_t uids[] = {0, 1000, 1001, 1002};
#define NUIDS (sizeof uids / sizeof uids[0])
#define FIRST_PID 4100001

static struct daemon d;
static char dir[64];
static ino_t ino;
static char *out;
static size_t outlen, outcap;
static int peer = -1;
static int64_t give_up_ns;

static struct proto_str str(const char *s)
{
	return (struct proto_str){s, (uint16_t)strlen(s)};
}

/* A marker that names what uid owns: in the process, scope, thread and
 * value names, so any render of it carries the marker. */
static void marker(char *buf, size_t n, const char *what, uid_t uid)
{
	snprintf(buf, n, "%s-of-uid-%u", what, (unsigned)uid);
}

/* One process of uid with a scope, a task, a thread and a value. */
static void add_proc(pid_t pid, uid_t uid, enum proc_state state)
{
	char name[64], scope[64], thread[64], value[64];
	struct proc *p = proc_new(&d, pid, uid);
	if (!p)
		abort();
	marker(name, sizeof name, "proc", uid);
	marker(scope, sizeof scope, "scope", uid);
	marker(thread, sizeof thread, "thread", uid);
	marker(value, sizeof value, "value", uid);
	p->name = strdup(name);
	p->exe = strdup(name);
	p->runtime_version = strdup("0.1.0");
	p->clk = (struct clockref){0, 1000000000};
	p->state = state;
	if (state == PROC_EXITED) {
		p->exit_cause = "exit";
		p->exit_code = 0;
		p->ended_ns = loop_now_ns();
	}
	struct proto_msg m[] = {
	    {.type = PROTO_EV_THREAD_START, .ts = 1, .tid = (uint32_t)pid, .name = str(thread)},
	    {.type = PROTO_EV_SCOPE_OPEN,
	     .ts = 2,
	     .tid = (uint32_t)pid,
	     .scope = 1,
	     .name = str(scope)},
	    {.type = PROTO_EV_VALUE_BIND,
	     .ts = 3,
	     .tid = (uint32_t)pid,
	     .scope = 1,
	     .key = str("owner"),
	     .value = str(value)},
	    {.type = PROTO_EV_TASK_FORK, .ts = 4, .tid = (uint32_t)pid, .task = 1, .scope = 1},
	};
	for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
		if (model_apply(&p->model, &m[i], 5) != 0)
			abort();
}

static void on_ctl_listen(struct loop *l, int fd, unsigned ev, void *ctx)
{
	(void)l, (void)fd, (void)ev;
	client_accept(ctx);
}

static void drain(void)
{
	for (;;) {
		if (outcap - outlen < 65536) {
			outcap = outcap * 2 + 65536;
			out = realloc(out, outcap);
			if (!out)
				abort();
		}
		ssize_t n = recv(peer, out + outlen, outcap - outlen, MSG_DONTWAIT);
		if (n <= 0)
			return;
		outlen += (size_t)n;
	}
}

/* Reads the replies as they come; stops once the daemon closed the client
 * (it read the end of the input), or after 5 s, which no input needs. */
static int64_t tick(struct loop *l, void *ctx)
{
	(void)ctx;
	drain();
	if (d.nclients == 0 || loop_now_ns() > give_up_ns) {
		loop_stop(l);
		return -1;
	}
	return 1; /* 0 would run it again within this round of timers */
}

static void setup(void)
{
	char *argv[] = {"scoped", "--stacks=signal", NULL};
	char err[256];
	pid_t other;

	log_setup(LOG_LVL_ERROR, 0);
	if (options_parse(&d.opt, 2, argv, err, sizeof err) != 0)
		abort();
	/* As main.c does: a daemon always has a stack source, which the dumps
	 * of processes it does not hold (pid 1, or any pid on the host) use. */
	if (stacks_open(&d.stacks, d.opt.stacks, err, sizeof err) < 0)
		abort();
	snprintf(dir, sizeof dir, "/tmp/scoped-fuzz-XXXXXX");
	if (!mkdtemp(dir))
		abort();
	snprintf(d.ctl_path, sizeof d.ctl_path, "%s/control.sock", dir);
	d.ctl_fd = sock_listen(d.ctl_path, &other, &ino, err, sizeof err);
	d.agent_fd = -1;
	d.loop = loop_new();
	if (d.ctl_fd < 0 || !d.loop)
		abort();
	loop_add(d.loop, d.ctl_fd, LOOP_READ, on_ctl_listen, &d);
	d.started_ns = loop_now_ns();
	pid_t pid = FIRST_PID;
	for (size_t i = 0; i + 1 < NUIDS; i++) {
		add_proc(pid++, uids[i], PROC_LIVE);
		add_proc(pid++, uids[i], PROC_EXITED);
	}
}

/* Whether text holds needle (both of known length). */
static bool holds(const char *text, size_t len, const char *needle)
{
	size_t n = strlen(needle);
	for (size_t i = 0; i + n <= len; i++)
		if (!memcmp(text + i, needle, n))
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!d.loop)
		setup();
	if (size < 1 || size > 60000) /* one socket buffer: no blocking write */
		return 0;
	uid_t uid = uids[data[0] % NUIDS];
	const char *in = (const char *)data + 1;
	size_t inlen = size - 1;

	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", d.ctl_path);
	peer = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (peer < 0 || connect(peer, (struct sockaddr *)&sa, sizeof sa) != 0)
		abort();
	client_accept(&d);
	if (d.nclients != 1)
		abort();
	d.clients->uid = uid; /* as if that user had connected */
	if (inlen && write(peer, in, inlen) != (ssize_t)inlen)
		abort();
	shutdown(peer, SHUT_WR);
	outlen = 0;
	give_up_ns = loop_now_ns() + 5000000000ll;
	loop_timer_add(d.loop, 1, tick, NULL);
	loop_run(d.loop);
	drain();
	close(peer);
	if (d.nclients != 0)
		abort(); /* the client never saw the end of its input */

	/* Every reply is one JSON object per line. */
	size_t at = 0;
	while (at < outlen) {
		char *nl = memchr(out + at, '\n', outlen - at);
		if (!nl)
			abort();
		json_error_t jerr;
		json_t *r = json_loadb(out + at, (size_t)(nl - (out + at)), 0, &jerr);
		if (!json_is_object(r))
			abort();
		json_decref(r);
		at = (size_t)(nl - out) + 1;
	}
	/* Nothing of another uid reaches a client that is not root, unless the
	 * client wrote it itself (error messages quote what they refuse). */
	if (uid != 0)
		for (size_t i = 0; i < NUIDS; i++) {
			static const char *const what[] = {"proc", "scope", "thread", "value"};
			if (uids[i] == uid)
				continue;
			for (size_t w = 0; w < 4; w++) {
				char m[64];
				marker(m, sizeof m, what[w], uids[i]);
				if (holds(out, outlen, m) && !holds(in, inlen, m)) {
					fprintf(stderr, "uid %u was shown %s\n", (unsigned)uid, m);
					abort();
				}
			}
		}
	return 0;
}
