/* stacks.c - the two stack sources, and the life of a stacks/dump request:
 * start, collect the agent's replies, time out, symbolize and answer. */
#include "stacks.h"

#include "../bpf/bpfstack.h"
#include "../bpf/procstack.h"
#include "../common/jv.h"
#include "../dump/jdkdump.h"
#include "advisor.h"
#include "anyproc.h"
#include "cmd.h"
#include "jfield.h"
#include "locks.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "options.h"
#include "procstat.h"
#include "stackkey.h"
#include "symbolize.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void reqs_proc_ended(struct daemon *d, struct proc *p);
static void reqs_proc_freed(struct daemon *d, struct proc *p);
static void reqs_client_gone(struct daemon *d, struct client *c);
static void reqs_agent_msg(struct daemon *d, const struct proto_msg *m, struct proc *p);
/* Requests in flight point at their process and their client, and wait for
 * the agent's replies. */
static const struct watcher reqs_watch = {
    .proc_ended = reqs_proc_ended,
    .proc_freed = reqs_proc_freed,
    .client_gone = reqs_client_gone,
    .agent_msg = reqs_agent_msg,
};

/* Threads one request holds: what the BPF and /proc sources return at most
 * (a request names at most PROTO_MAX_TIDS, a capture may hold more). */
#define MAX_THREADS 32768
#define DEFAULT_FRAMES 64

/* Uninstrumented processes whose symbols the symbolizer keeps for the next
 * dump; the least recently dumped is forgotten. */
#define PLAIN_KEEP 16

/* Where a dump reply's members sit that change between two dumps of a
 * process in which nothing moved: the process's uptime_ms and the model's
 * now_ms (offsets of each value's text), and the tail from capture_ns on. */
struct spans {
	size_t proc, proc_end, model; /* where those objects begin (end) */
	size_t threads, threads_end;  /* the stacks[] entries of the threads */
	size_t up, up_end, now, now_end, tail;
	bool found; /* up and now are there */
};

/* Where each stacks[] entry's state and blocked_in values sit in a dump
 * reply ([0] state, [1] blocked_in): what moves when a thread that stays
 * where it was waits elsewhere or runs. */
struct tspan {
	uint64_t tid;
	size_t at[2], end[2];
};
struct tspans {
	struct tspan *v;
	size_t n, cap;
	bool failed; /* memory ran out: not all there */
};

/* The last dump rendered, for the next: the reply it came from (with its
 * spans), its text and the text's marks (dump/jdkdump.h).  A reply that
 * is the same but in those spans gives that text with the new time and
 * capture figures and the moved threads' state and blockedIn, without a
 * parse or a render. */
/* What a reply's thread entries were written from (all but each one's
 * state and blocked_in, which its tspans hold): the threads, and the
 * process's model and symbols of that moment.  The next reply whose
 * threads and process are the same takes the entries' text from it.  The
 * process is its pid and start time, not its struct proc: a process
 * without libscope gets a struct of its own for each request, freed after
 * it (an address malloc may or may not hand out again). */
struct entries_key {
	struct stack_key threads;
	pid_t pid;
	unsigned long long starttime;
	/* The model's thread names (struct model's names_gen; no_names: it
	 * had no threads, so entries named threads from their comm alone),
	 * and the symbolizer's generation. */
	uint64_t names_gen, sym_gen;
	bool no_names;
	const char *source;
	bool share;
};

struct warm {
	struct jbuf body;
	struct spans at;
	struct tspans ts;
	char *text;
	size_t len;
	struct jdkdump_marks marks;
};

/* The model's JSON of the last rendered dump after its now_ms (the
 * closing brace left out), and what it was made of: a model whose
 * generation (every change to an entity, every removal bumps it),
 * violations, warnings and clock are the same writes the same text. */
struct model_text {
	const struct proc *p;
	pid_t pid;
	unsigned long long starttime;
	uint64_t gen, nviol, nwarn;
	struct clockref clk;
	const void *sym;
	char *rest;
	size_t len;
};

/* Reply and text kept together at most (a dump of ~10,000 threads is more:
 * it is rendered each time). */
#define WARM_MAX (16u << 20)

struct stacks {
	const struct stack_source *src; /* for instrumented processes */
	struct bpfstack *bpf;
	struct procstack *ps; /* opened at first use */
	struct {
		pid_t pid;
		unsigned long long starttime;
		uint64_t used;
	} plain[PLAIN_KEEP];
	uint64_t plain_clock;
	struct jbuf body;     /* a rendered dump's reply, kept for the next one */
	struct spans cur;     /* where body's changing members are */
	struct tspans cur_ts; /* and its threads' */
	/* SCOPED_CHECK_REMADE=1 (tests): every re-made text is compared with
	 * the one rendered afresh, and a difference is an error reply. */
	bool check_remade;
	struct warm warm;
	struct entries_key warm_key; /* of the warm body's entries, when valid */
	/* body's thread entries: what they were written from, or (cur_reused)
	 * the warm key's, their text taken from the warm reply; with
	 * check_remade, whether that text differed from the one written
	 * afresh. */
	struct entries_key cur_key;
	bool cur_reused, entries_differ;
	struct model_text mtext;
};

static int signal_capture(struct daemon *d, struct stack_req *r, char *err, size_t errlen)
{
	struct proc *p = r->proc;
	if (p->state != PROC_LIVE || !p->conn) {
		snprintf(err, errlen, "process %d has no agent connected", (int)p->pid);
		return -ESRCH;
	}
	static uint8_t buf[PROTO_HDR_SIZE + 16 + 4 * PROTO_MAX_TIDS];
	struct proto_msg m = {.type = PROTO_STACK_REQUEST,
			      .req = r->id,
			      .max_frames = (uint16_t)r->max_frames,
			      .ntids = (uint16_t)r->ntids};
	int n = proto_encode(buf, sizeof buf, &m, r->tids, NULL);
	if (n < 0) {
		snprintf(err, errlen, "cannot encode the stack request: %s", proto_strerror(n));
		return -EINVAL;
	}
	if (!aconn_send(d, p->conn, buf, (size_t)n)) {
		snprintf(err, errlen, "process %d's agent does not read", (int)p->pid);
		return -EIO;
	}
	return 0;
}

static bool wanted(const struct stack_req *r, uint32_t tid)
{
	if (!r->tids)
		return true;
	for (size_t i = 0; i < r->ntids; i++)
		if (r->tids[i] == tid)
			return true;
	return false;
}

static struct stack_thread *add_thread(struct stack_req *r)
{
	if (r->nthreads == r->cap) {
		if (r->cap >= MAX_THREADS)
			return NULL;
		size_t cap = r->cap ? r->cap * 2 : 16;
		struct stack_thread *t = realloc(r->threads, cap * sizeof *t);
		if (!t)
			return NULL;
		r->threads = t;
		r->cap = cap;
	}
	struct stack_thread *t = &r->threads[r->nthreads++];
	memset(t, 0, sizeof *t);
	return t;
}

/* Takes a synchronous source's threads into r (those r wants). */
static void take_threads(struct stack_req *r, const struct bpfstack_thread *th, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!wanted(r, th[i].tid))
			continue;
		struct stack_thread *t = add_thread(r);
		if (!t)
			break;
		size_t nf =
		    th[i].nframes < (size_t)r->max_frames ? th[i].nframes : (size_t)r->max_frames;
		t->tid = th[i].tid;
		memcpy(t->comm, th[i].comm, sizeof t->comm);
		t->comm[sizeof t->comm - 1] = '\0';
		/* The target names its threads (prctl): no terminal escapes. */
		for (char *c = t->comm; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = '?';
		t->error = th[i].error;
		t->error_why = th[i].error ? th[i].error_why : NULL;
		t->state = th[i].jstate;
		t->blocked_in = th[i].blocked_in;
		t->approximate = th[i].approximate;
		t->approximate_why = th[i].approximate ? th[i].approximate_why : NULL;
		t->lock_addr = th[i].lock_addr;
		t->lock_how = th[i].lock_how;
		t->frames = nf ? malloc(nf * sizeof *t->frames) : NULL;
		if (t->frames) {
			memcpy(t->frames, th[i].frames, nf * sizeof *t->frames);
			t->nframes = (uint16_t)nf;
		}
	}
}

static int bpf_capture(struct daemon *d, struct stack_req *r, char *err, size_t errlen)
{
	struct bpfstack_thread *th = NULL;
	size_t n = 0;
	int64_t t0 = loop_now_ns();
	int rc = bpfstack_capture(d->stacks->bpf, r->proc->pid, &th, &n, err, errlen);
	if (rc < 0)
		return rc;
	take_threads(r, th, n);
	free(th);
	locks_resolve(r->proc->pid, r->threads, r->nthreads, false);
	r->capture_ns = loop_now_ns() - t0;
	return 1;
}

static int proc_capture(struct daemon *d, struct stack_req *r, char *err, size_t errlen)
{
	struct bpfstack_thread *th = NULL;
	size_t n = 0;
	int64_t t0 = loop_now_ns();
	if (!d->stacks->ps && !(d->stacks->ps = procstack_open())) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int rc = procstack_capture(d->stacks->ps, r->proc->pid, &th, &n, err, errlen);
	if (rc < 0)
		return rc;
	struct procstack_stats st;
	procstack_last_stats(d->stacks->ps, &st);
	r->read_ns = st.read_ns;
	r->unwind_ns = st.unwind_ns;
	take_threads(r, th, n);
	free(th);
	locks_resolve(r->proc->pid, r->threads, r->nthreads, false);
	r->capture_ns = loop_now_ns() - t0;
	return 1;
}

static const struct stack_source signal_source = {"signal", signal_capture};
static const struct stack_source bpf_source = {"bpf", bpf_capture};
static const struct stack_source proc_source = {"proc", proc_capture};

static void warm_drop(struct warm *w)
{
	jb_free(&w->body);
	free(w->ts.v);
	free(w->text);
	jdkdump_marks_free(&w->marks);
	memset(w, 0, sizeof *w);
}

/* The warm reply gone, and with it what its entries were written from. */
static void warm_forget(struct stacks *s)
{
	warm_drop(&s->warm);
	s->warm_key.threads.valid = false;
}

static bool value_span(const struct jbuf *b, size_t from, size_t to, const char *key, size_t *at,
		       size_t *end);

/* Whether mt was made of p's model as it stands. */
static bool mtext_fits(const struct model_text *mt, const struct proc *p)
{
	const struct model *m = &p->model;
	return mt->rest && mt->p == p && mt->pid == p->pid && mt->starttime == p->starttime &&
	       mt->gen == m->gen && mt->nviol == m->nviol && mt->nwarn == m->nwarn &&
	       mt->clk.mono == p->clk.mono && mt->clk.real == p->clk.real && mt->sym == m->sym;
}

/* Writes p's model as a dump needs it (model_render_live) into a dump's
 * body to be rendered: the text of the last one after a new now_ms when the
 * model did not change since, else afresh (then kept). */
static void model_into_body(struct daemon *d, const struct proc *p, struct jbuf *b)
{
	struct model_text *mt = &d->stacks->mtext;
	int64_t now = realtime_ns();
	if (mtext_fits(mt, p)) {
		jb_obj(b);
		jb_key(b, "now_ms");
		jb_ms(b, now);
		jb_raw(b, mt->rest, mt->len);
		jb_obj_end(b);
		return;
	}
	size_t at = b->len;
	model_render_live(&p->model, &p->clk, now, b);
	free(mt->rest);
	mt->rest = NULL;
	size_t v, end;
	if (b->oom || b->len < at + 2 || b->p[b->len - 1] != '}' ||
	    !value_span(b, at, b->len, "\"now_ms\":", &v, &end) ||
	    !(mt->rest = malloc(b->len - end)))
		return;
	mt->len = b->len - 1 - end;
	memcpy(mt->rest, b->p + end, mt->len);
	mt->p = p;
	mt->pid = p->pid;
	mt->starttime = p->starttime;
	mt->gen = p->model.gen;
	mt->nviol = p->model.nviol;
	mt->nwarn = p->model.nwarn;
	mt->clk = p->clk;
	mt->sym = p->model.sym;
}

/* Records b's length in *where when b is the body of a dump being
 * rendered (the spans of struct spans). */
static void body_at(struct daemon *d, const struct jbuf *b, size_t *where)
{
	if (b == &d->stacks->body)
		*where = b->len;
}

int stacks_open(struct stacks **out, int mode, char *why, size_t whylen)
{
	struct stacks *s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->src = &signal_source;
	const char *check = getenv("SCOPED_CHECK_REMADE");
	s->check_remade = check && strcmp(check, "1") == 0;
	if (mode == STACKS_SIGNAL || mode == STACKS_PROC) {
		if (mode == STACKS_PROC)
			s->src = &proc_source;
		snprintf(why, whylen, "%s",
			 mode == STACKS_PROC
			     ? "stacks from /proc registers and process_vm_readv "
			       "(no signal, no stop), as --stacks=proc asks"
			     : "stacks from the agent (signal mode), as --stacks=signal asks");
	} else {
		char err[256] = "";
		int rc = bpfstack_open(&s->bpf, err, sizeof err);
		if (rc == 0) {
			s->src = &bpf_source;
			snprintf(why, whylen, "stacks from BPF (nothing runs in the targets)");
		} else if (mode == STACKS_BPF) {
			snprintf(why, whylen, "--stacks=bpf: BPF stack capture cannot load: %s",
				 err);
			free(s);
			return rc;
		} else {
			snprintf(why, whylen,
				 "stacks from the agent (signal mode): BPF not available: %s", err);
		}
	}
	*out = s;
	return 0;
}

void stacks_close(struct stacks *s)
{
	if (!s)
		return;
	if (s->bpf)
		bpfstack_close(s->bpf);
	procstack_close(s->ps);
	jb_free(&s->body);
	warm_drop(&s->warm);
	stack_key_free(&s->warm_key.threads);
	stack_key_free(&s->cur_key.threads);
	free(s->cur_ts.v);
	free(s->mtext.rest);
	free(s);
}

const struct stack_source *stacks_source(const struct stacks *s)
{
	return s ? s->src : &signal_source;
}

void stacks_forget_last(struct proc *p)
{
	for (size_t i = 0; i < p->last.n; i++)
		free(p->last.threads[i].frames);
	free(p->last.threads);
	p->last.threads = NULL;
	p->last.n = 0;
	p->last.source = NULL;
}

/* The threads of a finished capture become the process's last known
 * stacks: what a post-mortem dump can still show (their frames were just
 * resolved, so the symbolizer's cache still knows them). */
static void keep_last(struct stack_req *r)
{
	struct proc *p = r->proc;
	if (!r->captured || !r->nthreads || r->tids || p->state != PROC_LIVE)
		return;
	stacks_forget_last(p);
	p->last.threads = r->threads;
	p->last.n = r->nthreads;
	p->last.real_ns = realtime_ns();
	p->last.source = r->source;
	r->threads = NULL;
	r->nthreads = r->cap = 0;
}

static void req_free(struct stack_req *r)
{
	for (size_t i = 0; i < r->nthreads; i++)
		free(r->threads[i].frames);
	free(r->threads);
	free(r->tids);
	json_decref(r->req_id);
	free(r);
}

static void unlink_req(struct daemon *d, struct stack_req *r)
{
	for (struct stack_req **pp = &d->reqs; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			return;
		}
}

/* JDK thread state of a thread as /proc sees it now; NULL when /proc does
 * not say.  *gone: the thread no longer exists (or is a zombie). */
static const char *proc_thread_state(pid_t pid, uint32_t tid, bool *gone)
{
	struct proc_stat st;
	int rc = pid > 0 && tid ? proc_stat_read(pid, tid, &st) : -ESRCH;
	*gone = rc == -ENOENT || rc == -ESRCH || (rc == 0 && (st.state == 'Z' || st.state == 'X'));
	if (*gone)
		return "TERMINATED";
	if (rc < 0 && rc != -EINVAL)
		return NULL;
	return rc == 0 && st.state == 'R' ? "RUNNABLE" : "WAITING";
}

static const char *thread_name(const struct proc *p, const struct stack_thread *st)
{
	const struct m_thread *t = idmap_get(&p->model.ents[ENT_THREAD], st->tid);
	if (t && t->name)
		return t->name;
	return st->comm[0] ? st->comm : NULL;
}

/* The name of the thread that owns the lock st waits for. */
static const char *lock_owner_name(const struct proc *p, const struct stack_thread *st)
{
	const struct m_thread *t = idmap_get(&p->model.ents[ENT_THREAD], st->lock_owner);
	if (t && t->name)
		return t->name;
	return st->lock_owner_comm[0] ? st->lock_owner_comm : NULL;
}

static void frame_json(struct jbuf *b, uint64_t addr, const struct sym_frame *f)
{
	char hex[24];
	jb_obj(b);
	snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)addr);
	jb_key(b, "addr");
	jb_str(b, hex);
	jb_key(b, "func");
	jb_str(b, f->func);
	jb_key(b, "file");
	jb_str(b, f->file);
	jb_key(b, "line");
	if (f->line > 0)
		jb_i64(b, f->line);
	else
		jb_null(b);
	jb_key(b, "module");
	jb_str(b, f->module);
	jb_key(b, "offset");
	if (f->module) {
		snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)f->offset);
		jb_str(b, hex);
	} else {
		jb_null(b);
	}
	jb_key(b, "inlined");
	jb_bool(b, f->inlined);
	jb_obj_end(b);
}

/* A thread's frames, each address as the frames a debugger shows: the
 * functions inlined there first, then the one that holds the code.  Past
 * twice the physical frames, only physical frames are added, so a deep
 * recursion of inlined helpers cannot multiply a reply. */
static void frames_json_found(struct symbolizer *sym, struct jbuf *b, const struct proc *p,
			      const uint64_t *frames, uint16_t nframes, bool *all_found)
{
	size_t budget = 2 * (size_t)nframes + SYM_MAX_INLINE, out = 0;
	jb_key(b, "frames");
	jb_arr(b);
	for (uint16_t k = 0; k < nframes; k++) {
		struct sym_frame f[SYM_MAX_INLINE + 1];
		size_t n = 1;
		f[0] = (struct sym_frame){0};
		if (sym) {
			size_t left = (size_t)(nframes - k); /* physical frames still to add */
			size_t room = budget - out > left ? budget - out - left : 0;
			size_t max = room + 1 < SYM_MAX_INLINE + 1 ? room + 1 : SYM_MAX_INLINE + 1;
			bool found = false;
			n = sym_lookup_inline(sym, p->pid, p->starttime, frames[k], k > 0, f, max,
					      &found);
			*all_found = *all_found && found;
		}
		for (size_t i = 0; i < n; i++)
			frame_json(b, frames[k], &f[i]);
		out += n;
	}
	jb_arr_end(b);
}

static void frames_json(struct symbolizer *sym, struct jbuf *b, const struct proc *p,
			const uint64_t *frames, uint16_t nframes)
{
	bool found = true;
	frames_json_found(sym, b, p, frames, nframes, &found);
}

void stacks_crash_json(struct jbuf *b, const struct proc *p)
{
	const struct m_thread *t = idmap_get(&p->model.ents[ENT_THREAD], p->crash.tid);
	const struct m_task *task =
	    t && t->task ? idmap_get(&p->model.ents[ENT_TASK], t->task) : NULL;
	jb_key(b, "crash");
	jb_obj(b);
	jf_u64(b, "tid", p->crash.tid);
	jf_i64_if(b, "signal", p->exit_signal >= 0 || p->crash.has_info,
		  p->exit_signal >= 0 ? p->exit_signal : p->crash.signo);
	jf_i64_if(b, "si_code", p->crash.has_info, p->crash.si_code);
	int sig = p->crash.signo;
	/* si_addr means something only for faults (0x0 included: a null pointer). */
	if (p->crash.has_info &&
	    (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE)) {
		char hex[24];
		snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)p->crash.fault_addr);
		jf_str(b, "fault_addr", hex);
	}
	jf_id(b, "task", task ? task->id : 0);
	jf_id(b, "scope", task ? task->scope : 0);
	/* Resolved from the cache the handler's reply filled while the
	 * process still lived. */
	frames_json(p->model.sym, b, p, p->crash.frames, p->crash.nframes);
	jb_obj_end(b);
}

static int tid_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* The live threads of the model that the capture did not return, each
 * with the state /proc gives now and why it has no stack: it exited during
 * the capture, or started after it.  So that every thread of the dump has
 * a real state, and says what is not known. */
static void missed_json(struct jbuf *b, const struct stack_req *r)
{
	const struct proc *p = r->proc;
	const struct live_set *ls = &p->model.live[ENT_THREAD];
	uint32_t *got = malloc((r->nthreads ? r->nthreads : 1) * sizeof *got);
	if (!got)
		return;
	for (size_t i = 0; i < r->nthreads; i++)
		got[i] = r->threads[i].tid;
	qsort(got, r->nthreads, sizeof *got, tid_cmp);
	for (uint32_t i = 0; i < ls->n; i++) {
		const struct m_thread *t = ls->e[i];
		uint32_t tid = (uint32_t)t->id;
		if (!wanted(r, tid) || bsearch(&tid, got, r->nthreads, sizeof *got, tid_cmp))
			continue;
		bool gone = false;
		const char *state = proc_thread_state(p->pid, tid, &gone);
		jb_obj(b);
		jf_u64(b, "tid", tid);
		jf_str(b, "name", t->name);
		jf_str(b, "error",
		       gone ? "the thread exited during the capture"
			    : "the thread was not in the capture (it started after it)");
		jf_str(b, "state", state);
		if (gone)
			jf_bool(b, "exited", true);
		jf_str(b, "blocked_in", NULL);
		jf_bool(b, "approximate", false);
		jb_key(b, "frames");
		jb_arr(b);
		jb_arr_end(b);
		jb_obj_end(b);
	}
	free(got);
}

/* Threads already written, by stack: the first thread with each stack. */
struct shared {
	size_t cap;
	struct {
		uint64_t hash;
		const struct stack_thread *t;
	} * slot;
};

static uint64_t stack_hash(const struct stack_thread *t)
{
	uint64_t h = 1469598103934665603ull ^ t->nframes;
	for (uint16_t i = 0; i < t->nframes; i++)
		h = (h ^ t->frames[i]) * 1099511628211ull;
	return h ? h : 1;
}

/* The first thread of the reply with t's stack, or NULL (t is then
 * remembered as the first with it). */
static const struct stack_thread *shared_find(struct shared *s, const struct stack_thread *t)
{
	if (!s->slot || !t->nframes)
		return NULL;
	uint64_t h = stack_hash(t);
	for (size_t i = h % s->cap;; i = (i + 1) % s->cap) {
		if (!s->slot[i].t) {
			s->slot[i].hash = h;
			s->slot[i].t = t;
			return NULL;
		}
		const struct stack_thread *o = s->slot[i].t;
		if (s->slot[i].hash == h && o->nframes == t->nframes &&
		    !memcmp(o->frames, t->frames, t->nframes * sizeof *t->frames))
			return o;
	}
}

/* A new span of thread tid when b is the body of a dump being rendered,
 * else (or out of memory) NULL. */
static struct tspan *thread_span(struct daemon *d, const struct jbuf *b, uint64_t tid)
{
	struct tspans *s = &d->stacks->cur_ts;
	if (b != &d->stacks->body || s->failed)
		return NULL;
	if (s->n == s->cap) {
		size_t ncap = s->cap ? 2 * s->cap : 256;
		struct tspan *nv = realloc(s->v, ncap * sizeof *nv);
		if (!nv) {
			s->failed = true;
			return NULL;
		}
		s->v = nv;
		s->cap = ncap;
	}
	s->v[s->n] = (struct tspan){.tid = tid};
	return &s->v[s->n++];
}

/* Writes the stacks[] entries of r's threads; *all_found: every frame's
 * address was in a module (else left as it is). */
static void entries_json(struct daemon *d, struct jbuf *b, const struct stack_req *r,
			 int64_t *symbols_ns, bool *all_found)
{
	const struct proc *p = r->proc;
	struct shared sh = {0};
	struct locks_index locks;
	locks_index_build(&locks, r->threads, r->nthreads); /* empty when out of memory */
	if (r->share_stacks && r->nthreads) {
		sh.cap = 2 * r->nthreads + 1;
		sh.slot = calloc(sh.cap, sizeof *sh.slot); /* NULL: every stack in full */
	}
	for (size_t i = 0; i < r->nthreads; i++) {
		const struct stack_thread *t = &r->threads[i];
		jb_obj(b);
		jb_key(b, "tid");
		jb_u64(b, t->tid);
		jb_key(b, "name");
		jb_str(b, thread_name(p, t));
		jb_key(b, "error");
		jb_str(b, t->error ? (t->error_why ? t->error_why : strerror(-t->error)) : NULL);
		bool gone = false;
		const char *state = t->state ? t->state : proc_thread_state(p->pid, t->tid, &gone);
		struct tspan *ts = thread_span(d, b, t->tid);
		jb_key(b, "state");
		if (ts)
			ts->at[0] = b->len;
		jb_str(b, state);
		if (ts)
			ts->end[0] = b->len;
		if (gone) {
			jb_key(b, "exited");
			jb_bool(b, true);
		}
		jb_key(b, "blocked_in");
		if (ts)
			ts->at[1] = b->len;
		jb_str(b, t->blocked_in);
		if (ts)
			ts->end[1] = b->len;
		jb_key(b, "approximate");
		jb_bool(b, t->approximate);
		if (t->approximate_why)
			jf_str(b, "approximate_why", t->approximate_why);
		locks_waiting_json(b, t, lock_owner_name(p, t));
		locks_held_json(b, &locks, t);
		const struct stack_thread *same = shared_find(&sh, t);
		if (same) {
			jf_u64(b, "same_stack_as", same->tid);
			jb_key(b, "frames");
			jb_arr(b);
			jb_arr_end(b);
		} else {
			int64_t s0 = loop_now_ns();
			frames_json_found(d->sym, b, p, t->frames, t->nframes, all_found);
			*symbols_ns += loop_now_ns() - s0;
		}
		jb_obj_end(b);
	}
	free(sh.slot);
	locks_index_free(&locks);
}

/* Whether the names the model m gives threads are those of key. */
static bool names_fit(const struct entries_key *k, const struct model *m)
{
	return k->no_names ? m->ents[ENT_THREAD].n == 0 : k->names_gen == m->names_gen;
}

/* Whether key describes the entries r's threads would have in a reply
 * written now, their state and blocked_in apart. */
static bool key_fits(const struct entries_key *k, struct daemon *d, const struct stack_req *r)
{
	const struct proc *p = r->proc;
	if (!k->threads.valid || k->pid != p->pid || k->starttime != p->starttime ||
	    !names_fit(k, &p->model) || k->source != r->source || k->share != r->share_stacks ||
	    !d->sym || k->sym_gen != sym_generation(d->sym, p->pid, p->starttime))
		return false;
	/* A state the source did not give is read from /proc when written. */
	for (size_t i = 0; i < r->nthreads; i++)
		if (!r->threads[i].state)
			return false;
	return stack_key_same(&k->threads, r->threads, r->nthreads);
}

/* The thread entries of the warm reply, each with its state and blocked_in
 * of now, into b (the body being rendered); false, with b as it was, when
 * the warm reply's spans do not allow it. */
static bool entries_from_warm(struct daemon *d, struct jbuf *b, const struct stack_req *r)
{
	struct stacks *s = d->stacks;
	const struct warm *w = &s->warm;
	const struct tspans *ts = &w->ts;
	if (!w->text || !w->at.found || ts->failed || ts->n != r->nthreads ||
	    w->at.threads > w->at.threads_end || w->at.threads_end > w->body.len)
		return false;
	size_t from = w->at.threads;
	for (size_t i = 0; i < ts->n; i++) {
		const struct tspan *t = &ts->v[i];
		if (t->tid != r->threads[i].tid || t->at[0] < from || t->end[0] < t->at[0] ||
		    t->at[1] < t->end[0] || t->end[1] < t->at[1] || t->end[1] > w->at.threads_end)
			return false;
		from = t->end[1];
	}
	size_t len0 = b->len, nts = s->cur_ts.n;
	from = w->at.threads;
	for (size_t i = 0; i < ts->n; i++) {
		const struct tspan *t = &ts->v[i];
		const struct stack_thread *th = &r->threads[i];
		struct tspan *now = thread_span(d, b, th->tid);
		if (!now)
			break;
		const char *v[2] = {th->state, th->blocked_in};
		for (int k = 0; k < 2; k++) {
			jb_raw(b, w->body.p + from, t->at[k] - from);
			now->at[k] = b->len;
			b->after_key = true; /* the value alone: its key was copied */
			jb_str(b, v[k]);
			now->end[k] = b->len;
			from = t->end[k];
		}
	}
	if (b->oom || s->cur_ts.n != nts + ts->n) {
		b->len = len0;
		b->oom = false;
		s->cur_ts.n = nts;
		return false;
	}
	jb_raw(b, w->body.p + from, w->at.threads_end - from);
	if (ts->n)
		b->first[b->depth] = false;
	return true;
}

/* Whether the entries written in b from at on are those written afresh
 * (SCOPED_CHECK_REMADE). */
static bool entries_right(struct daemon *d, const struct jbuf *b, size_t at,
			  const struct stack_req *r)
{
	struct jbuf fresh;
	jb_init(&fresh);
	int64_t ns = 0;
	bool found = true;
	entries_json(d, &fresh, r, &ns, &found);
	bool same = !fresh.oom && at <= b->len && fresh.len == b->len - at &&
		    memcmp(fresh.p, b->p + at, fresh.len) == 0;
	jb_free(&fresh);
	return same;
}

/* The thread entries of a reply, written afresh or, in the body being
 * rendered when the warm reply's were written from the same, taken from
 * it; the body's key says which (for the warm reply it may become). */
static void entries(struct daemon *d, struct jbuf *b, const struct stack_req *r,
		    int64_t *symbols_ns)
{
	struct stacks *s = d->stacks;
	const struct proc *p = r->proc;
	bool render = b == &s->body;
	if (render) {
		s->cur_reused = s->entries_differ = false;
		s->cur_key.threads.valid = false;
	}
	size_t at = b->len;
	if (render && key_fits(&s->warm_key, d, r) && entries_from_warm(d, b, r)) {
		s->cur_reused = true;
		if (s->check_remade && !entries_right(d, b, at, r)) {
			log_error("re-used thread entries differ from those written afresh");
			s->entries_differ = true;
		}
		return;
	}
	bool found = true;
	uint64_t sym_gen = d->sym ? sym_generation(d->sym, p->pid, p->starttime) : 0;
	entries_json(d, b, r, symbols_ns, &found);
	if (!render || !found || !d->sym || sym_gen != sym_generation(d->sym, p->pid, p->starttime))
		return;
	struct entries_key *k = &s->cur_key;
	k->pid = p->pid;
	k->starttime = p->starttime;
	k->names_gen = p->model.names_gen;
	k->no_names = p->model.ents[ENT_THREAD].n == 0;
	k->sym_gen = sym_gen;
	k->source = r->source;
	k->share = r->share_stacks;
	stack_key_set(&k->threads, r->threads, r->nthreads);
}

/* The warm reply is now the body just rendered: its entries' key with it. */
static void key_install(struct stacks *s)
{
	if (s->cur_reused)
		return; /* the same threads: the warm key stands */
	struct entries_key k = s->warm_key;
	s->warm_key = s->cur_key;
	s->cur_key = k;
	s->cur_key.threads.valid = false;
}

static void stacks_json(struct daemon *d, struct jbuf *b, const struct stack_req *r)
{
	int64_t symbols_ns = 0; /* in frames_json: symbols and their text */
	jb_key(b, "source");
	jb_str(b, r->source);
	jb_key(b, "stacks");
	jb_arr(b);
	body_at(d, b, &d->stacks->cur.threads);
	entries(d, b, r, &symbols_ns);
	body_at(d, b, &d->stacks->cur.threads_end);
	if (r->captured)
		missed_json(b, r);
	jb_arr_end(b);
	body_at(d, b, &d->stacks->cur.tail);
	jb_key(b, "capture_ns");
	jb_i64(b, r->capture_ns);
	jb_key(b, "max_pause_ns");
	jb_i64(b, r->max_pause_ns);
	/* Where the time went, past the capture: not compared between dumps
	 * (the tail). */
	if (r->read_ns >= 0) {
		jb_key(b, "read_ns");
		jb_i64(b, r->read_ns);
		jb_key(b, "unwind_ns");
		jb_i64(b, r->unwind_ns);
	}
	jb_key(b, "symbols_ns");
	jb_i64(b, symbols_ns);
}

/* A post-mortem dump's "last_stacks": each thread's stack as the last
 * capture before the end found it. */
static void last_stacks_json(struct daemon *d, struct jbuf *b, const struct proc *p)
{
	jb_key(b, "last_stacks");
	jb_obj(b);
	jf_str(b, "source", p->last.source);
	jb_key(b, "taken_ms");
	jb_ms(b, p->last.real_ns);
	jb_key(b, "stacks");
	jb_arr(b);
	for (size_t i = 0; i < p->last.n; i++) {
		const struct stack_thread *t = &p->last.threads[i];
		jb_obj(b);
		jf_u64(b, "tid", t->tid);
		frames_json(d->sym, b, p, t->frames, t->nframes);
		jb_obj_end(b);
	}
	jb_arr_end(b);
	jb_obj_end(b);
}

/* A reply larger than the socket's buffer goes out in pieces, each waiting
 * for the client to read and for the daemon to run again (on a busy host,
 * milliseconds each): the buffer is raised to hold it whole, up to 4 MiB
 * (the kernel caps it at net.core.wmem_max). */
static void room_for_reply(struct client *c, size_t len)
{
	int want = len > (4u << 20) ? 4 << 20 : (int)len, have = 0;
	socklen_t optlen = sizeof have;
	if (want > (128 << 10) && getsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &have, &optlen) == 0 &&
	    have < want)
		setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof want);
}

/* Where a reply's members go: the client's output, or, for a dump it
 * renders, the daemon's own buffer (then send_body()). */
static struct jbuf *body_begin(struct daemon *d, struct client *c, const struct stack_req *r)
{
	if (!r->render)
		return reply_begin(c, r->req_id);
	struct jbuf *b = &d->stacks->body;
	jb_reset(b);
	memset(&d->stacks->cur, 0, sizeof d->stacks->cur);
	d->stacks->cur_ts.n = 0;
	d->stacks->cur_ts.failed = false;
	jb_obj(b);
	jf_bool(b, "ok", true);
	return b;
}

/* The value of member key (its quoted name and colon) in b's text from
 * from to to: [*at, *end).  Our own writer made the text, so a name in
 * quotes followed by a colon is a member's (inside a string value a quote
 * is escaped). */
static bool value_span(const struct jbuf *b, size_t from, size_t to, const char *key, size_t *at,
		       size_t *end)
{
	size_t n = strlen(key);
	const char *p = from < to && to <= b->len ? memmem(b->p + from, to - from, key, n) : NULL;
	if (!p)
		return false;
	*at = (size_t)(p - b->p) + n;
	*end = *at + strcspn(b->p + *at, ",}");
	return *end <= to;
}

/* Finds the values of uptime_ms and now_ms in b, with the offsets the
 * writer recorded; false when they are not all there. */
static bool find_spans(const struct jbuf *b, struct spans *at)
{
	at->found = !b->oom && at->proc && at->model && at->tail &&
		    value_span(b, at->proc, at->proc_end, "\"uptime_ms\":", &at->up, &at->up_end) &&
		    value_span(b, at->model, at->tail, "\"now_ms\":", &at->now, &at->now_end) &&
		    at->up_end <= at->now && at->now_end <= at->tail;
	return at->found;
}

/* Whether the bytes of b from [f, t) are those of o from [of, ot). */
static bool same_bytes(const struct jbuf *b, size_t f, size_t t, const struct jbuf *o, size_t of,
		       size_t ot)
{
	return f <= t && of <= ot && t <= b->len && ot <= o->len && t - f == ot - of &&
	       memcmp(b->p + f, o->p + of, t - f) == 0;
}

/* Whether the reply in b (its spans at and ts found) is the warm one's but
 * for those spans: the times, and at most JDKDUMP_MAX_MOVED threads' state
 * or blocked_in values, which go into moved (*nmoved). */
static bool same_as_warm(const struct warm *w, const struct jbuf *b, const struct spans *at,
			 const struct tspans *ts, struct jdkdump_moved *moved, size_t *nmoved)
{
	const struct spans *o = &w->at;
	*nmoved = 0;
	if (!w->text || !o->found || !at->found)
		return false;
	/* The parts between the spans, of equal length and bytes. */
	size_t a[2][2] = {{0, at->up}, {at->up_end, at->now}};
	size_t e[2][2] = {{0, o->up}, {o->up_end, o->now}};
	for (int i = 0; i < 2; i++)
		if (!same_bytes(b, a[i][0], a[i][1], &w->body, e[i][0], e[i][1]))
			return false;
	if (ts->failed || w->ts.failed || ts->n != w->ts.n)
		return false;
	size_t from = at->now_end, ofrom = o->now_end;
	for (size_t i = 0; i < ts->n; i++) {
		const struct tspan *c = &ts->v[i], *p = &w->ts.v[i];
		for (int k = 0; k < 2; k++) {
			if (c->at[k] < from || c->end[k] < c->at[k] || p->at[k] < ofrom ||
			    p->end[k] < p->at[k] || c->end[k] > at->tail || p->end[k] > o->tail ||
			    !same_bytes(b, from, c->at[k], &w->body, ofrom, p->at[k]))
				return false;
			/* The tids are in the bytes before: the same thread. */
			if (!same_bytes(b, c->at[k], c->end[k], &w->body, p->at[k], p->end[k])) {
				if (*nmoved == JDKDUMP_MAX_MOVED)
					return false;
				moved[(*nmoved)++] = (struct jdkdump_moved){
				    (int64_t)c->tid,
				    k ? JDKDUMP_MARK_BLOCKED_IN : JDKDUMP_MARK_STATE,
				    b->p + c->at[k], c->end[k] - c->at[k]};
			}
			from = c->end[k];
			ofrom = p->end[k];
		}
	}
	return same_bytes(b, from, at->tail, &w->body, ofrom, o->tail);
}

/* Whether text (len bytes), re-made, is what rendering b afresh gives. */
static bool remade_right(const struct jbuf *b, const char *text, size_t len)
{
	struct jv_doc *doc = NULL;
	char err[256];
	size_t flen = 0;
	char *fresh = NULL;
	if (!b->oom && jv_parse(b->p, b->len, &doc, err, sizeof err) == 0)
		fresh = jdkdump_json_doc(jv_root(doc), &flen, err, sizeof err);
	jv_free(doc);
	bool same = fresh && flen == len && memcmp(fresh, text, len) == 0;
	free(fresh);
	return same;
}

/* text, re-made from the warm one for the reply in b; with check_remade,
 * NULL with err when it is not the fresh render (the warm one dropped). */
static char *remade(struct stacks *s, const struct jbuf *b, char *text, size_t len, char *err,
		    size_t errlen)
{
	if (!s->check_remade || remade_right(b, text, len))
		return text;
	log_error("a re-made dump differs from the one rendered afresh");
	snprintf(err, errlen, "the re-made dump differs from the one rendered afresh");
	warm_forget(s);
	return NULL;
}

/* The text of the dump in d's body: the warm text with this capture's
 * time and figures when nothing else differs, else rendered (and kept as
 * the warm one when it is not too big).  Returns the text, which the
 * caller frees when *owned, or NULL with err. */
static char *render_body(struct daemon *d, const struct stack_req *r, size_t *len, bool *reused,
			 bool *owned, char *err, size_t errlen)
{
	struct stacks *s = d->stacks;
	struct warm *w = &s->warm;
	struct jbuf *b = &s->body;
	*reused = *owned = false;
	struct jdkdump_moved moved[JDKDUMP_MAX_MOVED];
	size_t nmoved = 0;
	bool same =
	    find_spans(b, &s->cur) && same_as_warm(w, b, &s->cur, &s->cur_ts, moved, &nmoved);
	if (same && nmoved) {
		/* Threads moved: the text with their new values; this reply
		 * is the warm one now. */
		struct jdkdump_moment now = {strtod(b->p + s->cur.now, NULL), r->capture_ns,
					     r->max_pause_ns};
		struct jdkdump_marks marks = {0};
		char *text = jdkdump_json_remark_moved(w->text, w->len, &w->marks, &now, moved,
						       nmoved, len, &marks);
		if (text && b->len + *len <= WARM_MAX) {
			free(w->text);
			w->text = text;
			w->len = *len;
			jdkdump_marks_free(&w->marks);
			w->marks = marks;
			struct jbuf body = w->body;
			w->body = *b;
			*b = body;
			w->at = s->cur;
			struct tspans ts = w->ts;
			w->ts = s->cur_ts;
			s->cur_ts = ts;
			key_install(s);
			*reused = true;
			return remade(s, &w->body, text, *len, err, errlen);
		}
		free(text);
		jdkdump_marks_free(&marks);
	} else if (same) {
		/* The warm reply's entries are those just written: when they
		 * were written afresh and keyed, their key is the warm one's
		 * now (else the next dump would write them afresh again). */
		if (s->cur_key.threads.valid)
			key_install(s);
		struct jdkdump_moment now = {strtod(b->p + s->cur.now, NULL), r->capture_ns,
					     r->max_pause_ns};
		if (jdkdump_json_remark_inplace(w->text, w->len, &w->marks, &now)) {
			*len = w->len;
			*reused = true;
			return remade(s, b, w->text, w->len, err, errlen);
		}
		struct jdkdump_marks marks = {0};
		char *text = jdkdump_json_remark(w->text, w->len, &w->marks, &now, len, &marks);
		if (text) {
			free(w->text);
			w->text = text;
			w->len = *len;
			jdkdump_marks_free(&w->marks);
			w->marks = marks;
			*reused = true;
			return remade(s, b, text, *len, err, errlen);
		}
		jdkdump_marks_free(&marks);
	}
	struct jv_doc *doc = NULL;
	struct jdkdump_marks marks = {0};
	char *text = NULL;
	if (!b->oom && jv_parse(b->p, b->len, &doc, err, errlen) == 0)
		text = jdkdump_json_doc_marked(jv_root(doc), len, &marks, err, errlen);
	jv_free(doc);
	warm_drop(w);
	if (text && !marks.failed && s->cur.found && b->len + *len <= WARM_MAX) {
		/* This reply and its text are the next dump's warm ones. */
		w->body = *b;
		jb_init(b);
		w->at = s->cur;
		struct tspans ts = w->ts;
		w->ts = s->cur_ts;
		s->cur_ts = ts;
		key_install(s);
		w->text = text;
		w->len = *len;
		w->marks = marks;
		return text;
	}
	s->warm_key.threads.valid = false; /* no warm reply to take entries from */
	jdkdump_marks_free(&marks);
	/* One big dump's memory is not held until the next. */
	if (b->cap > (8u << 20))
		jb_free(b);
	*owned = true;
	return text;
}

/* Ends the reply body_begin() began.  A rendered dump goes out as a line
 * {"id", "ok", "text_bytes": N} and then N bytes: the JDK's JSON text, as
 * scopecmd would write it from the plain reply (dump/jdkdump.h), so the
 * client only copies it to its file. */
static void send_body(struct daemon *d, struct client *c, const struct stack_req *r)
{
	if (!r->render) {
		room_for_reply(c, c->out.len);
		reply_end(c);
		return;
	}
	char err[256] = "out of memory building the reply";
	size_t len = 0;
	bool reused, owned;
	jb_obj_end(&d->stacks->body);
	if (d->stacks->entries_differ) {
		/* SCOPED_CHECK_REMADE: what the tests must see. */
		warm_forget(d->stacks);
		reply_error(c, r->req_id, "internal",
			    "the re-used thread entries differ from those written afresh");
		return;
	}
	char *text = render_body(d, r, &len, &reused, &owned, err, sizeof err);
	if (!text) {
		reply_error(c, r->req_id, "internal", "rendering the dump failed: %s", err);
		return;
	}
	room_for_reply(c, c->out.len + len);
	reply_text(c, r->req_id, text, len,
		   (reused ? REPLY_REUSED : 0u) |
		       (d->stacks->cur_reused ? REPLY_ENTRIES_REUSED : 0u));
	if (owned)
		free(text);
}

/* Writes the reply: the stacks, and for a dump the tree of this same moment. */
static void write_reply(struct daemon *d, struct client *c, const struct stack_req *r)
{
	struct jbuf *b = body_begin(d, c, r);
	if (r->dump) {
		jb_key(b, "process");
		body_at(d, b, &d->stacks->cur.proc);
		proc_summary_json(b, r->proc, loop_now_ns());
		body_at(d, b, &d->stacks->cur.proc_end);
		jb_key(b, "model");
		body_at(d, b, &d->stacks->cur.model);
		if (b == &d->stacks->body)
			model_into_body(d, r->proc, b);
		else
			model_render(&r->proc->model, &r->proc->clk, realtime_ns(), b);
		/* The pool advice of this moment, for the pool containers. */
		if (r->proc->model.adv) {
			jb_key(b, "advice");
			advisor_render(&r->proc->model, NULL, b);
		}
		/* What the tree took in while the stacks were taken. */
		if (r->captured)
			jf_u64(b, "events_during_capture",
			       r->proc->model.events - r->events_at_capture);
		if (!r->captured && r->proc->last.source)
			last_stacks_json(d, b, r->proc);
	}
	stacks_json(d, b, r);
	send_body(d, c, r);
}

/* Answers r and lets the client's next request run. */
static void fail_req(struct daemon *d, struct stack_req *r, const char *code, const char *msg);

static void finish(struct daemon *d, struct stack_req *r)
{
	char err[256];
	int rc;
	if (r->client && (rc = proc_check_live(r->proc, r->client->uid, err, sizeof err)) < 0) {
		fail_req(d, r, rc == -EPERM ? "permission_denied" : "exited", err);
		return;
	}
	unlink_req(d, r);
	metrics_stack_done(d, r, true);
	struct client *c = r->client;
	/* The agent's replies say nothing of syscalls, nor name the threads
	 * the runtime does not know: /proc does. */
	locks_resolve(r->proc->pid, r->threads, r->nthreads, true);
	for (size_t i = 0; i < r->nthreads; i++)
		if (!thread_name(r->proc, &r->threads[i]))
			locks_thread_comm(r->proc->pid, r->threads[i].tid, r->threads[i].comm);
	if (c)
		write_reply(d, c, r);
	keep_last(r);
	req_free(r);
	if (c)
		daemon_reply_done(d, c);
}

static void fail_req(struct daemon *d, struct stack_req *r, const char *code, const char *msg)
{
	unlink_req(d, r);
	metrics_stack_done(d, r, false);
	struct client *c = r->client;
	if (c)
		reply_error(c, r->req_id, code, "%s", msg);
	req_free(r);
	if (c)
		daemon_reply_done(d, c);
}

/* Reads "tids" and "max_frames"; false after an error reply. */
static bool parse_filter(struct cmd_ctx *x, struct stack_req *r)
{
	json_t *mf = json_object_get(x->req, "max_frames");
	r->max_frames = DEFAULT_FRAMES;
	if (mf) {
		if (!json_is_integer(mf) || json_integer_value(mf) < 1 ||
		    json_integer_value(mf) > PROTO_MAX_FRAMES) {
			reply_error(x->c, x->id, "bad_request", "\"max_frames\" must be 1..%u",
				    PROTO_MAX_FRAMES);
			return false;
		}
		r->max_frames = (int)json_integer_value(mf);
	}
	r->share_stacks = json_is_true(json_object_get(x->req, "share_stacks"));
	json_t *render = json_object_get(x->req, "render");
	if (render) {
		if (!r->dump || !json_is_string(render) ||
		    strcmp(json_string_value(render), "jdk_json") != 0) {
			reply_error(x->c, x->id, "bad_request",
				    "\"render\" must be \"jdk_json\", and only a dump renders");
			return false;
		}
		/* Stacks shared in the body: less to write and read back. */
		r->render = r->share_stacks = true;
	}
	json_t *tids = json_object_get(x->req, "tids");
	if (!tids)
		return true;
	if (!json_is_array(tids) || json_array_size(tids) > PROTO_MAX_TIDS) {
		reply_error(x->c, x->id, "bad_request",
			    "\"tids\" must be an array of at most %u tids", PROTO_MAX_TIDS);
		return false;
	}
	r->tids = malloc((json_array_size(tids) + 1) * sizeof *r->tids);
	if (!r->tids) {
		reply_error(x->c, x->id, "internal", "out of memory");
		return false;
	}
	size_t i;
	json_t *v;
	json_array_foreach(tids, i, v)
	{
		if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
		    json_integer_value(v) > 0x7fffffff) {
			reply_error(x->c, x->id, "bad_request",
				    "\"tids\" must hold positive integers");
			return false;
		}
		r->tids[r->ntids++] = (uint32_t)json_integer_value(v);
	}
	return true;
}

void stacks_attach(struct daemon *d)
{
	/* At start, not at the first request: a crash report comes unasked. */
	daemon_watch(d, &reqs_watch);
}

int stacks_start(struct cmd_ctx *x, struct proc *p, bool dump)
{
	struct daemon *d = x->d;
	struct stack_req *r = calloc(1, sizeof *r);
	if (!r) {
		reply_error(x->c, x->id, "internal", "out of memory");
		return CMD_DONE;
	}
	r->proc = p;
	r->client = x->c;
	r->req_id = x->id ? json_incref(x->id) : NULL;
	r->dump = dump;
	r->id = ++d->next_req;
	r->started_ns = loop_now_ns();
	r->read_ns = r->unwind_ns = -1;
	r->deadline_ns = r->started_ns + DAEMON_STACK_TIMEOUT_NS;
	const struct stack_source *src = stacks_source(d->stacks);
	r->source = src->name;
	if (!parse_filter(x, r)) {
		req_free(r);
		return CMD_DONE;
	}
	if (p->state != PROC_LIVE && !(src != &signal_source && p->state == PROC_DETACHED)) {
		if (dump)
			write_reply(d, x->c, r); /* post-mortem: the last tree, no stacks */
		req_free(r);
		if (dump)
			return CMD_DONE;
		if (p->state == PROC_EXITED)
			reply_error(
			    x->c, x->id, "exited",
			    "process %d has exited; its last tree is still available (tree, "
			    "dump)",
			    (int)p->pid);
		else
			reply_error(x->c, x->id, "not_instrumented",
				    "process %d runs but its agent is gone (%s)", (int)p->pid,
				    p->exit_cause ? p->exit_cause : "disconnected");
		return CMD_DONE;
	}
	char err[256] = "";
	/* Identity at the moment of use: the pid still the registered process,
	 * with the viewer's credentials; again below, before the reply. */
	int rc = proc_check_live(p, x->c->uid, err, sizeof err);
	if (rc < 0) {
		reply_error(x->c, x->id, rc == -EPERM ? "permission_denied" : "exited", "%s", err);
		req_free(r);
		return CMD_DONE;
	}
	r->captured = true; /* a reply that follows comes from a capture */
	r->events_at_capture = p->model.events;
	rc = src->capture(d, r, err, sizeof err);
	if (rc == 1) {
		/* Answered here, synchronously: the client is not left waiting. */
		int again = proc_check_live(p, x->c->uid, err, sizeof err);
		if (again < 0) {
			reply_error(x->c, x->id, again == -EPERM ? "permission_denied" : "exited",
				    "%s", err);
		} else {
			write_reply(d, x->c, r);
			keep_last(r);
		}
		req_free(r);
		return CMD_DONE;
	}
	if (rc < 0) {
		reply_error(x->c, x->id, "internal", "stack capture failed: %s", err);
		req_free(r);
		return CMD_DONE;
	}
	r->next = d->reqs;
	d->reqs = r;
	daemon_watch(d, &reqs_watch);
	return CMD_PENDING;
}

/* The crashing thread's stack, sent unasked by the fatal-signal handler:
 * kept for post-mortem dumps and resolved now, while the process's modules
 * are still known (afterwards only the cache answers). */
static void crash_stack(struct daemon *d, const struct proto_msg *m, struct proc *p)
{
	if (m->type != PROTO_STACK_REPLY || p->crash.tid)
		return;
	uint16_t n = m->nframes;
	uint64_t *frames = n ? malloc(n * sizeof *frames) : NULL;
	if (n && !frames)
		return;
	for (uint16_t i = 0; i < n; i++) {
		frames[i] = proto_addr_at(m, i);
		struct sym_frame f[SYM_MAX_INLINE + 1];
		if (d->sym)
			sym_lookup_inline(d->sym, p->pid, p->starttime, frames[i], i > 0, f,
					  SYM_MAX_INLINE + 1, NULL);
	}
	p->crash.tid = m->tid;
	p->crash.nframes = n;
	p->crash.frames = frames;
}

/* A STACK_REPLY or STACK_DONE of p's agent. */
static void reqs_agent_msg(struct daemon *d, const struct proto_msg *m, struct proc *p)
{
	if (m->type == PROTO_CRASH) {
		if (!p->crash.has_info) {
			p->crash.has_info = true;
			p->crash.tid = p->crash.tid ? p->crash.tid : m->tid;
			p->crash.signo = m->code;
			p->crash.si_code = m->si_code;
			p->crash.fault_addr = m->fault_addr;
		}
		return;
	}
	if (m->req == 0) {
		crash_stack(d, m, p);
		return;
	}
	struct stack_req *r = d->reqs;
	while (r && !(r->id == m->req && r->proc == p))
		r = r->next;
	if (!r)
		return; /* late, after a timeout */
	/* The agent sends what its threads emitted before the capture ahead
	 * of its first reply: the tree as it stands then is the capture's. */
	if (!r->nthreads)
		r->events_at_capture = p->model.events;
	if (m->type == PROTO_STACK_DONE) {
		r->capture_ns = m->total_ns;
		r->max_pause_ns = m->max_pause_ns;
		finish(d, r);
		return;
	}
	if (!wanted(r, m->tid))
		return;
	struct stack_thread *t = add_thread(r);
	if (!t)
		return;
	size_t nf = m->nframes < (size_t)r->max_frames ? m->nframes : (size_t)r->max_frames;
	t->tid = m->tid;
	t->error = (int)m->error;
	t->pause_ns = m->pause_ns;
	t->frames = nf ? malloc(nf * sizeof *t->frames) : NULL;
	if (t->frames) {
		for (size_t i = 0; i < nf; i++)
			t->frames[i] = proto_addr_at(m, i);
		t->nframes = (uint16_t)nf;
	}
}

void stack_reqs_housekeep(struct daemon *d, int64_t now_ns)
{
	/* The /proc source's files of a process that exited are closed. */
	if (d->stacks)
		procstack_forget_gone(d->stacks->ps);
	for (struct stack_req *r = d->reqs, *next; r; r = next) {
		next = r->next;
		if (now_ns >= r->deadline_ns) {
			char msg[160];
			snprintf(msg, sizeof msg,
				 "process %d's agent did not send its stacks within 2 s",
				 (int)r->proc->pid);
			fail_req(d, r, "timeout", msg);
			next = d->reqs; /* the list may have changed under the reply */
		}
	}
}

/* Fails the requests of a process whose agent went away. */
static void reqs_proc_ended(struct daemon *d, struct proc *p)
{
	for (struct stack_req *r = d->reqs, *next; r; r = next) {
		next = r->next;
		if (r->proc == p) {
			char msg[160];
			snprintf(msg, sizeof msg, "process %d went away during the capture",
				 (int)p->pid);
			fail_req(d, r, "exited", msg);
			next = d->reqs;
		}
	}
}

/* A process's model text goes with it (another could get its address). */
static void reqs_proc_freed(struct daemon *d, struct proc *p)
{
	struct model_text *mt = d->stacks ? &d->stacks->mtext : NULL;
	if (mt && mt->p == p) {
		free(mt->rest);
		memset(mt, 0, sizeof *mt);
	}
}

static void reqs_client_gone(struct daemon *d, struct client *c)
{
	for (struct stack_req *r = d->reqs; r; r = r->next)
		if (r->client == c)
			r->client = NULL;
}

/* Remembers that the symbolizer holds pid's modules; forgets the least
 * recently dumped process past PLAIN_KEEP, and any that is gone. */
static void plain_keep(struct daemon *d, pid_t pid, unsigned long long starttime)
{
	struct stacks *s = d->stacks;
	size_t lru = 0;
	for (size_t i = 0; i < PLAIN_KEEP; i++) {
		if (s->plain[i].pid && proc_starttime(s->plain[i].pid) != s->plain[i].starttime) {
			if (d->sym)
				sym_forget(d->sym, s->plain[i].pid, s->plain[i].starttime);
			s->plain[i].pid = 0;
			s->plain[i].used = 0;
		}
		if (s->plain[i].pid == pid && s->plain[i].starttime == starttime) {
			s->plain[i].used = ++s->plain_clock;
			return;
		}
		if (s->plain[i].used < s->plain[lru].used)
			lru = i;
	}
	if (s->plain[lru].pid && d->sym)
		sym_forget(d->sym, s->plain[lru].pid, s->plain[lru].starttime);
	s->plain[lru].pid = pid;
	s->plain[lru].starttime = starttime;
	s->plain[lru].used = ++s->plain_clock;
}

/* Whether the source can read a process whose uids are uids: BPF reads
 * any; /proc and process_vm_readv only what ptrace's rules let scoped
 * read (its own uid's, or any as root). */
static bool source_may_read(const struct stack_source *src, const uid_t uids[4])
{
	if (src == &bpf_source || geteuid() == 0)
		return true;
	for (int i = 0; i < 4; i++)
		if (uids[i] != geteuid())
			return false;
	return true;
}

bool stacks_plain_target(struct cmd_ctx *x, pid_t *pid)
{
	json_t *j = json_object_get(x->req, "pid");
	if (!json_is_integer(j) || json_integer_value(j) <= 0 || json_integer_value(j) > 0x7fffffff)
		return false;
	*pid = (pid_t)json_integer_value(j);
	if (proc_find(x->d, *pid))
		return false;
	char path[32];
	snprintf(path, sizeof path, "/proc/%d", (int)*pid);
	return access(path, F_OK) == 0;
}

int stacks_start_plain(struct cmd_ctx *x, pid_t pid, bool dump)
{
	struct daemon *d = x->d;
	struct anyproc a;
	char why[512] = "";
	int rc = anyproc_read(pid, &a);
	if (rc < 0) {
		reply_error(x->c, x->id, "no_such_process", "process %d does not exist", (int)pid);
		return CMD_DONE;
	}
	if (!anyproc_may_inspect(&a, x->c->uid, why, sizeof why)) {
		reply_error(x->c, x->id, "permission_denied", "%s", why);
		return CMD_DONE;
	}
	const struct stack_source *src = d->stacks && d->stacks->bpf ? &bpf_source : &proc_source;
	if (!source_may_read(src, a.uids)) {
		reply_error(
		    x->c, x->id, "no_privileges",
		    "scoped runs as uid %u without BPF, so it may read the stacks of its "
		    "own uid's processes only, and process %d is uid %u; run scoped as root "
		    "(or with CAP_BPF and CAP_PERFMON) to dump it",
		    (unsigned)geteuid(), (int)pid, (unsigned)a.uids[1]);
		return CMD_DONE;
	}
	struct proc *p = calloc(1, sizeof *p);
	struct stack_req *r = calloc(1, sizeof *r);
	if (!p || !r) {
		free(p);
		free(r);
		reply_error(x->c, x->id, "internal", "out of memory");
		return CMD_DONE;
	}
	r->read_ns = r->unwind_ns = -1;
	struct model_limits lim = daemon_model_limits(d);
	model_init(&p->model, &lim);
	p->pid = pid;
	p->uid = a.uids[1];
	p->state = PROC_LIVE;
	p->starttime = a.starttime;
	r->proc = p;
	r->client = x->c;
	r->req_id = x->id ? json_incref(x->id) : NULL;
	r->dump = dump;
	r->id = ++d->next_req;
	r->source = src->name;
	r->captured = true;
	if (parse_filter(x, r)) {
		char err[256] = "";
		rc = src->capture(d, r, err, sizeof err);
		struct anyproc now;
		if (rc < 0)
			reply_error(x->c, x->id,
				    rc == -EPERM   ? "no_privileges"
				    : rc == -ESRCH ? "exited"
						   : "internal",
				    "stack capture of process %d failed: %s", (int)pid, err);
		else if (anyproc_read(pid, &now) < 0 || now.starttime != a.starttime)
			reply_error(x->c, x->id, "exited", "process %d exited during the capture",
				    (int)pid);
		else {
			struct jbuf *b = body_begin(d, x->c, r);
			if (dump) {
				jb_key(b, "process");
				body_at(d, b, &d->stacks->cur.proc);
				anyproc_summary_json(b, &now);
				body_at(d, b, &d->stacks->cur.proc_end);
				jb_key(b, "model");
				body_at(d, b, &d->stacks->cur.model);
				model_render(&p->model, &p->clk, realtime_ns(), b);
			}
			stacks_json(d, b, r);
			send_body(d, x->c, r);
			plain_keep(d, pid, a.starttime);
		}
	}
	req_free(r);
	model_free(&p->model);
	free(p);
	return CMD_DONE;
}
