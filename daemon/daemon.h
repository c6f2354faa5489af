/* daemon.h - the state scoped's parts share: processes, agent connections,
 * control clients, pending stack requests, and the daemon that holds them. */
#ifndef DAEMON_DAEMON_H
#define DAEMON_DAEMON_H

#include "jbuf.h"
#include "model.h"
#include "options.h"

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define SCOPED_VERSION "0.1.0"
#define DAEMON_MAX_PENDING 64 /* agent connections that have not said HELLO */
#define DAEMON_HELLO_TIMEOUT_NS 5000000000ll
#define DAEMON_STACK_TIMEOUT_NS 2000000000ll
#define CLIENT_MAX_LINE (1u << 20)    /* a request line, bytes */
#define CLIENT_MAX_UNSENT (4u << 20)  /* unsent output before a client is dropped */
#define CLIENT_ROOT_RESERVE 16	      /* root's clients served past --max-clients */
#define CLIENT_STALL_NS 10000000000ll /* a client whose output does not drain goes */
#define AGENT_MAX_UNSENT (256u << 10) /* unsent requests to an agent */

enum proc_state { PROC_LIVE = 0, PROC_DETACHED = 1, PROC_EXITED = 2 };

struct aconn;
struct client;

struct proc {
	struct proc *next;
	pid_t pid;
	uid_t uid;
	char *name, *exe, *runtime_version;
	int64_t start_realtime_ns;
	struct clockref clk;
	unsigned long long starttime; /* /proc/PID/stat starttime: tells a reused pid apart */
	enum proc_state state;
	const char *exit_cause;		 /* "exit", "signal", "unknown", "agent_gone", "dropped" */
	int exit_code, exit_signal;	 /* -1: not known */
	int64_t registered_ns, ended_ns; /* daemon monotonic clock */
	int64_t ended_real_ns;
	/* The crashing thread's stack, from the agent's fatal-signal handler
	 * (an unsolicited STACK_REPLY before PROCESS_EXIT); tid 0: none. */
	struct {
		uint32_t tid;
		uint16_t nframes;
		uint64_t *frames;
		bool has_info; /* CRASH came: signo, si_code, fault_addr */
		int32_t signo, si_code;
		uint64_t fault_addr;
	} crash;
	/* The stacks of the last capture, kept for post-mortem dumps: the
	 * threads' last known stacks (source NULL: none yet). */
	struct {
		struct stack_thread *threads;
		size_t n;
		int64_t real_ns;
		const char *source;
	} last;
	struct model model;
	struct aconn *conn; /* NULL unless live */
	int nsubs;
};

struct aconn {
	struct aconn *next;
	struct daemon *d;
	int fd;
	pid_t pid;
	uid_t uid;
	struct proc *proc; /* NULL until HELLO */
	uint8_t *buf;
	size_t len, cap;
	struct jbuf out; /* bytes to the agent not yet written */
	int64_t accepted_ns;
	int64_t read_ns; /* when the bytes being applied were read: their "now" */
	bool dead;
};

struct sub {
	struct sub *next;
	struct proc *proc;
	int64_t interval_ns, due_ns;
	uint64_t gen;
};

struct client {
	struct client *next;
	struct daemon *d;
	int fd;
	pid_t pid;
	uid_t uid;
	char *in;
	size_t inlen, incap;
	struct jbuf out;
	int64_t drained_ns; /* when output last drained or left: a stalled reader goes */
	bool waiting;	    /* an async reply is pending: later lines wait their turn */
	bool dead;
	struct sub *subs;
};

struct stack_thread {
	uint32_t tid;
	char comm[16];	       /* the kernel's name (BPF source), for threads the model lacks */
	int error;	       /* negative errno from the source, or 0 */
	const char *error_why; /* static: why in words, or NULL (strerror) */
	const char *approximate_why; /* static, or NULL */
	const char *state;	     /* JDK state, static */
	const char *blocked_in;	     /* static or NULL */
	bool approximate;
	int64_t pause_ns;
	uint16_t nframes;
	uint64_t *frames; /* top first */
	/* The lock it waits for (daemon/locks.c): the futex word's address
	 * and how it waits (BPFSTACK_LOCK_*), then, once its owner is known
	 * from the target's memory, the owner's tid and what the lock is. */
	uint64_t lock_addr;
	int lock_how;
	uint32_t lock_owner;	/* 0: not known to be a held lock */
	const char *lock_class; /* static: "pthread_mutex_t", "PI futex" */
	char lock_owner_comm[16];
};

/* One stacks or dump request in flight. */
struct stack_req {
	struct stack_req *next;
	uint64_t id; /* on the wire */
	struct proc *proc;
	struct client *client; /* NULL when the client left */
	json_t *req_id;	       /* the client's id (new reference) or NULL */
	bool dump;
	bool captured;		    /* a capture ran (not a post-mortem reply) */
	uint64_t events_at_capture; /* the model's event count when it began */
	int max_frames;
	bool share_stacks; /* alike threads name the first with the same stack */
	bool render;	   /* a dump answered as the JDK's JSON text (text_bytes) */
	size_t ntids;
	uint32_t *tids; /* the filter; NULL: all */
	int64_t started_ns, deadline_ns;
	const char *source;
	struct stack_thread *threads;
	size_t nthreads, cap;
	int64_t capture_ns, max_pause_ns;
	/* Of capture_ns, for a source that tells them apart (/proc): reading
	 * the threads' files, registers and stack windows, and unwinding; -1
	 * when not told. */
	int64_t read_ns, unwind_ns;
};

struct metrics;
struct stacks;
struct symbolizer;
struct daemon;

/* What a part that holds pointers to processes or clients is told before
 * they go, and what a part that sent an agent a request hears back
 * (watch.c).  The part registers itself with daemon_watch() when it first
 * takes such a pointer or sends such a request, so proc.c, client.c and
 * ingest.c call daemon_proc_ended() and the rest without knowing who
 * listens: they depend on no part above them.  Any member may be NULL. */
struct watcher {
	void (*proc_ended)(struct daemon *d, struct proc *p);	 /* its agent went away */
	void (*proc_freed)(struct daemon *d, struct proc *p);	 /* about to be freed */
	void (*client_gone)(struct daemon *d, struct client *c); /* about to be freed */
	/* A message of p's agent that is not for the model (STACK_REPLY,
	 * STACK_DONE). */
	void (*agent_msg)(struct daemon *d, const struct proto_msg *m, struct proc *p);
	/* An asynchronous reply to c is written: its next lines may run (c
	 * may be closed by the call). */
	void (*reply_done)(struct daemon *d, struct client *c);
};
#define DAEMON_MAX_WATCHES 8

struct daemon {
	struct options opt;
	struct loop *loop;
	int agent_fd, ctl_fd, sig_fd;
	char dir[PATH_MAX], agent_path[PATH_MAX], ctl_path[PATH_MAX];
	struct proc *procs;
	size_t nprocs;
	struct aconn *conns;
	size_t nconns, npending;
	size_t max_conns; /* agent connections the descriptor limit leaves room for */
	struct client *clients;
	size_t nclients;
	struct stack_req *reqs;
	uint64_t next_req;
	struct stacks *stacks;
	struct symbolizer *sym;
	int64_t started_ns;
	uint64_t events, lost; /* totals, including processes gone */
	uint64_t rate_events;  /* events at the last rate sample */
	int64_t rate_ns;
	double events_per_sec;
	int64_t tick_id;
	const struct watcher *watch[DAEMON_MAX_WATCHES];
	size_t nwatch;
	struct metrics *metrics; /* the /metrics endpoint (metrics.h), NULL when off */
};

/* watch.c */
/* Registers w (once; again is a no-op). */
void daemon_watch(struct daemon *d, const struct watcher *w);
void daemon_proc_ended(struct daemon *d, struct proc *p);
void daemon_proc_freed(struct daemon *d, struct proc *p);
void daemon_client_gone(struct daemon *d, struct client *c);
void daemon_agent_msg(struct daemon *d, const struct proto_msg *m, struct proc *p);
void daemon_reply_done(struct daemon *d, struct client *c);

/* What one uid other than root may take of a shared cap (processes, agent
 * connections, control clients): three quarters, so that one user cannot
 * lock the others, or root, out. */
static inline size_t per_uid_share(size_t cap)
{
	return cap - cap / 4 > 0 ? cap - cap / 4 : 1;
}

/* proc.c */
struct model_limits daemon_model_limits(const struct daemon *d);
/* The live process with pid, else the newest one kept with that pid. */
struct proc *proc_find(struct daemon *d, pid_t pid);
/* A new live process entry for pid (linked in), or NULL when every slot is
 * taken by live processes (--max-processes), or uid (not root) holds its
 * share of them (per_uid_share), so that the others keep a quarter. */
struct proc *proc_new(struct daemon *d, pid_t pid, uid_t uid);
/* The agent connection ended: marks the process exited, detached or dropped. */
void proc_ended(struct daemon *d, struct proc *p, const char *dropped_why);
/* Drops exited processes past --keep-exited or --keep-exited-for. */
void proc_evict(struct daemon *d, int64_t now_ns);
void proc_free(struct daemon *d, struct proc *p);
/* Whether p's pid is still the process p registered (same start time)
 * and, for a viewer other than root, runs with the viewer's uid and no
 * other (real, effective, saved, filesystem): checked before anything is
 * read from the live process and again before the reply.  Returns 0,
 * -ESRCH (gone or reused) or -EPERM, with a sentence in err. */
int proc_check_live(const struct proc *p, uid_t viewer, char *err, size_t errlen);
/* /proc/PID/stat starttime, or 0. */
unsigned long long proc_starttime(pid_t pid);
/* Writes the process summary object. */
void proc_summary_json(struct jbuf *b, const struct proc *p, int64_t now_ns);
/* Realtime now in nanoseconds. */
int64_t realtime_ns(void);

/* ingest.c */
void agent_accept(struct daemon *d);
void aconn_close(struct daemon *d, struct aconn *a);
/* Queues frame bytes to the agent; false when the connection had to go. */
bool aconn_send(struct daemon *d, struct aconn *a, const void *frame, size_t len);
void agents_housekeep(struct daemon *d, int64_t now_ns);

/* client.c */
void client_accept(struct daemon *d);
void client_close(struct client *c);
/* Gives back buffer memory a big request or reply left behind, and marks
 * dead a client that has read nothing of its output for CLIENT_STALL_NS. */
void client_trim(struct client *c);

/* client_out.c */
void client_flush(struct client *c);
/* False (and the client marked dead) when its unsent output is over the cap. */
bool client_room(struct client *c);

/* cmd_subscribe.c */
void subs_tick(struct daemon *d, int64_t now_ns);

/* stack requests (stacks.c) */
void stack_reqs_housekeep(struct daemon *d, int64_t now_ns);

#endif
