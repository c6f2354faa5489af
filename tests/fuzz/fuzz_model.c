/* fuzz_model.c - libFuzzer target for the daemon's live model: the input is
 * a stream of wire frames (the proto corpus seeds it); each frame the decoder
 * accepts is applied to a model with small caps, with time moving on so that
 * ended entities expire, and after every few frames the full render and the
 * delta since the last render must be valid JSON objects; so must the pool
 * advisor's, which samples a made-up /proc as time moves. */
#include "../../daemon/advisor.h"
#include "../../daemon/jbuf.h"
#include "../../daemon/model.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#define SEC 1000000000ll

/* The render in b must parse as one JSON object. */
static void check_json(struct jbuf *b, const char *what)
{
	json_error_t err;
	if (b->oom)
		return; /* out of memory: the caller drops the reply */
	json_t *j = json_loadb(b->p, b->len, JSON_DECODE_INT_AS_REAL, &err);
	if (!json_is_object(j)) {
		fprintf(stderr, "the %s render is not a JSON object: %s\n%.*s\n", what, err.text,
			(int)(b->len > 4000 ? 4000 : b->len), b->p);
		abort();
	}
	json_decref(j);
}

/* A /proc where every thread ran half the time and waited a tenth. */
static int fake_schedstat(void *ctx, pid_t pid, uint32_t tid, int64_t *cpu, int64_t *rq)
{
	(void)pid;
	*cpu = *(const int64_t *)ctx / 2 + tid;
	*rq = *(const int64_t *)ctx / 10;
	return 0;
}

static int64_t fake_proc_cpu(void *ctx, pid_t pid)
{
	(void)pid;
	return *(const int64_t *)ctx;
}

static double fake_ncpu(void *ctx, pid_t pid, char *why, size_t len)
{
	(void)ctx;
	(void)pid;
	snprintf(why, len, "fuzz");
	return 2;
}

static void render(const struct model *m, uint64_t since, int64_t now)
{
	struct clockref clk = {0, 1764441600 * SEC};
	struct jbuf b;

	jb_init(&b);
	model_render(m, &clk, clk.real + now, &b);
	check_json(&b, "full");
	jb_reset(&b);
	jb_obj(&b);
	model_render_delta(m, &clk, since, &b);
	jb_obj_end(&b);
	check_json(&b, "delta");
	jb_reset(&b);
	advisor_render(m, NULL, &b);
	check_json(&b, "advice");
	jb_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct model_limits lim = {.max_entities = 64,
				   .max_string_bytes = 4096,
				   .max_values = 4,
				   .max_sites = 16,
				   .retain_ns = 2 * SEC,
				   .max_retained = 8};
	struct model m;
	struct proto_msg msg;
	size_t used;
	int64_t now = 0;
	uint64_t since = 0;
	unsigned n = 0;

	model_init(&m, &lim);
	m.adv = advisor_new();
	if (m.adv) {
		m.adv->read_schedstat = fake_schedstat;
		m.adv->read_proc_cpu = fake_proc_cpu;
		m.adv->read_ncpu = fake_ncpu;
		m.adv->read_ctx = &now;
	}
	while (size > 0 && proto_decode(data, size, &msg, &used) == PROTO_OK) {
		(void)model_apply(&m, &msg, now); /* a refusal keeps the model whole */
		data += used;
		size -= used;
		now += SEC / 2;
		advisor_tick(&m, 1, now);
		if (++n % 4 == 0) {
			model_sweep(&m, now);
			render(&m, since, now);
			since = m.gen;
			model_trim_removals(&m, since);
		}
	}
	model_sweep(&m, now + 10 * SEC);
	render(&m, since, now + 10 * SEC);
	model_free(&m);
	return 0;
}
