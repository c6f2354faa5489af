/* otelid.h - the OpenTelemetry span and trace ids of scopes and tasks, made
 * the same way by libscope (for the thread context profilers read) and by
 * the daemon (for the spans it exports), so that a profiler's sample and an
 * exported span name the same span.
 *
 * A process's key mixes the host's boot id (random per boot, so ids differ
 * across hosts and boots), the pid and the process's start time in clock
 * ticks (so they differ across processes of one host).  A span id is the
 * scope's or task's id under a key per kind; a trace id, when no traceparent
 * gives one, is the root scope's id under one key and, mixed, under another. */
#ifndef COMMON_OTELID_H
#define COMMON_OTELID_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum otelid_kind {
	OTELID_SCOPE = 1,
	OTELID_TASK = 2,
	OTELID_TRACE_HI = 3,
	OTELID_TRACE_LO = 4,
};

/* splitmix64's finalizer: a bijection that spreads every input bit. */
static inline uint64_t otelid_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Reads /proc/sys/kernel/random/boot_id's 32 hex digits into out; all zero
 * when it cannot be read (both sides of one host then agree on zero). */
static inline void otelid_boot_id(uint8_t out[16])
{
	char buf[64];
	size_t n = 0;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	memset(out, 0, 16);
	if (!f)
		return;
	if (!fgets(buf, sizeof buf, f))
		buf[0] = '\0';
	fclose(f);
	for (const char *p = buf; *p && n < 32; p++) {
		int v = *p >= '0' && *p <= '9'	 ? *p - '0'
			: *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
						 : -1;
		if (v < 0)
			continue;
		out[n / 2] = (uint8_t)(out[n / 2] << 4 | v);
		n++;
	}
}

static inline uint64_t otelid_process_key(const uint8_t boot[16], uint32_t pid,
					  unsigned long long start_ticks)
{
	uint64_t hi, lo;

	memcpy(&hi, boot, 8);
	memcpy(&lo, boot + 8, 8);
	return otelid_mix(otelid_mix(hi ^ otelid_mix(lo)) ^ otelid_mix((uint64_t)pid << 32) ^
			  otelid_mix(start_ticks + 1));
}

/* The key of one kind of id in a process.  Its top bit is set, so that
 * key ^ id is never 0 for an id below 2^63 (what the runtime's ids are):
 * the hot path needs no test for it. */
static inline uint64_t otelid_kind_key(uint64_t process_key, enum otelid_kind kind)
{
	return otelid_mix(process_key ^ otelid_mix(kind)) | 1ull << 63;
}

/* A scope's or task's span id as a number (never 0 for an id >= 1): the
 * key xor the id, one instruction on the runtime's hot path, unique per
 * process since ids are. */
static inline uint64_t otelid_span(uint64_t kind_key, uint64_t id)
{
	uint64_t v = kind_key ^ id;

	return v ? v : id;
}

/* W3C Trace Context bytes: the most significant first, as the hex is. */
static inline void otelid_bytes(uint8_t out[8], uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	memcpy(out, &v, 8);
}

/* The trace id of the tree whose root scope is root, when no traceparent
 * joined it to another trace; hi and lo are the kind keys OTELID_TRACE_HI
 * and OTELID_TRACE_LO.  The high half is the root's id under hi (unique
 * in the process, as ids are; never 0, hi's top bit being set), the low
 * half a mix of it: the part that samplers read as random (W3C Trace
 * Context level 2 puts the randomness in the rightmost bytes).  One mix,
 * since the runtime computes this on the first task of every new root. */
static inline void otelid_trace_keyed(uint8_t out[16], uint64_t hi, uint64_t lo, uint64_t root)
{
	otelid_bytes(out, hi ^ root);
	otelid_bytes(out + 8, otelid_mix(lo ^ root));
}

static inline void otelid_trace(uint8_t out[16], uint64_t process_key, uint64_t root)
{
	otelid_trace_keyed(out, otelid_kind_key(process_key, OTELID_TRACE_HI),
			   otelid_kind_key(process_key, OTELID_TRACE_LO), root);
}

static inline int otelid_hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Reads n bytes from 2n lowercase hex digits; 0 when they are not, or are
 * all zero (an invalid id). */
static inline int otelid_hex(const char *s, uint8_t *out, size_t n)
{
	uint8_t any = 0;

	for (size_t i = 0; i < n; i++) {
		int hi = otelid_hexval(s[2 * i]), lo = otelid_hexval(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return 0;
		out[i] = (uint8_t)(hi << 4 | lo);
		any |= out[i];
	}
	return any != 0;
}

/* W3C Trace Context traceparent, version 00 (or a later one read as 00):
 * "vv-<32 hex trace id>-<16 hex parent id>-<2 hex flags>".  1 when valid;
 * flags may be NULL. */
static inline int otelid_traceparent(const char *v, uint8_t trace_id[16], uint8_t parent[8],
				     uint8_t *flags)
{
	size_t len = strlen(v);
	uint8_t fl;

	if (len < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' || otelid_hexval(v[0]) < 0 ||
	    otelid_hexval(v[1]) < 0 || (v[0] == 'f' && v[1] == 'f') || (len > 55 && v[55] != '-') ||
	    (v[0] == '0' && v[1] == '0' && len != 55) || otelid_hexval(v[53]) < 0 ||
	    otelid_hexval(v[54]) < 0)
		return 0;
	if (!otelid_hex(v + 3, trace_id, 16) || !otelid_hex(v + 36, parent, 8))
		return 0;
	fl = (uint8_t)(otelid_hexval(v[53]) << 4 | otelid_hexval(v[54]));
	if (flags)
		*flags = fl;
	return 1;
}

#endif
