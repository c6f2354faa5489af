/* proc.c - the processes scoped knows: registration, how each one ended, and
 * how long exited ones are kept for post-mortem dumps. */
#include "daemon.h"
#include "stacks.h"

#include "advisor.h"
#include "jfield.h"
#include "log.h"
#include "loop.h"
#include "procstat.h"
#include "symbolize.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct model_limits daemon_model_limits(const struct daemon *d)
{
	return (struct model_limits){
	    .max_entities = (size_t)d->opt.max_entities,
	    .max_string_bytes = 8u << 20,
	    .max_values = 256,
	    .max_owned_bytes = MODEL_MAX_OWNED_BYTES,
	    .max_sites = MODEL_MAX_SITES,
	    .retain_ns = (int64_t)d->opt.retain_s * 1000000000,
	    .max_retained = (size_t)d->opt.max_retained,
	    .tally = d->opt.metrics != NULL || d->opt.otlp != NULL,
	};
}

/* From the main thread's stat file: /proc/PID/stat would also sum the
 * times of every thread, and a dump checks identity twice. */
unsigned long long proc_starttime(pid_t pid)
{
	struct proc_stat st;
	return pid > 0 && proc_stat_read(pid, (uint32_t)pid, &st) == 0 ? st.starttime : 0;
}

/* The four uids of /proc/PID/status (real, effective, saved, filesystem). */
static int read_uids(pid_t pid, uid_t uids[4])
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	int rc = -EINVAL;
	while (fgets(line, sizeof line, f)) {
		unsigned u[4];
		if (sscanf(line, "Uid: %u %u %u %u", &u[0], &u[1], &u[2], &u[3]) == 4) {
			for (int i = 0; i < 4; i++)
				uids[i] = (uid_t)u[i];
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

int proc_check_live(const struct proc *p, uid_t viewer, char *err, size_t errlen)
{
	unsigned long long start = proc_starttime(p->pid);
	if (!start || !p->starttime || start != p->starttime) {
		snprintf(
		    err, errlen,
		    "process %d is no longer the one scoped registered (it exited%s); its last "
		    "tree is still available",
		    (int)p->pid, start ? " and its pid was reused" : "");
		return -ESRCH;
	}
	uid_t uids[4];
	int rc = read_uids(p->pid, uids);
	if (rc < 0) {
		snprintf(err, errlen, "cannot read the credentials of process %d: %s", (int)p->pid,
			 strerror(-rc));
		return rc == -ENOENT ? -ESRCH : rc;
	}
	if (viewer == 0)
		return 0;
	/* As ptrace's rule: every uid of the process is the viewer's.  One that
	 * registered as the viewer and then gained others (a setuid program
	 * exec'd with the socket kept) is not the viewer's to read any more. */
	for (int i = 0; i < 4; i++)
		if (uids[i] != viewer || uids[i] != p->uid) {
			snprintf(err, errlen,
				 "process %d now runs as uid %u (it registered as uid %u); you are "
				 "uid %u",
				 (int)p->pid, (unsigned)uids[1], (unsigned)p->uid,
				 (unsigned)viewer);
			return -EPERM;
		}
	return 0;
}

struct proc *proc_find(struct daemon *d, pid_t pid)
{
	struct proc *best = NULL;
	for (struct proc *p = d->procs; p; p = p->next) {
		if (p->pid != pid)
			continue;
		if (p->state == PROC_LIVE)
			return p;
		if (!best || p->registered_ns > best->registered_ns)
			best = p;
	}
	return best;
}

static void unlink_proc(struct daemon *d, struct proc *p)
{
	for (struct proc **pp = &d->procs; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			d->nprocs--;
			return;
		}
}

void proc_free(struct daemon *d, struct proc *p)
{
	unlink_proc(d, p);
	/* No connection (ingest.c), subscription or request may outlive the
	 * entry it points at: each is told through its watcher. */
	daemon_proc_freed(d, p);
	if (d->sym)
		sym_forget(d->sym, p->pid, p->starttime);
	model_free(&p->model);
	free(p->crash.frames);
	stacks_forget_last(p);
	free(p->name);
	free(p->exe);
	free(p->runtime_version);
	free(p);
}

static struct proc *oldest_ended(struct daemon *d)
{
	struct proc *old = NULL;
	for (struct proc *p = d->procs; p; p = p->next)
		if (p->state != PROC_LIVE && (!old || p->ended_ns < old->ended_ns))
			old = p;
	return old;
}

struct proc *proc_new(struct daemon *d, pid_t pid, uid_t uid)
{
	size_t cap = (size_t)d->opt.max_processes, mine = 0;
	if (uid != 0) {
		for (const struct proc *p = d->procs; p; p = p->next)
			mine += p->uid == uid && p->state == PROC_LIVE;
		if (mine >= per_uid_share(cap))
			return NULL; /* one user may not lock the others out */
	}
	if (d->nprocs >= cap) {
		struct proc *old = oldest_ended(d);
		if (!old)
			return NULL;
		proc_free(d, old);
	}
	struct proc *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->pid = pid;
	p->uid = uid;
	p->state = PROC_LIVE;
	p->exit_code = p->exit_signal = -1;
	p->registered_ns = loop_now_ns();
	p->starttime = proc_starttime(pid);
	struct model_limits lim = daemon_model_limits(d);
	model_init(&p->model, &lim);
	p->model.adv = advisor_new(); /* NULL (out of memory): no pool advice */
	/* Task bodies are named in renders by this process's symbols. */
	model_set_symbolizer(&p->model, d->sym, p->pid, p->starttime);
	p->next = d->procs;
	d->procs = p;
	d->nprocs++;
	return p;
}

/* Decides how a process ended from what its agent said and what /proc says. */
void proc_ended(struct daemon *d, struct proc *p, const char *dropped_why)
{
	struct proc_stat ps = {.exit_code = -1};
	int rc = p->pid > 0 ? proc_stat_read(p->pid, 0, &ps) : -ESRCH;
	bool same = rc == 0 && (ps.starttime == p->starttime || !p->starttime);
	bool running = same && ps.state != 'Z' && ps.state != 'X';

	p->ended_ns = loop_now_ns();
	p->ended_real_ns = realtime_ns();
	p->conn = NULL;
	if (p->model.exit_how == 1 || p->model.exit_how == 2) {
		p->state = PROC_EXITED;
		p->exit_cause = p->model.exit_how == 1 ? "exit" : "signal";
		if (p->model.exit_how == 1)
			p->exit_code = p->model.exit_code;
		else
			p->exit_signal = p->model.exit_code;
	} else if (running) {
		p->state = PROC_DETACHED;
		p->exit_cause = dropped_why ? "dropped" : "agent_gone";
	} else {
		p->state = PROC_EXITED;
		p->exit_cause = "unknown";
		/* A zombie still holds its wait status (field 52). */
		int code = ps.exit_code;
		if (same && ps.state == 'Z' && code >= 0) {
			if (code & 0x7f) {
				p->exit_cause = "signal";
				p->exit_signal = code & 0x7f;
			} else {
				p->exit_cause = "exit";
				p->exit_code = (code >> 8) & 0xff;
			}
		}
	}
	/* Keep the tree as it was at the end: nothing more expires from it. */
	p->model.track_removals = p->nsubs > 0;
	daemon_proc_ended(d, p);
	if (d->sym)
		sym_process_exited(d->sym, p->pid, p->starttime);
	log_msg(dropped_why ? LOG_LVL_WARN : LOG_LVL_INFO, "process %d (%s) %s: %s%s%s",
		(int)p->pid, p->name ? p->name : "?",
		p->state == PROC_EXITED ? "exited" : "detached", p->exit_cause,
		dropped_why ? ", " : "", dropped_why ? dropped_why : "");
}

void proc_evict(struct daemon *d, int64_t now_ns)
{
	int64_t max_age = (int64_t)d->opt.keep_exited_s * 1000000000;
	size_t ended = 0;
	for (struct proc *p = d->procs; p; p = p->next)
		ended += p->state != PROC_LIVE;
	for (;;) {
		struct proc *old = oldest_ended(d);
		if (!old)
			return;
		if (ended <= (size_t)d->opt.keep_exited && now_ns - old->ended_ns < max_age)
			return;
		proc_free(d, old);
		ended--;
	}
}

static const char *const state_names[] = {
    [PROC_LIVE] = "live", [PROC_DETACHED] = "detached", [PROC_EXITED] = "exited"};

void proc_summary_json(struct jbuf *b, const struct proc *p, int64_t now_ns)
{
	const struct model *m = &p->model;
	jb_obj(b);
	jf_i64(b, "pid", p->pid);
	jf_u64(b, "uid", p->uid);
	jf_str(b, "name", p->name);
	jf_str(b, "exe", p->exe);
	jf_str(b, "runtime_version", p->runtime_version);
	jf_ms_if(b, "start_time_ms", p->start_realtime_ns > 0, p->start_realtime_ns);
	jf_str(b, "state", state_names[p->state]);
	jf_str(b, "exit_cause", p->state == PROC_LIVE ? NULL : p->exit_cause);
	jf_i64_if(b, "exit_code", p->exit_code >= 0, p->exit_code);
	jf_i64_if(b, "exit_signal", p->exit_signal >= 0, p->exit_signal);
	static const char *const counts[] = {"threads", "pools", "scopes", "tasks"};
	for (int k = 0; k < ENT_KINDS; k++)
		jf_u64(b, counts[k], model_count(m, k));
	jf_u64(b, "events", m->events);
	jf_u64(b, "lost", m->lost);
	jf_bool(b, "complete", m->complete);
	jf_bool(b, "repaired", m->repaired);
	if (p->crash.tid)
		stacks_crash_json(b, p);
	/* The process's own uptime when its start is known, else time registered. */
	jb_key(b, "uptime_ms");
	int64_t up;
	/* The start time is the peer's word: one that makes no sense gives
	 * the time registered instead, never an overflow. */
	if (p->start_realtime_ns > 0 &&
	    !__builtin_sub_overflow(p->state == PROC_LIVE ? realtime_ns() : p->ended_real_ns,
				    p->start_realtime_ns, &up) &&
	    up >= 0)
		jb_ms(b, up);
	else
		jb_ms(b, (p->state == PROC_LIVE ? now_ns : p->ended_ns) - p->registered_ns);
	jb_obj_end(b);
}
