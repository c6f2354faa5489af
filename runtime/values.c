/* values.c - scoped values: string bindings an owner makes in its scope,
 * read by everything that runs below it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define SC_VALUE_KEY_MAX 256 /* bytes of a key */
#define SC_VALUE_MAX 1024    /* bytes of a value (the wire's string cap) */

static void emit_bind(const scope_t *s, const struct sc_value *v, int snapshot,
		      void (*emit)(void *, const struct sc_ev *), void *ctx)
{
	struct sc_ev ev;

	sc_ev_init(&ev, SC_EV_VALUE_BIND);
	ev.snapshot = (uint16_t)snapshot;
	ev.tid = s->owner_tid;
	ev.a = s->id;
	ev.s1 = v->key;
	ev.s2 = v->value;
	if (emit)
		emit(ctx, &ev);
	else
		sc_emit(&ev);
}

int scope_value_bind(scope_t *s, const char *key, const char *value)
{
	struct sc_value *v;
	size_t kn, vn;

	if (!s || !key || !value || !*key)
		return -EINVAL;
	if (!sc_owns(s)) {
		sc_emit_violation(s->id, SC_VIOL_NOT_OWNER, -EPERM);
		return -EPERM;
	}
	if (s->joined)
		return SCOPE_EJOINED;
	/* Frozen at the first fork, as Java fixes them at fork: a running
	 * subtask never sees a binding come or change under it. */
	if (s->nforks)
		return -EBUSY;
	kn = strnlen(key, SC_VALUE_KEY_MAX + 1);
	vn = strnlen(value, SC_VALUE_MAX + 1);
	if (kn > SC_VALUE_KEY_MAX || vn > SC_VALUE_MAX)
		return -EINVAL;
	v = malloc(sizeof(*v) + kn + vn + 2);
	if (!v)
		return -ENOMEM;
	v->key = (char *)(v + 1);
	v->value = v->key + kn + 1;
	memcpy(v->key, key, kn + 1);
	memcpy(v->value, value, vn + 1);
	/* Bindings are immutable and a rebinding shadows the old one, so
	 * readers on other threads never see a value change under them. */
	pthread_mutex_lock(&s->lock);
	v->next = atomic_load_explicit(&s->values, memory_order_relaxed);
	atomic_store_explicit(&s->values, v, memory_order_release);
	pthread_mutex_unlock(&s->lock);
	if (strcmp(key, "traceparent") == 0)
		sc_trace_src_bound(s);
	if (sc_observed())
		emit_bind(s, v, 0, NULL, NULL);
	return 0;
}

static const struct sc_value *lookup(const scope_t *s, const char *key)
{
	for (const struct sc_value *v = atomic_load_explicit(&s->values, memory_order_acquire); v;
	     v = v->next)
		if (strcmp(v->key, key) == 0)
			return v;
	return NULL;
}

const char *scope_value_get(const char *key)
{
	if (!key)
		return NULL;
	/* No depth limit: the chain ends at a root, as structure guarantees. */
	for (const scope_t *s = sc_context(); s; s = s->parent) {
		const struct sc_value *v = lookup(s, key);
		if (v)
			return v->value;
	}
	return NULL;
}

void sc_values_snapshot(const scope_t *s, void (*emit)(void *, const struct sc_ev *), void *ctx)
{
	for (const struct sc_value *v = atomic_load_explicit(&s->values, memory_order_acquire); v;
	     v = v->next)
		if (lookup(s, v->key) == v) /* shadowed bindings are history */
			emit_bind(s, v, 1, emit, ctx);
}
