/* cmd_status.c - "status": how the daemon itself is doing. */
#include "cmd.h"

#include "loop.h"
#include "stacks.h"

#include <stdio.h>
#include <unistd.h>

static uint64_t rss_bytes(void)
{
	unsigned long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "re");
	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &resident) != 2)
		resident = 0;
	fclose(f);
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static int cmd_status(struct cmd_ctx *x)
{
	struct daemon *d = x->d;
	size_t live = 0;
	for (struct proc *p = d->procs; p; p = p->next)
		live += p->state == PROC_LIVE;
	struct jbuf *b = reply_begin(x->c, x->id);
	jb_key(b, "version");
	jb_str(b, SCOPED_VERSION);
	jb_key(b, "pid");
	jb_i64(b, getpid());
	jb_key(b, "uptime_ms");
	jb_ms(b, loop_now_ns() - d->started_ns);
	jb_key(b, "processes");
	jb_u64(b, d->nprocs);
	jb_key(b, "live_processes");
	jb_u64(b, live);
	jb_key(b, "clients");
	jb_u64(b, d->nclients);
	jb_key(b, "events");
	jb_u64(b, d->events);
	jb_key(b, "events_per_sec");
	jb_u64(b, (uint64_t)(d->events_per_sec + 0.5));
	jb_key(b, "lost");
	jb_u64(b, d->lost);
	jb_key(b, "rss_bytes");
	jb_u64(b, rss_bytes());
	jb_key(b, "stacks_source");
	jb_str(b, stacks_source(d->stacks)->name);
	reply_end(x->c);
	return CMD_DONE;
}

const struct cmd_entry cmd_status_entry = {"status", cmd_status};
