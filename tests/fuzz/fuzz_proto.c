/* fuzz_proto.c - libFuzzer target for the wire decoder: decodes the input as
 * a stream of frames and checks that every accepted frame re-encodes to a
 * frame that decodes to the same message, and that the hot frames' own
 * decoder agrees (make fuzz; corpus in tests/fuzz/corpus/). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

/* Strings compare by content: each decode points into its own buffer. */
static void same_str(struct proto_str *a, struct proto_str *b)
{
	if (a->len != b->len || (a->len && memcmp(a->p, b->p, a->len)))
		abort();
	a->p = b->p = NULL;
}

/* A decoded known message re-encodes to a frame of the same length that
 * decodes to the same content: every field, string, tid and address.  The
 * reserved fields and unknown flags are not carried, so the bytes may
 * differ; the decoded forms may not.  The structs are compared whole, so a
 * field the decoder fills and the encoder forgets (or the other way round)
 * fails here; a new string or array field must be added to the list below. */
static void check_reencode(size_t n, const struct proto_msg *m)
{
	static uint8_t out[PROTO_MAX_FRAME];
	static uint32_t tids[PROTO_MAX_TIDS];
	static uint64_t addrs[PROTO_MAX_FRAMES];
	struct proto_msg a, b;
	size_t used;

	if (!strcmp(proto_type_name(m->type), "unknown"))
		return;
	for (size_t i = 0; i < m->ntids; i++)
		tids[i] = proto_tid_at(m, i);
	for (size_t i = 0; i < m->nframes; i++)
		addrs[i] = proto_addr_at(m, i);
	int len = proto_encode(out, sizeof out, m, tids, addrs);
	if (len != (int)n)
		abort();
	if (proto_decode(out, (size_t)len, &b, &used) != PROTO_OK || used != n)
		abort();
	memcpy(&a, m, sizeof a);
	if (a.ntids != b.ntids || a.nframes != b.nframes)
		abort();
	for (size_t i = 0; i < a.ntids; i++)
		if (proto_tid_at(&b, i) != tids[i])
			abort();
	for (size_t i = 0; i < a.nframes; i++)
		if (proto_addr_at(&b, i) != addrs[i])
			abort();
	a.tids_raw = b.tids_raw = NULL;
	a.addrs_raw = b.addrs_raw = NULL;
	same_str(&a.runtime_version, &b.runtime_version);
	same_str(&a.program, &b.program);
	same_str(&a.exe, &b.exe);
	same_str(&a.name, &b.name);
	same_str(&a.file, &b.file);
	same_str(&a.func, &b.func);
	same_str(&a.key, &b.key);
	same_str(&a.value, &b.value);
	same_str(&a.message, &b.message);
	if ((a.flags & PROTO_F_SNAPSHOT) != (b.flags & PROTO_F_SNAPSHOT))
		abort();
	a.flags = b.flags;
	if (memcmp(&a, &b, sizeof a))
		abort();
}

/* proto_decode_hot takes only what proto_decode accepts, and leaves the
 * one message it keeps (zeroed once, filled by it alone, over every input)
 * exactly as proto_decode leaves its own. */
static void check_hot(const uint8_t *p, size_t n, const struct proto_msg *m, int rc, size_t used)
{
	static struct proto_msg hot; /* zero: static */
	size_t hot_used = 0;
	if (!proto_decode_hot(p, n, &hot, &hot_used))
		return;
	if (rc != PROTO_OK || hot_used != used || memcmp(&hot, m, sizeof hot))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_msg m;
	size_t used;

	while (size > 0) {
		int rc = proto_decode(data, size, &m, &used);
		check_hot(data, size, &m, rc, used);
		if (rc != PROTO_OK)
			break;
		if (used < PROTO_HDR_SIZE || used > size)
			abort();
		check_reencode(used, &m);
		data += used;
		size -= used;
	}
	return 0;
}
