/* test_wire.c - the wire's one declaration (proto/wire.h) and what is made
 * from it: every message has a decoder, every runtime event an encoder, and
 * every message the model applies a handler; every wire value has the same
 * number and name in the runtime, the protocol, the daemon's JSON and
 * scopetop; and a cancellation's reason survives the whole way from the
 * runtime through the agent's encoder, the decoder and the model to the
 * JSON under its own name. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <jansson.h>

#include "../../daemon/model.h"
#include "../../tui/model.h"
#include "agent.h"
#include "scope.h"

#define SEC 1000000000LL
#define MS 1000000LL

/* Every message as wire.h declares it. */
enum cls { SESSION, MARK, EVENT, DERIVED, STACK };
static const struct {
	uint16_t type;
	enum cls cls;
	const char *name;
} msgs[] = {
#define ROW(NAME, name, number, class, array) {PROTO_##NAME, class, #NAME},
    PROTO_MESSAGES(ROW)
#undef ROW
};
#define NMSGS (sizeof msgs / sizeof msgs[0])

static struct proto_str S(const char *s) {
	return (struct proto_str){s, (uint16_t)strlen(s)};
}

static void
model_start(struct model *m)
{
	struct model_limits lim = {.max_entities = 10000, .retain_ns = 5 * SEC};
	model_init(m, &lim);
}

/* A message of type with every field a valid value (site 1, how 1). */
static struct proto_msg sample(uint16_t type)
{
	struct proto_msg m;
	memset(&m, 0, sizeof m);
	m.type = type;
	m.version = PROTO_VERSION;
	m.ts = 1000;
	m.tid = 7;
	m.scope = 3;
	m.task = 4;
	m.pool_id = 5;
	m.site = 1;
	m.how = PROTO_EXIT_EXIT;
	m.name = S("n");
	m.file = S("f.c");
	m.func = S("fn");
	m.key = S("k");
	m.value = S("v");
	return m;
}

/* Each declared message encodes and decodes to itself (proto.c's table);
 * each EVENT has the agent's encoder, whose frame the decoder takes; each
 * MARK, EVENT and DERIVED message reaches a model handler (the model counts
 * the messages it has a handler for), and the others do not. */
static void test_every_message_has_its_parts(void **state)
{
	(void)state;
	uint8_t buf[4096];
	size_t used;
	struct proto_msg d;

	assert_true(NMSGS >= 28);
	for (size_t i = 0; i < NMSGS; i++) {
		uint16_t type = msgs[i].type;
		struct proto_msg m = sample(type);
		int n = proto_encode(buf, sizeof buf, &m, NULL, NULL);
		if (n < 0)
			fail_msg("%s: proto_encode: %s", msgs[i].name, proto_strerror(n));
		assert_int_equal(proto_decode(buf, (size_t)n, &d, &used), PROTO_OK);
		assert_int_equal(d.type, type);
		assert_string_equal(proto_type_name(type),
				    msgs[i].name +
					(msgs[i].cls == EVENT || msgs[i].cls == DERIVED ? 3 : 0));

		if (msgs[i].cls == EVENT) {
			struct sc_ev ev = {
			    .kind = type, .tid = 9, .ts = 77, .a = 3, .u = 1, .s1 = "x", .s2 = "y"};
			struct sc_enc e;
			uint32_t size = sc_enc_measure(&ev, &e);
			if (!size)
				fail_msg("%s: the agent has no encoder", msgs[i].name);
			assert_true(size <= sizeof buf);
			sc_enc_write(&ev, &e, 0, buf);
			int rc = proto_decode(buf, size, &d, &used);
			if (rc != PROTO_OK)
				fail_msg("%s: the agent's frame does not decode: %s", msgs[i].name,
					 proto_strerror(rc));
			assert_int_equal(used, size);
			assert_int_equal(d.type, type);
			assert_int_equal(d.ts, 77);
			assert_int_equal(d.tid, 9);
		}

		struct model mod;
		model_start(&mod);
		if (type != PROTO_SITE) {
			struct proto_msg def = sample(PROTO_SITE);
			assert_int_equal(model_apply(&mod, &def, 0), 0);
		}
		uint64_t before = mod.events;
		(void)model_apply(&mod, &m, 0);
		int handled = mod.events == before + 1;
		int want = msgs[i].cls == MARK || msgs[i].cls == EVENT || msgs[i].cls == DERIVED;
		if (handled != want)
			fail_msg("%s: the model %s a handler", msgs[i].name,
				 want ? "has no" : "unexpectedly has");
		model_free(&mod);
	}
}

/* The wire values and their names, as schemas/protocol.md states them:
 * written out here, not taken from wire.h, so that a value or a name changed
 * or swapped there fails. */
struct named {
	unsigned value;
	const char *name;
};
static const struct named task_states[] = {{0, "forked"}, {1, "running"},   {2, "success"},
					   {3, "failed"}, {4, "cancelled"}, {5, "unavailable"}};
static const struct named cancel_reasons[] = {{1, "joiner"},  {2, "timeout"},	{3, "explicit"},
					      {4, "parent"},  {5, "violation"}, {6, "close"},
					      {7, "shutdown"}};
static const struct named violations[] = {{1, "not_owner"},	  {2, "double_join"},
					  {3, "fork_after_join"}, {4, "inner_open"},
					  {5, "thread_exit"},	  {6, "no_join"}};
static const struct named warnings[] = {{1, "pool_over_max"}};
static const struct named roles[] = {{0, "other"}, {1, "main"}, {2, "worker"}, {3, "agent"}};
static const struct named joiners[] = {
    {0, "all_successful"}, {1, "any_successful"}, {2, "await_all"}, {3, "until"}, {4, "custom"}};
static const struct named queues[] = {{0, "unbounded"}, {1, "bounded"}, {2, "direct"}};
static const struct named policies[] = {
    {0, "abort"}, {1, "caller_runs"}, {2, "discard"}, {3, "discard_oldest"}, {4, "block"}};
#define N(a) (sizeof a / sizeof a[0])

static char *render(const struct model *m)
{
	struct jbuf b;
	jb_init(&b);
	struct clockref clk = {0, 0};
	model_render(m, &clk, 0, &b);
	jb_raw(&b, "", 1);
	assert_false(b.oom);
	return b.p;
}

static json_t *render_json(const struct model *m)
{
	char *text = render(m);
	json_error_t err;
	json_t *j = json_loads(text, 0, &err);
	if (!j)
		fail_msg("model JSON does not parse: %s in %s", err.text, text);
	free(text);
	return j;
}

/* The string member key of the object with "id" (or "tid") id in array
 * arr_key. */
static const char *member(json_t *root, const char *arr_key, uint64_t id, const char *key)
{
	json_t *arr = json_object_get(root, arr_key), *o;
	size_t i;
	json_array_foreach(arr, i, o)
	{
		json_t *jid = json_object_get(o, "id");
		if (!jid)
			jid = json_object_get(o, "tid"); /* threads */
		if (jid && (uint64_t)json_integer_value(jid) == id)
			return json_string_value(json_object_get(o, key));
	}
	fail_msg("no %s with id %llu", arr_key, (unsigned long long)id);
	return NULL;
}

/* Each wire value: the protocol's number, the runtime's enum, the daemon's
 * JSON name, and scopetop's enum and name for the same value. */
static void test_wire_values_everywhere(void **state)
{
	(void)state;
	/* The runtime's names are the wire's numbers. */
	assert_int_equal(SC_CANCEL_TIMEOUT, 2);
	assert_int_equal(SC_CANCEL_PARENT, 4);
	assert_int_equal(SC_TASK_FAILED, 3);
	assert_int_equal(SC_ROLE_WORKER, 2);
	assert_int_equal(SC_VIOL_NO_JOIN, 6);
	assert_int_equal(SC_WARN_POOL_OVER_MAX, 1);

	for (size_t i = 0; i < N(task_states); i++) {
		unsigned v = task_states[i].value;
		assert_string_equal(model_task_state_name(v), task_states[i].name);
		assert_string_equal(tm_task_state_name((int)v), task_states[i].name);
	}
	assert_null(model_task_state_name((unsigned)N(task_states)));
	assert_int_equal(TK_FORKED, 0);
	assert_int_equal(TK_RUNNING, 1);
	assert_int_equal(TK_SUCCESS, 2);
	assert_int_equal(TK_FAILED, 3);
	assert_int_equal(TK_CANCELLED, 4);
	assert_int_equal(TK_UNAVAILABLE, 5);
	assert_int_equal(RL_OTHER, 0);
	assert_int_equal(RL_MAIN, 1);
	assert_int_equal(RL_WORKER, 2);
	assert_int_equal(RL_AGENT, 3);
	for (size_t i = 0; i < N(joiners); i++)
		assert_string_equal(tm_joiner_name((int)joiners[i].value + 1), joiners[i].name);

	/* The daemon's JSON, one entity per value. */
	struct model m;
	model_start(&m);
	for (size_t i = 0; i < N(cancel_reasons); i++) {
		struct proto_msg o = sample(PROTO_EV_SCOPE_OPEN), c = sample(PROTO_EV_SCOPE_CANCEL);
		o.scope = c.scope = 100 + i;
		o.site = 0;
		o.joiner = joiners[i % N(joiners)].value;
		c.reason = cancel_reasons[i].value;
		assert_int_equal(model_apply(&m, &o, 0), 0);
		assert_int_equal(model_apply(&m, &c, 0), 0);
	}
	for (size_t i = 0; i < N(roles); i++) {
		struct proto_msg t = sample(PROTO_EV_THREAD_START);
		t.tid = 200 + (uint32_t)i;
		t.role = roles[i].value;
		assert_int_equal(model_apply(&m, &t, 0), 0);
	}
	for (size_t i = 0; i < N(policies); i++) {
		struct proto_msg p = sample(PROTO_EV_POOL_CREATE);
		p.pool_id = 300 + i;
		p.pool.policy = policies[i].value;
		p.pool.queue_kind = queues[i % N(queues)].value;
		assert_int_equal(model_apply(&m, &p, 0), 0);
	}
	for (size_t i = 0; i < N(violations); i++) {
		struct proto_msg v = sample(PROTO_EV_VIOLATION);
		v.kind = violations[i].value;
		assert_int_equal(model_apply(&m, &v, 0), 0);
	}
	for (size_t i = 0; i < N(warnings); i++) {
		struct proto_msg w = sample(PROTO_EV_WARNING);
		w.kind = warnings[i].value;
		assert_int_equal(model_apply(&m, &w, 0), 0);
	}
	for (size_t i = 0; i < N(task_states); i++) {
		struct proto_msg t = sample(PROTO_EV_TASK_FORK);
		t.task = 400 + i;
		t.scope = 100;
		t.site = 0;
		t.state = task_states[i].value;
		assert_int_equal(model_apply(&m, &t, 0), 0);
	}

	json_t *j = render_json(&m);
	for (size_t i = 0; i < N(cancel_reasons); i++) {
		assert_string_equal(member(j, "scopes", 100 + i, "cancel_reason"),
				    cancel_reasons[i].name);
		assert_string_equal(member(j, "scopes", 100 + i, "joiner"),
				    joiners[i % N(joiners)].name);
	}
	for (size_t i = 0; i < N(roles); i++)
		assert_string_equal(member(j, "threads", 200 + i, "role"), roles[i].name);
	for (size_t i = 0; i < N(policies); i++) {
		json_t *cfg = NULL, *arr = json_object_get(j, "pools"), *o;
		size_t k;
		json_array_foreach(arr, k, o)
		{
			if ((uint64_t)json_integer_value(json_object_get(o, "id")) == 300 + i)
				cfg = o;
		}
		assert_non_null(cfg);
		char *text = json_dumps(cfg, 0);
		char want[64];
		snprintf(want, sizeof want, "\"policy\": \"%s\"", policies[i].name);
		if (!strstr(text, want))
			fail_msg("pool %zu: no %s in %s", i, want, text);
		snprintf(want, sizeof want, "\"queue\": \"%s\"", queues[i % N(queues)].name);
		if (!strstr(text, want))
			fail_msg("pool %zu: no %s in %s", i, want, text);
		free(text);
	}
	json_t *viol = json_object_get(j, "violations");
	assert_int_equal(json_array_size(viol), N(violations));
	for (size_t i = 0; i < N(violations); i++)
		assert_string_equal(
		    json_string_value(json_object_get(json_array_get(viol, i), "kind")),
		    violations[i].name);
	json_t *warn = json_object_get(j, "warnings");
	assert_int_equal(json_array_size(warn), N(warnings));
	for (size_t i = 0; i < N(warnings); i++)
		assert_string_equal(
		    json_string_value(json_object_get(json_array_get(warn, i), "kind")),
		    warnings[i].name);
	for (size_t i = 0; i < N(task_states); i++)
		assert_string_equal(member(j, "tasks", 400 + i, "state"), task_states[i].name);
	json_decref(j);
	model_free(&m);
}

/* ---- the runtime's events, through the agent's encoder ---- */

/* Frames the observer encoded, in order. */
static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t rec[1 << 20];
static size_t rec_len;

static void recorder(const struct sc_ev *ev)
{
	struct sc_enc e;
	uint32_t n = sc_enc_measure(ev, &e);
	if (!n)
		return;
	pthread_mutex_lock(&rec_lock);
	if (rec_len + n <= sizeof rec) {
		sc_enc_write(ev, &e, 0, rec + rec_len);
		rec_len += n;
	}
	pthread_mutex_unlock(&rec_lock);
}

/* Decodes every recorded frame into a fresh model. */
static void replay(struct model *m)
{
	model_start(m);
	pthread_mutex_lock(&rec_lock);
	for (size_t off = 0; off < rec_len;) {
		struct proto_msg d;
		size_t used;
		int rc = proto_decode(rec + off, rec_len - off, &d, &used);
		if (rc != PROTO_OK)
			fail_msg("recorded frame at %zu: %s", off, proto_strerror(rc));
		(void)model_apply(m, &d, 0);
		off += used;
	}
	pthread_mutex_unlock(&rec_lock);
}

static int sleep_long(void *arg, void **result)
{
	(void)arg;
	(void)result;
	return scope_sleep(30 * SEC);
}

static int succeed(void *arg, void **result)
{
	(void)arg;
	(void)result;
	return 0;
}

static int fail_io(void *arg, void **result)
{
	(void)arg;
	(void)result;
	return -EIO;
}

/* A scope cancelled by its deadline says "timeout", its inner scope
 * "parent", a scope cancelled by scope_cancel "explicit"; tasks that
 * succeeded, failed and were forked into a cancelled scope say so, and
 * scope_task_state agrees with each; a warning arrives with its kind and
 * numbers. */
static void test_runtime_values_reach_the_json(void **state)
{
	(void)state;
	scope_t *outer, *inner, *expl;
	scope_task_t *ok, *bad, *late, *sleeper;
	struct scope_config cfg = SCOPE_CONFIG_INIT;

	rec_len = 0;
	sc_observer_set(recorder);

	cfg.timeout_ns = 500 * MS; /* far past the setup, even under a sanitizer */
	cfg.joiner = SCOPE_JOIN_AWAIT_ALL;
	assert_int_equal(scope_open(&outer, &cfg), 0);
	assert_int_equal(scope_fork(outer, succeed, NULL, &ok), 0);
	assert_int_equal(scope_fork(outer, fail_io, NULL, &bad), 0);
	struct scope_config icfg = SCOPE_CONFIG_INIT;
	assert_int_equal(scope_open(&inner, &icfg), 0);
	assert_int_equal(scope_fork(inner, sleep_long, NULL, &sleeper), 0);
	(void)scope_join(inner); /* ends when the outer deadline cancels it */
	(void)scope_join(outer);
	assert_int_equal(scope_task_state(ok), SCOPE_TASK_SUCCESS);
	assert_int_equal(scope_task_state(bad), SCOPE_TASK_FAILED);
	assert_int_equal(scope_task_state(sleeper), SCOPE_TASK_UNAVAILABLE);
	uint64_t outer_id = scope_id(outer), inner_id = scope_id(inner);
	uint64_t ok_id = scope_task_id(ok), bad_id = scope_task_id(bad);
	uint64_t sleeper_id = scope_task_id(sleeper);
	(void)scope_close(inner);
	(void)scope_close(outer);

	struct scope_config ecfg = SCOPE_CONFIG_INIT;
	assert_int_equal(scope_open(&expl, &ecfg), 0);
	assert_int_equal(scope_cancel(expl), 0);
	assert_int_equal(scope_fork(expl, succeed, NULL, &late), 0);
	(void)scope_join(expl);
	assert_int_equal(scope_task_state(late), SCOPE_TASK_UNAVAILABLE);
	uint64_t expl_id = scope_id(expl), late_id = scope_task_id(late);
	(void)scope_close(expl);
	sc_emit_warning(SC_WARN_POOL_OVER_MAX, 77, 9, 8);
	sc_observer_set(NULL);

	struct model m;
	replay(&m);
	json_t *j = render_json(&m);
	assert_string_equal(member(j, "scopes", outer_id, "cancel_reason"), "timeout");
	assert_string_equal(member(j, "scopes", inner_id, "cancel_reason"), "parent");
	assert_string_equal(member(j, "scopes", expl_id, "cancel_reason"), "explicit");
	assert_string_equal(member(j, "tasks", ok_id, "state"), "success");
	assert_string_equal(member(j, "tasks", bad_id, "state"), "failed");
	assert_string_equal(member(j, "tasks", sleeper_id, "state"), "cancelled");
	assert_string_equal(member(j, "tasks", late_id, "state"), "unavailable");
	json_t *w = json_array_get(json_object_get(j, "warnings"), 0);
	assert_non_null(w);
	assert_string_equal(json_string_value(json_object_get(w, "kind")), "pool_over_max");
	assert_int_equal(json_integer_value(json_object_get(w, "subject")), 77);
	assert_int_equal(json_integer_value(json_object_get(w, "amount")), 9);
	assert_int_equal(json_integer_value(json_object_get(w, "limit")), 8);
	assert_int_equal(json_integer_value(json_object_get(w, "tid")), sc_gettid());
	json_decref(j);
	model_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_message_has_its_parts),
	    cmocka_unit_test(test_wire_values_everywhere),
	    cmocka_unit_test(test_runtime_values_reach_the_json),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
