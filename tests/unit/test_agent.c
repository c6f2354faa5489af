/* test_agent.c - the agent driven with hand-made events against a receiving
 * endpoint (test_agent_recv --receiver, which rebuilds the model from the
 * wire and compares it with the truth the test sends): the encoder, a
 * multi-thread stream, SIGSTOP with drops and repair, receiver restart,
 * stacks, fork children, PROCESS_EXIT, a receiver that ends with its test.
 * test_agent_workload.c drives the agent with the real runtime. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent.h"
#include "scope.h"
#include "test_agent_rx.h"
#include "proto.h"
#include "test_util.h"

/* ======================================================================
 * Hand-made events through the real agent.
 */
static struct rx rx;

static int64_t mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct sc_ev mk(uint16_t kind, uint64_t a, uint64_t b)
{
	struct sc_ev e;
	memset(&e, 0, sizeof e);
	e.kind = kind;
	e.ts = mono();
	e.tid = sc_gettid();
	e.a = a;
	e.b = b;
	e.site = (struct sc_site){"handmade.c", "worker", 42};
	return e;
}

/* The agent's own thread, as every snapshot lists it. */
static void truth_add_agent(struct truth *t)
{
	struct sc_agent_stats st;
	sc_agent_get_stats(&st);
	assert_int_not_equal(st.tid, 0);
	struct sc_ev ev = mk(SC_EV_THREAD_START, 0, 0);
	ev.tid = st.tid;
	ev.s1 = "scoped-agent";
	ev.i = SC_ROLE_AGENT;
	truth_add(t, &ev);
}

/* Sends scope id, named name, through the agent and waits until it is out. */
static struct sc_ev emit_scope(uint64_t id, const char *name)
{
	struct sc_ev ev = mk(SC_EV_SCOPE_OPEN, id, 0);
	ev.s1 = name;
	sc_emit(&ev);
	assert_int_equal(sc_agent_flush(5000), 0);
	return ev;
}

/* The receiver's model holds exactly scope ev and the agent's thread. */
static void expect_scope_and_agent(const struct sc_ev *ev)
{
	struct truth t = {0};
	truth_add(&t, ev);
	truth_add_agent(&t);
	assert_int_equal(rx_compare(&rx, &t), 2);
	free(t.p);
}

static int setup(void **state)
{
	(void)state;
	rx_start_agent(&rx);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rx_stop_agent(&rx);
	return 0;
}

/* Every event kind encodes into a frame proto_decode accepts, with the
 * values where the layout says. */
static void test_encoder_matches_decoder(void **state)
{
	(void)state;
	static const uint16_t kinds[] = {
	    SC_EV_THREAD_START, SC_EV_THREAD_EXIT, SC_EV_THREAD_NAME, SC_EV_PROCESS_EXIT,
	    SC_EV_SCOPE_OPEN,	SC_EV_JOIN_BEGIN,  SC_EV_JOIN_END,    SC_EV_SCOPE_CANCEL,
	    SC_EV_SCOPE_CLOSE,	SC_EV_TASK_FORK,   SC_EV_TASK_START,  SC_EV_TASK_END,
	    SC_EV_VIOLATION,	SC_EV_VALUE_BIND,  SC_EV_POOL_CREATE, SC_EV_POOL_STATS,
	    SC_EV_POOL_DESTROY,
	};
	struct sc_pool_info pi = {1, 2, 3, 4, 5, 1, 2, 64, 7, 8, 9, -10};
	uint8_t buf[8192];
	for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
		struct sc_ev ev = mk(kinds[k], 0x1111222233334444ull, 77);
		ev.c = 88;
		ev.d = 99;
		ev.i = -5;
		ev.u = 2;
		ev.s1 = "name";
		ev.s2 = "value";
		ev.pool = &pi;
		struct sc_enc e;
		uint32_t n = sc_enc_measure(&ev, &e);
		assert_true(n > 0 && n <= sizeof buf);
		sc_enc_write(&ev, &e, PROTO_F_SNAPSHOT, buf);
		struct proto_msg m;
		size_t used;
		int rc = proto_decode(buf, n, &m, &used);
		if (rc != PROTO_OK)
			fail_msg("kind 0x%x: %s", kinds[k], proto_strerror(rc));
		assert_int_equal(m.type, kinds[k]);
		assert_int_equal(m.flags, PROTO_F_SNAPSHOT);
		assert_true(m.ts == ev.ts);
		assert_int_equal(m.tid, ev.tid);
	}
	struct sc_ev ev = mk(SC_EV_SCOPE_OPEN, 5, 4);
	ev.c = 3;
	ev.d = 2;
	ev.i = 123456789;
	ev.u = SCOPE_JOIN_AWAIT_ALL;
	ev.s1 = "handle";
	struct sc_enc e;
	uint32_t n = sc_enc_measure(&ev, &e);
	sc_enc_write(&ev, &e, 0, buf);
	struct proto_msg m;
	size_t used;
	assert_int_equal(proto_decode(buf, n, &m, &used), PROTO_OK);
	assert_true(m.scope == 5 && m.parent == 4 && m.parent_task == 3 && m.pool_id == 2);
	assert_true(m.deadline == 123456789);
	assert_int_equal(m.joiner, SCOPE_JOIN_AWAIT_ALL);
	assert_int_equal(m.site, 0); /* the caller numbers it (sc_site_number) */
	assert_string_equal(m.name.p, "handle");
	assert_null(m.file.p);

	/* A SITE frame decodes to the definition it was given. */
	struct sc_site site = {"handmade.c", "worker", 42};
	uint16_t slen[2];
	n = sc_enc_site_size(&site, slen);
	sc_enc_site(buf, n, 7, &site, slen, PROTO_F_SNAPSHOT);
	assert_int_equal(proto_decode(buf, n, &m, &used), PROTO_OK);
	assert_int_equal(m.type, PROTO_SITE);
	assert_int_equal(m.flags, PROTO_F_SNAPSHOT);
	assert_int_equal(m.site, 7);
	assert_int_equal(m.line, 42);
	assert_string_equal(m.file.p, "handmade.c");
	assert_string_equal(m.func.p, "worker");

	/* Over-long strings are cut to the cap, never refused. */
	static char big[5000];
	memset(big, 'x', sizeof big - 1);
	ev = mk(SC_EV_VALUE_BIND, 1, 0);
	ev.s1 = big;
	ev.s2 = NULL;
	n = sc_enc_measure(&ev, &e);
	sc_enc_write(&ev, &e, 0, buf);
	assert_int_equal(proto_decode(buf, n, &m, &used), PROTO_OK);
	assert_int_equal(m.key.len, PROTO_MAX_STR);
	assert_int_equal(m.value.len, 0);

	ev.kind = 0x1ff;
	assert_int_equal(sc_enc_measure(&ev, &e), 0);
	uint16_t nlen = 0;
	assert_int_equal(sc_enc_hot_size(&ev, &nlen), 0);

	/* A task's three events and SCOPE_OPEN, written without the layout
	 * walk: the same bytes as the table's, every field set and the site
	 * numbered; SCOPE_OPEN's name as it comes, empty, absent, and cut to
	 * the cap. */
	static const uint16_t hot[] = {SC_EV_TASK_FORK,	 SC_EV_TASK_START, SC_EV_TASK_END,
				       SC_EV_SCOPE_OPEN, SC_EV_SCOPE_OPEN, SC_EV_SCOPE_OPEN,
				       SC_EV_SCOPE_OPEN};
	const char *names[] = {"x", "x", "x", "request-handler", "", NULL, big};
	for (int k = 0; k < 7; k++) {
		static uint8_t slow[8192], fast[8192];
		ev = mk(hot[k], 0x1111222233334444ull, 0x5555666677778888ull);
		ev.ts = -123456789;
		ev.c = 0x99;
		ev.d = 0x00007f0012345678ull;
		ev.i = -110;
		ev.u = 0xfffffff3u;
		ev.s1 = names[k];
		n = sc_enc_measure(&ev, &e);
		e.site = sc_enc_wants_site(&e) ? 0xabcdef01u : 0;
		assert_int_equal(sc_enc_hot_size(&ev, &nlen), n);
		memset(slow, 0xa5, sizeof slow);
		memset(fast, 0x5a, sizeof fast);
		sc_enc_write(&ev, &e, 0, slow);
		sc_enc_hot_write(&ev, n, nlen, e.site, fast);
		assert_memory_equal(slow, fast, n);
	}
}

static _Atomic int emit_stalled;

struct emitter {
	int id, nscopes;
	struct truth *truth; /* what should stay live */
};

/* One thread's hand-made life: scopes with forks; half of them closed. */
static void *emit_life(void *arg)
{
	struct emitter *em = arg;
	uint64_t base = (uint64_t)em->id << 32;
	char name[32];
	for (int s = 1; s <= em->nscopes; s++) {
		/* Paced so a slow-to-schedule agent never meets a full ring; the
		 * ring still wraps many times over the run. */
		if (s % 40 == 0 && sc_agent_flush(5000))
			atomic_store(&emit_stalled, 1); /* cmocka asserts on main only */
		uint64_t scope = base | (uint64_t)s << 8;
		struct sc_ev ev = mk(SC_EV_SCOPE_OPEN, scope, 0);
		snprintf(name, sizeof name, "s%d-%d", em->id, s);
		ev.s1 = name;
		sc_emit(&ev);
		struct sc_ev open = ev;
		for (int t = 1; t <= 3; t++) {
			ev = mk(SC_EV_TASK_FORK, scope | (uint64_t)t, scope);
			sc_emit(&ev);
			ev = mk(SC_EV_TASK_START, scope | (uint64_t)t, scope);
			sc_emit(&ev);
		}
		ev = mk(SC_EV_TASK_END, scope | 1, scope);
		ev.u = SC_TASK_SUCCESS;
		sc_emit(&ev);
		if (s % 2) {
			ev = mk(SC_EV_SCOPE_CLOSE, scope, 0);
			sc_emit(&ev);
		} else {
			/* Still open at the end: the truth holds it and tasks 2, 3,
			 * forked (so their fork site is checked too) and started. */
			open.snapshot = 1;
			truth_add(em->truth, &open);
			for (int t = 2; t <= 3; t++) {
				ev = mk(SC_EV_TASK_FORK, scope | (uint64_t)t, scope);
				truth_add(em->truth, &ev);
				ev = mk(SC_EV_TASK_START, scope | (uint64_t)t, scope);
				truth_add(em->truth, &ev);
			}
		}
	}
	return NULL;
}

/* Events from several threads reach the receiver whole and in an order
 * that rebuilds exactly the expected model. */
static void test_events_reach_receiver(void **state)
{
	(void)state;
	enum { NT = 4 };
	pthread_t th[NT];
	struct emitter em[NT];
	struct truth truths[NT];
	memset(truths, 0, sizeof truths);
	for (int i = 0; i < NT; i++) {
		em[i] = (struct emitter){i + 1, 600, &truths[i]};
		pthread_create(&th[i], NULL, emit_life, &em[i]);
	}
	for (int i = 0; i < NT; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&emit_stalled), 0);
	assert_int_equal(sc_agent_flush(5000), 0);

	/* A receiver that could not read for the agent's shed time, or an
	 * agent too slow to drain the rings between the emitters' flushes
	 * (a sanitizer build on a loaded machine: CI saw 8 events of 19,200
	 * dropped, 1 run in about 10), makes the agent drop, by design, and
	 * say so; hand-made scopes are not in the registry, so no snapshot
	 * brings them back and the model cannot equal the truth.  Such a run
	 * says nothing about delivery: skipped, with the drop shown to have
	 * been announced.  A normal build must deliver everything. */
	struct sc_agent_stats shed;
	sc_agent_get_stats(&shed);
	if (shed.lost > 0 && (shed.sheds > 0 || TEST_WATCHDOG_SLOWER > 1)) {
		print_message("skip: the agent dropped %llu events (%llu sheds), announced in "
			      "%llu LOST messages\n",
			      (unsigned long long)shed.lost, (unsigned long long)shed.sheds,
			      (unsigned long long)shed.lost_msgs);
		assert_true(shed.lost_msgs >= 1);
		for (int i = 0; i < NT; i++)
			free(truths[i].p);
		skip();
	}

	struct truth all = {0};
	truth_add_agent(&all);
	for (int i = 0; i < NT; i++) {
		all.p = realloc(all.p, all.len + truths[i].len);
		memcpy(all.p + all.len, truths[i].p, truths[i].len);
		all.len += truths[i].len;
		free(truths[i].p);
	}
	size_t n = rx_compare(&rx, &all);
	assert_int_equal(n, NT * 300 * 3 + 1); /* 300 open scopes x (scope + 2 tasks), agent */
	free(all.p);
	assert_true(rx_stat(&rx, "events") >= NT * 600 * 8);
	assert_int_equal(rx_stat(&rx, "lost_msgs"), 0);

	/* Thread rings are retired and freed after their threads exit. */
	struct sc_agent_stats st;
	sc_agent_get_stats(&st);
	assert_int_equal(st.lost, 0);
}

/* A stopped receiver: the emitting thread never waits, drops are counted,
 * and after SIGCONT a LOST and a fresh snapshot repair the model. */
static void test_stopped_receiver_drops_then_repairs(void **state)
{
	(void)state;
	rx_kill(&rx, SIGSTOP);
	int64_t worst = 0, t0 = mono();
	const int N = 400000;
	for (int i = 0; i < N; i++) {
		struct sc_ev ev = mk(SC_EV_SCOPE_OPEN, 0x7700000000ull + (uint64_t)i, 0);
		ev.s1 = "flood";
		int64_t a = mono();
		sc_emit(&ev);
		ev = mk(SC_EV_SCOPE_CLOSE, ev.a, 0);
		sc_emit(&ev);
		int64_t d = mono() - a;
		if (d > worst)
			worst = d;
	}
	int64_t total = mono() - t0;
	struct sc_agent_stats st;
	usleep(20000);
	sc_agent_get_stats(&st);
	rx_kill(&rx, SIGCONT);
	printf("  %d events in %.1f ms with the receiver stopped; worst emit %.1f us\n", 2 * N,
	       total / 1e6, worst / 1e3);
	/* Emitting must not have waited for the receiver, which is stopped: a
	 * wait would last until SIGCONT, which comes only after this loop.  The
	 * bound is generous because a loaded machine may preempt any emit. */
	assert_true(worst < 1000 * 1000 * 1000);

	/* An event after the loss; the repair must keep it and drop the rest. */
	for (int i = 0; i < 200; i++) {
		if (sc_agent_flush(100) == 0)
			break;
	}
	struct sc_ev ev = emit_scope(0x99, "after");
	sc_agent_get_stats(&st);
	assert_true(st.lost > 0);
	assert_true(st.lost_msgs >= 1);
	assert_true(rx_stat(&rx, "lost_msgs") >= 1);
	assert_true(rx_stat(&rx, "lost") > 0);
	assert_true(rx_stat(&rx, "snapshots") >= 2);
	ev.snapshot = 1;
	expect_scope_and_agent(&ev);
}

/* runtime/rt.h: what scope_join() and the others call on a violation.
 * Called here directly, so the runtime's registry stays as the other tests
 * expect it (no thread or pool is made). */
void sc_emit_violation(uint64_t scope, int kind, int err);

/* A stopped receiver is seen stopped (/proc/PID/stat, by the pid the
 * socket names) once the socket is full, and the threads shed for that
 * reason: the agent looks once the socket has been blocked for 5 ms,
 * rather than wait out the 20 ms a daemon that merely lags gets (test_agent_peer checks that
 * one).  The events go out at a pace the agent keeps up with, so that what
 * blocks is the socket, not a full ring (drops would make the agent
 * discard and snapshot instead of sending). */
static void test_stopped_receiver_shed_at_once(void **state)
{
	(void)state;
	struct sc_agent_stats st, st0;
	sc_agent_get_stats(&st0); /* the counts are the process's */
	long long viol0 = rx_stat(&rx, "violations");
	rx_kill(&rx, SIGSTOP);
	int64_t end = mono() + 10 * 1000000000ll;
	uint64_t id = 0x7800000000ull;
	do {
		for (int i = 0; i < 500; i++, id++) {
			struct sc_ev ev = mk(SC_EV_SCOPE_OPEN, id, 0);
			ev.s1 = "paced";
			sc_emit(&ev);
			ev = mk(SC_EV_SCOPE_CLOSE, id, 0);
			sc_emit(&ev);
		}
		usleep(2000);
		sc_agent_get_stats(&st);
	} while (st.sheds == st0.sheds && mono() < end);
	/* Violations while shedding are dropped from the rings, and no
	 * snapshot could give them back: they are kept and come after the
	 * repairing one. */
	for (int i = 0; i < 3; i++)
		sc_emit_violation(0x7a00 + (uint64_t)i, SC_VIOL_DOUBLE_JOIN, SCOPE_EJOINED);
	rx_kill(&rx, SIGCONT);
	printf("  sheds %llu -> %llu, at once %llu -> %llu\n", (unsigned long long)st0.sheds,
	       (unsigned long long)st.sheds, (unsigned long long)st0.sheds_stopped,
	       (unsigned long long)st.sheds_stopped);
	assert_true(st.sheds > st0.sheds);
	assert_true(st.sheds_stopped > st0.sheds_stopped);
	/* The receiver reads again: shedding ends, and the loss is repaired. */
	for (int i = 0; i < 200 && sc_agent_flush(100) != 0; i++) {
	}
	struct sc_ev ev = emit_scope(0x98, "after the shed");
	ev.snapshot = 1;
	expect_scope_and_agent(&ev);
	assert_int_equal(rx_stat(&rx, "violations") - viol0, 3);
}

/* Structure violations while the daemon is away change no state that a
 * snapshot could find: the agent keeps the last 16 and sends them after the
 * reconnect's snapshot. */
static void test_violations_kept_while_away(void **state)
{
	(void)state;
	struct sc_agent_stats st;
	rx_kill(&rx, SIGKILL);
	for (int i = 0; i < 1000; i++) {
		sc_agent_get_stats(&st);
		if (!st.connected)
			break;
		usleep(5000);
	}
	assert_false(st.connected);
	for (int i = 0; i < 20; i++)
		sc_emit_violation(0x7900 + (uint64_t)i, SC_VIOL_DOUBLE_JOIN, SCOPE_EJOINED);
	rx_restart(&rx, "reconnect");
	long long got = 0;
	for (int i = 0; i < 1000 && got < 16; i++) {
		got = rx_stat(&rx, "violations");
		usleep(5000);
	}
	assert_int_equal(got, 16);
	/* Sent once: a second snapshot brings none again. */
	rx_kill(&rx, SIGKILL);
	rx_restart(&rx, "reconnect again");
	assert_int_equal(sc_agent_flush(5000), 0);
	assert_int_equal(rx_stat(&rx, "violations"), 0);
}

/* The receiver killed and restarted: the program goes on, the agent
 * reconnects with backoff and the new receiver gets a snapshot. */
static void test_receiver_restart(void **state)
{
	(void)state;
	rx_kill(&rx, SIGKILL);
	for (int i = 0; i < 10000; i++) {
		struct sc_ev ev = mk(SC_EV_JOIN_BEGIN, 5, 0);
		sc_emit(&ev);
	}
	rx_restart(&rx, "reconnect");
	struct sc_agent_stats st;
	sc_agent_get_stats(&st);
	assert_true(st.sessions >= 2);
	assert_int_equal(rx_stat(&rx, "snapshots"), 1);
	struct sc_ev ev = emit_scope(0x42, "reborn");
	expect_scope_and_agent(&ev);
}

static pthread_barrier_t park_barrier;
static _Atomic int park_go;
static _Atomic uint32_t parked_tids[8];

static void *parked(void *arg)
{
	atomic_store(&parked_tids[(intptr_t)arg], sc_gettid());
	pthread_barrier_wait(&park_barrier);
	while (!atomic_load(&park_go))
		usleep(1000);
	return NULL;
}

#if defined(__SANITIZE_THREAD__)
/* TSan's own background thread blocks every signal, and TSan delays
 * signals to threads inside some of its interceptors: under TSan a thread
 * that is not one of ours may answer -ETIMEDOUT. */
#define TSAN 1
#else
#define TSAN 0
#endif

/* Every thread of the process answers a stack request with addresses. */
static void test_stack_request_all_threads(void **state)
{
	(void)state;
	enum { NT = 6 };
	pthread_t th[NT];
	pthread_barrier_init(&park_barrier, NULL, NT + 1);
	atomic_store(&park_go, 0);
	for (intptr_t i = 0; i < NT; i++)
		pthread_create(&th[i], NULL, parked, (void *)i);
	pthread_barrier_wait(&park_barrier);

	char *r = rx_cmd(&rx, "stacks", NULL, 0);
	int replies = 0, ok = 0, parked_ok = 0, parked_late = 0, timed_out = 0;
	unsigned done_n = 0;
	for (char *line = strtok(r, "\n"); line; line = strtok(NULL, "\n")) {
		unsigned tid, nf;
		int err;
		long long pause;
		if (sscanf(line, "stack %u %d %u %lld", &tid, &err, &nf, &pause) == 4) {
			replies++;
			if (err == 0 && nf > 0 && pause >= 0) {
				ok++;
				for (int i = 0; i < NT; i++)
					parked_ok += atomic_load(&parked_tids[i]) == tid;
			} else {
				timed_out += err == -ETIMEDOUT;
				for (int i = 0; i < NT; i++)
					parked_late += err == -ETIMEDOUT &&
						       atomic_load(&parked_tids[i]) == tid;
				fprintf(stderr, "thread %u: error %d, %u frames\n", tid, err, nf);
			}
		}
		sscanf(line, "done %u", &done_n);
	}
	free(r);
	atomic_store(&park_go, 1);
	for (int i = 0; i < NT; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&park_barrier);
	/* main, the agent, the NT parked threads at least */
	assert_true(replies >= NT + 2);
	assert_int_equal(done_n, (unsigned)replies);
	if (TSAN) {
		/* TSan runs our handler when the thread next enters one of its
		 * interceptors; on a loaded machine (the CI's TSan pass) a parked
		 * thread's once came later than the 200 ms a batch waits.  Every
		 * parked thread still answers, with frames or in time-out. */
		printf("  under TSan: %d of %d threads answered, %d timed out (%d parked)\n", ok,
		       replies, timed_out, parked_late);
		assert_int_equal(ok + timed_out, replies);
		assert_int_equal(parked_ok + parked_late, NT);
		assert_true(parked_ok >= 1);
	} else {
		assert_int_equal(parked_ok, NT);
		assert_int_equal(ok, replies);
	}
}

/* Events emitted just before a capture reach the daemon ahead of its first
 * reply, so the tree sent with the stacks already holds them (issue 19,
 * item 5).  The events are written while the agent sleeps out its drain
 * period and the request comes within it: without the drain before the
 * capture the reply went first (each round shows it, nearly always). */
static void test_capture_after_pending_events(void **state)
{
	(void)state;
	enum { ROUNDS = 5, K = 20 };
	char req[32];
	snprintf(req, sizeof req, "stacks %u", (unsigned)sc_gettid());
	for (int round = 0; round < ROUNDS; round++) {
		assert_int_equal(sc_agent_flush(5000), 0);
		unsigned long long before = rx_stat(&rx, "events");
		for (int i = 0; i < K; i++) {
			struct sc_ev ev =
			    mk(SC_EV_SCOPE_OPEN, 0x7700000000ull + (uint64_t)(round * K + i), 0);
			ev.s1 = "pending";
			sc_emit(&ev);
		}
		char *r = rx_cmd(&rx, req, NULL, 0);
		const char *at = strstr(r, "events_before_reply ");
		if (!at)
			fail_msg("no reply to the capture: %s", r);
		unsigned long long seen = strtoull(at + 20, NULL, 10);
		free(r);
		if (seen < before + K)
			fail_msg(
			    "round %d: the capture's reply came after %llu events, before the %d "
			    "emitted ahead of it (%llu before them)",
			    round, seen, K, before);
	}
}

/* A request naming threads gets exactly those, -ESRCH for a gone one. */
static void test_stack_request_named_threads(void **state)
{
	(void)state;
	char cmd[64];
	pthread_t th;
	/* A parked thread, not this one: this one waits in read() for the
	 * answer, where TSan would hold the signal back. */
	pthread_barrier_init(&park_barrier, NULL, 2);
	atomic_store(&park_go, 0);
	pthread_create(&th, NULL, parked, (void *)0);
	pthread_barrier_wait(&park_barrier);
	unsigned self = atomic_load(&parked_tids[0]), gone = 0x7ffffff0u;
	snprintf(cmd, sizeof cmd, "stacks %u %u", self, gone);
	char *r = rx_cmd(&rx, cmd, NULL, 0);
	unsigned tid, nf, n;
	int err, self_ok = 0, gone_srch = 0, replies = 0, done = 0;
	for (char *line = strtok(r, "\n"); line; line = strtok(NULL, "\n")) {
		if (sscanf(line, "stack %u %d %u", &tid, &err, &nf) == 3) {
			replies++;
			self_ok += tid == self && err == 0 && nf > 0;
			gone_srch += tid == gone && err == -ESRCH;
		}
		if (sscanf(line, "done %u", &n) == 1)
			done = (int)n;
	}
	free(r);
	atomic_store(&park_go, 1);
	pthread_join(th, NULL);
	pthread_barrier_destroy(&park_barrier);
	assert_int_equal(replies, 2);
	assert_int_equal(done, 2);
	assert_int_equal(self_ok, 1);
	assert_int_equal(gone_srch, 1);
}

/* A fork child that never uses the runtime starts no agent and never
 * connects (it only execs or _exits); the parent's session goes on.  A
 * child that does use it is tests/e2e/agent_fork.sh, against the real
 * daemon: this receiver keeps only its newest connection. */
static void test_fork_child_quiet_until_used(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sc_agent_stats st;
		usleep(100000); /* time enough to connect, were it trying */
		sc_agent_get_stats(&st);
		/* The parent's counts are not the child's (this process shed
		 * in the tests before). */
		int quiet = st.tid == 0 && !st.connected && st.sessions == 0;
		_exit(quiet && st.sheds == 0 && st.sheds_stopped == 0 ? 0 : 1);
	}
	int status;
	waitpid(pid, &status, 0);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	struct sc_ev ev = emit_scope(0xa1, "parent");
	expect_scope_and_agent(&ev);
	assert_int_equal(rx_stat(&rx, "sessions"), 1); /* a HELLO from the child would count */
}

/* The agent's own thread is in every snapshot under its name and role, so
 * dumps name the thread that answers stack requests; when the agent stops,
 * its THREAD_EXIT reaches the daemon before the socket closes. */
static void test_agent_thread_reported(void **state)
{
	(void)state;
	struct sc_agent_stats st;
	sc_agent_get_stats(&st);
	char want[96];
	snprintf(want, sizeof want, "thread %u role=%d pool=0 name=scoped-agent\n", st.tid,
		 SC_ROLE_AGENT);
	char *dump = rx_cmd(&rx, "dump", NULL, 0);
	if (!strstr(dump, want))
		fail_msg("the first snapshot lacks \"%.*s\": %s", (int)strlen(want) - 1, want,
			 dump);
	free(dump);

	/* A repair snapshot lists it again. */
	rx_kill(&rx, SIGKILL);
	rx_restart(&rx, "reconnect");
	dump = rx_cmd(&rx, "dump", NULL, 0);
	if (!strstr(dump, want))
		fail_msg("the snapshot after a reconnect lacks the agent thread: %s", dump);
	free(dump);

	sc_agent_stop();
	dump = NULL;
	for (int i = 0; i < 200; i++) {
		free(dump);
		dump = rx_cmd(&rx, "dump", NULL, 0);
		if (!strstr(dump, want))
			break;
		usleep(5000);
	}
	if (strstr(dump, want))
		fail_msg("the agent stopped but the receiver still holds its thread: %s", dump);
	assert_non_null(strstr(dump, " connected=0 "));
	free(dump);
}

/* A receiver outlives no test: a "test" (a child here) starts one and
 * ends without its cleanup, as one killed by run.sh's timeout would; its
 * receiver must be gone too, killed, not left listening. */
static void test_receiver_dies_with_test(void **state)
{
	struct rx orphan = {.pid = 0};
	int fds[2], status;
	pid_t test, got = 0;
	ssize_t n;

	(void)state;
	/* The orphaned receiver is handed to us, so that its end is ours to
	 * see (and its pid cannot be reused while we look). */
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	assert_int_equal(pipe(fds), 0);
	test = fork();
	assert_true(test >= 0);
	if (test == 0) {
		close(fds[0]);
		rx_start(&orphan);
		n = write(fds[1], &orphan, sizeof orphan);
		_exit(n == (ssize_t)sizeof orphan ? 0 : 1);
	}
	close(fds[1]);
	n = read(fds[0], &orphan, sizeof orphan);
	close(fds[0]);
	assert_int_equal(waitpid(test, &status, 0), test);
	assert_int_equal(n, sizeof orphan);
	assert_true(orphan.pid > 0);
	for (int i = 0; i < 500 && got == 0; i++) {
		got = waitpid(orphan.pid, &status, WNOHANG);
		if (got == 0)
			usleep(10000);
	}
	(void)prctl(PR_SET_CHILD_SUBREAPER, 0);
	if (got == 0) {
		rx_cleanup(&orphan); /* kills and reaps it */
		fail_msg("the receiver outlived the test that started it by 5 s");
	}
	assert_int_equal(got, orphan.pid);
	orphan.pid = 0;
	rx_cleanup(&orphan); /* its socket files and directory */
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);
}

/* exit() and a fatal signal each end with PROCESS_EXIT. */
static void check_exit(const char *mode, unsigned how, int code)
{
	/* The receiver keeps only its newest agent connection: this process's own
	 * agent, reconnecting to the restarted receiver, could displace the
	 * child's before its PROCESS_EXIT is read.  Only the child may speak. */
	sc_agent_stop();
	rx_kill(&rx, SIGKILL);
	rx_start(&rx);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl("/proc/self/exe", "test_agent", mode, rx.sock, (char *)NULL);
		_exit(127);
	}
	int status;
	waitpid(pid, &status, 0);
	char want[64];
	snprintf(want, sizeof want, " exit=%u:%d ", how, code);
	char *s = NULL;
	for (int i = 0; i < 100; i++) {
		free(s);
		s = rx_cmd(&rx, "stats", NULL, 0);
		if (strstr(s, want))
			break;
		usleep(10000);
	}
	if (!strstr(s, want)) {
		char got[512];
		snprintf(got, sizeof got, "%s", s);
		free(s); /* fail_msg does not return */
		fail_msg("%s: want%sgot %s", mode, want, got);
	}
	free(s);
}

static void test_process_exit_reported(void **state)
{
	(void)state;
	check_exit("--exiter", 1, 3);
	check_exit("--crasher", 2, SIGABRT);
}

/* The child programs of test_process_exit_reported. */
static int exit_child(const char *mode, const char *sock)
{
	if (sc_agent_start(sock))
		return 100;
	for (int i = 0; i < 500; i++) {
		struct sc_agent_stats st;
		sc_agent_get_stats(&st);
		if (st.connected && sc_agent_flush(100) == 0)
			break;
		usleep(10000);
	}
	struct sc_ev ev = mk(SC_EV_SCOPE_OPEN, 1, 0);
	sc_emit(&ev);
	if (!strcmp(mode, "--crasher"))
		abort();
	exit(3);
}

int main(int argc, char **argv)
{
	if (argc == 3 && (!strcmp(argv[1], "--exiter") || !strcmp(argv[1], "--crasher")))
		return exit_child(argv[1], argv[2]);
	test_without_agent(argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_encoder_matches_decoder),
	    cmocka_unit_test_setup_teardown(test_events_reach_receiver, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stopped_receiver_drops_then_repairs, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_stopped_receiver_shed_at_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_receiver_restart, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_violations_kept_while_away, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stack_request_all_threads, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stack_request_named_threads, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_capture_after_pending_events, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fork_child_quiet_until_used, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_agent_thread_reported, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_process_exit_reported, setup, teardown),
	    cmocka_unit_test(test_receiver_dies_with_test),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
