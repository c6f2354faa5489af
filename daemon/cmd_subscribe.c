/* cmd_subscribe.c - "subscribe"/"unsubscribe": a snapshot of one process, then
 * deltas at the client's interval, diffed by per-entity generations. */
#include "cmd.h"

#include "log.h"
#include "loop.h"

#include <stdlib.h>

static void subs_proc_freed(struct daemon *d, struct proc *p);
static void subs_client_gone(struct daemon *d, struct client *c);
/* Subscriptions point at processes and at their clients. */
static const struct watcher subs_watch = {
    .proc_freed = subs_proc_freed,
    .client_gone = subs_client_gone,
};

#define INTERVAL_MIN_MS 25
#define INTERVAL_MAX_MS 5000
#define INTERVAL_DEFAULT_MS 250
#define SUBS_PER_CLIENT 64

static void line_start(struct jbuf *b)
{
	b->depth = 0;
	b->first[0] = true;
	b->after_key = false;
}

static void write_snapshot(struct client *c, struct sub *s, json_t *id)
{
	struct proc *p = s->proc;
	struct jbuf *b;
	if (id) {
		b = reply_begin(c, id);
	} else {
		/* A resend after the removal log was trimmed: no request to answer. */
		b = &c->out;
		line_start(b);
		jb_obj(b);
	}
	jb_key(b, "type");
	jb_str(b, "snapshot");
	jb_key(b, "process");
	proc_summary_json(b, p, loop_now_ns());
	jb_key(b, "model");
	model_render(&p->model, &p->clk, realtime_ns(), b);
	jb_key(b, "gen");
	jb_u64(b, p->model.gen);
	s->gen = p->model.gen;
	reply_end(c);
}

static int cmd_subscribe(struct cmd_ctx *x)
{
	struct proc *p = cmd_proc(x);
	if (!p)
		return CMD_DONE;
	json_t *iv = json_object_get(x->req, "interval_ms");
	json_int_t ms = INTERVAL_DEFAULT_MS;
	if (iv) {
		if (!json_is_integer(iv) || json_integer_value(iv) < INTERVAL_MIN_MS ||
		    json_integer_value(iv) > INTERVAL_MAX_MS) {
			reply_error(x->c, x->id, "bad_request", "\"interval_ms\" must be %d..%d",
				    INTERVAL_MIN_MS, INTERVAL_MAX_MS);
			return CMD_DONE;
		}
		ms = json_integer_value(iv);
	}
	int n = 0;
	struct sub *s = x->c->subs;
	for (; s && s->proc != p; s = s->next)
		n++;
	if (!s) {
		if (n >= SUBS_PER_CLIENT) {
			reply_error(x->c, x->id, "too_large", "at most %d subscriptions per client",
				    SUBS_PER_CLIENT);
			return CMD_DONE;
		}
		s = calloc(1, sizeof *s);
		if (!s) {
			reply_error(x->c, x->id, "internal", "out of memory");
			return CMD_DONE;
		}
		s->proc = p;
		s->next = x->c->subs;
		x->c->subs = s;
		daemon_watch(x->c->d, &subs_watch);
		if (p->nsubs++ == 0) {
			p->model.track_removals = true;
			p->model.nrm = 0;
			p->model.rm_floor = p->model.gen;
		}
	}
	s->interval_ns = (int64_t)ms * 1000000;
	s->due_ns = loop_now_ns() + s->interval_ns;
	write_snapshot(x->c, s, x->id);
	return CMD_DONE;
}

static void sub_drop(struct client *c, struct sub *s)
{
	for (struct sub **pp = &c->subs; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	if (--s->proc->nsubs == 0) {
		s->proc->model.track_removals = false;
		s->proc->model.nrm = 0;
		s->proc->model.rm_floor = s->proc->model.gen;
	}
	free(s);
}

static int cmd_unsubscribe(struct cmd_ctx *x)
{
	struct proc *p = cmd_proc(x);
	if (!p)
		return CMD_DONE;
	for (struct sub *s = x->c->subs; s; s = s->next)
		if (s->proc == p) {
			sub_drop(x->c, s);
			break;
		}
	reply_begin(x->c, x->id);
	reply_end(x->c);
	return CMD_DONE;
}

static void subs_client_gone(struct daemon *d, struct client *c)
{
	(void)d;
	while (c->subs)
		sub_drop(c, c->subs);
}

static void subs_proc_freed(struct daemon *d, struct proc *p)
{
	for (struct client *c = d->clients; c; c = c->next)
		for (struct sub *s = c->subs, *next; s; s = next) {
			next = s->next;
			if (s->proc == p)
				sub_drop(c, s);
		}
}

static void write_delta(struct client *c, struct sub *s)
{
	struct proc *p = s->proc;
	struct jbuf *b = &c->out;
	line_start(b);
	jb_obj(b);
	jb_key(b, "type");
	jb_str(b, "delta");
	jb_key(b, "gen");
	jb_u64(b, p->model.gen);
	jb_key(b, "process");
	proc_summary_json(b, p, loop_now_ns());
	model_render_delta(&p->model, &p->clk, s->gen, b);
	jb_obj_end(b);
	jb_raw(b, "\n", 1);
	s->gen = p->model.gen;
}

static void write_exited(struct client *c, struct sub *s)
{
	struct jbuf *b = &c->out;
	line_start(b);
	jb_obj(b);
	jb_key(b, "type");
	jb_str(b, "exited");
	jb_key(b, "process");
	proc_summary_json(b, s->proc, loop_now_ns());
	jb_obj_end(b);
	jb_raw(b, "\n", 1);
}

/* Sends what is due; then forgets removals every subscriber has seen. */
void subs_tick(struct daemon *d, int64_t now_ns)
{
	for (struct client *c = d->clients; c; c = c->next) {
		if (!c->subs || !client_room(c))
			continue;
		bool wrote = false;
		for (struct sub *s = c->subs, *next; s; s = next) {
			next = s->next;
			if (now_ns < s->due_ns)
				continue;
			s->due_ns = now_ns + s->interval_ns;
			struct proc *p = s->proc;
			if (p->model.rm_floor > s->gen) {
				write_snapshot(c, s, NULL);
				wrote = true;
			} else if (p->model.gen > s->gen) {
				write_delta(c, s);
				wrote = true;
			}
			if (p->state != PROC_LIVE) {
				write_exited(c, s);
				sub_drop(c, s);
				wrote = true;
			}
		}
		if (wrote)
			client_flush(c);
	}
	for (struct proc *p = d->procs; p; p = p->next) {
		if (!p->nsubs || !p->model.nrm)
			continue;
		uint64_t min = UINT64_MAX;
		for (struct client *c = d->clients; c; c = c->next)
			for (struct sub *s = c->subs; s; s = s->next)
				if (s->proc == p && s->gen < min)
					min = s->gen;
		if (min != UINT64_MAX)
			model_trim_removals(&p->model, min);
	}
}

const struct cmd_entry cmd_subscribe_entry = {"subscribe", cmd_subscribe};
const struct cmd_entry cmd_unsubscribe_entry = {"unsubscribe", cmd_unsubscribe};
