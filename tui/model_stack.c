/* model_stack.c - thread stacks fetched from the daemon: frames as display
 * text and a hash per stack so identical stacks can be grouped. */
#include "model_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tm_stack_free(void *p)
{
	struct tm_stack *s = p;
	if (!s)
		return;
	free(s->state);
	free(s->blocked_in);
	free(s->error);
	free(s->lock_addr);
	free(s->lock_owner_name);
	for (int i = 0; i < s->nframes; i++)
		free(s->frames[i]);
	free(s->frames);
	free(s);
}

static uint64_t hash_str(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h * 0x100000001b3ull;
}

/* "func (file:line)", or the address and module when symbols are missing;
 * " (inlined)" after a function inlined into the next frame. */
static char *frame_text(json_t *f)
{
	const char *func = tm_jraw(f, "func"), *file = tm_jraw(f, "file"),
		   *addr = tm_jraw(f, "addr");
	const char *mod = tm_jraw(f, "module"), *off = tm_jraw(f, "offset");
	int64_t line = tm_jint(f, "line");
	char b[TM_MAX_STR];
	if (func && file && line > 0)
		snprintf(b, sizeof b, "%s (%s:%lld)", func, file, (long long)line);
	else if (func && file)
		snprintf(b, sizeof b, "%s (%s)", func, file);
	else if (func)
		snprintf(b, sizeof b, "%s", func);
	else if (mod) {
		const char *base = strrchr(mod, '/');
		snprintf(b, sizeof b, "%s (%s+%s)", addr ? addr : "?", base ? base + 1 : mod,
			 off ? off : "?");
	} else
		snprintf(b, sizeof b, "%s", addr ? addr : "?");
	/* Inlined into the frame below it, at the same address (as gdb shows). */
	if (json_is_true(json_object_get(f, "inlined"))) {
		size_t len = strlen(b);
		snprintf(b + len, sizeof b - len, " (inlined)");
	}
	return tm_str_copy(b);
}

struct tm_stack *tm_stack_parse(json_t *o, double now)
{
	struct tm_stack *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->tid = tm_jint(o, "tid");
	s->state = tm_jstr(o, "state");
	s->blocked_in = tm_jstr(o, "blocked_in");
	s->error = tm_jtext(o, "error");
	json_t *w = json_object_get(o, "waiting_to_lock");
	int64_t owner = tm_jint(w, "owner");
	if (owner > 0 && owner <= 0x7fffffff && (s->lock_addr = tm_jstr(w, "addr"))) {
		s->lock_owner = owner;
		s->lock_owner_name = tm_jstr(w, "owner_name");
	}
	s->fetched_ms = now;
	json_t *fr = json_object_get(o, "frames");
	size_t n = json_is_array(fr) ? json_array_size(fr) : 0;
	if (n > TM_MAX_FRAMES)
		n = TM_MAX_FRAMES;
	s->frames = n ? calloc(n, sizeof *s->frames) : NULL;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; s->frames && i < n; i++) {
		json_t *f = json_array_get(fr, i);
		if (!json_is_object(f))
			continue;
		char *t = frame_text(f);
		if (!t)
			break;
		s->frames[s->nframes++] = t;
		/* Group by symbol, not address: the same code parked in the same
		 * place on different threads has different stack addresses. */
		h = hash_str(h, tm_jraw(f, "func") ? tm_jraw(f, "func") : tm_jraw(f, "offset"));
	}
	s->hash = s->nframes ? h : 0;
	return s;
}

void tm_model_set_stacks(struct tm_model *m, json_t *stacks, double local_ms)
{
	size_t i;
	json_t *o;
	double now = tm_model_now(m, local_ms);
	json_array_foreach(stacks, i, o)
	{
		if (!json_is_object(o) || tm_jint(o, "tid") <= 0)
			continue;
		struct tm_stack *s = tm_stack_parse(o, now);
		if (!s)
			return;
		void *old;
		if (m->stacks.n >= m->threads.n + 64 && !tm_stack_get(m, s->tid)) {
			/* Bound the cache by what can be live; drop an arbitrary old one. */
			tm_stack_free(tm_table_take(&m->stacks, *(int64_t *)m->stacks.v[0]));
		}
		if (tm_table_put(&m->stacks, s, &old)) {
			tm_stack_free(s);
			return;
		}
		tm_stack_free(old);
	}
	m->gen++;
}

struct tm_stack *tm_stack_get(const struct tm_model *m, int64_t tid)
{
	return tm_table_get(&m->stacks, tid);
}
