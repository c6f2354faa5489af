/* test_trace.c - the --otlp tree gathering: which trees are kept, which
 * traceparent values join a trace, the span budget, and that the protobuf
 * written holds what it should (the e2e test decodes it with the official
 * definitions; here the bytes are looked for). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../daemon/model.h"
#include "../../daemon/trace.h"
#include "../../daemon/options.h"
#include "../../daemon/otlp.h"
#include "../../daemon/otlp_json.h"
#include "otelid.h"

#include <jansson.h>

#include <stdlib.h>
#include <string.h>

#define MS 1000000ll
#define TRACE_HEX "0af7651916cd43dd8448eb211c80319c"
static const uint8_t trace_bytes[16] = {0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd,
					0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c};

static struct proto_str S(const char *s) {
	return (struct proto_str){s, (uint16_t)strlen(s)};
}

static void
apply(struct model *m, struct proto_msg e)
{
	assert_int_equal(model_apply(m, &e, e.ts + MS), 0);
}

static struct proto_msg ev(uint16_t type, int64_t ts)
{
	struct proto_msg e;
	memset(&e, 0, sizeof e);
	e.type = type;
	e.ts = ts;
	e.tid = 7;
	return e;
}

/* A root scope id with one task ending in state, and traceparent bound when
 * not NULL. */
static void tree(struct model *m, uint64_t id, uint32_t state, const char *traceparent)
{
	struct proto_msg e = ev(PROTO_EV_SCOPE_OPEN, 10 * MS);
	e.scope = id;
	e.name = S("root");
	apply(m, e);
	if (traceparent) {
		e = ev(PROTO_EV_VALUE_BIND, 11 * MS);
		e.scope = id;
		e.key = S("traceparent");
		e.value = S(traceparent);
		apply(m, e);
	}
	e = ev(PROTO_EV_TASK_FORK, 12 * MS);
	e.task = id * 100;
	e.scope = id;
	apply(m, e);
	e = ev(PROTO_EV_TASK_RAN, 13 * MS);
	e.task = id * 100;
	e.scope = id;
	e.end_ts = 14 * MS;
	e.state = state;
	e.error = state == PROTO_TASK_FAILED ? -5 : 0;
	apply(m, e);
	e = ev(PROTO_EV_SCOPE_CLOSE, 15 * MS);
	e.scope = id;
	apply(m, e);
}

static bool holds(const struct jbuf *b, const void *needle, size_t n)
{
	return b->len >= n && memmem(b->p, b->len, needle, n) != NULL;
}

static uint64_t take(struct model *m, struct jbuf *b)
{
	struct trace_resource r = {42, "prog", "/bin/prog", "0.1.0", 0, 1000 * MS, 77};
	jb_init(b);
	return trace_take(m, &r, b, 1 << 20);
}

static void setup_model(struct model *m, uint64_t max_spans)
{
	struct trace_config c = {.on = true,
				 .sample_permille = 0,
				 .max_spans = max_spans,
				 .max_spans_per_s = 1000000,
				 .seed = 1};
	trace_configure(&c);
	struct model_limits lim = {.max_entities = 10000, .tally = true};
	model_init(m, &lim);
	assert_non_null(m->tally);
}

static void test_kept_and_sampled(void **state)
{
	(void)state;
	struct model m;
	setup_model(&m, 1000);
	uint64_t out0 = trace_counted(TRACE_SAMPLED_OUT);
	tree(&m, 1, PROTO_TASK_SUCCESS, NULL);
	assert_int_equal(trace_counted(TRACE_SAMPLED_OUT) - out0, 2); /* scope + task */
	tree(&m, 2, PROTO_TASK_FAILED, "00-" TRACE_HEX "-b7ad6b7169203331-01");
	struct jbuf b;
	assert_int_equal(take(&m, &b), 2);
	assert_true(holds(&b, trace_bytes, 16));
	assert_true(holds(&b, "the task failed: error -5", 25));
	assert_true(holds(&b, "service.name", 12));
	assert_true(holds(&b, "prog", 4));
	jb_free(&b);
	assert_int_equal(take(&m, &b), 0); /* taken once */
	jb_free(&b);
	model_free(&m);
}

static void test_bad_traceparent(void **state)
{
	(void)state;
	static const char *const bad[] = {
	    "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", /* upper case */
	    "ff-" TRACE_HEX "-b7ad6b7169203331-01",		       /* version ff */
	    "00-" TRACE_HEX "-0000000000000000-01",		       /* zero parent */
	    "00-" TRACE_HEX "-b7ad6b7169203331-01-extra",	       /* 00 is 55 bytes */
	    "00-" TRACE_HEX "-b7ad6b716920333-01",		       /* short */
	    "00_" TRACE_HEX "_b7ad6b7169203331_01",		       /* separators */
	    "",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct model m;
		setup_model(&m, 1000);
		tree(&m, 3, PROTO_TASK_FAILED, bad[i]);
		struct jbuf b;
		assert_int_equal(take(&m, &b), 2);
		if (holds(&b, trace_bytes, 16))
			fail_msg("'%s' joined the trace", bad[i]);
		jb_free(&b);
		model_free(&m);
	}
}

static void test_budget(void **state)
{
	(void)state;
	struct model m;
	setup_model(&m, 1);
	uint64_t mem0 = trace_counted(TRACE_DROP_MEMORY);
	tree(&m, 4, PROTO_TASK_FAILED, NULL); /* the task's span takes the one place */
	assert_int_equal(trace_counted(TRACE_DROP_MEMORY) - mem0, 1);
	struct jbuf b;
	assert_int_equal(take(&m, &b), 1);
	jb_free(&b);
	/* An open tree freed with its process counts as gone. */
	uint64_t gone0 = trace_counted(TRACE_DROP_GONE);
	struct proto_msg e = ev(PROTO_EV_SCOPE_OPEN, 20 * MS);
	e.scope = 5;
	apply(&m, e);
	e = ev(PROTO_EV_TASK_RAN, 21 * MS);
	e.task = 500;
	e.scope = 5;
	e.end_ts = 22 * MS;
	e.state = PROTO_TASK_SUCCESS;
	apply(&m, e);
	model_free(&m);
	assert_int_equal(trace_counted(TRACE_DROP_GONE) - gone0, 1);
}

/* The ids the export writes are the ones libscope writes into a running
 * task's thread context (common/otelid.h, tests/unit/test_otelctx.c): a
 * profiler's sample names the exported span. */
static void test_ids_match_the_thread_context(void **state)
{
	(void)state;
	struct model m;
	struct jbuf b;
	uint8_t id[16];
	setup_model(&m, 1000);
	tree(&m, 6, PROTO_TASK_FAILED, NULL);
	assert_int_equal(take(&m, &b), 2);
	otelid_trace(id, 77, 6); /* 77: take()'s process key */
	assert_true(holds(&b, id, 16));
	otelid_bytes(id, otelid_span(otelid_kind_key(77, OTELID_TASK), 600));
	assert_true(holds(&b, id, 8));
	otelid_bytes(id, otelid_span(otelid_kind_key(77, OTELID_SCOPE), 6));
	assert_true(holds(&b, id, 8));
	jb_free(&b);
	model_free(&m);
}

/* Past --otlp-max-rate, whole trees are dropped and counted as such. */
static void test_rate_budget(void **state)
{
	(void)state;
	struct model m;
	struct jbuf b;
	struct trace_config c = {.on = true,
				 .sample_permille = 1000,
				 .max_spans = 1000,
				 .max_spans_per_s = 5,
				 .seed = 1};
	trace_configure(&c);
	struct model_limits lim = {.max_entities = 10000, .tally = true};
	model_init(&m, &lim);
	uint64_t rate0 = trace_counted(TRACE_DROP_RATE);
	for (uint64_t i = 10; i < 20; i++) /* 10 trees of 2 spans; 5 spans a second */
		tree(&m, i, PROTO_TASK_SUCCESS, NULL);
	assert_int_equal(take(&m, &b), 4); /* two trees fit, the third does not */
	jb_free(&b);
	assert_int_equal(trace_counted(TRACE_DROP_RATE) - rate0, 16);
	assert_int_equal(take(&m, &b), 0);
	jb_free(&b);
	model_free(&m);
}

/* --otlp-protocol http/json: the same request as OTLP/JSON, ids in hex,
 * 64-bit times as strings, enums as numbers; nothing that does not parse. */
static void test_json(void **state)
{
	(void)state;
	struct model m;
	struct jbuf b, j;
	setup_model(&m, 1000);
	tree(&m, 7, PROTO_TASK_FAILED, "00-" TRACE_HEX "-b7ad6b7169203331-01");
	assert_int_equal(take(&m, &b), 2);
	jb_init(&j);
	assert_int_equal(otlp_json_request(b.p, b.len, &j), 0);
	json_error_t err;
	json_t *root = json_loadb(j.p, j.len, 0, &err);
	if (!root)
		fail_msg("not JSON: %s: %.*s", err.text, (int)j.len, j.p);
	json_t *rs = json_array_get(json_object_get(root, "resourceSpans"), 0);
	json_t *attrs = json_object_get(json_object_get(rs, "resource"), "attributes");
	assert_string_equal(json_string_value(json_object_get(json_array_get(attrs, 0), "key")),
			    "service.name");
	json_t *ss = json_array_get(json_object_get(rs, "scopeSpans"), 0);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(ss, "scope"), "name")), "scoped");
	json_t *spans = json_object_get(ss, "spans");
	assert_int_equal(json_array_size(spans), 2);
	json_t *task = json_array_get(spans, 0), *scope = json_array_get(spans, 1);
	assert_string_equal(json_string_value(json_object_get(task, "traceId")), TRACE_HEX);
	assert_string_equal(json_string_value(json_object_get(scope, "parentSpanId")),
			    "b7ad6b7169203331");
	assert_int_equal(strlen(json_string_value(json_object_get(task, "spanId"))), 16);
	assert_string_equal(json_string_value(json_object_get(task, "parentSpanId")),
			    json_string_value(json_object_get(scope, "spanId")));
	assert_int_equal(json_integer_value(json_object_get(task, "kind")), 1);
	assert_string_equal(json_string_value(json_object_get(task, "name")), "task");
	assert_true(json_is_string(json_object_get(task, "startTimeUnixNano")));
	json_t *st = json_object_get(task, "status");
	assert_int_equal(json_integer_value(json_object_get(st, "code")), 2);
	bool error_attr = false;
	json_t *a;
	size_t i;
	json_array_foreach(json_object_get(task, "attributes"), i, a)
	{
		if (strcmp(json_string_value(json_object_get(a, "key")), "scoped.task.error") ==
		    0) {
			json_t *v = json_object_get(json_object_get(a, "value"), "intValue");
			assert_string_equal(json_string_value(v), "-5");
			error_attr = true;
		}
	}
	assert_true(error_attr);
	json_decref(root);
	jb_free(&j);
	/* Bytes that are not the request do not pass. */
	static const uint8_t bad[][6] = {{0x0a, 0x05, 0x0a}, {0x0a, 0x02, 0x12, 0x7f}, {0x08}};
	for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
		jb_init(&j);
		assert_int_equal(otlp_json_request(bad[k], sizeof bad[k], &j), -1);
		jb_free(&j);
	}
	jb_free(&b);
	model_free(&m);
}

/* --otlp-headers: OTEL_EXPORTER_OTLP_HEADERS's format, and nothing that
 * could inject a header line. */
static void test_headers(void **state)
{
	(void)state;
	static const char *const good[] = {
	    "authorization=Bearer%20abc",
	    " x-tenant = a , api-key=k%3Dv ,",
	    "",
	};
	static const char *const bad[] = {
	    "novalue", "=v", "bad key=v", "k=v%0d%0aX-Evil: 1", "k=%zz", "k=%4", "k:x=v",
	};
	struct options opt;
	char err[512];
	memset(&opt, 0, sizeof opt);
	opt.otlp = "http://127.0.0.1:4318/v1/traces";
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		opt.otlp_headers = good[i];
		if (otlp_check(&opt, err, sizeof err) != 0)
			fail_msg("'%s' refused: %s", good[i], err);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		opt.otlp_headers = bad[i];
		if (otlp_check(&opt, err, sizeof err) == 0)
			fail_msg("'%s' accepted", bad[i]);
		if (!strstr(err, "--otlp-headers"))
			fail_msg("'%s': %s", bad[i], err);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kept_and_sampled),
	    cmocka_unit_test(test_bad_traceparent),
	    cmocka_unit_test(test_budget),
	    cmocka_unit_test(test_ids_match_the_thread_context),
	    cmocka_unit_test(test_rate_budget),
	    cmocka_unit_test(test_json),
	    cmocka_unit_test(test_headers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
