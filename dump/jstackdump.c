/* jstackdump.c - prints a JDK JSON thread dump in HotSpot's jstack text
 * layout, so that analysers written for `jstack`/`jcmd Thread.print` output
 * (TDA, IntelliJ's thread-dump view, fastThread-style services) read it. */
#include "jstackdump.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dumplocks.h"
#include "jdkdump.h"
#include "jdkjson.h"

#define MAX_CHAIN 64 /* containers named in one thread's chain */

static long long int_or(const json_t *obj, const char *key, long long def)
{
	const json_t *v = json_object_get(obj, key);
	return json_is_integer(v) ? (long long)json_integer_value(v) : def;
}

/* Appends n bytes of src to buf (at *at, room len) as HotSpot's layout
 * allows them: no white space or parenthesis in a method's name, no
 * parenthesis in its location (a C++ name such as "f<g(int)> >" would
 * otherwise end the frame early for a parser of jstack output). */
static void put_hotspot(char *buf, size_t len, size_t *at, const char *src, size_t n, bool method)
{
	for (size_t i = 0; i < n && *at + 1 < len; i++) {
		char c = src[i];
		if (c == '(')
			c = '[';
		else if (c == ')')
			c = ']';
		else if (method && (c == ' ' || c == '\t'))
			c = '_';
		buf[(*at)++] = c;
	}
	buf[*at] = '\0';
}

char *jstackdump_frame(const char *frame, char *buf, size_t len)
{
	/* "func (where)" loses its space; a frame without a location says
	 * "(Unknown Source)" as HotSpot does for a class without one. */
	const char *open = strstr(frame, " (");
	size_t n = strlen(frame), at = 0;

	if (!len)
		return buf;
	buf[0] = '\0';
	/* The last " (": a C++ name may hold one of its own. */
	for (const char *o = open; o; o = strstr(o + 1, " ("))
		open = o;
	if (open && n > 0 && frame[n - 1] == ')') {
		put_hotspot(buf, len, &at, frame, (size_t)(open - frame), true);
		if (at + 1 < len)
			buf[at++] = '(';
		put_hotspot(buf, len, &at, open + 2, (size_t)(frame + n - 1 - (open + 2)), false);
	} else {
		put_hotspot(buf, len, &at, frame, n, true);
		if (at + 1 < len)
			buf[at++] = '(';
		put_hotspot(buf, len, &at, "Unknown Source", 14, false);
	}
	if (at + 1 < len)
		buf[at++] = ')';
	buf[at] = '\0';
	return buf;
}

/* The word HotSpot writes after nid= for a thread in state. */
static const char *activity(const char *state)
{
	static const char *const map[][2] = {
	    {"RUNNABLE", "runnable"},
	    {"WAITING", "waiting on condition"},
	    {"TIMED_WAITING", "waiting on condition"},
	    {"BLOCKED", "waiting for monitor entry"},
	    {"NEW", "new"},
	    {"TERMINATED", "terminated"},
	};
	for (size_t i = 0; i < sizeof map / sizeof *map; i++)
		if (!strcmp(state, map[i][0]))
			return map[i][1];
	return "unknown";
}

/* HotSpot's detail in "java.lang.Thread.State: WAITING (parking)": a futex
 * wait is what a parked Java thread does, a sleep is "sleeping". */
static const char *state_detail(const json_t *t)
{
	const char *b = jt_str(t, "blockedIn");
	if (!b)
		return NULL;
	if (!strcmp(b, "futex"))
		return "parking";
	if (strstr(b, "sleep"))
		return "sleeping";
	return NULL;
}

/* "2026-11-29T19:35:06.123Z" as HotSpot's first line, "2026-11-29 19:35:06". */
static void time_line(FILE *out, const char *iso)
{
	if (iso && strlen(iso) >= 19 && iso[10] == 'T')
		fprintf(out, "%.10s %.8s\n", iso, iso + 11);
	else
		fprintf(out, "%s\n", iso ? iso : "");
}

static void header(FILE *out, const json_t *td)
{
	time_line(out, jt_str(td, "time"));
	fprintf(out, "Full thread dump %s (%s, pid %lld, stacks from %s):\n",
		jt_str_or(td, "runtimeVersion", "libscope"), jt_str_or(td, "processName", "?"),
		int_or(td, "processId", 0), jt_str_or(td, "stackSource", "nowhere"));
	if (jt_str_is(td, "processState", "exited"))
		fprintf(out, "Process exited: a post-mortem dump, without stacks.\n");
	if (json_is_false(json_object_get(td, "complete")))
		fprintf(out, "Incomplete: %lld events lost.\n", int_or(td, "eventsLost", 0));
}

/* The containers, parents first, as a block that parsers skip (no line
 * starts with '"' or "at"); each thread names its own chain again. */
static void containers(FILE *out, const json_t *cs)
{
	fprintf(out, "\nThread containers (scopes and pools, each after its parent):\n");
	for (size_t i = 0; i < json_array_size(cs); i++) {
		const json_t *c = json_array_get(cs, i);
		fprintf(out, "  %s", jt_str_or(c, "container", "?"));
		if (jt_str(c, "parent"))
			fprintf(out, " in %s", jt_str(c, "parent"));
		if (jt_str_is(c, "kind", "scope")) {
			fprintf(out, ": scope, %s, %s", jt_str_or(c, "joiner", "?"),
				jt_str_or(c, "state", "?"));
			if (json_is_integer(json_object_get(c, "owner")))
				fprintf(out, ", owner #%lld", int_or(c, "owner", 0));
			if (jt_str(c, "deadline"))
				fprintf(out, ", deadline %s", jt_str(c, "deadline"));
			if (jt_str(c, "cancelReason"))
				fprintf(out, ", cancelled (%s)", jt_str(c, "cancelReason"));
		} else if (jt_str_is(c, "kind", "pool")) {
			const json_t *p = json_object_get(c, "pool");
			fprintf(out, ": pool %s, %lld of max %lld threads",
				jt_str_or(p, "name", "?"), int_or(p, "size", -1),
				int_or(p, "max", -1));
		}
		size_t n = json_array_size(jt_array(c, "threads"));
		fprintf(out, ", %zu thread%s\n", n, n == 1 ? "" : "s");
	}
}

/* " in outer@1 in <root>": parent and the containers above it. */
static void chain(FILE *out, const json_t *cs, const char *parent)
{
	for (int n = 0; parent && n < MAX_CHAIN; n++) {
		fprintf(out, " in %s", parent);
		const char *next = NULL;
		for (size_t i = 0; i < json_array_size(cs); i++) {
			const json_t *c = json_array_get(cs, i);
			if (jt_str_is(c, "container", parent)) {
				next = jt_str(c, "parent");
				break;
			}
		}
		parent = next;
	}
}

/* HotSpot's "Locked ownable synchronizers" section, in the runtime's view:
 * a scope is owned by the one thread that opened it and must close it, as a
 * ReentrantLock by the thread that locked it.  Its id stands for the
 * address HotSpot prints. */
static void owned_scopes(FILE *out, const json_t *cs, const json_t *t, long long tid)
{
	fprintf(out, "\n   Locked ownable synchronizers:\n");
	/* The pthread mutexes it holds that others wait for, as HotSpot lists
	 * a ReentrantLock: where analysers find who blocks whom. */
	size_t n = (size_t)dumplocks_held_lines(out, t, "\t- ", "");
	for (size_t i = 0; i < json_array_size(cs); i++) {
		const json_t *c = json_array_get(cs, i);
		const json_t *owner = json_object_get(c, "owner");
		if (!jt_str_is(c, "kind", "scope") || !json_is_integer(owner) ||
		    json_integer_value(owner) != tid)
			continue;
		uint64_t sid = 0;
		jt_id(json_object_get(c, "scopeId"), &sid);
		fprintf(out, "\t- <0x%llx> (a scope %s, %s, %s)\n", (unsigned long long)sid,
			jt_str_or(c, "container", "?"), jt_str_or(c, "joiner", "?"),
			jt_str_or(c, "state", "?"));
		n++;
	}
	if (!n)
		fprintf(out, "\t- None\n");
}

static void thread_block(FILE *out, const json_t *cs, const json_t *c, const json_t *t,
			 unsigned flags)
{
	long long tid = int_or(t, "tid", 0);
	const char *state = jt_str_or(t, "state", "UNKNOWN");
	const char *detail = state_detail(t);
	char frame[JDKDUMP_MAX_STR + 32];
	/* A quote inside a name would end HotSpot's "name" early; parsers
	 * take the name up to the last quote before prio=, so it is kept. */
	fprintf(out, "\n\"%s\" #%lld prio=0 tid=0x%llx nid=0x%llx %s\n", jt_str_or(t, "name", ""),
		tid, tid, tid, activity(state));
	fprintf(out, "   java.lang.Thread.State: %s%s%s%s\n", state, detail ? " (" : "",
		detail ? detail : "", detail ? ")" : "");
	const json_t *stack = jt_array(t, "stack");
	bool lock_said = false;
	for (size_t i = 0; i < json_array_size(stack); i++) {
		const char *f = json_string_value(json_array_get(stack, i));
		if (!f)
			continue;
		fprintf(out, "\tat %s\n", jstackdump_frame(f, frame, sizeof frame));
		/* HotSpot's place for it: under the frame that waits. */
		if (!lock_said)
			lock_said = dumplocks_waiting_line(out, t, "\t- ");
	}
	if (!lock_said)
		dumplocks_waiting_line(out, t, "\t- ");
	fprintf(out, "\n   Container: %s", jt_str_or(c, "container", "?"));
	chain(out, cs, jt_str(c, "parent"));
	fputc('\n', out);
	const json_t *task = json_object_get(t, "task");
	if (json_is_object(task)) {
		const char *fn = jt_str(task, "function");
		char idt[24];
		fprintf(out, "   Task: %s%s%s%s %s, forked by %s\n",
			jt_id_text(json_object_get(task, "id"), idt, sizeof idt, "-1"),
			fn ? " " : "", fn ? fn : "", fn ? "()" : "", jt_str_or(task, "state", "?"),
			jt_str_or(task, "forkSite", "?"));
	}
	if (jt_str(t, "stackError"))
		fprintf(out, "   Stack missing: %s\n", jt_str(t, "stackError"));
	if (flags & JSTACKDUMP_LOCKS)
		owned_scopes(out, cs, t, tid);
}

static int write_safe(FILE *out, const json_t *dump, unsigned flags)
{
	const json_t *td = json_object_get(dump, "threadDump");
	const json_t *cs = jt_array(td, "threadContainers");
	header(out, td);
	containers(out, cs);
	for (size_t i = 0; i < json_array_size(cs); i++) {
		const json_t *c = json_array_get(cs, i);
		const json_t *threads = jt_array(c, "threads");
		for (size_t k = 0; k < json_array_size(threads); k++)
			thread_block(out, cs, c, json_array_get(threads, k), flags);
	}
	fputc('\n', out);
	return ferror(out) ? -EIO : 0;
}

int jstackdump_write(FILE *out, const json_t *dump, unsigned flags)
{
	return jj_render(out, dump, flags, write_safe);
}

char *jstackdump_string(const json_t *dump, unsigned flags)
{
	return jj_render_string(dump, flags, write_safe);
}
