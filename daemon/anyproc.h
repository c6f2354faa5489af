/* anyproc.h - processes that never linked libscope: who owns one, what it
 * is called, and its summary in the shape of an instrumented one's (no
 * scopes, tasks or pools; "instrumented": false). */
#ifndef DAEMON_ANYPROC_H
#define DAEMON_ANYPROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct jbuf;

struct anyproc {
	pid_t pid;
	uid_t uids[4];		      /* real, effective, saved, filesystem */
	char name[16];		      /* comm, control characters as '?' */
	char exe[4096];		      /* "" when unreadable (a kernel thread) */
	unsigned long long starttime; /* clock ticks after boot */
	int64_t start_real_ns;
	long threads;
};

/* Reads what /proc says of pid.  0 or a negative errno (-ESRCH: gone). */
int anyproc_read(pid_t pid, struct anyproc *a);

/* Whether viewer may inspect it: root, or every uid of it is the viewer's
 * (ptrace's rule).  When not, why says so in a sentence. */
bool anyproc_may_inspect(const struct anyproc *a, uid_t viewer, char *why, size_t whylen);

/* Whether the process maps libscope (then a missing agent is a socket
 * mismatch, not a plain process). */
bool anyproc_links_libscope(pid_t pid);

/* Writes a process summary (control-reply.schema.json "summary"). */
void anyproc_summary_json(struct jbuf *b, const struct anyproc *a);

#endif
