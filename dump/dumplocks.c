/* dumplocks.c - the pthread mutexes a dump's threads wait for and hold (see
 * dumplocks.h); the daemon finds them (daemon/locks.c). */
#include "dumplocks.h"

#include <string.h>

#include "jdkjson.h"

/* What one thread's lists may hold in the dump. */
#define MAX_HELD 64
#define MAX_WAITERS 4096

static const char *const classes[] = {"pthread_mutex_t", "PI futex", NULL};

/* The address string when it is "0x" and 1..16 lowercase hex digits. */
static const char *lock_addr(const jv *o)
{
	const char *a = jj_str(o, "addr");
	size_t n = a ? strlen(a) : 0;
	if (n < 3 || n > 18 || a[0] != '0' || a[1] != 'x' ||
	    strspn(a + 2, "0123456789abcdef") != n - 2)
		return NULL;
	return a;
}

static bool is_tid(const jv *v)
{
	return jv_is_integer(v) && jv_integer(v) > 0 && jv_integer(v) <= 0x7fffffff;
}

static const char *lock_class(const jv *o)
{
	const char *c = jj_str(o, "class");
	for (size_t i = 0; c && classes[i]; i++)
		if (!strcmp(c, classes[i]))
			return classes[i];
	return NULL;
}

void dumplocks_add(json_t *th, const jv *st)
{
	const jv *w = jv_get(st, "waiting_to_lock");
	if (lock_addr(w) && lock_class(w) && is_tid(jv_get(w, "owner"))) {
		json_t *o = json_object();
		jj_set(o, "lock", json_string(lock_addr(w)));
		jj_set(o, "class", json_string(lock_class(w)));
		jj_set(o, "ownerTid", json_integer(jv_integer(jv_get(w, "owner"))));
		jj_set(o, "ownerName", jj_str_or_null(w, "owner_name"));
		jj_set(th, "waitingToLock", o);
	}
	const jv *held = jj_array(st, "locks_held");
	json_t *arr = NULL;
	for (size_t i = 0; i < jv_size(held) && i < MAX_HELD; i++) {
		const jv *h = jv_at(held, i);
		if (!lock_addr(h) || !lock_class(h))
			continue;
		json_t *ws = json_array();
		const jv *wv = jj_array(h, "waiters");
		for (size_t k = 0; k < jv_size(wv) && k < MAX_WAITERS; k++)
			if (is_tid(jv_at(wv, k)))
				jj_append(ws, json_integer(jv_integer(jv_at(wv, k))));
		json_t *o = json_object();
		jj_set(o, "lock", json_string(lock_addr(h)));
		jj_set(o, "class", json_string(lock_class(h)));
		jj_set(o, "waiters", ws);
		if (!arr)
			arr = json_array();
		jj_append(arr, o);
	}
	if (arr)
		jj_set(th, "locksHeld", arr);
}

int dumplocks_waiting_line(FILE *out, const json_t *t, const char *prefix)
{
	const json_t *w = json_object_get(t, "waitingToLock");
	const json_t *owner = json_object_get(w, "ownerTid");
	if (!jt_str(w, "lock") || !json_is_integer(owner))
		return 0;
	fprintf(out, "%swaiting to lock <%s> (a %s) owned by tid %lld", prefix, jt_str(w, "lock"),
		jt_str(w, "class") ? jt_str(w, "class") : "lock",
		(long long)json_integer_value(owner));
	if (jt_str(w, "ownerName")) {
		/* The name as HotSpot quotes one; '<' and '>' would end the
		 * "<0x…>" of a parser's greedy pattern, so they become '?'. */
		fputs(" \"", out);
		for (const char *c = jt_str(w, "ownerName"); *c; c++)
			fputc(*c == '<' || *c == '>' ? '?' : *c, out);
		fputc('"', out);
	}
	fputc('\n', out);
	return 1;
}

int dumplocks_held_lines(FILE *out, const json_t *t, const char *prefix, const char *suffix)
{
	const json_t *held = jt_array(t, "locksHeld");
	int n = 0;
	for (size_t i = 0; i < json_array_size(held); i++) {
		const json_t *h = json_array_get(held, i);
		if (!jt_str(h, "lock"))
			continue;
		fprintf(out, "%s<%s> (a %s)%s\n", prefix, jt_str(h, "lock"),
			jt_str(h, "class") ? jt_str(h, "class") : "lock", suffix);
		n++;
	}
	return n;
}
