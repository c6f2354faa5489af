/* jdkjson.c - defensive readers of the daemon's JSON and the formatters of
 * sites, frames, tasks and pools used by the dump builder. */
#include "jdkjson.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "jdkdump.h"
#include "jw.h"
#include "../common/termtext.h"

#define JJ_MAX_VALUES 64     /* scoped values kept per scope */
#define JJ_MAX_CACHED 100000 /* distinct frame addresses remembered per dump */

const char *const jj_joiners[] = {"all_successful", "any_successful", "await_all",
				  "until",	    "custom",	      NULL};
const char *const jj_scope_states[] = {"open", "joining", "joined", "cancelled", NULL};
const char *const jj_cancel_reasons[] = {"joiner",    "timeout", "explicit", "parent",
					 "violation", "close",	 "shutdown", NULL};
const char *const jj_task_states[] = {"forked",	   "running",	  "success", "failed",
				      "cancelled", "unavailable", NULL};
const char *const jj_roles[] = {"main", "worker", "agent", "other", NULL};
const char *const jj_sources[] = {"bpf", "signal", "proc", NULL};
const char *const jj_proc_states[] = {"live", "exited", NULL};
static const char *const jj_queues[] = {"unbounded", "bounded", "direct", NULL};
static const char *const jj_policies[] = {"abort",	    "caller_runs", "discard",
					  "discard_oldest", "block",	   NULL};

static const char *const jdk_states[] = {"NEW",	    "RUNNABLE",	     "BLOCKED",
					 "WAITING", "TIMED_WAITING", "TERMINATED"};

/* Set when a member or item could not be added since the last
 * jj_failed_take(): the builder then refuses the dump rather than hand out
 * one with parts silently missing.  Per thread, as builds are. */
static _Thread_local bool add_failed;

void jj_set(json_t *obj, const char *key, json_t *value)
{
	if (json_object_set_new(obj, key, value) != 0)
		add_failed = true;
}

void jj_append(json_t *arr, json_t *value)
{
	if (json_array_append_new(arr, value) != 0)
		add_failed = true;
}

void jj_fail(void)
{
	add_failed = true;
}

bool jj_failed_take(void)
{
	bool f = add_failed;
	add_failed = false;
	return f;
}

const char *jt_str(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

bool jt_str_is(const json_t *obj, const char *key, const char *want)
{
	const char *s = jt_str(obj, key);
	return s && strcmp(s, want) == 0;
}

const json_t *jt_array(const json_t *obj, const char *key)
{
	const json_t *a = json_object_get(obj, key);
	return json_is_array(a) ? a : NULL;
}

/* Length of the valid UTF-8 sequence at s (at most avail bytes), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t avail)
{
	unsigned char c = s[0];
	size_t n;
	unsigned char lo = 0x80, hi = 0xbf;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	/* The second byte's range rules out overlong forms and surrogates. */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (n > avail || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

void jj_strcpy(char *dst, size_t len, const char *src, const char *def)
{
	if (!len)
		return;
	if (!src)
		src = def ? def : "";
	const unsigned char *s = (const unsigned char *)src;
	size_t avail = strlen(src), o = 0;
	/* Whole characters only, and '?' for bytes that are not UTF-8: the
	 * dump must stay valid JSON whatever a peer sent. */
	while (avail) {
		size_t n = utf8_seq(s, avail);
		size_t take = n ? n : 1;
		if (o + (n ? n : 1) >= len)
			break;
		if (n)
			memcpy(dst + o, s, n);
		else
			dst[o] = '?';
		o += n ? n : 1;
		s += take;
		avail -= take;
	}
	dst[o] = '\0';
}

/* Whether s is UTF-8 as jansson accepts it: no overlong forms, no
 * surrogates, nothing past U+10FFFF. */
static bool utf8_valid(const unsigned char *s)
{
	while (*s) {
		unsigned c = *s, n; /* continuation bytes after the lead */
		if (c < 0x80)
			n = 0;
		else if (c >= 0xc2 && c < 0xe0)
			n = 1;
		else if (c >= 0xe0 && c < 0xf0)
			n = 2;
		else if (c >= 0xf0 && c < 0xf5)
			n = 3;
		else
			return false;
		uint32_t cp = n ? c & (0x3f >> n) : c;
		for (unsigned i = 1; i <= n; i++) {
			if ((s[i] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i] & 0x3f);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp < 0xe000))
			return false;
		s += n + 1;
	}
	return true;
}

json_t *jj_string_new(const char *s)
{
	char buf[JDKDUMP_MAX_STR + 1];
	jj_strcpy(buf, sizeof buf, s, "");
	json_t *j = json_string(buf);
	if (j)
		return j;
	/* A name that is not UTF-8 shows as ""; valid text that could not be
	 * stored means memory ran out, and "" would hide that. */
	if (utf8_valid((const unsigned char *)buf))
		add_failed = true;
	return json_string("");
}

json_t *jj_str_or_null(const jv *obj, const char *key)
{
	const char *s = jj_str(obj, key);
	return s ? jj_string_new(s) : json_null();
}

json_t *jj_enum_or_null(const jv *obj, const char *key, const char *const *allowed)
{
	const char *s = jj_str(obj, key);
	for (size_t i = 0; s && allowed[i]; i++)
		if (strcmp(s, allowed[i]) == 0)
			return json_string(allowed[i]);
	return json_null();
}

json_t *jj_string_or_null(const char *s)
{
	return s ? jj_string_new(s) : json_null();
}

const char *jj_signal_name(long long sig)
{
	static const struct {
		int sig;
		const char *name;
	} names[] = {{SIGABRT, "SIGABRT"}, {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},
		     {SIGILL, "SIGILL"},   {SIGFPE, "SIGFPE"},	 {SIGKILL, "SIGKILL"},
		     {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"},	 {SIGTRAP, "SIGTRAP"},
		     {SIGSYS, "SIGSYS"},   {SIGQUIT, "SIGQUIT"}, {SIGHUP, "SIGHUP"}};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (names[i].sig == sig)
			return names[i].name;
	return NULL;
}

const char *jj_si_code_name(long long sig, long long code)
{
	static const struct {
		int sig, code; /* sig 0: any signal */
		const char *name;
	} names[] = {
	    {SIGSEGV, SEGV_MAPERR, "SEGV_MAPERR"},
	    {SIGSEGV, SEGV_ACCERR, "SEGV_ACCERR"},
	    {SIGBUS, BUS_ADRALN, "BUS_ADRALN"},
	    {SIGBUS, BUS_ADRERR, "BUS_ADRERR"},
	    {SIGBUS, BUS_OBJERR, "BUS_OBJERR"},
	    {SIGILL, ILL_ILLOPC, "ILL_ILLOPC"},
	    {SIGILL, ILL_ILLOPN, "ILL_ILLOPN"},
	    {SIGILL, ILL_ILLADR, "ILL_ILLADR"},
	    {SIGILL, ILL_ILLTRP, "ILL_ILLTRP"},
	    {SIGILL, ILL_PRVOPC, "ILL_PRVOPC"},
	    {SIGFPE, FPE_INTDIV, "FPE_INTDIV"},
	    {SIGFPE, FPE_INTOVF, "FPE_INTOVF"},
	    {SIGFPE, FPE_FLTDIV, "FPE_FLTDIV"},
	    {SIGFPE, FPE_FLTOVF, "FPE_FLTOVF"},
	    {SIGFPE, FPE_FLTUND, "FPE_FLTUND"},
	    {SIGFPE, FPE_FLTRES, "FPE_FLTRES"},
	    {SIGFPE, FPE_FLTINV, "FPE_FLTINV"},
	    {0, SI_USER, "SI_USER"},
	    {0, SI_TKILL, "SI_TKILL"},
	    {0, SI_QUEUE, "SI_QUEUE"},
	    {0, SI_KERNEL, "SI_KERNEL"},
	};
	/* A signal's own codes first: they reuse small numbers. */
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (names[i].sig == sig && names[i].code == code)
			return names[i].name;
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (names[i].sig == 0 && names[i].code == code)
			return names[i].name;
	return NULL;
}

json_t *jj_int_or_null(const jv *obj, const char *key)
{
	const jv *v = jv_get(obj, key);
	return jv_is_integer(v) && !jv_is_big(v) ? json_integer(jv_integer(v)) : json_null();
}

json_t *jj_id_new(int64_t bits)
{
	if (bits >= 0)
		return json_integer(bits);
	char b[24];
	snprintf(b, sizeof b, "%llu", (unsigned long long)(uint64_t)bits);
	return json_string(b);
}

json_t *jj_id_or_null(const jv *obj, const char *key)
{
	const jv *v = jv_get(obj, key);
	return jv_is_integer(v) ? jj_id_new(jv_integer(v)) : json_null();
}

bool jt_id(const json_t *v, uint64_t *out)
{
	if (json_is_integer(v)) {
		*out = (uint64_t)json_integer_value(v);
		return true;
	}
	const char *s = json_string_value(v);
	if (!s || !*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 20)
		return false;
	char *end;
	errno = 0;
	unsigned long long u = strtoull(s, &end, 10);
	if (errno)
		return false;
	*out = u;
	return true;
}

const char *jt_id_text(const json_t *v, char *buf, size_t len, const char *def)
{
	uint64_t id;
	if (jt_id(v, &id))
		snprintf(buf, len, "%llu", (unsigned long long)id);
	else
		snprintf(buf, len, "%s", def);
	return buf;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash && slash[1] ? slash + 1 : path;
}

/* The text of a site into buf (2 * JDKDUMP_MAX_STR + 64 bytes), or NULL
 * when it names neither file nor function. */
static const char *site_text(const jv *site, char *buf, size_t len)
{
	const char *file = jj_str(site, "file"), *func = jj_str(site, "func");
	const jv *line = jv_get(site, "line");

	if (!file && !func)
		return NULL;
	if (file && jv_is_integer(line))
		snprintf(buf, len, "%.1024s (%.1024s:%lld)", func ? func : "??", base_name(file),
			 (long long)jv_integer(line));
	else if (file)
		snprintf(buf, len, "%.1024s (%.1024s)", func ? func : "??", base_name(file));
	else
		snprintf(buf, len, "%.1024s", func);
	return buf;
}

json_t *jj_site(const jv *site)
{
	char buf[2 * JDKDUMP_MAX_STR + 64];
	const char *s = site_text(site, buf, sizeof buf);
	return s ? jj_string_new(s) : json_null();
}

/* "key": jj_site(site), written without a jansson value in text. */
static void jw_ksite(struct jw *w, const char *key, const jv *site)
{
	char buf[2 * JDKDUMP_MAX_STR + 64];
	const char *s = site_text(site, buf, sizeof buf);
	jw_key(w, key);
	if (s)
		jw_text_str(w, s);
	else
		jw_null(w);
}

json_t *jj_values(const jv *values)
{
	json_t *out = json_object();
	size_t kept = 0;

	if (!jv_is_object(values))
		return out;
	for (size_t i = 0; i < jv_size(values) && kept < JJ_MAX_VALUES; i++) {
		const jv *v = jv_at(values, i);
		char key[JDKDUMP_MAX_STR + 1];
		if (!jv_is_string(v) || strlen(v->key) > JDKDUMP_MAX_STR)
			continue;
		jj_strcpy(key, sizeof key, v->key, "");
		/* A key that repeats keeps its last value, as jansson does. */
		if (!json_object_get(out, key))
			kept++;
		jj_set(out, key, jj_string_new(jv_string(v)));
	}
	return out;
}

const char *jj_thread_state(const jv *stack)
{
	const char *s = jj_str(stack, "state");
	if (jv_is_true(jv_get(stack, "exited")))
		return "TERMINATED";
	for (size_t i = 0; s && i < sizeof jdk_states / sizeof *jdk_states; i++)
		if (strcmp(s, jdk_states[i]) == 0)
			return jdk_states[i];
	return NULL;
}

static json_t *frame_string(const jv *f)
{
	const char *func = jj_str(f, "func"), *file = jj_str(f, "file");
	const char *module = jj_str(f, "module"), *off = jj_str(f, "offset");
	const char *addr = jj_str(f, "addr");
	const jv *line = jv_get(f, "line");
	char buf[2 * JDKDUMP_MAX_STR + 64];

	if (!addr)
		addr = "0x0";
	if (func && file && jv_is_integer(line))
		snprintf(buf, sizeof buf, "%.1024s (%.1024s:%lld)", func, base_name(file),
			 (long long)jv_integer(line));
	else if (func && module && off)
		snprintf(buf, sizeof buf, "%.1024s (%.900s+%.64s)", func, base_name(module), off);
	else if (func)
		snprintf(buf, sizeof buf, "%.1024s (%.64s)", func, addr);
	else if (module && off)
		snprintf(buf, sizeof buf, "%.64s (%.900s+%.64s)", addr, base_name(module), off);
	else
		snprintf(buf, sizeof buf, "%.64s", addr);
	return jj_string_new(buf);
}

/* Frame i of a stack as its JDK string (borrowed from cache, or new in
 * *own), or NULL when the entry is neither an object nor a string. */
static const json_t *frame_at(const jv *f, const char *addr, unsigned chain, json_t *cache,
			      json_t **own)
{
	char key[96];
	*own = NULL;
	if (addr) {
		/* "addr/chain", the address cut at 64 bytes. */
		size_t n = strnlen(addr, 64);
		memcpy(key, addr, n);
		key[n++] = '/';
		char digits[12], *d = digits + sizeof digits;
		unsigned c = chain;
		do
			*--d = (char)('0' + c % 10);
		while (c /= 10);
		memcpy(key + n, d, (size_t)(digits + sizeof digits - d));
		key[n + (size_t)(digits + sizeof digits - d)] = '\0';
		const json_t *hit = cache ? json_object_get(cache, key) : NULL;
		if (hit)
			return hit;
	}
	if (jv_is_object(f)) {
		json_t *str = frame_string(f);
		/* Threads blocked alike share most frames: format each address
		 * once per dump. */
		if (str && cache && addr && json_object_size(cache) < JJ_MAX_CACHED &&
		    json_object_set(cache, key, str) == 0) {
			json_decref(str);
			return json_object_get(cache, key);
		}
		*own = str;
		if (!str)
			add_failed = true;
		return str;
	}
	if (jv_is_string(f))
		return *own = jj_string_new(jv_string(f));
	return NULL;
}

void jj_write_stack(struct jw *w, const char *key, const char *inlined_key, const jv *stack,
		    size_t max, json_t *cache)
{
	const jv *frames = jj_array(stack, "frames");
	size_t n = jv_size(frames), kept = 0, ninl = 0;
	size_t *inl = inlined_key && n ? malloc((n < max ? n : max) * sizeof *inl) : NULL;
	const char *prev = NULL; /* the address of the frame before */
	unsigned chain = 0;	 /* frames before this one at the same address */

	if (inlined_key && n && !inl)
		add_failed = true;
	jw_key(w, key);
	jw_arr(w);
	for (size_t i = 0; i < n && i < max; i++) {
		const jv *f = jv_at(frames, i);
		const char *addr = jj_str(f, "addr");
		chain = addr && prev && strcmp(addr, prev) == 0 ? chain + 1 : 0;
		prev = addr;
		json_t *own;
		const json_t *str = frame_at(f, addr, chain, cache, &own);
		if (!str)
			continue;
		jw_str(w, json_string_value(str));
		json_decref(own);
		if (inl && jv_is_true(jv_get(f, "inlined")))
			inl[ninl++] = kept;
		kept++;
	}
	jw_end(w);
	if (ninl) {
		jw_key(w, inlined_key);
		jw_arr(w);
		for (size_t i = 0; i < ninl; i++)
			jw_int(w, (int64_t)inl[i]);
		jw_end(w);
	}
	free(inl);
}

/* "key": the ISO time of ms milliseconds, or null when ms is no number
 * (as iso_or_null in jdkdump.c does for the tree). */
static void jw_kiso(struct jw *w, const char *key, const jv *ms)
{
	char iso[40];

	jw_key(w, key);
	if (jv_is_number(ms))
		jw_str(w, jdkdump_iso_time(jv_number(ms), iso, sizeof iso));
	else
		jw_null(w);
}

void jj_write_task(struct jw *w, const jv *task, bool crashed, const char *container)
{
	jw_obj(w);
	jw_kid_or_null(w, "id", task, "id");
	jw_kenum_or_null(w, "state", task, "state", jj_task_states);
	jw_kstr_or_null(w, "function", task, "func");
	jw_ksite(w, "forkSite", jv_get(task, "site"));
	jw_kiso(w, "forkedAt", jv_get(task, "forked_ms"));
	jw_kiso(w, "startedAt", jv_get(task, "started_ms"));
	const jv *err = jv_get(task, "error");
	if (jv_is_integer(err))
		jw_kint(w, "error", jv_integer(err));
	else if (jv_is_string(err)) {
		jw_key(w, "error");
		jw_text_str(w, jv_string(err));
	}
	if (crashed) {
		jw_key(w, "crashed");
		jw_bool(w, true);
	}
	if (container)
		jw_kstr(w, "container", container);
	jw_end(w);
}

json_t *jj_pool_stats(const jv *pool)
{
	static const char *const ints[] = {"id",      "core",	"max",	     "size",	"active",
					   "largest", "queued", "completed", "rejected"};
	json_t *p = json_object();

	jj_set(p, "name", jj_str_or_null(pool, "name"));
	for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
		jj_set(p, ints[i], i ? jj_int_or_null(pool, ints[i]) : jj_id_or_null(pool, "id"));
	jj_set(p, "queue", jj_enum_or_null(pool, "queue", jj_queues));
	jj_set(p, "policy", jj_enum_or_null(pool, "policy", jj_policies));
	return p;
}

static json_t *num_or_null(const jv *obj, const char *key)
{
	const jv *v = jv_get(obj, key);
	return jv_is_number(v) ? json_real(jv_number(v)) : json_null();
}

static json_t *bool_or_null(const jv *obj, const char *key)
{
	const jv *v = jv_get(obj, key);
	return jv_is_true(v) ? json_true() : jv_is_false(v) ? json_false() : json_null();
}

json_t *jj_pool_advice(const jv *pool, const jv *advice)
{
	static const char *const verdicts[] = {"collecting", "idle",	  "leave",	"grow",
					       "shrink",     "saturated", "starvation", NULL};
	static const char *const confidences[] = {"none", "low", "medium", "high", NULL};
	/* Dump member <- advise reply member, numbers. */
	static const char *const nums[][2] = {
	    {"waitComputeRatio", "wait_compute_ratio"},
	    {"nFormula", "n_formula"},
	    {"runMs", "run_ms"},
	    {"cpuMs", "cpu_ms"},
	    {"runnableMs", "runnable_ms"},
	    {"waitMs", "wait_ms"},
	    {"queueWaitP50Ms", "queue_wait_p50_ms"},
	    {"queueWaitP99Ms", "queue_wait_p99_ms"},
	    {"workerUtilization", "worker_utilization"},
	    {"cpuUtilization", "cpu_utilization"},
	    {"throughputPerSecond", "throughput_per_s"},
	    {"arrivalPerSecond", "arrival_per_s"},
	    {"joinBlockedShare", "join_blocked_share"},
	    {"spanSeconds", "span_s"},
	};
	json_t *a = json_object();

	jj_set(a, "verdict", jj_enum_or_null(pool, "verdict", verdicts));
	jj_set(a, "recommended", jj_int_or_null(pool, "recommended"));
	jj_set(a, "reason", jj_str_or_null(pool, "reason"));
	jj_set(a, "confidence", jj_enum_or_null(pool, "confidence", confidences));
	jj_set(a, "ncpu", num_or_null(advice, "ncpu"));
	for (size_t i = 0; i < sizeof nums / sizeof *nums; i++)
		jj_set(a, nums[i][0], num_or_null(pool, nums[i][1]));
	jj_set(a, "queueGrowing", bool_or_null(pool, "queue_growing"));
	const jv *res = jv_get(pool, "resource");
	jj_set(a, "resource",
	       jv_is_object(res) ? json_pack("{s:o,s:o}", "name", jj_str_or_null(res, "name"),
					     "limit", jj_int_or_null(res, "limit"))
				 : json_null());
	jj_set(a, "capped", bool_or_null(pool, "capped"));
	return a;
}

/* Whether some string or key of v needs escaping. */
static bool text_dirty(const json_t *v)
{
	if (json_is_string(v))
		return !tt_clean(json_string_value(v));
	for (size_t i = 0; i < json_array_size(v); i++)
		if (text_dirty(json_array_get(v, i)))
			return true;
	for (void *it = json_object_iter((json_t *)v); it;
	     it = json_object_iter_next((json_t *)v, it))
		if (!tt_clean(json_object_iter_key(it)) || text_dirty(json_object_iter_value(it)))
			return true;
	return false;
}

/* A copy of v with every string and key escaped; NULL when out of memory. */
static json_t *text_copy(const json_t *v)
{
	if (json_is_string(v)) {
		char *e = tt_escape_dup(json_string_value(v));
		json_t *out = e ? json_string(e) : NULL;
		free(e);
		return out;
	}
	if (!json_is_array(v) && !json_is_object(v))
		return json_deep_copy(v);
	json_t *out = json_is_array(v) ? json_array() : json_object();
	for (size_t i = 0; out && i < json_array_size(v); i++)
		if (json_array_append_new(out, text_copy(json_array_get(v, i))) < 0) {
			json_decref(out);
			return NULL;
		}
	for (void *it = json_object_iter((json_t *)v); out && it;
	     it = json_object_iter_next((json_t *)v, it)) {
		char *e = tt_escape_dup(json_object_iter_key(it));
		int rc =
		    e ? json_object_set_new(out, e, text_copy(json_object_iter_value(it))) : -1;
		free(e);
		if (rc < 0) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

json_t *jj_text_safe(const json_t *v)
{
	return text_dirty(v) ? text_copy(v) : json_incref((json_t *)v);
}

const char *jt_str_or(const json_t *obj, const char *key, const char *def)
{
	const char *s = jt_str(obj, key);
	return s ? s : def;
}

int jj_render(FILE *out, const json_t *dump, unsigned flags, jj_render_fn *render)
{
	/* Names from the target reach the terminal escaped. */
	json_t *safe = jj_text_safe(dump);
	if (!safe)
		return -ENOMEM;
	int rc = render(out, safe, flags);
	json_decref(safe);
	return rc;
}

char *jj_render_string(const json_t *dump, unsigned flags, jj_render_fn *render)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	int rc = jj_render(f, dump, flags, render);
	if (fclose(f) != 0 || rc < 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
