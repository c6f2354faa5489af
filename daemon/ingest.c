/* ingest.c - agent connections: accept with SO_PEERCRED, the HELLO handshake,
 * bounded non-blocking reads, and decoded frames into the process model. */
#include "daemon.h"

#include "conn.h"
#include "log.h"
#include "loop.h"
#include "symbolize.h"
#include "utf8.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_START 16384u
#define BUF_MAX (PROTO_MAX_FRAME + 65536u)
#define HELLO_MAX 4096u	  /* a HELLO fits: three strings of PROTO_MAX_STR */
#define READS_PER_WAKE 8  /* then let the other peers have a turn */
#define PENDING_PER_PID 4 /* connections one process may hold before its HELLO */

static void on_agent(struct loop *l, int fd, unsigned events, void *ctx);
static void aconns_forget_proc(struct daemon *d, struct proc *p);
/* Connections point at the process entries they feed. */
static const struct watcher aconn_watch = {.proc_freed = aconns_forget_proc};

/* No connection may outlive the process entry it feeds. */
static void aconns_forget_proc(struct daemon *d, struct proc *p)
{
	for (struct aconn *a = d->conns, *next; a; a = next) {
		next = a->next;
		if (a->proc != p)
			continue;
		log_debug("closing the agent connection of pid %d: its entry is freed",
			  (int)a->pid);
		if (p->conn == a)
			p->conn = NULL;
		aconn_close(d, a);
	}
}

void aconn_close(struct daemon *d, struct aconn *a)
{
	for (struct aconn **pp = &d->conns; *pp; pp = &(*pp)->next)
		if (*pp == a) {
			*pp = a->next;
			break;
		}
	d->nconns--;
	if (!a->proc)
		d->npending--;
	loop_del(d->loop, a->fd);
	close(a->fd);
	jb_free(&a->out);
	free(a->buf);
	free(a);
}

/* Ends the connection; the process keeps its model (exited, detached or
 * dropped, as proc_ended decides). */
static void drop(struct daemon *d, struct aconn *a, const char *why)
{
	struct proc *p = a->proc;
	if (p && p->conn == a)
		proc_ended(d, p, why);
	else if (why)
		log_warn("agent connection from pid %d dropped: %s", (int)a->pid, why);
	aconn_close(d, a);
}

static void flush_out(struct daemon *d, struct aconn *a)
{
	/* A peer gone for good: what it would have been sent is dropped, and
	 * the read side sees the end. */
	if (conn_write(a->fd, &a->out) < 0)
		a->out.len = 0;
	loop_mod(d->loop, a->fd, LOOP_READ | (a->out.len ? LOOP_WRITE : 0));
}

bool aconn_send(struct daemon *d, struct aconn *a, const void *frame, size_t len)
{
	if (a->dead)
		return false;
	if (a->out.len + len > AGENT_MAX_UNSENT) {
		/* Closed by the housekeeper: the caller may still hold it. */
		a->dead = true;
		return false;
	}
	jb_raw(&a->out, frame, len);
	if (a->out.oom)
		return false;
	flush_out(d, a);
	return true;
}

static void send_error(struct daemon *d, struct aconn *a, int code, const char *msg)
{
	uint8_t buf[1200];
	struct proto_msg m = {.type = PROTO_ERROR, .code = code};
	m.message.p = msg;
	m.message.len = (uint16_t)strnlen(msg, PROTO_MAX_STR);
	int n = proto_encode(buf, sizeof buf, &m, NULL, NULL);
	if (n > 0)
		aconn_send(d, a, buf, (size_t)n);
}

static size_t pending_of(const struct daemon *d, pid_t pid)
{
	size_t n = 0;
	for (const struct aconn *a = d->conns; a; a = a->next)
		n += !a->proc && a->pid == pid;
	return n;
}

/* Closes the oldest connection still without HELLO (of pid, or of anyone). */
static void evict_oldest_pending(struct daemon *d, pid_t pid)
{
	struct aconn *old = NULL;
	for (struct aconn *a = d->conns; a; a = a->next)
		if (!a->proc && (!pid || a->pid == pid) &&
		    (!old || a->accepted_ns <= old->accepted_ns))
			old = a;
	if (old) {
		log_debug("closing a silent agent connection from pid %d to make room",
			  (int)old->pid);
		aconn_close(d, old);
	}
}

/* Takes one accepted agent connection (fd is ours to keep or close). */
static size_t conns_of_uid(const struct daemon *d, uid_t uid)
{
	size_t n = 0;
	for (const struct aconn *a = d->conns; a; a = a->next)
		n += a->uid == uid;
	return n;
}

static void take_agent(void *ctx, int fd, const struct ucred *cred)
{
	struct daemon *d = ctx;
	static struct conn_ratelog full;
	size_t cap = d->max_conns ? d->max_conns : SIZE_MAX;
	/* Past the descriptor budget, or past one user's share of it: closed
	 * at once (the agent retries later), so that control clients keep
	 * their descriptors and other users their room. */
	if (d->nconns >= cap ||
	    (cred->uid != 0 && d->max_conns && conns_of_uid(d, cred->uid) >= per_uid_share(cap))) {
		conn_warn_limited(&full,
				  "refusing an agent connection from pid %d uid %u: %zu held, "
				  "the descriptor limit allows %zu (%zu per user)",
				  (int)cred->pid, (unsigned)cred->uid, d->nconns, cap,
				  per_uid_share(cap));
		close(fd);
		return;
	}
	/* A real agent says HELLO at once, so under a connect flood the
	 * oldest silent connections go, and the newcomer gets its chance. */
	if (pending_of(d, cred->pid) >= PENDING_PER_PID)
		evict_oldest_pending(d, cred->pid);
	if (d->npending >= DAEMON_MAX_PENDING)
		evict_oldest_pending(d, 0);
	struct aconn *a = calloc(1, sizeof *a);
	if (!a || !(a->buf = malloc(BUF_START))) {
		free(a);
		close(fd);
		return;
	}
	a->d = d;
	a->fd = fd;
	a->cap = BUF_START;
	a->pid = cred->pid;
	a->uid = cred->uid;
	a->accepted_ns = loop_now_ns();
	jb_init(&a->out);
	if (loop_add(d->loop, fd, LOOP_READ, on_agent, a) < 0) {
		free(a->buf);
		free(a);
		close(fd);
		return;
	}
	a->next = d->conns;
	d->conns = a;
	d->nconns++;
	d->npending++;
	log_debug("agent connection from pid %d uid %u", (int)a->pid, (unsigned)a->uid);
}

void agent_accept(struct daemon *d)
{
	conn_accept_each(d->loop, d->agent_fd, "an agent", d->agent_path, take_agent, d);
}

/* The peer's text, kept as valid UTF-8 without control characters. */
static char *copy_str(const struct proto_str *s)
{
	return text_clean_dup(s->p ? s->p : "", s->len, NULL);
}

/* HELLO: the peer's own pid (from SO_PEERCRED) names the process.  A second
 * connection from the same live process takes the entry over: the agent
 * reconnected before we saw the old connection end, and its snapshot will
 * repair the model we keep. */
static int on_hello(struct daemon *d, struct aconn *a, const struct proto_msg *m)
{
	unsigned long long start = proc_starttime(a->pid);
	struct proc *p = proc_find(d, a->pid);
	/* The same process is the same pid, start time and uid: one that
	 * registered as another uid (and then exec'd a setuid program, say)
	 * is a new identity, not the old entry revived with the old uid. */
	if (p && p->state != PROC_EXITED && (p->starttime == start || !start) && p->uid == a->uid) {
		if (p->conn) {
			log_info("process %d connected again; the new connection replaces the old",
				 (int)a->pid);
			struct aconn *old = p->conn;
			p->conn = NULL;
			old->proc = NULL;
			d->npending++; /* aconn_close counts it as pending now */
			aconn_close(d, old);
		}
		p->state = PROC_LIVE;
		p->exit_cause = NULL;
		p->model.exit_how = 0;
	} else {
		if (p && p->state == PROC_LIVE) {
			/* The pid was reused (or its uid changed): whoever still
			 * holds the old process's socket (a fork child that
			 * inherited it) is not the process the entry describes,
			 * and must not feed it once it is ended, nor after it is
			 * evicted. */
			struct aconn *old = p->conn;
			proc_ended(d, p, NULL);
			if (old)
				aconn_close(d, old);
		}
		p = proc_new(d, a->pid, a->uid);
		if (!p) {
			static struct conn_ratelog full;
			conn_warn_limited(&full,
					  "refusing process %d uid %u: %zu processes held; the cap "
					  "(--max-processes) is %ld, %zu for one user",
					  (int)a->pid, (unsigned)a->uid, d->nprocs,
					  d->opt.max_processes,
					  per_uid_share((size_t)d->opt.max_processes));
			send_error(d, a, -ENOSPC,
				   "scoped holds too many processes (--max-processes), or too many "
				   "of this user's; try later");
			return -1;
		}
	}
	free(p->name);
	free(p->exe);
	free(p->runtime_version);
	p->name = copy_str(&m->program);
	p->exe = copy_str(&m->exe);
	p->runtime_version = copy_str(&m->runtime_version);
	p->start_realtime_ns = m->start_realtime_ns;
	p->clk = (struct clockref){m->ref_mono_ns, m->ref_realtime_ns};
	p->conn = a;
	a->proc = p;
	daemon_watch(d, &aconn_watch);
	d->npending--;

	uint8_t buf[64];
	/* The session's version: the older of the agent's and ours (the
	 * decoder refused anything outside PROTO_VERSION_MIN..PROTO_VERSION). */
	uint16_t version = m->version < PROTO_VERSION ? m->version : PROTO_VERSION;
	struct proto_msg ack = {.type = PROTO_HELLO_ACK, .version = version};
	int n = proto_encode(buf, sizeof buf, &ack, NULL, NULL);
	if (n < 0 || !aconn_send(d, a, buf, (size_t)n))
		return -1;
	log_info("process %d (%s) registered, uid %u, protocol %u", (int)p->pid,
		 p->name ? p->name : "?", (unsigned)p->uid, (unsigned)version);
	if (d->sym) {
		int rc = sym_attach(d->sym, p->pid, p->starttime);
		if (rc < 0)
			log_debug("process %d: cannot read its modules for symbols yet: %s",
				  (int)p->pid, strerror(-rc));
	}
	return 0;
}

/* Handles one decoded frame; -1 drops the peer for the reason put in why. */
static int dispatch(struct daemon *d, struct aconn *a, const struct proto_msg *m, char *why,
		    size_t whylen)
{
	if (!a->proc) {
		if (m->type != PROTO_HELLO) {
			snprintf(why, whylen, "sent %s before HELLO", proto_type_name(m->type));
			return -1;
		}
		snprintf(why, whylen, "handshake refused");
		return on_hello(d, a, m);
	}
	struct proc *p = a->proc;
	if (p->conn != a) {
		/* Cannot happen while every path that ends a process closes its
		 * connection; refusing here keeps a missed path from feeding an
		 * entry that has moved on. */
		snprintf(why, whylen, "its process entry belongs to another connection");
		return -1;
	}
	switch (m->type) {
	case PROTO_HELLO:
		snprintf(why, whylen, "sent a second HELLO");
		return -1;
	case PROTO_STACK_REPLY:
	case PROTO_STACK_DONE:
	case PROTO_CRASH:
		daemon_agent_msg(d, m, p);
		return 0;
	default:
		break;
	}
	uint64_t refused = p->model.sites_refused;
	int rc = model_apply(&p->model, m, a->read_ns);
	d->events++;
	if (!refused && p->model.sites_refused)
		log_warn("process %d (%s): %s; events from refused call sites show no site "
			 "(said once per process)",
			 (int)p->pid, p->name ? p->name : "?", p->model.err);
	if (m->type == PROTO_LOST && m->lost_since)
		d->lost += m->lost_since;
	if (rc < 0) {
		snprintf(why, whylen, "%s (its model is kept)", p->model.err);
		return -1;
	}
	return 0;
}

/* Why the frame at p was refused, naming its type once the header is there
 * (the same error code means different things in different messages). */
static void malformed_why(const uint8_t *p, size_t len, int rc, char *why, size_t whylen)
{
	if (len < 6) {
		snprintf(why, whylen, "malformed frame: %s", proto_strerror(rc));
		return;
	}
	uint16_t type = (uint16_t)(p[4] | p[5] << 8);
	snprintf(why, whylen, "malformed frame (type 0x%04x %s): %s", type, proto_type_name(type),
		 proto_strerror(rc));
}

static void on_agent(struct loop *l, int fd, unsigned events, void *ctx)
{
	(void)l;
	(void)fd;
	struct aconn *a = ctx;
	struct daemon *d = a->d;
	if (events & LOOP_WRITE)
		flush_out(d, a);
	if (!(events & LOOP_READ))
		return;
	bool filled = false; /* the last read filled the buffer: the socket holds more */
	/* The fork storm's frames are decoded into one message, zeroed once
	 * per wake instead of once per frame (proto_decode_hot). */
	struct proto_msg hot;
	bool hot_zeroed = false;
	for (int round = 0; round < READS_PER_WAKE; round++) {
		size_t limit = a->proc ? BUF_MAX : HELLO_MAX;
		/* A buffer that a read fills grows (up to BUF_MAX, until the
		 * housekeeper gives it back): a fork storm's stream then takes
		 * a read per 128 KiB, not per 16 (each read was a tenth of the
		 * daemon's time there). */
		if ((a->len == a->cap || (filled && a->proc)) && a->cap < limit) {
			uint8_t *b = conn_grow(a->buf, &a->cap, BUF_START, limit);
			if (!b) {
				drop(d, a, "out of memory for its buffer");
				return;
			}
			a->buf = b;
		}
		if (a->len == a->cap) {
			drop(d, a, "its first frame is too large for a HELLO");
			return;
		}
		size_t room = a->cap - a->len;
		ssize_t n = read(a->fd, a->buf + a->len, room);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			drop(d, a, NULL);
			return;
		}
		if (n == 0) {
			drop(d, a, NULL);
			return;
		}
		a->len += (size_t)n;
		filled = (size_t)n == room;
		/* One clock read per read(), not per event (it was a tenth of
		 * the daemon's time in a fork storm); retention needs no finer. */
		a->read_ns = loop_now_ns();
		size_t off = 0;
		for (;;) {
			struct proto_msg m;
			const struct proto_msg *mp = &hot;
			size_t used = 0;
			if (!hot_zeroed) {
				memset(&hot, 0, sizeof hot);
				hot_zeroed = true;
			}
			if (!proto_decode_hot(a->buf + off, a->len - off, &hot, &used)) {
				int rc = proto_decode(a->buf + off, a->len - off, &m, &used);
				if (rc == PROTO_EAGAIN)
					break;
				if (rc < 0) {
					char why[160];
					malformed_why(a->buf + off, a->len - off, rc, why,
						      sizeof why);
					drop(d, a, why);
					return;
				}
				mp = &m;
			}
			off += used;
			char why[256];
			if (dispatch(d, a, mp, why, sizeof why) < 0) {
				drop(d, a, why);
				return;
			}
		}
		if (off) {
			memmove(a->buf, a->buf + off, a->len - off);
			a->len -= off;
		}
	}
}

void agents_housekeep(struct daemon *d, int64_t now_ns)
{
	struct aconn *next;
	for (struct aconn *a = d->conns; a; a = next) {
		next = a->next;
		if (a->dead) {
			char why[96];
			snprintf(why, sizeof why, "its agent stopped reading (%zu bytes unsent)",
				 a->out.len);
			drop(d, a, why);
			next =
			    d->conns; /* dropping may have failed requests and changed the list */
			continue;
		}
		/* Give back what a burst made the buffers grow to. */
		a->buf = conn_shrink(a->buf, &a->cap, a->len, BUF_START);
		conn_out_trim(&a->out, BUF_START);
		if (!a->proc && now_ns - a->accepted_ns > DAEMON_HELLO_TIMEOUT_NS) {
			log_warn("agent pid %d said nothing valid within 5 s; dropping it",
				 (int)a->pid);
			aconn_close(d, a);
		}
	}
	for (struct proc *p = d->procs; p; p = p->next)
		if (p->state == PROC_LIVE)
			model_sweep(&p->model, now_ns);
}
