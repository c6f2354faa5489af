/* dumplocks.c - the pthread mutexes a dump's threads wait for and hold (see
 * dumplocks.h); the daemon finds them (daemon/locks.c). */
#include "dumplocks.h"

#include <string.h>

#include "jdkjson.h"
#include "jw.h"

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

void dumplocks_write(struct jw *w, const jv *st)
{
	const jv *wl = jv_get(st, "waiting_to_lock");
	if (lock_addr(wl) && lock_class(wl) && is_tid(jv_get(wl, "owner"))) {
		jw_key(w, "waitingToLock");
		jw_obj(w);
		jw_kstr(w, "lock", lock_addr(wl));
		jw_kstr(w, "class", lock_class(wl));
		jw_kint(w, "ownerTid", jv_integer(jv_get(wl, "owner")));
		jw_kstr_or_null(w, "ownerName", wl, "owner_name");
		jw_end(w);
	}
	const jv *held = jj_array(st, "locks_held");
	bool any = false;
	for (size_t i = 0; i < jv_size(held) && i < MAX_HELD; i++) {
		const jv *h = jv_at(held, i);
		if (!lock_addr(h) || !lock_class(h))
			continue;
		if (!any) {
			jw_key(w, "locksHeld");
			jw_arr(w);
			any = true;
		}
		jw_obj(w);
		jw_kstr(w, "lock", lock_addr(h));
		jw_kstr(w, "class", lock_class(h));
		jw_key(w, "waiters");
		jw_arr(w);
		const jv *wv = jj_array(h, "waiters");
		for (size_t k = 0; k < jv_size(wv) && k < MAX_WAITERS; k++)
			if (is_tid(jv_at(wv, k)))
				jw_int(w, jv_integer(jv_at(wv, k)));
		jw_end(w);
		jw_end(w);
	}
	if (any)
		jw_end(w);
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
