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
#define DAEMON_MAX_PENDING 64           /* agent connections that have not said HELLO */
#define DAEMON_HELLO_TIMEOUT_NS 5000000000ll
#define DAEMON_STACK_TIMEOUT_NS 2000000000ll
#define CLIENT_MAX_LINE (1u << 20)     /* a request line, bytes */
#define CLIENT_MAX_UNSENT (4u << 20)   /* unsent output before a client is dropped */
#define AGENT_MAX_UNSENT (256u << 10)  /* unsent requests to an agent */

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
	const char *exit_cause; /* "exit", "signal", "unknown", "agent_gone", "dropped" */
	int exit_code, exit_signal; /* -1: not known */
	int64_t registered_ns, ended_ns; /* daemon monotonic clock */
	int64_t ended_real_ns;
	/* The crashing thread's stack, from the agent's fatal-signal handler
	 * (an unsolicited STACK_REPLY before PROCESS_EXIT); tid 0: none. */
	struct {
		uint32_t tid;
		uint16_t nframes;
		uint64_t *frames;
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
	bool waiting; /* an async reply is pending: later lines wait their turn */
	bool dead;
	struct sub *subs;
};

struct stack_thread {
	uint32_t tid;
	char comm[16]; /* the kernel's name (BPF source), for threads the model lacks */
	int error; /* negative errno from the source, or 0 */
	const char *state;      /* JDK state, static */
	const char *blocked_in; /* static or NULL */
	bool approximate;
	int64_t pause_ns;
	uint16_t nframes;
	uint64_t *frames; /* top first */
};

/* One stacks or dump request in flight. */
struct stack_req {
	struct stack_req *next;
	uint64_t id; /* on the wire */
	struct proc *proc;
	struct client *client; /* NULL when the client left */
	json_t *req_id;        /* the client's id (new reference) or NULL */
	bool dump;
	bool captured; /* a capture ran (not a post-mortem reply) */
	uint64_t events_at_capture; /* the model's event count when it began */
	int max_frames;
	size_t ntids;
	uint32_t *tids; /* the filter; NULL: all */
	int64_t started_ns, deadline_ns;
	const char *source;
	struct stack_thread *threads;
	size_t nthreads, cap;
	int64_t capture_ns, max_pause_ns;
};

struct stacks;
struct symbolizer;

struct daemon {
	struct options opt;
	struct loop *loop;
	int agent_fd, ctl_fd, sig_fd;
	char dir[PATH_MAX], agent_path[PATH_MAX], ctl_path[PATH_MAX];
	struct proc *procs;
	size_t nprocs;
	struct aconn *conns;
	size_t nconns, npending;
	struct client *clients;
	size_t nclients;
	struct stack_req *reqs;
	uint64_t next_req;
	struct stacks *stacks;
	struct symbolizer *sym;
	int64_t started_ns;
	uint64_t events, lost;    /* totals, including processes gone */
	uint64_t rate_events;     /* events at the last rate sample */
	int64_t rate_ns;
	double events_per_sec;
	int64_t tick_id;
};

/* proc.c */
struct model_limits daemon_model_limits(const struct daemon *d);
/* The live process with pid, else the newest one kept with that pid. */
struct proc *proc_find(struct daemon *d, pid_t pid);
/* A new live process entry for pid (linked in), or NULL when every slot is
 * taken by live processes (--max-processes). */
struct proc *proc_new(struct daemon *d, pid_t pid, uid_t uid);
/* The agent connection ended: marks the process exited, detached or dropped. */
void proc_ended(struct daemon *d, struct proc *p, const char *dropped_why);
/* Drops exited processes past --keep-exited or --keep-exited-for. */
void proc_evict(struct daemon *d, int64_t now_ns);
void proc_free(struct daemon *d, struct proc *p);
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
void client_flush(struct client *c);
/* False (and the client marked dead) when its unsent output is over the cap. */
bool client_room(struct client *c);
/* Reads and runs the lines that wait, after an async reply finished. */
void client_resume(struct client *c);
void client_close(struct client *c);
/* Gives back buffer memory a big request or reply left behind. */
void client_trim(struct client *c);

/* cmd_subscribe.c */
void subs_tick(struct daemon *d, int64_t now_ns);
void subs_forget_proc(struct daemon *d, struct proc *p);
void sub_free_all(struct client *c);

/* stack requests (stacks.c) */
void stack_req_reply(struct daemon *d, const struct proto_msg *msg, struct proc *p);
void stack_reqs_housekeep(struct daemon *d, int64_t now_ns);
/* Fails the requests of a process whose agent went away. */
void stack_reqs_proc_gone(struct daemon *d, struct proc *p);
void stack_reqs_client_gone(struct daemon *d, struct client *c);

#endif
