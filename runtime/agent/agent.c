/* agent.c - the reporting agent's thread: connects to scoped with backoff,
 * says HELLO, sends a snapshot, then drains the per-thread rings onto the
 * socket in batches; repairs losses with LOST + snapshot; answers stack
 * requests; never lets the daemon block the application. */
#include <errno.h>
#include <limits.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "procstat.h"
#include "scope.h"
#include "sockcheck.h"
#include "sockpath.h"

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000
#define HELLO_WAIT_MS 1000
#define BATCH_BYTES (256u * 1024)  /* events moved per batch */
#define OUT_MAX (64u << 20)	   /* cap of the output buffer (snapshots) */
#define DRAIN_MS 1		   /* drain period while rings fill fast */
#define IDLE_MS 4		   /* drain period while they stay nearly empty */
#define HOLD_FORK_NS 2000000	   /* a fork waits this long at most for its end (TASK_DONE) */
#define BLOCKED_REAP_NS 100000000  /* after this long blocked, exited threads' events go */
#define SHED_MS 20		   /* after this long blocked, new events are only counted */
#define STOP_CHECK_MS 5		   /* blocked this long: look whether the daemon is stopped */
#define STOP_CHECK_GAP_NS 50000000 /* at most one such look per 50 ms */
#define FINAL_NS 80000000	   /* the agent's part of the exit-time flush */
#define REAP_NS 50000000	   /* how often exited threads' rings are freed */
#define IN_CAP (2 * PROTO_MAX_FRAME)
/* The largest a ring grows to.  1 MiB holds about 50 ms of the busiest
 * thread of a fork storm, more than the SHED_MS a stalled daemon gets
 * before threads only count their events; larger rings held far more
 * memory, and faulting them in and reading them cold cost the agent more
 * than they saved (docs/perf-notes.md). */
#define DEFAULT_RING_KB 1024
#define AGENT_NAME "scoped-agent"

struct agent {
	/* Set by sc_agent_start, read-only afterwards. */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char program[PROTO_MAX_STR + 1];
	char exe[PROTO_MAX_STR + 1];
	int64_t start_realtime_ns;
	pthread_t thread;
	int running;
	int wake_fd;

	/* The agent thread's own. */
	int fd;
	pid_t peer;	      /* the daemon's pid, from SO_PEERCRED (0: unknown) */
	_Atomic uint32_t tid; /* read by sc_agent_get_stats */
	struct sc_buf out;
	uint8_t in[IN_CAP];
	size_t in_len;
	uint64_t snap_seq, lost_base, lost_reported;
	int finished;

	/* Requests from other threads. */
	_Atomic int stop;
	_Atomic int exit_req, exit_done;
	uint32_t exit_how, exit_tid;
	int32_t exit_code;
	_Atomic uint64_t flush_req, flush_done;

	/* Statistics (sc_agent_get_stats). */
	_Atomic int connected;
	_Atomic uint64_t sessions, snapshots, events, lost, lost_msgs, stack_reqs, sheds;
	_Atomic uint64_t sheds_stopped; /* of sheds: the daemon was seen stopped */
	int64_t block_ns;		/* SCOPED_BLOCK_US, in ns */
};

static struct agent ag = {.fd = -1, .wake_fd = -1};

static int64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static void wake_agent(void)
{
	uint64_t one = 1;
	if (ag.wake_fd >= 0 && write(ag.wake_fd, &one, sizeof one) < 0) {
		/* The counter is saturated: the agent is awake anyway. */
	}
}

void sc_agent_nudge(void)
{
	wake_agent();
}

/* ---- process identity for HELLO ---- */

/* keep_name: a fork child keeps its parent's display name (its comm is
 * the forking thread's, which the program may have renamed). */
static void read_identity(int keep_name)
{
	const char *name = getenv("SCOPED_NAME");
	if (keep_name && ag.program[0]) {
		/* as the parent said HELLO */
	} else if (name && *name) {
		snprintf(ag.program, sizeof ag.program, "%s", name);
	} else {
		FILE *f = fopen("/proc/self/comm", "re");
		if (!f || !fgets(ag.program, sizeof ag.program, f))
			snprintf(ag.program, sizeof ag.program, "unknown");
		if (f)
			fclose(f);
		ag.program[strcspn(ag.program, "\n")] = 0;
	}
	ssize_t n = readlink("/proc/self/exe", ag.exe, sizeof ag.exe - 1);
	ag.exe[n > 0 ? n : 0] = 0;

	/* Start time: field 22 of /proc/self/stat, clock ticks after boot. */
	int64_t boot_age = clock_ns(CLOCK_BOOTTIME), real = clock_ns(CLOCK_REALTIME);
	ag.start_realtime_ns = real;
	struct proc_stat st;
	long hz = sysconf(_SC_CLK_TCK);
	if (proc_stat_read(0, 0, &st) == 0 && hz > 0)
		ag.start_realtime_ns =
		    real -
		    (boot_age - (int64_t)(st.starttime * (1000000000ull / (unsigned long)hz)));
}

/* ---- session ---- */

static void put_ctl(uint16_t type, uint64_t a, uint64_t b)
{
	struct proto_msg m;
	memset(&m, 0, sizeof m);
	m.type = type;
	m.ts = now_ns();
	if (type == PROTO_LOST) {
		m.total_lost = a;
		m.lost_since = b;
	} else {
		m.seq = a;
		m.count = b;
	}
	(void)sc_buf_put_msg(&ag.out, &m, NULL, NULL);
}

static void snap_emit(void *ctx, const struct sc_ev *ev)
{
	uint64_t *count = ctx;
	if (sc_buf_put_ev(&ag.out, ev, PROTO_F_SNAPSHOT) == 0)
		(*count)++;
}

static void snap_site(void *ctx, uint32_t id, const struct sc_site *s)
{
	uint64_t *count = ctx;
	if (sc_buf_put_site(&ag.out, id, s, PROTO_F_SNAPSHOT) == 0)
		(*count)++;
}

/* Structure violations that nothing delivered: they happened while nothing
 * streamed (the daemon absent or being reconnected to, or a fork child's
 * session not begun: its very first event, which starts its agent, may be
 * one), or the rings lost them (dropped while shedding or with the ring
 * full, or thrown away for a snapshot; see sc_rings_keep).  A violation is
 * something that happened, not a state a snapshot's registry walk can find,
 * so the newest KEPT_MAX are kept here and sent after the next snapshot, in
 * the order they happened.  Application threads only trylock: one that
 * would have to wait drops its violation instead. */
#define KEPT_MAX 16
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sc_ev kept[KEPT_MAX];
static unsigned kept_n;
static _Atomic int keeping; /* an agent runs, or a fork child's will */

/* With kept_lock held: keeps ev unless KEPT_MAX newer ones are kept. */
static void keep_locked(const struct sc_ev *ev, int64_t ts)
{
	unsigned slot = kept_n, oldest = 0;
	if (kept_n == KEPT_MAX) {
		for (unsigned i = 1; i < KEPT_MAX; i++)
			if (kept[i].ts < kept[oldest].ts)
				oldest = i;
		if (kept[oldest].ts > ts)
			return; /* older than every one kept */
		slot = oldest;
	} else {
		kept_n++;
	}
	struct sc_ev *k = &kept[slot];
	*k = *ev;
	k->ts = ts;
	k->s1 = k->s2 = NULL; /* borrowed (a VIOLATION has none) */
	k->pool = NULL;
}

static void keep_violation(const struct sc_ev *ev, int may_wait)
{
	if (!atomic_load_explicit(&keeping, memory_order_relaxed))
		return; /* no agent runs, nor will */
	/* Stamped as the ring observer stamps events. */
	int64_t ts = ev->ts ? ev->ts : now_ns();
	if (may_wait)
		pthread_mutex_lock(&kept_lock);
	else if (pthread_mutex_trylock(&kept_lock))
		return;
	keep_locked(ev, ts);
	pthread_mutex_unlock(&kept_lock);
}

void sc_keep_violation(const struct sc_ev *ev)
{
	keep_violation(ev, 0);
}

/* Appends the kept violations to ag.out, oldest first, and forgets them. */
static void send_kept(void)
{
	pthread_mutex_lock(&kept_lock);
	for (unsigned i = 1; i < kept_n; i++) { /* insertion sort by ts */
		struct sc_ev e = kept[i];
		unsigned j = i;
		for (; j > 0 && kept[j - 1].ts > e.ts; j--)
			kept[j] = kept[j - 1];
		kept[j] = e;
	}
	for (unsigned i = 0; i < kept_n; i++)
		(void)sc_buf_put_ev(&ag.out, &kept[i], 0);
	kept_n = 0;
	pthread_mutex_unlock(&kept_lock);
}

/* Whether MEMBARRIER_CMD_PRIVATE_EXPEDITED was registered (agent_main). */
static bool membarrier_ok;

/* A full memory barrier on every thread of the process that runs now (the
 * kernel's IPIs; a thread not running went through a context switch).
 * The runtime stores a task's or scope's state and then reads whether
 * anything observes, with only a compiler barrier between (sc_observed:
 * the hot path pays no fence); the agent stores the observer, then reads
 * those states in its walk.  Without a full barrier on both sides, both
 * loads can see the old values (x86 lets a load pass an earlier store):
 * the event is not written because nothing observed yet, and the walk
 * skips the task because it was not forked yet, so the daemon never hears
 * of the fork.  This barrier stands for the runtime's half. */
static void barrier_all_threads(void)
{
	if (membarrier_ok && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
		return;
	/* Slower (it waits for every CPU to pass a quiescent state), but
	 * needs no registration.  A kernel without membarrier (before 4.14,
	 * or a seccomp filter that refuses it) leaves the race open: no
	 * fence of the agent's own could stand for the runtime's half. */
	(void)syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
}

/* SNAPSHOT_BEGIN, the registry walk, SNAPSHOT_END.  What the rings held is
 * thrown away first: the walk covers it. */
static void send_snapshot(void)
{
	uint64_t count = 0;
	sc_agent_set_streaming(1);
	/* Before the walk reads any state: see barrier_all_threads. */
	barrier_all_threads();
	sc_rings_discard();
	ag.lost_base = sc_rings_drops_seen();
	ag.out.overflow = 0;
	ag.snap_seq++;
	put_ctl(PROTO_SNAPSHOT_BEGIN, ag.snap_seq, 0);
	/* Every site numbered so far, again: definitions that went out with
	 * events the rings just threw away, or to a daemon that restarted. */
	sc_sites_walk(snap_site, &count);
	sc_registry_snapshot(snap_emit, &count);
	put_ctl(PROTO_SNAPSHOT_END, ag.snap_seq, count);
	atomic_fetch_add(&ag.snapshots, 1);
	/* After the snapshot, ahead of every event the rings hold: they
	 * happened before the rings' events (those the discard above threw
	 * away, or those written while nothing streamed).  One that does not
	 * fit brings LOST, as for any event lost. */
	send_kept();
}

/* Connects to the daemon; -1 when none answers, or when the socket or the
 * process answering it is not one we trust (another user's directory or
 * daemon): the program's names and addresses go to nobody else. */
static int dial(void)
{
	if (scoped_socket_check(ag.path, false, NULL, 0) < 0)
		return -1;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, ag.path, sizeof sa.sun_path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    scoped_peer_check(fd, ag.path, false, NULL, 0) < 0) {
		close(fd);
		return -1;
	}
	struct ucred cred;
	socklen_t len = sizeof cred;
	/* The kernel gives the pid as this process's namespace sees it, 0
	 * when the daemon is outside it. */
	ag.peer = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? cred.pid : 0;
	/* Where Yama lets only ancestors read a process (ptrace_scope 1), let
	 * the daemon that passed the check above read this one's registers
	 * and stacks (its /proc stack source).  Without Yama it fails, and
	 * nothing changes. */
	if (ag.peer > 0)
		(void)prctl(PR_SET_PTRACER, (unsigned long)ag.peer, 0UL, 0UL, 0UL);
	return fd;
}

/* Whether the daemon is stopped (SIGSTOP, or a debugger's stop), by the
 * state in its /proc/PID/stat.  0 when it cannot be told. */
static int peer_stopped(pid_t pid)
{
	struct proc_stat st;
	return pid > 0 && proc_stat_read(pid, 0, &st) == 0 && (st.state == 'T' || st.state == 't');
}

/* Reads what the daemon sent into ag.in; 0, or -1 on EOF or error. */
static int read_in(void)
{
	for (;;) {
		ssize_t n = recv(ag.fd, ag.in + ag.in_len, IN_CAP - ag.in_len, MSG_DONTWAIT);
		if (n > 0) {
			ag.in_len += (size_t)n;
			return 0;
		}
		if (n == 0)
			return -1;
		if (errno == EINTR)
			continue;
		return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
	}
}

/* Takes the next whole message out of ag.in: 1 with *m, 0 when none is
 * complete, -1 when the daemon sent garbage. */
static int next_msg(struct proto_msg *m, uint8_t *frame)
{
	size_t used;
	int rc = proto_decode(ag.in, ag.in_len, m, &used);
	if (rc == PROTO_EAGAIN)
		return 0;
	if (rc != PROTO_OK)
		return -1;
	/* The message's strings point into ag.in, which we shift: copy first. */
	memcpy(frame, ag.in, used);
	memmove(ag.in, ag.in + used, ag.in_len - used);
	ag.in_len -= used;
	return proto_decode(frame, used, m, &used) == PROTO_OK ? 1 : -1;
}

/* HELLO, then HELLO_ACK within HELLO_WAIT_MS.  0, or -1. */
static int handshake(void)
{
	struct proto_msg m;
	memset(&m, 0, sizeof m);
	m.type = PROTO_HELLO;
	m.version = PROTO_VERSION;
	m.pid = (uint32_t)getpid();
	m.start_realtime_ns = ag.start_realtime_ns;
	m.ref_mono_ns = now_ns();
	m.ref_realtime_ns = clock_ns(CLOCK_REALTIME);
	m.runtime_version.p = SCOPE_VERSION_STRING;
	m.program.p = ag.program;
	m.exe.p = ag.exe;
	if (sc_buf_put_msg(&ag.out, &m, NULL, NULL) < 0)
		return -1;

	static uint8_t frame[PROTO_MAX_FRAME];
	int64_t deadline = now_ns() + HELLO_WAIT_MS * 1000000LL;
	for (;;) {
		int fr = sc_buf_flush(&ag.out, ag.fd);
		if (fr < 0)
			return -1;
		int64_t left = deadline - now_ns();
		if (left <= 0 || atomic_load(&ag.stop))
			return -1;
		struct pollfd p = {ag.fd, (short)(POLLIN | (fr ? 0 : POLLOUT)), 0};
		if (poll(&p, 1, (int)(left / 1000000) + 1) < 0 && errno != EINTR)
			return -1;
		if ((p.revents & POLLIN) && read_in() < 0)
			return -1;
		int got;
		while ((got = next_msg(&m, frame)) == 1) {
			if (m.type == PROTO_HELLO_ACK) {
				/* The session's version (see PROTO_VERSION). */
				sc_rings_coalesce(m.version >= 4 ? 2 : m.version >= 3);
				return 0;
			}
			if (m.type == PROTO_ERROR)
				return -1; /* refused (e.g. too many processes): retry later */
		}
		if (got < 0 || (p.revents & (POLLERR | POLLHUP)))
			return -1;
	}
}

/* Moves what the rings hold, up to now, into the output buffer ahead of a
 * capture's replies: the daemon applies every event emitted before the
 * capture first, so the tree it sends with the stacks is the one of the
 * capture's moment (a dump taken right after an event shows that event).
 * Half the buffer's cap stays for the replies; after a loss not yet
 * reported, the events wait for its LOST and snapshot as they always do. */
static void drain_before_capture(void)
{
	size_t n = sc_rings_drain_unless(&ag.out, ag.out.max / 2, now_ns(), ag.lost_base);
	atomic_fetch_add(&ag.events, n);
}

static void handle_msg(const struct proto_msg *m)
{
	if (m->type == PROTO_STACK_REQUEST) {
		drain_before_capture();
		sc_stack_answer(m, &ag.out, ag.tid);
		atomic_fetch_add(&ag.stack_reqs, 1);
	}
	/* Everything else from the daemon needs no answer. */
}

/* Handles every whole message waiting in ag.in; -1 on garbage. */
static int handle_input(uint8_t *frame)
{
	struct proto_msg m;
	int got;
	while ((got = next_msg(&m, frame)) == 1)
		handle_msg(&m);
	return got;
}

/* Drains every ring onto the socket until both are empty or the deadline
 * passes. */
static void flush_all(int64_t deadline)
{
	for (;;) {
		int fr = sc_buf_flush(&ag.out, ag.fd);
		if (fr < 0)
			break;
		if (fr == 1 && sc_rings_drain(&ag.out, BATCH_BYTES, INT64_MAX) == 0)
			break;
		int64_t left = deadline - now_ns();
		if (left <= 0)
			break;
		if (!fr) {
			struct pollfd p = {ag.fd, POLLOUT, 0};
			(void)poll(&p, 1, (int)(left / 1000000) + 1);
		}
	}
}

/* Sends what is left and PROCESS_EXIT, within FINAL_NS. */
static void final_flush(void)
{
	int64_t deadline = now_ns() + FINAL_NS;
	flush_all(deadline);
	struct sc_ev ev;
	memset(&ev, 0, sizeof ev);
	ev.kind = SC_EV_PROCESS_EXIT;
	ev.ts = now_ns();
	ev.tid = ag.exit_tid;
	ev.u = ag.exit_how;
	ev.i = ag.exit_code;
	(void)sc_buf_put_ev(&ag.out, &ev, 0);
	while (sc_buf_flush(&ag.out, ag.fd) == 0 && now_ns() < deadline) {
		struct pollfd p = {ag.fd, POLLOUT, 0};
		(void)poll(&p, 1, 5);
	}
	ag.finished = 1;
	atomic_store(&ag.exit_done, 1);
}

/* The next drain period: longer while the rings stay nearly empty (fewer
 * wake-ups stealing a core from the application), short again as soon as
 * one fills up. */
static int next_period(int period, size_t moved)
{
	unsigned fill = sc_rings_last_fill();
	if (fill >= 25)
		return DRAIN_MS;
	if (fill >= 12)
		return period > DRAIN_MS ? period / 2 : DRAIN_MS;
	if (!moved)
		return IDLE_MS;
	return period * 2 > IDLE_MS ? IDLE_MS : period * 2;
}

/* The state of one session's loop. */
struct session {
	int64_t blocked_since; /* when the socket last stopped taking bytes (0: it takes them) */
	int64_t last_reap;
	int shedding;	  /* threads only count their events (sc_rings_shed) */
	int stop_checked; /* this block's look at the daemon's state is done */
	int64_t last_stop_check;
	int period;	      /* the drain period, ms */
	uint64_t drained_gen; /* the flush request the last exhaustive drain covers */
};

/* Reports a loss: LOST, then a fresh snapshot. */
static void report_loss(uint64_t dropped)
{
	put_ctl(PROTO_LOST, dropped, dropped - ag.lost_reported);
	ag.lost_reported = dropped;
	atomic_store(&ag.lost, dropped);
	atomic_fetch_add(&ag.lost_msgs, 1);
	send_snapshot();
}

/* The output buffer is on the socket: report a loss, or move the next
 * batch from the rings.  Returns 1 when the loop should go round again at
 * once (more to send), 0 when it may wait. */
static int on_sent(struct session *s)
{
	/* Everything an exhaustive drain took is on the socket now. */
	atomic_store(&ag.flush_done, s->drained_gen);
	s->blocked_since = 0;
	s->stop_checked = 0;
	if (s->shedding) {
		/* The daemon reads again; what was shed is counted in the
		 * drops, so LOST and a snapshot follow. */
		sc_rings_shed(0);
		s->shedding = 0;
	}
	uint64_t dropped = sc_rings_drops_seen();
	if (dropped != ag.lost_base || ag.out.overflow) {
		report_loss(dropped);
		return 1;
	}
	/* Read the flush request before the horizon: whatever was emitted
	 * before it has a ts below the horizon. */
	uint64_t freq = atomic_load(&ag.flush_req);
	int64_t now = now_ns();
	/* Forks may wait a little for their task's end (TASK_DONE), unless
	 * someone waits for a flush. */
	int64_t hold = freq == atomic_load(&ag.flush_done) ? HOLD_FORK_NS : 0;
	size_t n = sc_rings_drain_hold(&ag.out, BATCH_BYTES, now, ag.lost_base, hold);
	atomic_fetch_add(&ag.events, n);
	if (sc_rings_drops_seen() != ag.lost_base)
		return 1; /* to the LOST and the snapshot */
	if (now - s->last_reap > REAP_NS) {
		sc_rings_reap(0);
		sc_rings_tune();
		s->last_reap = now;
	}
	if (ag.out.len >= BATCH_BYTES)
		return 1; /* more is waiting: no sleep */
	s->drained_gen = freq;
	if (n == 0 && !sc_rings_held())
		atomic_store(&ag.flush_done, freq);
	s->period = next_period(s->period, n);
	return 0;
}

/* The socket takes no more bytes: free exited threads' rings after a
 * while, and once the daemon is seen stopped or has not read for SHED_MS,
 * let threads only count their events. */
static void on_blocked(struct session *s)
{
	int64_t now = now_ns();
	if (!s->blocked_since) {
		s->blocked_since = now;
		sc_rings_calm();
	} else if (now - s->blocked_since > BLOCKED_REAP_NS) {
		sc_rings_reap(1); /* exited threads must not pile up */
	}
	/* Once the socket has been blocked for STOP_CHECK_MS, one look at
	 * whether the daemon is stopped: not for the short blocks of a daemon
	 * that reads a batch a little later, routine in a fork storm, and at
	 * most every STOP_CHECK_GAP_NS, since a read of /proc/PID/stat costs
	 * far more than an event (docs/perf-notes.md). */
	int stopped = 0;
	if (!s->shedding && !s->stop_checked &&
	    now - s->blocked_since >= STOP_CHECK_MS * 1000000ll) {
		s->stop_checked = 1;
		if (now - s->last_stop_check >= STOP_CHECK_GAP_NS) {
			s->last_stop_check = now;
			stopped = peer_stopped(ag.peer);
		}
	}
	/* With SCOPED_BLOCK_US the program said how long its threads may wait
	 * for the daemon: a swamped daemon is given that long too. */
	int64_t shed_ns = SHED_MS * 1000000ll;
	if (ag.block_ns > shed_ns)
		shed_ns = ag.block_ns;
	if (!s->shedding && (stopped || now - s->blocked_since > shed_ns)) {
		/* A daemon that has not read for this long is stopped or
		 * swamped: rather than fill megabytes of rings that it may
		 * never read, threads now only count their events (a store to
		 * a line they own, instead of a write to a ring line out of
		 * the caches).  One that is stopped will not read at all: no
		 * need to wait for SHED_MS.  docs/perf-notes.md has the
		 * measurements. */
		sc_rings_shed(1);
		s->shedding = 1;
		atomic_fetch_add(&ag.sheds, 1);
		if (stopped)
			atomic_fetch_add(&ag.sheds_stopped, 1);
	}
}

/* Waits for the socket, a wake-up or the drain period; reads and handles
 * what the daemon sent.  -1 when the session is over. */
static int wait_and_read(struct session *s, uint8_t *frame)
{
	int pending = ag.out.sent < ag.out.len;
	struct pollfd p[2] = {{ag.fd, (short)(POLLIN | (pending ? POLLOUT : 0)), 0},
			      {ag.wake_fd, POLLIN, 0}};
	int wait = !pending	     ? s->period
		   : s->shedding     ? 100
		   : s->stop_checked ? SHED_MS
				     : STOP_CHECK_MS;
	if (poll(p, 2, wait) < 0 && errno != EINTR)
		return -1;
	if (p[1].revents & POLLIN) {
		uint64_t v;
		if (read(ag.wake_fd, &v, sizeof v) < 0) {
			/* Nothing to read after all: a spurious wake. */
		}
	}
	if ((p[0].revents & POLLIN) && read_in() < 0)
		return -1;
	if (!(p[0].revents & POLLIN) && (p[0].revents & (POLLERR | POLLHUP)))
		return -1;
	/* Also what arrived with HELLO_ACK, before the loop polled. */
	if (handle_input(frame) < 0)
		return -1; /* a daemon that sends garbage is not one we talk to */
	return 0;
}

/* The session is over (the daemon went away, or we were told to stop). */
static void session_end(void)
{
	sc_rings_shed(0);
	if (atomic_load(&ag.stop) && !ag.finished) {
		/* The agent thread ends with the stop: the daemon must not keep
		 * it as live.  Its THREAD_EXIT goes out with what the rings hold. */
		sc_thread_agent_exit();
		flush_all(now_ns() + FINAL_NS);
	}
	sc_agent_set_streaming(0);
	atomic_store(&ag.connected, 0);
	atomic_store(&sc_exit_fd, -1);
}

/* One connected session, until the daemon goes away or we are told to stop. */
static void session(void)
{
	static uint8_t frame[PROTO_MAX_FRAME];
	struct session s = {.period = DRAIN_MS, .drained_gen = atomic_load(&ag.flush_done)};

	atomic_store(&ag.connected, 1);
	atomic_fetch_add(&ag.sessions, 1);
	atomic_store(&sc_exit_fd, ag.fd);
	send_snapshot();

	while (!atomic_load(&ag.stop)) {
		if (atomic_load(&ag.exit_req)) {
			sc_rings_shed(0); /* the last events are written, if there is room */
			final_flush();
			break;
		}
		int fr = sc_buf_flush(&ag.out, ag.fd);
		if (fr < 0)
			break;
		if (fr == 1) {
			if (on_sent(&s))
				continue;
		} else {
			on_blocked(&s);
		}
		if (wait_and_read(&s, frame) < 0)
			break;
	}
	session_end();
}

/* After the process's end was reported: wait, idle, until the process is
 * gone or sc_agent_stop() joins us (a thread that returned unjoined at exit
 * is a leak to TSan). */
static void idle_until_stop(void)
{
	while (!atomic_load(&ag.stop)) {
		struct pollfd p = {ag.wake_fd, POLLIN, 0};
		uint64_t v;
		if (poll(&p, 1, 1000) > 0 && read(ag.wake_fd, &v, sizeof v) < 0) {
			/* spurious */
		}
	}
}

static void *agent_main(void *arg)
{
	(void)arg;
	int backoff = BACKOFF_MIN_MS;

	/* Named before it is registered: the registry takes the name from
	 * the kernel. */
	prctl(PR_SET_NAME, AGENT_NAME);
	sc_thread_mark_agent();
	membarrier_ok =
	    syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
	atomic_store(&ag.tid, sc_gettid());
	while (!atomic_load(&ag.stop)) {
		if (atomic_load(&ag.exit_req)) {
			atomic_store(&ag.exit_done, 1); /* no daemon: nothing to tell */
			idle_until_stop();
			break;
		}
		ag.fd = dial();
		if (ag.fd >= 0) {
			if (handshake() == 0) {
				backoff = BACKOFF_MIN_MS;
				session();
			}
			/* A crash handler that took the socket keeps it open. */
			if (atomic_load(&sc_sock_owner) != 2)
				close(ag.fd);
			ag.fd = -1;
			ag.in_len = 0;
			ag.out.len = ag.out.sent = ag.out.frame_at = 0;
			if (atomic_load(&ag.stop))
				break;
			if (ag.finished) {
				idle_until_stop();
				break;
			}
		}
		struct pollfd p = {ag.wake_fd, POLLIN, 0};
		if (poll(&p, 1, backoff) > 0) {
			uint64_t v;
			if (read(ag.wake_fd, &v, sizeof v) < 0) {
				/* spurious */
			}
		}
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
	sc_thread_agent_exit(); /* when no session said it already */
	return NULL;
}

/* ---- control from other threads ---- */

int sc_agent_final(uint32_t how, int32_t code, int timeout_ms)
{
	if (!ag.running || !atomic_load(&ag.connected))
		return -ENOTCONN;
	ag.exit_how = how;
	ag.exit_code = code;
	ag.exit_tid = sc_gettid();
	atomic_store(&ag.exit_req, 1);
	wake_agent();
	for (int i = 0; i < timeout_ms * 2 && !atomic_load(&ag.exit_done); i++) {
		struct timespec ts = {0, 500000};
		nanosleep(&ts, NULL);
	}
	return atomic_load(&ag.exit_done) ? 0 : -ETIMEDOUT;
}

int sc_agent_flush(int timeout_ms)
{
	if (!ag.running || !atomic_load(&ag.connected))
		return -ENOTCONN;
	uint64_t gen = atomic_fetch_add(&ag.flush_req, 1) + 1;
	wake_agent();
	for (int i = 0; i < timeout_ms * 2; i++) {
		if (atomic_load(&ag.flush_done) >= gen)
			return 0;
		if (!atomic_load(&ag.connected))
			return -ENOTCONN;
		struct timespec ts = {0, 500000};
		nanosleep(&ts, NULL);
	}
	return -ETIMEDOUT;
}

void sc_agent_get_stats(struct sc_agent_stats *st)
{
	st->connected = atomic_load(&ag.connected);
	st->sessions = atomic_load(&ag.sessions);
	st->snapshots = atomic_load(&ag.snapshots);
	st->events = atomic_load(&ag.events);
	st->lost = atomic_load(&ag.lost);
	st->lost_msgs = atomic_load(&ag.lost_msgs);
	st->stack_reqs = atomic_load(&ag.stack_reqs);
	st->sheds = atomic_load(&ag.sheds);
	st->sheds_stopped = atomic_load(&ag.sheds_stopped);
	st->tid = ag.running ? atomic_load(&ag.tid) : 0;
	st->cpu_ns = -1;
	clockid_t cid;
	struct timespec ts;
	if (ag.running && pthread_getcpuclockid(ag.thread, &cid) == 0 &&
	    clock_gettime(cid, &ts) == 0)
		st->cpu_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int start(const char *path, int keep_name);

/* Set in a fork child whose parent ran an agent: the child starts its own
 * with its first event.  Read by whichever thread emits first. */
static _Atomic int start_on_event;

/* The observer a fork child runs with until it uses the runtime: the first
 * event starts the child's own agent (connection, HELLO with the child's
 * pid, snapshot).  A state change needs no copy: the registry changed
 * before it was emitted, so the snapshot covers it.  A VIOLATION changes no
 * state, so it is kept and sent after the first snapshot. */
static void first_event_in_child(const struct sc_ev *ev)
{
	char path[sizeof ag.path];

	/* Only the first thread here starts it. */
	if (!atomic_exchange(&start_on_event, 0))
		return;
	sc_observer_set(NULL); /* until the session streams, as in any process */
	if (ev->kind == SC_EV_VIOLATION)
		keep_violation(ev, 0);
	memcpy(path, ag.path, sizeof path);
	(void)start(path, 1); /* on failure the child runs unreported */
}

/* In a fork child the agent thread does not exist and the rings belong to
 * threads that do not either: all of it is dropped here, and a child that
 * goes on to use the runtime starts afresh.  Nothing is started now: a
 * child that only execs or _exits must never show up in the daemon. */
static void atfork_child(void)
{
	int restart = ag.running || atomic_load(&start_on_event);

	sc_agent_set_streaming(0);
	sc_observer_set(NULL);
	sc_rings_forget();
	sc_sites_after_fork();
	if (ag.fd >= 0)
		close(ag.fd);
	if (ag.wake_fd >= 0)
		close(ag.wake_fd);
	memset(&ag.out, 0, sizeof ag.out); /* the parent's buffer: leaked */
	ag.fd = ag.wake_fd = -1;
	ag.in_len = 0;
	ag.running = 0;
	atomic_store(&ag.connected, 0);
	atomic_store(&sc_exit_fd, -1);
	/* The agent thread may have been inside a write() when fork() came:
	 * the child's crash handler must not wait for it. */
	atomic_store(&sc_sock_owner, 0);
	atomic_store(&sc_exit_rest_len, 0);
	/* The child's statistics are its own, and so are its losses: the ring
	 * layer counts drops from 0 again, so LOST's total and its "since
	 * the last one" are the child's alone. */
	ag.lost_reported = ag.lost_base = sc_rings_dropped();
	atomic_store(&ag.lost, 0);
	atomic_store(&ag.sessions, 0);
	atomic_store(&ag.snapshots, 0);
	atomic_store(&ag.events, 0);
	atomic_store(&ag.lost_msgs, 0);
	atomic_store(&ag.stack_reqs, 0);
	atomic_store(&ag.sheds, 0);
	atomic_store(&ag.sheds_stopped, 0);
	/* The violations the parent kept are not the child's; and a parent's
	 * thread may have held the lock when fork() came. */
	pthread_mutex_init(&kept_lock, NULL);
	kept_n = 0;
	atomic_store(&keeping, restart);
	atomic_store(&sc_keep_times, restart);
	if (restart) {
		atomic_store(&start_on_event, 1);
		sc_observer_set(first_event_in_child);
	}
}

static size_t ring_bytes_from_env(void)
{
	const char *s = getenv("SCOPED_BUFFER_KB");
	char *end;
	long kb = s ? strtol(s, &end, 10) : 0;
	if (!s || *end || kb < 16 || kb > 65536)
		kb = DEFAULT_RING_KB;
	return (size_t)kb * 1024;
}

/* SCOPED_BLOCK_US: microseconds a thread may wait for room in its full
 * ring (0 to 1000000; more is taken as 1000000, since a program that asks
 * for a long wait wants its events kept; unset, negative or not a number:
 * 0, never wait). */
static int64_t block_ns_from_env(void)
{
	const char *s = getenv("SCOPED_BLOCK_US");
	char *end;
	errno = 0;
	long us = s && *s ? strtol(s, &end, 10) : 0;
	if (!s || !*s || *end || us < 0)
		return 0;
	if (us > 1000000 || errno == ERANGE)
		us = 1000000;
	return (int64_t)us * 1000;
}

static int start(const char *path, int keep_name)
{
	static int atfork_done;
	if (ag.running)
		return -EALREADY;
	if (!ag.out.max)
		ag.out.max = OUT_MAX;
	int rc = scoped_socket_paths(path, NULL, 0, ag.path, sizeof ag.path, NULL, 0);
	if (rc)
		return rc;
	read_identity(keep_name);
	rc = sc_rings_init(ring_bytes_from_env());
	if (rc)
		return rc;
	ag.block_ns = block_ns_from_env();
	sc_rings_block(ag.block_ns);
	sc_rings_keep(keep_violation);
	(void)sc_stack_init(); /* without it stack requests time out; events still flow */
	sc_exit_init();
	if (!atfork_done && pthread_atfork(NULL, NULL, atfork_child) == 0)
		atfork_done = 1;
	ag.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ag.wake_fd < 0)
		return -errno;
	atomic_store(&ag.stop, 0);
	atomic_store(&ag.exit_req, 0);
	atomic_store(&ag.exit_done, 0);
	ag.finished = 0;
	atomic_store(&ag.tid, 0);

	/* The agent thread takes no asynchronous signals: they belong to the
	 * application's threads. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&ag.thread, NULL, agent_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		sc_observer_set(NULL);
		close(ag.wake_fd);
		ag.wake_fd = -1;
		atomic_store(&keeping, 0);
		atomic_store(&sc_keep_times, 0);
		return -rc;
	}
	ag.running = 1;
	atomic_store(&keeping, 1);
	atomic_store(&sc_keep_times, 1);
	return 0;
}

int sc_agent_start(const char *path)
{
	return start(path, 0);
}

void sc_agent_stop(void)
{
	if (!ag.running)
		return;
	atomic_store(&ag.stop, 1);
	wake_agent();
	pthread_join(ag.thread, NULL);
	ag.running = 0;
	atomic_store(&keeping, 0);
	atomic_store(&sc_keep_times, 0);
	pthread_mutex_lock(&kept_lock);
	kept_n = 0; /* for no one now */
	pthread_mutex_unlock(&kept_lock);
	sc_observer_set(NULL);
	sc_agent_set_streaming(0);
	close(ag.wake_fd);
	ag.wake_fd = -1;
	sc_buf_free(&ag.out);
	ag.out.max = OUT_MAX;
}

static int disabled(void)
{
	const char *d = getenv("SCOPED_DISABLE");
	return d && (!strcmp(d, "1") || !strcmp(d, "true") || !strcmp(d, "yes"));
}

void sc_agent_init(void)
{
	if (disabled())
		return;
	(void)sc_agent_start(NULL);
}
