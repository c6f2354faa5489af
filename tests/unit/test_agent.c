/* test_agent.c - tests of the reporting agent against a receiving endpoint:
 * this binary, run as `test_agent --receiver SOCK CTL`, is a stand-in daemon
 * that rebuilds the scope/task model from the wire and compares it with the
 * truth a test sends it.  The cmocka tests here drive the agent with
 * hand-made events; test_agent_workload.c drives it with the real runtime. */
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

/* ======================================================================
 * The model a receiver rebuilds: live threads, pools, scopes, tasks and
 * bindings, applied idempotently; a snapshot replaces it.
 */
enum rk { R_THREAD = 1, R_POOL, R_SCOPE, R_TASK, R_VALUE };

struct rec {
	uint8_t kind, used; /* used: 0 empty, 1 live, 2 deleted */
	uint64_t id, a, b;  /* scope: a parent, b parent task; task: a scope; value: a scope */
	uint32_t owner, joiner, state, cancel, role;
	int joining;
	char name[96];
};

struct model {
	struct rec *t;
	size_t cap, n, tomb;
	uint64_t events, snapshots, snap_bad, lost_msgs, lost_total, violations;
	uint64_t snap_frames;
	int in_snap;
	uint32_t exit_how;
	int32_t exit_code;
};

static uint64_t mix(uint8_t kind, uint64_t id)
{
	uint64_t h = id * 0x9e3779b97f4a7c15ull ^ kind;
	return h ^ (h >> 29);
}

static struct rec *slot_of(struct model *m, uint8_t kind, uint64_t id, int create);

static void model_grow(struct model *m)
{
	struct rec *old = m->t;
	size_t oldcap = m->cap;
	m->cap = oldcap ? oldcap * 2 : 1024;
	if (m->n * 4 < oldcap)
		m->cap = oldcap; /* mostly tombstones: rehash in place size */
	m->t = calloc(m->cap, sizeof *m->t);
	assert_non_null(m->t);
	m->n = m->tomb = 0;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].used == 1)
			*slot_of(m, old[i].kind, old[i].id, 1) = old[i];
	free(old);
}

/* The record (kind, id); with create, a fresh one when absent. */
static struct rec *slot_of(struct model *m, uint8_t kind, uint64_t id, int create)
{
	if (create && (m->n + m->tomb + 1) * 2 > m->cap)
		model_grow(m);
	if (!m->cap)
		return NULL;
	struct rec *tomb = NULL;
	for (size_t i = mix(kind, id) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct rec *r = &m->t[i];
		if (r->used == 0) {
			if (!create)
				return NULL;
			if (tomb) {
				r = tomb;
				m->tomb--;
			}
			memset(r, 0, sizeof *r);
			r->used = 1;
			r->kind = kind;
			r->id = id;
			m->n++;
			return r;
		}
		if (r->used == 2) {
			if (!tomb)
				tomb = r;
			continue;
		}
		if (r->kind == kind && r->id == id)
			return r;
	}
}

static void del(struct model *m, struct rec *r)
{
	if (r && r->used == 1) {
		r->used = 2;
		m->n--;
		m->tomb++;
	}
}

static void model_clear(struct model *m)
{
	if (m->t)
		memset(m->t, 0, m->cap * sizeof *m->t);
	m->n = m->tomb = 0;
}

static void set_name(struct rec *r, const struct proto_str *s)
{
	snprintf(r->name, sizeof r->name, "%s", s->p ? s->p : "");
}

/* A scope's close takes its tasks and bindings with it. */
static void close_scope(struct model *m, uint64_t scope)
{
	del(m, slot_of(m, R_SCOPE, scope, 0));
	for (size_t i = 0; i < m->cap; i++) {
		struct rec *r = &m->t[i];
		if (r->used == 1 && (r->kind == R_TASK || r->kind == R_VALUE) && r->a == scope)
			del(m, r);
	}
}

static uint64_t value_id(uint64_t scope, const char *key)
{
	uint64_t h = 1469598103934665603ull ^ scope;
	for (; *key; key++)
		h = (h ^ (uint8_t)*key) * 1099511628211ull;
	return h;
}

static void apply(struct model *m, const struct proto_msg *e)
{
	struct rec *r;

	if (e->type >= 0x100 && e->type < 0x200) {
		m->events++;
		if (m->in_snap && (e->flags & PROTO_F_SNAPSHOT))
			m->snap_frames++;
	}
	switch (e->type) {
	case PROTO_SNAPSHOT_BEGIN:
		model_clear(m);
		m->in_snap = 1;
		m->snap_frames = 0;
		break;
	case PROTO_SNAPSHOT_END:
		m->in_snap = 0;
		m->snapshots++;
		if (e->count != m->snap_frames)
			m->snap_bad++;
		break;
	case PROTO_LOST:
		m->lost_msgs++;
		m->lost_total = e->total_lost;
		break;
	case PROTO_EV_THREAD_START:
		r = slot_of(m, R_THREAD, e->tid, 1);
		set_name(r, &e->name);
		r->role = e->role;
		r->a = e->pool_id;
		break;
	case PROTO_EV_THREAD_EXIT:
		del(m, slot_of(m, R_THREAD, e->tid, 0));
		break;
	case PROTO_EV_THREAD_NAME:
		set_name(slot_of(m, R_THREAD, e->tid, 1), &e->name);
		break;
	case PROTO_EV_PROCESS_EXIT:
		m->exit_how = e->how;
		m->exit_code = e->code;
		break;
	case PROTO_EV_POOL_CREATE:
		set_name(slot_of(m, R_POOL, e->pool_id, 1), &e->name);
		break;
	case PROTO_EV_POOL_DESTROY:
		del(m, slot_of(m, R_POOL, e->pool_id, 0));
		break;
	case PROTO_EV_SCOPE_OPEN:
		r = slot_of(m, R_SCOPE, e->scope, 1);
		r->a = e->parent;
		r->b = e->parent_task;
		r->owner = e->tid;
		r->joiner = e->joiner;
		set_name(r, &e->name);
		break;
	case PROTO_EV_JOIN_BEGIN:
	case PROTO_EV_JOIN_END:
		if ((r = slot_of(m, R_SCOPE, e->scope, 0)))
			r->joining = e->type == PROTO_EV_JOIN_BEGIN;
		break;
	case PROTO_EV_SCOPE_CANCEL:
		if ((r = slot_of(m, R_SCOPE, e->scope, 0)) && !r->cancel)
			r->cancel = e->reason;
		break;
	case PROTO_EV_SCOPE_CLOSE:
		close_scope(m, e->scope);
		break;
	case PROTO_EV_TASK_FORK:
		r = slot_of(m, R_TASK, e->task, 1);
		r->a = e->scope;
		if (e->state > r->state) /* a START seen first must not be undone */
			r->state = e->state;
		break;
	case PROTO_EV_TASK_START:
		r = slot_of(m, R_TASK, e->task, 1);
		r->a = e->scope;
		if (r->state < SC_TASK_RUNNING)
			r->state = SC_TASK_RUNNING;
		r->owner = e->tid;
		break;
	case PROTO_EV_TASK_END:
		/* Ended tasks leave the live model (the registry lists live ones). */
		del(m, slot_of(m, R_TASK, e->task, 0));
		break;
	case PROTO_EV_VALUE_BIND:
		r = slot_of(m, R_VALUE, value_id(e->scope, e->key.p), 1);
		r->a = e->scope;
		snprintf(r->name, sizeof r->name, "%s=%s", e->key.p, e->value.p);
		break;
	case PROTO_EV_VIOLATION:
		m->violations++;
		break;
	default:
		break;
	}
}

static int line_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The model as sorted text lines, one per live record.  New string. */
static char *model_text(struct model *m)
{
	char **lines = calloc(m->n + 1, sizeof *lines);
	size_t k = 0, total = 1;
	for (size_t i = 0; i < m->cap; i++) {
		struct rec *r = &m->t[i];
		char buf[256];
		if (r->used != 1)
			continue;
		switch (r->kind) {
		case R_THREAD:
			snprintf(buf, sizeof buf, "thread %llu role=%u pool=%llu name=%s\n",
				 (unsigned long long)r->id, r->role, (unsigned long long)r->a, r->name);
			break;
		case R_POOL:
			snprintf(buf, sizeof buf, "pool %llu name=%s\n", (unsigned long long)r->id,
				 r->name);
			break;
		case R_SCOPE:
			snprintf(buf, sizeof buf,
				 "scope %llu parent=%llu ptask=%llu owner=%u joiner=%u joining=%d "
				 "cancel=%u name=%s\n",
				 (unsigned long long)r->id, (unsigned long long)r->a,
				 (unsigned long long)r->b, r->owner, r->joiner, r->joining, r->cancel,
				 r->name);
			break;
		case R_TASK:
			snprintf(buf, sizeof buf, "task %llu scope=%llu state=%u worker=%u\n",
				 (unsigned long long)r->id, (unsigned long long)r->a, r->state,
				 r->state == SC_TASK_RUNNING ? r->owner : 0);
			break;
		default:
			snprintf(buf, sizeof buf, "value scope=%llu %s\n", (unsigned long long)r->a,
				 r->name);
			break;
		}
		lines[k] = strdup(buf);
		total += strlen(buf);
		k++;
	}
	qsort(lines, k, sizeof *lines, line_cmp);
	char *out = malloc(total), *p = out;
	for (size_t i = 0; i < k; i++) {
		p = stpcpy(p, lines[i]);
		free(lines[i]);
	}
	*p = 0;
	free(lines);
	return out;
}

/* Applies a buffer of whole frames; the number applied, or -1 on a bad one. */
static long apply_frames(struct model *m, const uint8_t *p, size_t n)
{
	long count = 0;
	while (n > 0) {
		struct proto_msg e;
		size_t used;
		if (proto_decode(p, n, &e, &used) != PROTO_OK)
			return -1;
		apply(m, &e);
		p += used;
		n -= used;
		count++;
	}
	return count;
}

/* ======================================================================
 * The receiver process.
 */
struct recv {
	int lfd, cfd_listen, afd;
	uint8_t *in;
	size_t in_len;
	struct model m;
	uint64_t sessions, bad_frames;
	char program[128];
	/* stack request in progress */
	char *stack_text;
	size_t stack_len;
	int stack_done;
};

#define RECV_IN (4u << 20)

static int listen_on(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 8) < 0) {
		fprintf(stderr, "receiver: cannot listen on %s: %s\n", path, strerror(errno));
		exit(2);
	}
	return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		c += w;
		n -= (size_t)w;
	}
}

static void recv_stack_line(struct recv *r, const struct proto_msg *e)
{
	char line[256];
	int n;
	if (e->type == PROTO_STACK_REPLY)
		n = snprintf(line, sizeof line, "stack %u %d %u %lld %llx\n", e->tid, (int)e->error,
			     e->nframes, (long long)e->pause_ns,
			     (unsigned long long)proto_addr_at(e, 0));
	else
		n = snprintf(line, sizeof line, "done %u %lld %lld\n", e->nthreads,
			     (long long)e->total_ns, (long long)e->max_pause_ns);
	r->stack_text = realloc(r->stack_text, r->stack_len + (size_t)n + 1);
	memcpy(r->stack_text + r->stack_len, line, (size_t)n + 1);
	r->stack_len += (size_t)n;
	if (e->type == PROTO_STACK_DONE)
		r->stack_done = 1;
}

static void recv_drop_agent(struct recv *r)
{
	if (r->afd >= 0)
		close(r->afd);
	r->afd = -1;
	r->in_len = 0;
}

/* Reads what the agent sent and applies it; returns bytes read (0: none). */
static size_t recv_agent(struct recv *r)
{
	if (r->afd < 0)
		return 0;
	ssize_t n = recv(r->afd, r->in + r->in_len, RECV_IN - r->in_len, MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		recv_drop_agent(r);
		return 0;
	}
	if (n < 0)
		return 0;
	r->in_len += (size_t)n;
	size_t off = 0;
	for (;;) {
		struct proto_msg e;
		size_t used;
		int rc = proto_decode(r->in + off, r->in_len - off, &e, &used);
		if (rc == PROTO_EAGAIN)
			break;
		if (rc != PROTO_OK) {
			fprintf(stderr, "receiver: bad frame from the agent: %s\n", proto_strerror(rc));
			r->bad_frames++;
			recv_drop_agent(r);
			return (size_t)n;
		}
		if (e.type == PROTO_HELLO) {
			snprintf(r->program, sizeof r->program, "%s", e.program.p);
			uint8_t ack[16];
			struct proto_msg a = {.type = PROTO_HELLO_ACK, .version = PROTO_VERSION};
			int len = proto_encode(ack, sizeof ack, &a, NULL, NULL);
			send_all(r->afd, ack, (size_t)len);
			r->sessions++;
		} else if (e.type == PROTO_STACK_REPLY || e.type == PROTO_STACK_DONE) {
			recv_stack_line(r, &e);
		} else {
			apply(&r->m, &e);
		}
		off += used;
	}
	memmove(r->in, r->in + off, r->in_len - off);
	r->in_len -= off;
	return (size_t)n;
}

static void recv_drain(struct recv *r)
{
	while (recv_agent(r) > 0) {
	}
}

static void reply_stats(struct recv *r, int fd)
{
	char buf[512];
	int n = snprintf(buf, sizeof buf,
			 "stats events=%llu snapshots=%llu snap_bad=%llu lost_msgs=%llu lost=%llu "
			 "sessions=%llu bad_frames=%llu exit=%u:%d connected=%d program=%s\n",
			 (unsigned long long)r->m.events, (unsigned long long)r->m.snapshots,
			 (unsigned long long)r->m.snap_bad, (unsigned long long)r->m.lost_msgs,
			 (unsigned long long)r->m.lost_total, (unsigned long long)r->sessions,
			 (unsigned long long)r->bad_frames, r->m.exit_how, r->m.exit_code,
			 r->afd >= 0, r->program);
	send_all(fd, buf, (size_t)n);
}

/* "compare N\n" + N bytes of truth frames: is the live model the same? */
static void cmd_compare(struct recv *r, int fd, size_t nbytes)
{
	uint8_t *truth = malloc(nbytes + 1);
	size_t got = 0;
	while (got < nbytes) {
		ssize_t k = read(fd, truth + got, nbytes - got);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	recv_drain(r);
	struct model t = {0};
	long applied = apply_frames(&t, truth, got);
	char *live = model_text(&r->m), *want = model_text(&t);
	if (applied < 0) {
		send_all(fd, "badtruth\n", 9);
	} else if (!strcmp(live, want)) {
		char line[64];
		int n = snprintf(line, sizeof line, "same %zu\n", t.n);
		send_all(fd, line, (size_t)n);
	} else {
		send_all(fd, "diff\n--- live\n", 14);
		send_all(fd, live, strlen(live));
		send_all(fd, "--- truth\n", 10);
		send_all(fd, want, strlen(want));
	}
	free(live);
	free(want);
	free(t.t);
	free(truth);
}

/* "stacks [TID...]": a STACK_REQUEST for those threads (none: all). */
static void cmd_stacks(struct recv *r, int fd, const char *args)
{
	uint8_t req[256];
	uint32_t tids[16];
	struct proto_msg q = {.type = PROTO_STACK_REQUEST, .req = 7, .max_frames = 32};
	char *end;
	for (unsigned long v; q.ntids < 16 && (v = strtoul(args, &end, 10)) && end != args;
	     args = end)
		tids[q.ntids++] = (uint32_t)v;
	int len = proto_encode(req, sizeof req, &q, tids, NULL);
	r->stack_len = 0;
	r->stack_done = 0;
	if (r->afd >= 0)
		send_all(r->afd, req, (size_t)len);
	for (int i = 0; i < 1000 && !r->stack_done && r->afd >= 0; i++) {
		struct pollfd p = {r->afd, POLLIN, 0};
		poll(&p, 1, 10);
		recv_drain(r);
	}
	if (r->stack_len)
		send_all(fd, r->stack_text, r->stack_len);
}

static void recv_command(struct recv *r, int fd)
{
	char line[128];
	size_t k = 0;
	while (k < sizeof line - 1 && read(fd, line + k, 1) == 1 && line[k] != '\n')
		k++;
	line[k] = 0;
	size_t n;
	if (!strcmp(line, "dump")) {
		recv_drain(r);
		char *t = model_text(&r->m);
		send_all(fd, t, strlen(t));
		free(t);
		reply_stats(r, fd);
	} else if (!strcmp(line, "stats")) {
		recv_drain(r);
		reply_stats(r, fd);
	} else if (sscanf(line, "compare %zu", &n) == 1) {
		cmd_compare(r, fd, n);
		reply_stats(r, fd);
	} else if (!strncmp(line, "stacks", 6)) {
		cmd_stacks(r, fd, line + 6);
	}
	send_all(fd, "end\n", 4);
}

static int receiver_main(const char *sock, const char *ctl)
{
	struct recv r = {.afd = -1};
	r.in = malloc(RECV_IN);
	r.lfd = listen_on(sock);
	r.cfd_listen = listen_on(ctl);
	for (;;) {
		struct pollfd p[3] = {{r.lfd, POLLIN, 0}, {r.cfd_listen, POLLIN, 0}, {r.afd, POLLIN, 0}};
		if (poll(p, 3, 1000) < 0 && errno != EINTR)
			return 1;
		if (p[0].revents & POLLIN) {
			int fd = accept4(r.lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0) {
				recv_drop_agent(&r); /* one agent at a time: the newest */
				r.afd = fd;
			}
		}
		if (p[2].revents)
			recv_agent(&r);
		if (p[1].revents & POLLIN) {
			int fd = accept4(r.cfd_listen, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0) {
				recv_command(&r, fd);
				close(fd);
			}
		}
	}
}

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

static int setup(void **state)
{
	(void)state;
	rx_start(&rx);
	assert_int_equal(sc_agent_start(rx.sock), 0);
	if (rx_wait_session(&rx, 1, 5000))
		fail_msg("the agent did not connect to %s", rx.sock);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sc_agent_stop();
	rx_cleanup(&rx);
	return 0;
}

/* Every event kind encodes into a frame proto_decode accepts, with the
 * values where the layout says. */
static void test_encoder_matches_decoder(void **state)
{
	(void)state;
	static const uint16_t kinds[] = {
		SC_EV_THREAD_START, SC_EV_THREAD_EXIT, SC_EV_THREAD_NAME,   SC_EV_PROCESS_EXIT,
		SC_EV_SCOPE_OPEN,   SC_EV_JOIN_BEGIN,  SC_EV_JOIN_END,      SC_EV_SCOPE_CANCEL,
		SC_EV_SCOPE_CLOSE,  SC_EV_TASK_FORK,   SC_EV_TASK_START,    SC_EV_TASK_END,
		SC_EV_VIOLATION,    SC_EV_VALUE_BIND,  SC_EV_POOL_CREATE,   SC_EV_POOL_STATS,
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
	assert_int_equal(m.line, 42);
	assert_string_equal(m.name.p, "handle");
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
			/* Still open at the end: the truth holds it and tasks 2, 3. */
			open.snapshot = 1;
			truth_add(em->truth, &open);
			for (int t = 2; t <= 3; t++) {
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

	struct truth all = {0};
	for (int i = 0; i < NT; i++) {
		all.p = realloc(all.p, all.len + truths[i].len);
		memcpy(all.p + all.len, truths[i].p, truths[i].len);
		all.len += truths[i].len;
		free(truths[i].p);
	}
	size_t n = rx_compare(&rx, &all);
	assert_int_equal(n, NT * 300 * 3); /* 300 open scopes x (scope + 2 tasks) */
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
	/* Emitting must not have waited for the receiver: no single emit
	 * anywhere near the agent's drain period. */
	assert_true(worst < 50 * 1000 * 1000);

	/* An event after the loss; the repair must keep it and drop the rest. */
	for (int i = 0; i < 200; i++) {
		if (sc_agent_flush(100) == 0)
			break;
	}
	struct sc_ev ev = mk(SC_EV_SCOPE_OPEN, 0x99, 0);
	ev.s1 = "after";
	sc_emit(&ev);
	assert_int_equal(sc_agent_flush(5000), 0);
	sc_agent_get_stats(&st);
	assert_true(st.lost > 0);
	assert_true(st.lost_msgs >= 1);
	assert_true(rx_stat(&rx, "lost_msgs") >= 1);
	assert_true(rx_stat(&rx, "lost") > 0);
	assert_true(rx_stat(&rx, "snapshots") >= 2);
	struct truth t = {0};
	ev.snapshot = 1;
	truth_add(&t, &ev);
	assert_int_equal(rx_compare(&rx, &t), 1);
	free(t.p);
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
	rx_start(&rx);
	if (rx_wait_session(&rx, 1, 10000))
		fail_msg("the agent did not reconnect");
	struct sc_agent_stats st;
	sc_agent_get_stats(&st);
	assert_true(st.sessions >= 2);
	assert_int_equal(rx_stat(&rx, "snapshots"), 1);
	struct sc_ev ev = mk(SC_EV_SCOPE_OPEN, 0x42, 0);
	ev.s1 = "reborn";
	sc_emit(&ev);
	assert_int_equal(sc_agent_flush(5000), 0);
	struct truth t = {0};
	truth_add(&t, &ev);
	assert_int_equal(rx_compare(&rx, &t), 1);
	free(t.p);
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
	int replies = 0, ok = 0, parked_ok = 0, timed_out = 0;
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
	assert_int_equal(parked_ok, NT);
	if (TSAN) {
		printf("  under TSan: %d of %d threads answered, %d timed out\n", ok, replies,
		       timed_out);
		assert_int_equal(ok + timed_out, replies);
	} else {
		assert_int_equal(ok, replies);
	}
}

/* A request naming threads gets exactly those, -ESRCH for a gone one. */
static void test_stack_request_named_threads(void **state)
{
	(void)state;
	char cmd[64];
	unsigned self = sc_gettid(), gone = 0x7ffffff0u;
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
	assert_int_equal(replies, 2);
	assert_int_equal(done, 2);
	assert_int_equal(self_ok, 1);
	assert_int_equal(gone_srch, 1);
}

/* A fork child runs unreported and the parent's session goes on. */
static void test_fork_child_unreported(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sc_ev ev = mk(SC_EV_SCOPE_OPEN, 0xc1d, 0);
		sc_emit(&ev); /* the observer is gone in the child: nothing happens */
		_exit(sc_observed() ? 1 : 0);
	}
	int status;
	waitpid(pid, &status, 0);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	struct sc_ev ev = mk(SC_EV_SCOPE_OPEN, 0xa1, 0);
	ev.s1 = "parent";
	sc_emit(&ev);
	assert_int_equal(sc_agent_flush(5000), 0);
	struct truth t = {0};
	truth_add(&t, &ev);
	assert_int_equal(rx_compare(&rx, &t), 1);
	free(t.p);
	assert_int_equal(rx_stat(&rx, "sessions"), 1);
}

/* exit() and a fatal signal each end with PROCESS_EXIT. */
static void check_exit(const char *mode, unsigned how, int code)
{
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
	if (!strstr(s, want))
		fail_msg("%s: want%sgot %s", mode, want, s);
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
	if (argc == 4 && !strcmp(argv[1], "--receiver"))
		return receiver_main(argv[2], argv[3]);
	rx_reexec_disabled(argv);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encoder_matches_decoder),
		cmocka_unit_test_setup_teardown(test_events_reach_receiver, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stopped_receiver_drops_then_repairs, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_receiver_restart, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stack_request_all_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stack_request_named_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_child_unreported, setup, teardown),
		cmocka_unit_test_setup_teardown(test_process_exit_reported, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
