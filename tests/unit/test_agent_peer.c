/* test_agent_peer.c - the agent against daemons that misbehave: refusal,
 * silence, garbage, a wrong version, hang-ups and oversized stack
 * requests.  The agent must drop the session, back off, reconnect, and
 * never crash or block the program. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent.h"
#include "proto.h"
#include "scope.h"
#include "test_agent_rx.h"
#include "test_util.h"

/* What the fake daemon does with each agent that connects. */
enum behaviour {
	B_REFUSE,    /* answers HELLO with ERROR */
	B_SILENT,    /* never answers HELLO */
	B_GARBAGE,   /* acks, then sends a frame with len 3 */
	B_VERSION,   /* answers with a HELLO_ACK of version 99 */
	B_HANGUP,    /* closes right after accept */
	B_BIG_STACK, /* acks, asks for the stacks of 4096 made-up threads */
	B_DEAF,	     /* acks, then reads nothing more (but is not stopped) */
};

struct peer {
	char dir[40], path[100];
	int lfd;
	enum behaviour how;
	pthread_t th;
	_Atomic int stop, accepts;
	_Atomic int64_t accept_ms[8]; /* when the first connects were accepted */
	_Atomic int replies, done_threads, bad_from_agent;
};

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void put(int fd, const struct proto_msg *m, const uint32_t *tids)
{
	static uint8_t buf[PROTO_MAX_FRAME];
	int n = proto_encode(buf, sizeof buf, m, tids, NULL);
	if (n > 0)
		rx_send_all(fd, buf, (size_t)n);
}

/* Reads frames until HELLO (1), EOF/garbage (-1) or stop. */
static int read_until_hello(struct peer *p, int fd, uint8_t *buf, size_t *len)
{
	while (!atomic_load(&p->stop)) {
		struct pollfd pfd = {fd, POLLIN, 0};
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		ssize_t n = read(fd, buf + *len, (1u << 20) - *len);
		if (n <= 0)
			return -1;
		*len += (size_t)n;
		struct proto_msg m;
		size_t used;
		int rc = proto_decode(buf, *len, &m, &used);
		if (rc == PROTO_OK && m.type == PROTO_HELLO) {
			memmove(buf, buf + used, *len - used);
			*len -= used;
			return 1;
		}
		if (rc != PROTO_EAGAIN)
			return -1;
	}
	return -1;
}

/* Counts the agent's STACK_REPLY / STACK_DONE frames (and bad frames). */
static void read_replies(struct peer *p, int fd, uint8_t *buf, size_t len)
{
	while (!atomic_load(&p->stop)) {
		size_t off = 0, used;
		struct proto_msg m;
		int rc;
		while ((rc = proto_decode(buf + off, len - off, &m, &used)) == PROTO_OK) {
			if (m.type == PROTO_STACK_REPLY && m.error == -ESRCH)
				atomic_fetch_add(&p->replies, 1);
			if (m.type == PROTO_STACK_DONE)
				atomic_store(&p->done_threads, (int)m.nthreads);
			off += used;
		}
		if (rc != PROTO_EAGAIN) {
			atomic_fetch_add(&p->bad_from_agent, 1);
			return;
		}
		memmove(buf, buf + off, len - off);
		len -= off;
		struct pollfd pfd = {fd, POLLIN, 0};
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		ssize_t n = read(fd, buf + len, (1u << 20) - len);
		if (n <= 0)
			return;
		len += (size_t)n;
	}
}

static void serve(struct peer *p, int fd)
{
	static uint8_t buf[1u << 20];
	size_t len = 0;
	struct proto_msg m;

	if (p->how == B_HANGUP || read_until_hello(p, fd, buf, &len) < 0)
		return;
	memset(&m, 0, sizeof m);
	switch (p->how) {
	case B_REFUSE:
		m.type = PROTO_ERROR;
		m.code = -EBUSY;
		m.message.p = "too many processes";
		put(fd, &m, NULL);
		break;
	case B_SILENT:
		while (!atomic_load(&p->stop) && read(fd, buf, sizeof buf) > 0) {
		}
		break;
	case B_GARBAGE:
		m.type = PROTO_HELLO_ACK;
		m.version = PROTO_VERSION;
		put(fd, &m, NULL);
		rx_send_all(fd, "\3\0\0\0\1\0\0\0", 8);
		while (!atomic_load(&p->stop) && read(fd, buf, sizeof buf) > 0) {
		}
		break;
	case B_VERSION:
		m.type = PROTO_HELLO_ACK;
		m.version = 99;
		put(fd, &m, NULL);
		while (!atomic_load(&p->stop) && read(fd, buf, sizeof buf) > 0) {
		}
		break;
	case B_BIG_STACK: {
		static uint32_t tids[PROTO_MAX_TIDS];
		m.type = PROTO_HELLO_ACK;
		m.version = PROTO_VERSION;
		put(fd, &m, NULL);
		memset(&m, 0, sizeof m);
		m.type = PROTO_STACK_REQUEST;
		m.req = 5;
		m.max_frames = PROTO_MAX_FRAMES;
		m.ntids = PROTO_MAX_TIDS;
		for (uint32_t i = 0; i < PROTO_MAX_TIDS; i++)
			tids[i] = 0x7f000000u + i; /* no such threads */
		put(fd, &m, tids);
		read_replies(p, fd, buf, len);
		break;
	}
	case B_DEAF:
		m.type = PROTO_HELLO_ACK;
		m.version = PROTO_VERSION;
		put(fd, &m, NULL);
		while (!atomic_load(&p->stop))
			usleep(5000);
		break;
	default:
		break;
	}
}

static void *peer_main(void *arg)
{
	struct peer *p = arg;
	while (!atomic_load(&p->stop)) {
		struct pollfd pfd = {p->lfd, POLLIN, 0};
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		int fd = accept(p->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		int k = atomic_fetch_add(&p->accepts, 1);
		if (k < 8)
			atomic_store(&p->accept_ms[k], mono_ms());
		serve(p, fd);
		close(fd);
	}
	return NULL;
}

static struct peer peer;

static void peer_start(enum behaviour how)
{
	memset(&peer, 0, sizeof peer);
	snprintf(peer.dir, sizeof peer.dir, "/tmp/scoped-agent-peer.XXXXXX");
	assert_non_null(mkdtemp(peer.dir));
	snprintf(peer.path, sizeof peer.path, "%s/agent.sock", peer.dir);
	peer.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", peer.path);
	assert_int_equal(bind(peer.lfd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(listen(peer.lfd, 8), 0);
	peer.how = how;
	pthread_create(&peer.th, NULL, peer_main, &peer);
	assert_int_equal(sc_agent_start(peer.path), 0);
}

static void peer_stop(void)
{
	sc_agent_stop();
	atomic_store(&peer.stop, 1);
	pthread_join(peer.th, NULL);
	close(peer.lfd);
	unlink(peer.path);
	rmdir(peer.dir);
}

/* Waits up to ms for at least n accepted connections. */
static int accepts_within(int n, int ms)
{
	int64_t end = mono_ms() + ms;
	while (mono_ms() < end && atomic_load(&peer.accepts) < n)
		usleep(5000);
	return atomic_load(&peer.accepts);
}

/* A daemon that refuses: no session, and retries back off (50, 100, 200,
 * 400 ms...).  Checked as gaps between connects that are never shorter than
 * the backoff (a loaded machine only makes them longer), not as a count of
 * connects within a time window, which load changes either way. */
static void test_refused_backs_off(void **state)
{
	(void)state;
	struct sc_agent_stats st;
	sc_agent_get_stats(&st);
	uint64_t sessions0 = st.sessions;
	peer_start(B_REFUSE);
	int n = accepts_within(4, 20000);
	sc_agent_get_stats(&st);
	peer_stop();
	assert_true(n >= 4);
	for (int k = 1; k < 4; k++) {
		int64_t gap = atomic_load(&peer.accept_ms[k]) - atomic_load(&peer.accept_ms[k - 1]);
		int64_t backoff = 50 << (k - 1);
		printf("  connect %d came %lld ms after the one before (backoff %lld ms)\n", k + 1,
		       (long long)gap, (long long)backoff);
		assert_true(gap >= backoff * 8 / 10);
	}
	assert_int_equal(st.sessions, sessions0);
}

/* A daemon that never answers HELLO: the agent gives up within about 1 s
 * and tries again. */
static void test_silent_daemon_times_out(void **state)
{
	(void)state;
	struct sc_agent_stats st;
	sc_agent_get_stats(&st);
	uint64_t sessions0 = st.sessions;
	peer_start(B_SILENT);
	assert_true(accepts_within(1, 2000) >= 1);
	int64_t t0 = mono_ms();
	int n = accepts_within(2, 20000);
	int64_t waited = mono_ms() - t0;
	sc_agent_get_stats(&st);
	peer_stop();
	assert_true(n >= 2);
	/* Not before the HELLO timeout; the upper bound only catches a hang. */
	assert_true(waited >= 900 && waited < 15000);
	assert_int_equal(st.sessions, sessions0);
}

/* Garbage, a wrong version or a hang-up: the session ends, the agent
 * reconnects, and the program's events keep costing nothing but a drop. */
static void check_reconnects(enum behaviour how, int want_sessions)
{
	struct sc_agent_stats st;
	sc_agent_get_stats(&st);
	uint64_t sessions0 = st.sessions;
	peer_start(how);
	int n = accepts_within(3, 3000);
	for (int i = 0; i < 100000; i++) {
		struct sc_ev ev = {.kind = SC_EV_JOIN_BEGIN, .tid = sc_gettid(), .a = 1};
		sc_emit(&ev);
	}
	sc_agent_get_stats(&st);
	peer_stop();
	assert_true(n >= 3);
	if (want_sessions)
		assert_true(st.sessions - sessions0 >= 2);
	else
		assert_int_equal(st.sessions, sessions0);
}

static void test_garbage_drops_session(void **state)
{
	(void)state;
	check_reconnects(B_GARBAGE, 1);
}

static void test_wrong_version_refused(void **state)
{
	(void)state;
	check_reconnects(B_VERSION, 0);
}

static void test_hangup_reconnects(void **state)
{
	(void)state;
	check_reconnects(B_HANGUP, 0);
}

/* A request for 4096 threads that do not exist: one -ESRCH reply each and a
 * STACK_DONE, every frame valid. */
static void test_big_stack_request(void **state)
{
	(void)state;
	peer_start(B_BIG_STACK);
	int64_t end = mono_ms() + 10000;
	while (mono_ms() < end && atomic_load(&peer.done_threads) == 0)
		usleep(5000);
	int replies = atomic_load(&peer.replies), done = atomic_load(&peer.done_threads);
	int bad = atomic_load(&peer.bad_from_agent);
	peer_stop();
	assert_int_equal(bad, 0);
	assert_int_equal(replies, PROTO_MAX_TIDS);
	assert_int_equal(done, PROTO_MAX_TIDS);
}

/* A daemon that stops reading but runs: the agent sheds only after its
 * 20 ms, never taking it for a stopped one (whose stop it sees in /proc
 * and sheds for at once; test_agent's stopped receiver checks that). */
static void test_deaf_daemon_is_not_stopped(void **state)
{
	(void)state;
	struct sc_agent_stats st, st0;
	sc_agent_get_stats(&st0); /* the counts are the process's */
	peer_start(B_DEAF);
	int64_t end = mono_ms() + 10000;
	do {
		sc_agent_get_stats(&st);
	} while (!st.connected && mono_ms() < end && usleep(2000) == 0);
	assert_true(st.connected);
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	cfg.name = "deaf";
	end = mono_ms() + 10000;
	while (mono_ms() < end) {
		for (int i = 0; i < 1000; i++) {
			scope_t *s;
			if (scope_open(&s, &cfg) == 0)
				scope_close(s);
		}
		sc_agent_get_stats(&st);
		if (st.sheds > st0.sheds)
			break;
	}
	peer_stop();
	assert_true(st.sheds > st0.sheds);
	assert_int_equal(st.sheds_stopped, st0.sheds_stopped);
}

int main(int argc, char **argv)
{
	(void)argc;
	test_without_agent(argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_refused_backs_off),
	    cmocka_unit_test(test_silent_daemon_times_out),
	    cmocka_unit_test(test_garbage_drops_session),
	    cmocka_unit_test(test_wrong_version_refused),
	    cmocka_unit_test(test_hangup_reconnects),
	    cmocka_unit_test(test_big_stack_request),
	    cmocka_unit_test(test_deaf_daemon_is_not_stopped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
