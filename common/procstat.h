/* procstat.h - the fields of /proc/PID/stat (or of one of its threads) that
 * the agent and the daemon read: one parser for both. */
#ifndef PROTO_PROCSTAT_H
#define PROTO_PROCSTAT_H

#include <stdint.h>
#include <sys/types.h>

struct proc_stat {
	char state;		      /* field 3: R, S, D, T, t, Z, X, ... */
	unsigned long long starttime; /* field 22: clock ticks after boot */
	int exit_code;		      /* field 52, kept while a zombie; -1 unknown */
};

/* Reads /proc/PID/stat, or with tid nonzero /proc/PID/task/TID/stat; pid 0
 * is the calling process.  Returns 0, -errno when the file cannot be read,
 * or -EINVAL when it does not parse (st->state is 0 then). */
int proc_stat_read(pid_t pid, uint32_t tid, struct proc_stat *st);

#endif
