/* textdump.c - prints a JDK JSON thread dump as text: a header, then the
 * containers as an indented tree with each container's threads and stacks. */
#include "textdump.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "dumplocks.h"
#include "jdkjson.h"

#define INDENT 2
#define MAX_DEPTH 64 /* deeper containers print at this indentation */

static void header(FILE *out, const json_t *td)
{
	const json_t *pid = json_object_get(td, "processId");
	const json_t *lost = json_object_get(td, "eventsLost");
	fprintf(out, "Thread dump of process %lld",
		json_is_integer(pid) ? (long long)json_integer_value(pid) : 0LL);
	if (jt_str(td, "processName"))
		fprintf(out, " (%s)", jt_str(td, "processName"));
	fprintf(out, " at %s\n", jt_str_or(td, "time", "?"));
	if (json_is_false(json_object_get(td, "instrumented")))
		fprintf(out, "not instrumented (no libscope: threads only), stacks from %s",
			jt_str_or(td, "stackSource", "nowhere"));
	else
		fprintf(out, "%s %s, stacks from %s", jt_str_or(td, "runtimeName", "libscope"),
			jt_str_or(td, "runtimeVersion", "?"),
			jt_str_or(td, "stackSource", "nowhere"));
	if (jt_str_is(td, "processState", "exited"))
		fprintf(out, ", process exited (post-mortem)");
	if (json_is_false(json_object_get(td, "complete")))
		fprintf(out, ", INCOMPLETE");
	if (json_is_integer(lost) && json_integer_value(lost) > 0)
		fprintf(out, ", %lld events lost", (long long)json_integer_value(lost));
	const json_t *moved = json_object_get(td, "eventsDuringCapture");
	if (json_is_integer(moved) && json_integer_value(moved) > 0)
		fprintf(out, ", tree %lld events newer than the stacks",
			(long long)json_integer_value(moved));
	fputc('\n', out);
}

/* The frames of t's "stack", each marked when it is inlined. */
static void print_stack(FILE *out, const json_t *t, int ind)
{
	const json_t *stack = jt_array(t, "stack");
	const json_t *inl = jt_array(t, "inlinedFrames");
	size_t next_inl = 0; /* inlinedFrames is in increasing order */
	for (size_t i = 0; i < json_array_size(stack); i++) {
		const char *f = json_string_value(json_array_get(stack, i));
		bool inlined = false;
		while (next_inl < json_array_size(inl)) {
			const json_t *at = json_array_get(inl, next_inl);
			json_int_t k = json_is_integer(at) ? json_integer_value(at) : -1;
			if (k > (json_int_t)i)
				break;
			next_inl++;
			inlined = inlined || k == (json_int_t)i;
		}
		if (f)
			fprintf(out, "%*s    at %s%s\n", ind, "", f, inlined ? " (inlined)" : "");
	}
}

/* The "crashed" section: what ended the process, and the stack it ended in. */
static void crashed(FILE *out, const json_t *td)
{
	const json_t *c = json_object_get(td, "crash");
	const json_t *tid = json_object_get(c, "tid"), *sig = json_object_get(c, "signal");
	const json_t *task = json_object_get(c, "task"), *code = json_object_get(c, "siCode");
	if (!json_is_object(c))
		return;
	fprintf(out, "\nCRASHED: thread #%lld",
		json_is_integer(tid) ? (long long)json_integer_value(tid) : -1LL);
	if (jt_str(c, "signalName"))
		fprintf(out, ", %s", jt_str(c, "signalName"));
	else if (json_is_integer(sig))
		fprintf(out, ", signal %lld", (long long)json_integer_value(sig));
	if (jt_str(c, "siCodeName"))
		fprintf(out, " (%s)", jt_str(c, "siCodeName"));
	else if (json_is_integer(code))
		fprintf(out, " (si_code %lld)", (long long)json_integer_value(code));
	if (jt_str(c, "faultAddress"))
		fprintf(out, " at address %s", jt_str(c, "faultAddress"));
	char idt[24];
	if (json_is_integer(task) || json_is_string(task))
		fprintf(out, ", running task %s", jt_id_text(task, idt, sizeof idt, "?"));
	if (jt_str(c, "container"))
		fprintf(out, " of %s", jt_str(c, "container"));
	fputc('\n', out);
	print_stack(out, c, 0);
}

static void print_values(FILE *out, const json_t *values)
{
	const char *k;
	json_t *v;
	const char *sep = "";
	json_object_foreach((json_t *)values, k, v)
	{
		fprintf(out, "%s%s=%s", sep, k, json_is_string(v) ? json_string_value(v) : "?");
		sep = " ";
	}
}

/* The advisor's word on a pool, after its figures: "; advice: grow to 10
 * threads (W/C 4.1, N 10.2)". */
static void pool_advice(FILE *out, const json_t *a)
{
	const char *verdict = jt_str(a, "verdict");
	if (!verdict || !strcmp(verdict, "collecting") || !strcmp(verdict, "idle"))
		return;
	const json_t *rec = json_object_get(a, "recommended");
	const json_t *wc = json_object_get(a, "waitComputeRatio");
	const json_t *n = json_object_get(a, "nFormula");
	fprintf(out, "; advice: %s", verdict);
	if (json_is_integer(rec) && (!strcmp(verdict, "grow") || !strcmp(verdict, "shrink")))
		fprintf(out, " to %lld threads", (long long)json_integer_value(rec));
	if (json_is_number(wc) && json_is_number(n))
		fprintf(out, " (W/C %.2g, N %.3g%s)", json_number_value(wc), json_number_value(n),
			json_is_true(json_object_get(a, "capped")) ? ", capped by a resource" : "");
}

/* Where a parent's cancellation began, the shield over the scope, its
 * cancellation handlers: said only when there is something to say. */
static void scope_cancel_text(FILE *out, const json_t *c)
{
	const json_t *shield = json_object_get(c, "shield");
	const json_t *h = json_object_get(c, "cancelHandlers");
	char id[32];

	if (jt_str_is(c, "cancelReason", "parent") && jt_str(c, "cancelCause"))
		fprintf(out, " by %s at scope #%s", jt_str(c, "cancelCause"),
			jt_id_text(json_object_get(c, "cancelOrigin"), id, sizeof id, "?"));
	if (json_is_object(shield))
		fprintf(out, ", shielded by scope #%s until %s",
			jt_id_text(json_object_get(shield, "scopeId"), id, sizeof id, "?"),
			jt_str_or(shield, "deadline", "?"));
	if (json_is_object(h)) {
		json_int_t armed = json_integer_value(json_object_get(h, "armed"));
		json_int_t ran = json_integer_value(json_object_get(h, "ran"));
		if (armed || ran)
			fprintf(out, ", cancel handlers %lld armed, %lld ran", (long long)armed,
				(long long)ran);
	}
}

static void container_line(FILE *out, const json_t *c, int ind, unsigned flags)
{
	const json_t *owner = json_object_get(c, "owner");
	fprintf(out, "%*s%s", ind, "", jt_str_or(c, "container", "?"));
	if (jt_str_is(c, "kind", "scope")) {
		fprintf(out, "  %s, %s", jt_str_or(c, "joiner", "?"), jt_str_or(c, "state", "?"));
		fprintf(out, ", deadline %s", jt_str_or(c, "deadline", "none"));
		if (json_is_integer(owner))
			fprintf(out, ", owner #%lld", (long long)json_integer_value(owner));
		if (jt_str(c, "cancelReason"))
			fprintf(out, ", cancelled (%s)", jt_str(c, "cancelReason"));
		scope_cancel_text(out, c);
		if (flags & TEXTDUMP_EXTENDED) {
			fprintf(out, ", opened at %s by %s", jt_str_or(c, "openedAt", "?"),
				jt_str_or(c, "openSite", "?"));
			if (json_object_size(json_object_get(c, "values"))) {
				fprintf(out, ", values ");
				print_values(out, json_object_get(c, "values"));
			}
		}
	} else if (jt_str_is(c, "kind", "pool")) {
		const json_t *p = json_object_get(c, "pool");
		const char *keys[] = {"size", "max", "active", "queued"};
		long long v[4];
		for (int i = 0; i < 4; i++) {
			const json_t *x = json_object_get(p, keys[i]);
			v[i] = json_is_integer(x) ? (long long)json_integer_value(x) : -1;
		}
		fprintf(out, "  pool %s: %lld of max %lld threads, %lld active, %lld queued",
			jt_str_or(p, "name", "?"), v[0], v[1], v[2], v[3]);
		pool_advice(out, json_object_get(c, "advice"));
	}
	fputc('\n', out);
}

static void thread_lines(FILE *out, const json_t *t, int ind, unsigned flags)
{
	const json_t *tid = json_object_get(t, "tid");
	const char *note = json_is_true(json_object_get(t, "crashed"))	     ? " (crashed)"
			   : json_is_false(json_object_get(t, "stateKnown")) ? " (state not known)"
			   : json_is_true(json_object_get(t, "exitedDuringCapture"))
			       ? " (exited during the capture)"
			       : "";
	fprintf(out, "%*s#%lld \"%s\" %s%s\n", ind, "",
		json_is_integer(tid) ? (long long)json_integer_value(tid) : -1LL,
		jt_str_or(t, "name", ""), jt_str_or(t, "state", "?"), note);
	const json_t *help = json_object_get(t, "runsWhileJoining");
	if (jt_str(t, "joins")) {
		char hidt[24];
		const char *hfn = jt_str(help, "function");
		fprintf(out, "%*s  joins %s, running its task %s%s%s%s meanwhile\n", ind, "",
			jt_str(t, "joins"),
			jt_id_text(json_object_get(help, "id"), hidt, sizeof hidt, "?"),
			hfn ? " " : "", hfn ? hfn : "", hfn ? "()" : "");
	}
	if (flags & TEXTDUMP_EXTENDED) {
		const json_t *task = json_object_get(t, "task");
		char idt[24];
		const char *fn = jt_str(task, "function");
		if (json_is_object(task))
			fprintf(out, "%*s  task %s%s%s%s %s%s, forked at %s by %s\n", ind, "",
				jt_id_text(json_object_get(task, "id"), idt, sizeof idt, "?"),
				fn ? " " : "", fn ? fn : "", fn ? "()" : "",
				jt_str_or(task, "state", "?"),
				json_is_true(json_object_get(task, "crashed"))
				    ? " when the process crashed"
				    : "",
				jt_str_or(task, "forkedAt", "?"), jt_str_or(task, "forkSite", "?"));
		if (json_object_size(json_object_get(t, "scopedValues"))) {
			fprintf(out, "%*s  scoped values: ", ind, "");
			print_values(out, json_object_get(t, "scopedValues"));
			fputc('\n', out);
		}
	}
	if (flags & TEXTDUMP_LOCKS) {
		if (jt_str(t, "blockedIn"))
			fprintf(out, "%*s  - blocked in %s\n", ind, "", jt_str(t, "blockedIn"));
		char pre[64];
		snprintf(pre, sizeof pre, "%*s  - ", ind < 40 ? ind : 40, "");
		dumplocks_waiting_line(out, t, pre);
		snprintf(pre, sizeof pre, "%*s  - holds ", ind < 40 ? ind : 40, "");
		dumplocks_held_lines(out, t, pre, "");
		if (jt_str(t, "stackError"))
			fprintf(out, "%*s  - stack missing: %s\n", ind, "",
				jt_str(t, "stackError"));
		if (json_is_true(json_object_get(t, "approximate")))
			fprintf(
			    out, "%*s  - stack approximate: %s\n", ind, "",
			    jt_str_or(t, "approximateWhy", "as of the thread's last kernel entry"));
	}
	print_stack(out, t, ind);
	const json_t *last = jt_array(t, "lastStack");
	if (json_array_size(last))
		fprintf(out, "%*s  - last known stack:\n", ind, "");
	for (size_t i = 0; i < json_array_size(last); i++)
		if (json_is_string(json_array_get(last, i)))
			fprintf(out, "%*s    at %s\n", ind, "",
				json_string_value(json_array_get(last, i)));
}

static int write_safe(FILE *out, const json_t *dump, unsigned flags)
{
	const json_t *td = json_object_get(dump, "threadDump");
	const json_t *cs = jt_array(td, "threadContainers");
	size_t n = json_array_size(cs);
	/* Depth from the parent's depth; parents come first in the dump, and
	 * a parent not seen yet counts as <root>. */
	json_t *depth = json_object();
	if (!depth)
		return -ENOMEM;
	header(out, td);
	crashed(out, td);
	for (size_t i = 0; i < n; i++) {
		const json_t *c = json_array_get(cs, i);
		const char *parent = jt_str(c, "parent");
		const json_t *pd = parent ? json_object_get(depth, parent) : NULL;
		json_int_t d = json_is_integer(pd) ? json_integer_value(pd) + 1 : parent ? 1 : 0;
		if (d > MAX_DEPTH)
			d = MAX_DEPTH;
		/* A depth that could not be kept would indent the children
		 * wrongly: no dump rather than a wrong one. */
		if (jt_str(c, "container") &&
		    json_object_set_new(depth, jt_str(c, "container"), json_integer(d)) < 0) {
			json_decref(depth);
			return -ENOMEM;
		}
		fputc('\n', out);
		container_line(out, c, (int)d * INDENT, flags);
		const json_t *threads = jt_array(c, "threads");
		for (size_t k = 0; k < json_array_size(threads); k++)
			thread_lines(out, json_array_get(threads, k), (int)(d + 1) * INDENT, flags);
	}
	json_decref(depth);
	return ferror(out) ? -EIO : 0;
}

int textdump_write(FILE *out, const json_t *dump, unsigned flags)
{
	return jj_render(out, dump, flags, write_safe);
}

char *textdump_string(const json_t *dump, unsigned flags)
{
	return jj_render_string(dump, flags, write_safe);
}
