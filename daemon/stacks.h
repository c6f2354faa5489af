/* stacks.h - where thread stacks come from: the agent's signal-mode capture or
 * the BPF task iterator, behind one interface. */
#ifndef DAEMON_STACKS_H
#define DAEMON_STACKS_H

#include <stddef.h>

struct daemon;
struct stack_req;

struct stack_source {
	const char *name; /* "signal" or "bpf", as replies say in "source" */
	/* Starts a capture for r.  Returns 0 when the threads will arrive later
	 * (the agent's replies / timeout), 1 when r is already complete, or a
	 * negative errno with a sentence in err. */
	int (*capture)(struct daemon *d, struct stack_req *r, char *err, size_t errlen);
};

struct stacks;

/* Chooses the source for mode (enum stacks_mode).  auto: BPF when it loads,
 * else signal; why says which and why (one line for the log).  bpf: fails
 * with -errno and the reason in why when BPF cannot load. */
int stacks_open(struct stacks **out, int mode, char *why, size_t whylen);
/* Listens for the agents' stack replies, and for the crash reports they
 * send unasked; the daemon calls it once, after stacks_open. */
void stacks_attach(struct daemon *d);
void stacks_close(struct stacks *s);
const struct stack_source *stacks_source(const struct stacks *s);

struct jbuf;
struct proc;

/* Writes "crash": {tid, signal, task, scope, frames} for a process whose
 * agent sent its crashing thread's stack (p->crash.tid != 0). */
void stacks_crash_json(struct jbuf *b, const struct proc *p);

/* Frees the stacks kept from p's last capture. */
void stacks_forget_last(struct proc *p);

#endif
