/* test_agent_recv.c - the agent tests' receiving endpoint.  Run as
 * `test_agent_recv --receiver SOCK CTL` it is a stand-in daemon that
 * rebuilds the scope/task model from the agent's stream and answers a
 * control socket (dump, stats, compare with a truth, stacks); run without
 * arguments it unit-tests that model. */
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

#include "../../common/writeall.h"
#include "agent.h"
#include "scope.h"
#include "proto.h"

/* ======================================================================
 * The model a receiver rebuilds: live threads, pools, scopes, tasks and
 * bindings, applied idempotently; a snapshot replaces it.  Call sites (SITE)
 * are the process's: a snapshot keeps them, as the daemon does.
 */
enum rk { R_THREAD = 1, R_POOL, R_SCOPE, R_TASK, R_VALUE };

struct rec {
	uint8_t kind, used; /* used: 0 empty, 1 live, 2 deleted */
	uint64_t id, a, b;  /* scope: a parent, b parent task; task: a scope; value: a scope */
	uint32_t owner, joiner, state, cancel, role;
	int joining;
	char name[96];
	char site[128]; /* scope, task: "file:func:line", "-" none, "" not told */
};

/* Site numbers the receiver holds: the agent numbers them 1, 2, ... so an
 * array indexed by number, grown to the largest seen, capped. */
#define RX_MAX_SITES 65536u

struct model {
	struct rec *t;
	size_t cap, n, tomb;
	uint64_t events, snapshots, snap_bad, lost_msgs, lost_total, violations;
	uint64_t snap_frames;
	int in_snap;
	uint32_t exit_how;
	int32_t exit_code;
	char **sites; /* [number]: "file:func:line" (new), NULL unknown */
	size_t nsites;
	uint64_t sites_defined, sites_refused;
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

/* SITE: defines or replaces site e->site; past the cap it is refused. */
static void define_site(struct model *m, const struct proto_msg *e)
{
	if (e->site == 0 || e->site >= RX_MAX_SITES) {
		m->sites_refused++;
		return;
	}
	if (e->site >= m->nsites) {
		size_t n = (size_t)e->site + 1;
		m->sites = realloc(m->sites, n * sizeof *m->sites);
		assert_non_null(m->sites);
		memset(m->sites + m->nsites, 0, (n - m->nsites) * sizeof *m->sites);
		m->nsites = n;
	}
	char text[128];
	snprintf(text, sizeof text, "%s:%s:%d", e->file.p ? e->file.p : "",
		 e->func.p ? e->func.p : "", (int)e->line);
	if (!m->sites[e->site])
		m->sites_defined++;
	free(m->sites[e->site]);
	m->sites[e->site] = strdup(text);
}

/* A scope's or task's site from the table: "-" when the number is unknown. */
static void set_site(struct model *m, struct rec *r, uint32_t site)
{
	const char *t = site < m->nsites ? m->sites[site] : NULL;
	snprintf(r->site, sizeof r->site, "%s", t ? t : "-");
}

static void model_free(struct model *m)
{
	for (size_t i = 0; i < m->nsites; i++)
		free(m->sites[i]);
	free(m->sites);
	free(m->t);
	memset(m, 0, sizeof *m);
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

	if (e->type >= 0x100 && e->type < 0x200)
		m->events++;
	/* SNAPSHOT_END counts every frame between it and SNAPSHOT_BEGIN: the
	 * SITEs the snapshot starts with as well as its events. */
	if (m->in_snap && (e->flags & PROTO_F_SNAPSHOT) &&
	    ((e->type >= 0x100 && e->type < 0x200) || e->type == PROTO_SITE))
		m->snap_frames++;
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
	case PROTO_SITE:
		define_site(m, e);
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
		set_site(m, r, e->site);
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
		set_site(m, r, e->site);
		break;
	case PROTO_EV_TASK_START:
		r = slot_of(m, R_TASK, e->task, 1);
		r->a = e->scope;
		if (r->state < SC_TASK_RUNNING)
			r->state = SC_TASK_RUNNING;
		r->owner = e->tid;
		break;
	case PROTO_EV_TASK_END:
	case PROTO_EV_TASK_RAN:	 /* a START and its END in one frame */
	case PROTO_EV_TASK_DONE: /* a FORK, its START and its END in one frame */
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
		char buf[512];
		if (r->used != 1)
			continue;
		switch (r->kind) {
		case R_THREAD:
			snprintf(buf, sizeof buf, "thread %llu role=%u pool=%llu name=%s\n",
				 (unsigned long long)r->id, r->role, (unsigned long long)r->a,
				 r->name);
			break;
		case R_POOL:
			snprintf(buf, sizeof buf, "pool %llu name=%s\n", (unsigned long long)r->id,
				 r->name);
			break;
		case R_SCOPE:
			snprintf(buf, sizeof buf,
				 "scope %llu parent=%llu ptask=%llu owner=%u joiner=%u joining=%d "
				 "cancel=%u name=%s site=%s\n",
				 (unsigned long long)r->id, (unsigned long long)r->a,
				 (unsigned long long)r->b, r->owner, r->joiner, r->joining,
				 r->cancel, r->name, r->site[0] ? r->site : "?");
			break;
		case R_TASK:
			snprintf(
			    buf, sizeof buf, "task %llu scope=%llu state=%u worker=%u site=%s\n",
			    (unsigned long long)r->id, (unsigned long long)r->a, r->state,
			    r->state == SC_TASK_RUNNING ? r->owner : 0, r->site[0] ? r->site : "?");
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
	int stack_replied;	  /* a STACK_REPLY of this request came */
	uint64_t events_at_reply; /* events applied when the first one came */
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

/* Every fd here is a socket; a peer that left needs no answer. */
static void send_all(int fd, const void *p, size_t n)
{
	(void)write_all(fd, p, n, true);
}

static void recv_stack_line(struct recv *r, const struct proto_msg *e)
{
	char line[256];
	int n;
	if (e->type == PROTO_STACK_REPLY && !r->stack_replied) {
		r->stack_replied = 1;
		r->events_at_reply = r->m.events;
	}
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
			fprintf(stderr, "receiver: bad frame from the agent: %s\n",
				proto_strerror(rc));
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
			 "sessions=%llu bad_frames=%llu sites=%llu sites_refused=%llu exit=%u:%d "
			 "connected=%d violations=%llu program=%s\n",
			 (unsigned long long)r->m.events, (unsigned long long)r->m.snapshots,
			 (unsigned long long)r->m.snap_bad, (unsigned long long)r->m.lost_msgs,
			 (unsigned long long)r->m.lost_total, (unsigned long long)r->sessions,
			 (unsigned long long)r->bad_frames, (unsigned long long)r->m.sites_defined,
			 (unsigned long long)r->m.sites_refused, r->m.exit_how, r->m.exit_code,
			 r->afd >= 0, (unsigned long long)r->m.violations, r->program);
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
	/* A truth record that no SCOPE_OPEN or TASK_FORK told the site of (a
	 * task the truth knows from its START only) says nothing about it: the
	 * live record's stands. */
	for (size_t i = 0; i < t.cap; i++) {
		struct rec *w = &t.t[i], *l;
		if (w->used == 1 && !w->site[0] && (l = slot_of(&r->m, w->kind, w->id, 0)))
			memcpy(w->site, l->site, sizeof w->site);
	}
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
	model_free(&t);
	free(truth);
}

/* "stacks [TID...]": a STACK_REQUEST for those threads (none: all); the
 * replies, then how many events the model had applied when the first
 * reply came. */
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
	r->stack_replied = 0;
	if (r->afd >= 0)
		send_all(r->afd, req, (size_t)len);
	for (int i = 0; i < 1000 && !r->stack_done && r->afd >= 0; i++) {
		struct pollfd p = {r->afd, POLLIN, 0};
		poll(&p, 1, 10);
		recv_drain(r);
	}
	if (r->stack_len)
		send_all(fd, r->stack_text, r->stack_len);
	if (r->stack_replied) {
		/* How far the model was when the capture's first reply came. */
		char line[64];
		int n = snprintf(line, sizeof line, "events_before_reply %llu\n",
				 (unsigned long long)r->events_at_reply);
		send_all(fd, line, (size_t)n);
	}
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
		struct pollfd p[3] = {
		    {r.lfd, POLLIN, 0}, {r.cfd_listen, POLLIN, 0}, {r.afd, POLLIN, 0}};
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
 * Unit tests of the model itself (run without --receiver).
 */
static void ev(struct model *m, uint16_t type, uint64_t a, uint64_t b, uint32_t tid, int flags)
{
	struct proto_msg e;
	memset(&e, 0, sizeof e);
	e.type = type;
	e.flags = (uint16_t)flags;
	e.tid = tid;
	e.scope = a;
	e.task = a;
	e.pool_id = a;
	if (type == PROTO_EV_TASK_FORK || type == PROTO_EV_TASK_START || type == PROTO_EV_TASK_END)
		e.scope = b;
	e.count = b;
	e.name = (struct proto_str){"n", 1};
	e.key = (struct proto_str){"k", 1};
	e.value = (struct proto_str){"v", 1};
	apply(m, &e);
}

static void expect(struct model *m, const char *want)
{
	char *got = model_text(m);
	assert_string_equal(got, want);
	free(got);
}

/* Applying an event twice, or a START before its FORK, gives one task. */
static void test_model_idempotent(void **state)
{
	(void)state;
	struct model m = {0};
	ev(&m, PROTO_EV_SCOPE_OPEN, 7, 0, 10, 0);
	ev(&m, PROTO_EV_SCOPE_OPEN, 7, 0, 10, 0);
	ev(&m, PROTO_EV_TASK_START, 70, 7, 11, 0);
	ev(&m, PROTO_EV_TASK_FORK, 70, 7, 10, 0);
	ev(&m, PROTO_EV_TASK_FORK, 71, 7, 10, 0);
	ev(&m, PROTO_EV_TASK_FORK, 71, 7, 10, 0);
	expect(&m, "scope 7 parent=0 ptask=0 owner=10 joiner=0 joining=0 cancel=0 name=n site=-\n"
		   "task 70 scope=7 state=1 worker=11 site=-\n"
		   "task 71 scope=7 state=0 worker=0 site=-\n");
	ev(&m, PROTO_EV_TASK_END, 70, 7, 11, 0);
	ev(&m, PROTO_EV_TASK_END, 70, 7, 11, 0);
	ev(&m, PROTO_EV_VALUE_BIND, 7, 0, 10, 0);
	expect(&m, "scope 7 parent=0 ptask=0 owner=10 joiner=0 joining=0 cancel=0 name=n site=-\n"
		   "task 71 scope=7 state=0 worker=0 site=-\n"
		   "value scope=7 k=v\n");
	/* Closing a scope takes its tasks and bindings with it. */
	ev(&m, PROTO_EV_SCOPE_CLOSE, 7, 0, 10, 0);
	expect(&m, "");
	model_free(&m);
}

/* A snapshot replaces the model; SNAPSHOT_END checks the frame count. */
static void test_model_snapshot_replaces(void **state)
{
	(void)state;
	struct model m = {0};
	ev(&m, PROTO_EV_THREAD_START, 0, 0, 5, 0);
	ev(&m, PROTO_EV_SCOPE_OPEN, 8, 0, 5, 0);
	ev(&m, PROTO_SNAPSHOT_BEGIN, 1, 0, 0, 0);
	ev(&m, PROTO_EV_SCOPE_OPEN, 9, 0, 6, PROTO_F_SNAPSHOT);
	ev(&m, PROTO_SNAPSHOT_END, 1, 1, 0, 0);
	expect(&m, "scope 9 parent=0 ptask=0 owner=6 joiner=0 joining=0 cancel=0 name=n site=-\n");
	assert_int_equal(m.snapshots, 1);
	assert_int_equal(m.snap_bad, 0);
	ev(&m, PROTO_SNAPSHOT_BEGIN, 2, 0, 0, 0);
	ev(&m, PROTO_SNAPSHOT_END, 2, 3, 0, 0); /* claims 3 frames, had 0 */
	assert_int_equal(m.snap_bad, 1);
	expect(&m, "");
	model_free(&m);
}

static void site_frame(struct model *m, uint32_t site, const char *file, const char *func,
		       int32_t line, int flags)
{
	struct proto_msg e;
	memset(&e, 0, sizeof e);
	e.type = PROTO_SITE;
	e.flags = (uint16_t)flags;
	e.site = site;
	e.line = line;
	e.file = (struct proto_str){file, (uint16_t)strlen(file)};
	e.func = (struct proto_str){func, (uint16_t)strlen(func)};
	apply(m, &e);
}

/* Scope and task records name the site their number stood for when they
 * came; a redefinition names later ones; an unknown number is "-"; sites
 * outlive a snapshot, whose SITE frames count among its frames; a number
 * past the cap is refused. */
static void test_model_sites(void **state)
{
	(void)state;
	struct model m = {0};
	site_frame(&m, 1, "a.c", "open_a", 10, 0);
	site_frame(&m, 2, "a.c", "fork_a", 20, 0);
	ev(&m, PROTO_EV_SCOPE_OPEN, 7, 0, 10, 0);
	struct proto_msg e;
	memset(&e, 0, sizeof e);
	e.type = PROTO_EV_SCOPE_OPEN;
	e.scope = 8;
	e.tid = 10;
	e.site = 1;
	apply(&m, &e);
	e.type = PROTO_EV_TASK_FORK;
	e.task = 80;
	e.site = 2;
	apply(&m, &e);
	site_frame(&m, 2, "b.c", "fork_b", 21, 0);
	e.task = 81;
	apply(&m, &e);
	e.task = 82;
	e.site = 9;
	apply(&m, &e);
	e.type = PROTO_EV_TASK_START; /* known from its START only: not told */
	e.task = 83;
	apply(&m, &e);
	expect(&m, "scope 7 parent=0 ptask=0 owner=10 joiner=0 joining=0 cancel=0 name=n site=-\n"
		   "scope 8 parent=0 ptask=0 owner=10 joiner=0 joining=0 cancel=0 name= "
		   "site=a.c:open_a:10\n"
		   "task 80 scope=8 state=0 worker=0 site=a.c:fork_a:20\n"
		   "task 81 scope=8 state=0 worker=0 site=b.c:fork_b:21\n"
		   "task 82 scope=8 state=0 worker=0 site=-\n"
		   "task 83 scope=8 state=1 worker=10 site=?\n");
	/* A snapshot of one SITE and one scope: two frames; site 2 is kept. */
	ev(&m, PROTO_SNAPSHOT_BEGIN, 1, 0, 0, 0);
	site_frame(&m, 3, "c.c", "open_c", 30, PROTO_F_SNAPSHOT);
	e.type = PROTO_EV_SCOPE_OPEN;
	e.flags = PROTO_F_SNAPSHOT;
	e.scope = 9;
	e.site = 3;
	apply(&m, &e);
	ev(&m, PROTO_SNAPSHOT_END, 1, 2, 0, 0);
	assert_int_equal(m.snap_bad, 0);
	e.type = PROTO_EV_TASK_FORK;
	e.flags = 0;
	e.task = 90;
	e.scope = 9;
	e.site = 2;
	apply(&m, &e);
	expect(&m, "scope 9 parent=0 ptask=0 owner=10 joiner=0 joining=0 cancel=0 name= "
		   "site=c.c:open_c:30\n"
		   "task 90 scope=9 state=0 worker=0 site=b.c:fork_b:21\n");
	assert_int_equal(m.sites_defined, 3);
	site_frame(&m, RX_MAX_SITES, "d.c", "too_far", 1, 0);
	assert_int_equal(m.sites_refused, 1);
	assert_int_equal(m.nsites, 4);
	model_free(&m);
}

/* Thousands of records with deletions keep the table consistent. */
static void test_model_many(void **state)
{
	(void)state;
	struct model m = {0};
	for (uint64_t i = 1; i <= 20000; i++)
		ev(&m, PROTO_EV_SCOPE_OPEN, i, 0, 1, 0);
	for (uint64_t i = 1; i <= 20000; i += 2)
		ev(&m, PROTO_EV_SCOPE_CLOSE, i, 0, 1, 0);
	assert_int_equal(m.n, 10000);
	for (uint64_t i = 2; i <= 20000; i += 2)
		assert_non_null(slot_of(&m, R_SCOPE, i, 0));
	assert_null(slot_of(&m, R_SCOPE, 3, 0));
	model_free(&m);
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "--receiver"))
		return receiver_main(argv[2], argv[3]);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_model_idempotent),
	    cmocka_unit_test(test_model_snapshot_replaces),
	    cmocka_unit_test(test_model_sites),
	    cmocka_unit_test(test_model_many),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
