/* test_otelctx.c - libscope's OpenTelemetry thread and process context read
 * from another process the way a profiler reads them (OTEP 4947, OTEP
 * 4719): the OTEL_CTX mapping found in /proc/PID/maps and its protobuf
 * payload decoded; otel_thread_ctx_v1 found in the .dynsym of the library
 * that defines it, what the loader resolved for its TLS relocation (a TLS
 * descriptor, or the legacy module and offset pair a compiler without
 * descriptors emits) read from the live process, each thread stopped
 * (ptrace) and its record read through its thread pointer, or its DTV
 * (process_vm_readv).  The target is tests/helpers/otelctx_target. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "otelid.h"
#include "scope.h"
#include "procstat.h"

#define TRACE_HEX "4bf92f3577b34da6a3ce929d0e0e4736"

struct target {
	pid_t pid;
	FILE *out; /* its stdout */
	int in;	   /* its stdin */
};

/* ---- reading another process */

static int peek(pid_t pid, uint64_t addr, void *buf, size_t n)
{
	struct iovec local = {buf, n}, remote = {(void *)(uintptr_t)addr, n};

	return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

/* ---- the process context (OTEP 4719) */

/* A protobuf reader over a byte range. */
struct pbr {
	const uint8_t *p, *end;
};

static int pbr_varint(struct pbr *r, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64 && r->p < r->end; shift += 7) {
		uint8_t b = *r->p++;
		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return 0;
	}
	return -1;
}

/* The next field: its number, and for a length-delimited one its body. */
static int pbr_next(struct pbr *r, unsigned *field, struct pbr *body, uint64_t *num)
{
	uint64_t key, len;

	if (r->p >= r->end || pbr_varint(r, &key) < 0)
		return -1;
	*field = (unsigned)(key >> 3);
	switch (key & 7) {
	case 0:
		return pbr_varint(r, num);
	case 2:
		if (pbr_varint(r, &len) < 0 || len > (uint64_t)(r->end - r->p))
			return -1;
		body->p = r->p;
		body->end = r->p + len;
		r->p += len;
		return 0;
	default:
		return -1; /* the payload uses no other wire type */
	}
}

static char *pbr_string(struct pbr s)
{
	return strndup((const char *)s.p, (size_t)(s.end - s.p));
}

struct process_ctx {
	char service[256];
	char schema[64];
	char *keys[16];
	int nkeys;
};

/* One KeyValue: key, and value (AnyValue) as a string or a string array. */
static void decode_kv(struct pbr kv, struct process_ctx *pc, bool resource)
{
	struct pbr f, any = {0}, b;
	unsigned n;
	uint64_t num;
	char *key = NULL;

	while (pbr_next(&kv, &n, &f, &num) == 0) {
		if (n == 1)
			key = pbr_string(f);
		else if (n == 2)
			any = f;
	}
	if (!key)
		return;
	while (any.p && pbr_next(&any, &n, &f, &num) == 0) {
		if (n == 1 && resource && strcmp(key, "service.name") == 0)
			snprintf(pc->service, sizeof pc->service, "%.*s", (int)(f.end - f.p), f.p);
		if (n == 1 && !resource && strcmp(key, "threadlocal.schema_version") == 0)
			snprintf(pc->schema, sizeof pc->schema, "%.*s", (int)(f.end - f.p), f.p);
		if (n == 5 && !resource && strcmp(key, "threadlocal.attribute_key_map") == 0)
			while (pbr_next(&f, &n, &b, &num) == 0) /* ArrayValue.values */
				if (n == 1 && pc->nkeys < 16) {
					struct pbr sv = b, s;
					unsigned m;
					while (pbr_next(&sv, &m, &s, &num) == 0)
						if (m == 1)
							pc->keys[pc->nkeys++] = pbr_string(s);
				}
	}
	free(key);
}

/* OTEP 4719's reading protocol: locate, validate, read, re-read. */
static int read_process_ctx(pid_t pid, struct process_ctx *pc)
{
	char path[64], line[512];
	uint64_t start = 0, end;
	FILE *f;
	struct {
		char signature[8];
		uint32_t version, payload_size;
		uint64_t published_at_ns, payload;
	} h, again;

	memset(pc, 0, sizeof *pc);
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof line, f))
		if (strstr(line, "[anon_shmem:OTEL_CTX]") || strstr(line, "/memfd:OTEL_CTX") ||
		    strstr(line, "[anon:OTEL_CTX]")) {
			assert_int_equal(sscanf(line, "%lx-%lx", &start, &end), 2);
			break;
		}
	fclose(f);
	if (!start)
		return -1;
	assert_int_equal(peek(pid, start, &h, sizeof h), 0);
	assert_memory_equal(h.signature, "OTEL_CTX", 8);
	assert_int_equal(h.version, 2);
	assert_true(h.published_at_ns != 0);
	assert_true(h.payload_size > 0 && h.payload_size < 65536);
	uint8_t *payload = malloc(h.payload_size);
	assert_non_null(payload);
	assert_int_equal(peek(pid, h.payload, payload, h.payload_size), 0);
	assert_int_equal(peek(pid, start, &again, sizeof again), 0);
	assert_true(again.published_at_ns == h.published_at_ns);

	/* ProcessContext: resource = 1 (Resource: attributes = 1), attributes = 2. */
	struct pbr r = {payload, payload + h.payload_size}, f1, f2;
	unsigned n, m;
	uint64_t num;
	while (pbr_next(&r, &n, &f1, &num) == 0) {
		if (n == 1)
			while (pbr_next(&f1, &m, &f2, &num) == 0)
				if (m == 1)
					decode_kv(f2, pc, true);
		if (n == 2)
			decode_kv(f1, pc, false);
	}
	assert_true(r.p == r.end);
	free(payload);
	return 0;
}

/* ---- the thread context (OTEP 4947) */

/* Where otel_thread_ctx_v1 lives in every thread: at a fixed offset from
 * the thread pointer (static TLS: a library loaded at start), or at an
 * offset in a module's block the thread's DTV points at (dynamic TLS). */
struct tls_loc {
	bool dynamic;
	int64_t tpoff;		 /* static */
	uint64_t module, offset; /* dynamic */
};

/* Reads what the loader resolved for the relocation rel of the module
 * mapped at bias: a TLS descriptor (gcc's -mtls-dialect=gnu2), the
 * traditional module and offset pair (the legacy general dynamic model,
 * where the compiler has no TLS descriptors), or an initial-exec offset. */
static bool tls_reloc(pid_t pid, uint64_t bias, const GElf_Rela *rel, struct tls_loc *loc)
{
	uint64_t w[2];

	switch (GELF_R_TYPE(rel->r_info)) {
	case R_X86_64_TLSDESC:
		assert_int_equal(peek(pid, bias + rel->r_offset, w, 16), 0);
		if ((int64_t)w[1] < 0 && (int64_t)w[1] > -(1 << 24)) {
			loc->tpoff = (int64_t)w[1]; /* the static resolver's argument */
			return true;
		}
		/* The dynamic resolver's: a tls_index {module, offset}. */
		assert_int_equal(peek(pid, w[1], w, 16), 0);
		loc->dynamic = true;
		loc->module = w[0];
		loc->offset = w[1];
		return true;
	case R_X86_64_DTPMOD64:
		assert_int_equal(peek(pid, bias + rel->r_offset, w, 16), 0);
		loc->dynamic = true;
		loc->module = w[0];
		loc->offset = w[1]; /* the DTPOFF64 slot that follows */
		return true;
	case R_X86_64_TPOFF64:
		assert_int_equal(peek(pid, bias + rel->r_offset, w, 8), 0);
		loc->tpoff = (int64_t)w[0];
		return true;
	default:
		return false;
	}
}

static struct tls_loc tls_locate(pid_t pid)
{
	char path[64], line[PATH_MAX + 128], file[PATH_MAX];
	struct tls_loc loc = {0};
	bool have = false;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	elf_version(EV_CURRENT);
	while (!have && fgets(line, sizeof line, f)) {
		uint64_t start, end, off;
		file[0] = '\0';
		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %s", &start, &end, &off, file) < 4 ||
		    off != 0 || file[0] != '/')
			continue;
		int fd = open(file, O_RDONLY);
		if (fd < 0)
			continue;
		Elf *e = elf_begin(fd, ELF_C_READ, NULL);
		Elf_Scn *scn = NULL;
		size_t symidx = 0;
		GElf_Shdr sh;
		uint64_t load = UINT64_MAX;
		size_t nph = 0;
		GElf_Phdr ph;
		/* The symbol, in .dynsym, as a TLS object. */
		while (e && (scn = elf_nextscn(e, scn)))
			if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_DYNSYM) {
				Elf_Data *d = elf_getdata(scn, NULL);
				for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
					GElf_Sym sym;
					const char *name;
					if (!gelf_getsym(d, (int)i, &sym))
						continue;
					name = elf_strptr(e, sh.sh_link, sym.st_name);
					if (name && strcmp(name, "otel_thread_ctx_v1") == 0 &&
					    GELF_ST_TYPE(sym.st_info) == STT_TLS && sym.st_shndx)
						symidx = i;
				}
			}
		/* Its TLS relocation, and the module's load bias. */
		if (symidx && elf_getphdrnum(e, &nph) == 0)
			for (size_t i = 0; i < nph; i++)
				if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD &&
				    ph.p_vaddr < load)
					load = ph.p_vaddr & ~(uint64_t)0xfff;
		scn = NULL;
		while (symidx && !have && (scn = elf_nextscn(e, scn)))
			if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_RELA) {
				Elf_Data *d = elf_getdata(scn, NULL);
				for (size_t i = 0; d && !have && i < sh.sh_size / sh.sh_entsize;
				     i++) {
					GElf_Rela rel;
					if (gelf_getrela(d, (int)i, &rel) &&
					    GELF_R_SYM(rel.r_info) == symidx)
						have = tls_reloc(pid, start - load, &rel, &loc);
				}
			}
		if (e)
			elf_end(e);
		close(fd);
		if (symidx && !have) {
			fclose(f);
			fail_msg("%s defines otel_thread_ctx_v1 but no TLS relocation for it",
				 file);
		}
	}
	fclose(f);
	assert_true(have);
	return loc;
}

struct record {
	bool attached; /* the pointer was not NULL */
	uint64_t ptr;
	uint8_t head[28];
	uint8_t attrs[640];
	uint16_t nattrs;
};

/* Stops thread tid, reads its record through its thread pointer, lets it
 * go: a reader must only read a stopped thread's context. */
static void read_thread(pid_t pid, pid_t tid, struct tls_loc loc, struct record *rec)
{
	struct user_regs_struct regs;
	uint64_t ptr = 0, at, dtv, block = 0;
	int st;

	memset(rec, 0, sizeof *rec);
	if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0)
		fail_msg("ptrace(PTRACE_SEIZE) of thread %d of %d: %s", (int)tid, (int)pid,
			 strerror(errno));
	assert_int_equal(ptrace(PTRACE_INTERRUPT, tid, 0, 0), 0);
	assert_int_equal(waitpid(tid, &st, __WALL), tid);
	assert_int_equal(ptrace(PTRACE_GETREGS, tid, 0, &regs), 0);
	if (!loc.dynamic) {
		at = regs.fs_base + (uint64_t)loc.tpoff;
	} else {
		/* glibc: the thread's DTV pointer is the TCB's second word, and
		 * its entry per module the block's address (0 or -1 when the
		 * thread has not touched the module's TLS yet). */
		assert_int_equal(peek(pid, regs.fs_base + 8, &dtv, 8), 0);
		assert_int_equal(peek(pid, dtv + 16 * loc.module, &block, 8), 0);
		at = block && block != UINT64_MAX ? block + loc.offset : 0;
	}
	if (at)
		assert_int_equal(peek(pid, at, &ptr, 8), 0);
	rec->ptr = ptr;
	if (ptr) {
		rec->attached = true;
		assert_int_equal(peek(pid, ptr, rec->head, 28), 0);
		memcpy(&rec->nattrs, rec->head + 26, 2);
		if (rec->head[24] == 1 && rec->nattrs) {
			assert_true(rec->nattrs <= 612);
			assert_int_equal(peek(pid, ptr + 28, rec->attrs, rec->nattrs), 0);
		}
	}
	assert_int_equal(ptrace(PTRACE_DETACH, tid, 0, 0), 0);
}

/* The value of key index k in the record's attributes ("" when absent). */
static void attr_of(const struct record *r, int k, char *out, size_t n)
{
	out[0] = '\0';
	for (size_t at = 0; at + 2 <= r->nattrs;) {
		size_t len = r->attrs[at + 1];
		if (at + 2 + len > r->nattrs)
			break;
		if (r->attrs[at] == k)
			snprintf(out, n, "%.*s", (int)len, (const char *)r->attrs + at + 2);
		at += 2 + len;
	}
}

/* ---- the target */

static void start_target_as(struct target *t, const char *mode)
{
	int in[2], out[2];
	const char *top = getenv("TOP"), *build = getenv("BUILD");
	char path[PATH_MAX];

	snprintf(path, sizeof path, "%s/%s/tests/helpers/otelctx_target", top ? top : ".",
		 build ? build : "build");
	assert_int_equal(access(path, X_OK), 0);
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	t->pid = fork();
	assert_true(t->pid >= 0);
	if (t->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		alarm(60); /* never outlives a broken test */
		setenv("SCOPED_SOCKET", "/nonexistent/scoped.sock", 1);
		setenv("OTEL_SERVICE_NAME", "otel-target", 1);
		execl(path, path, mode, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	t->in = in[1];
	t->out = fdopen(out[0], "r");
	assert_non_null(t->out);
}

static void start_target(struct target *t)
{
	start_target_as(t, NULL);
}

static void expect(struct target *t, const char *what, char *line, size_t n)
{
	assert_non_null(fgets(line, (int)n, t->out));
	assert_true(strncmp(line, what, strlen(what)) == 0);
}

static bool can_trace(void)
{
	pid_t c = fork();
	int st, ok;

	if (c == 0) {
		pause();
		_exit(0);
	}
	ok = ptrace(PTRACE_SEIZE, c, 0, 0) == 0;
	kill(c, SIGKILL);
	waitpid(c, &st, 0);
	return ok;
}

/* Skips the calling test where a profiler-like reader cannot run: not
 * x86-64 (the reader knows its thread pointer only), or no ptrace (a
 * reader must stop a thread to read its context). */
static void need_reader(void)
{
#ifndef __x86_64__
	skip();
#endif
	if (!can_trace()) {
		print_message("skip: ptrace is not allowed here, and a reader must stop a "
			      "thread to read its context\n");
		skip();
	}
}

static void test_task_context_read_from_outside(void **state)
{
	(void)state;
	need_reader();
	struct target t;
	struct process_ctx pc;
	struct record rec;
	struct proc_stat st;
	char line[256], line_ready[256], v[256], want[64];
	unsigned long long task_id, scope_id;
	int fork_line;
	long tid;
	uint8_t boot[16], trace[16], span[8];

	start_target(&t);
	expect(&t, "ready ", line_ready, sizeof line_ready);
	tid = strtol(line_ready + 6, NULL, 10);
	expect(&t, "fork ", line, sizeof line);
	assert_int_equal(sscanf(line, "fork %llu %llu %d", &task_id, &scope_id, &fork_line), 3);
	assert_true(tid != t.pid); /* a worker runs it */

	/* The process context: schema and key map. */
	assert_int_equal(read_process_ctx(t.pid, &pc), 0);
	assert_string_equal(pc.service, "otel-target");
	assert_string_equal(pc.schema, "tlsdesc_v1_dev");
	assert_int_equal(pc.nkeys, 4);
	assert_string_equal(pc.keys[0], "scoped.scope.name");
	assert_string_equal(pc.keys[1], "code.function.name");
	assert_string_equal(pc.keys[2], "code.file.path");
	assert_string_equal(pc.keys[3], "code.line.number");

	/* What the task would send on to another process: the caller's
	 * trace, its own span as the parent, the caller's flags. */
	char want_tp[64], got_tp[64];
	assert_int_equal(sscanf(line_ready, "ready %*d %63s", got_tp), 1);

	/* The running task's record: the traceparent's trace, its span. */
	struct tls_loc off = tls_locate(t.pid);
	otelid_boot_id(boot);
	assert_int_equal(proc_stat_read(t.pid, 0, &st), 0);
	uint64_t key = otelid_process_key(boot, (uint32_t)t.pid, st.starttime);
	read_thread(t.pid, (pid_t)tid, off, &rec);
	assert_true(rec.attached);
	assert_int_equal(rec.head[24], 1); /* valid */
	assert_int_equal(rec.head[25], 1); /* the traceparent's flags: sampled */
	assert_true(otelid_hex(TRACE_HEX, trace, 16));
	assert_memory_equal(rec.head, trace, 16);
	otelid_bytes(span, otelid_span(otelid_kind_key(key, OTELID_TASK), task_id));
	assert_memory_equal(rec.head + 16, span, 8);
	snprintf(want_tp, sizeof want_tp, "00-%s-%016llx-01", TRACE_HEX,
		 (unsigned long long)otelid_span(otelid_kind_key(key, OTELID_TASK), task_id));
	assert_string_equal(got_tp, want_tp);
	attr_of(&rec, 0, v, sizeof v);
	assert_string_equal(v, "otel-req");
	attr_of(&rec, 1, v, sizeof v);
	assert_string_equal(v, "tree"); /* the fork site's function */
	attr_of(&rec, 2, v, sizeof v);
	assert_non_null(strstr(v, "otelctx_target.c"));
	attr_of(&rec, 3, v, sizeof v);
	snprintf(want, sizeof want, "%d", fork_line);
	assert_string_equal(v, want);

	/* The main thread runs no task: no record. */
	read_thread(t.pid, t.pid, off, &rec);
	assert_false(rec.attached);

	/* The task ended: its worker's pointer is NULL (libscope swaps the
	 * pointer; a record once shown stays valid). */
	assert_int_equal(write(t.in, "go\n", 3), 3);
	expect(&t, "joined", line, sizeof line);
	read_thread(t.pid, (pid_t)tid, off, &rec);
	assert_false(rec.attached);

	/* A tree without traceparent: the trace the daemon exports it under. */
	assert_int_equal(write(t.in, "go\n", 3), 3);
	expect(&t, "ready ", line, sizeof line);
	tid = strtol(line + 6, NULL, 10);
	expect(&t, "fork ", line, sizeof line);
	assert_int_equal(sscanf(line, "fork %llu %llu %d", &task_id, &scope_id, &fork_line), 3);
	read_thread(t.pid, (pid_t)tid, off, &rec);
	assert_int_equal(rec.head[24], 1);
	assert_int_equal(rec.head[25], 0);
	otelid_trace(trace, key, scope_id);
	assert_memory_equal(rec.head, trace, 16);
	otelid_bytes(span, otelid_span(otelid_kind_key(key, OTELID_TASK), task_id));
	assert_memory_equal(rec.head + 16, span, 8);
	attr_of(&rec, 0, v, sizeof v);
	assert_string_equal(v, "otel-own");

	assert_int_equal(write(t.in, "go\ngo\n", 6), 6);
	expect(&t, "joined", line, sizeof line);
	expect(&t, "done", line, sizeof line);
	int status;
	assert_int_equal(waitpid(t.pid, &status, 0), t.pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	fclose(t.out);
	close(t.in);
	for (int i = 0; i < pc.nkeys; i++)
		free(pc.keys[i]);
}

/* Reads the target's lines until one starting with word; returns the
 * number after it. */
static unsigned long long await_word(struct target *t, const char *word, unsigned long long *seen,
				     const char *const *words, int nwords)
{
	char line[256];
	for (int i = 0; i < nwords; i++)
		if (strcmp(words[i], word) == 0 && seen[i])
			return seen[i];
	while (fgets(line, sizeof line, t->out)) {
		char w[32];
		unsigned long long v;
		if (sscanf(line, "%31s %llu", w, &v) != 2)
			continue;
		for (int i = 0; i < nwords; i++)
			if (strcmp(words[i], w) == 0)
				seen[i] = v;
		if (strcmp(w, word) == 0)
			return v;
	}
	fail_msg("the target ended before '%s'", word);
	return 0;
}

/* A task run inline by the thread of the task that forked it (its pool has
 * no other worker and runs what it cannot hand off in the forker): the
 * record is the inner task's, then the outer one's again. */
static void test_nested_task_restores_outer(void **state)
{
	(void)state;
	need_reader();
	static const char *const words[] = {"fork", "innerfork", "inner", "back"};
	unsigned long long seen[4] = {0};
	struct target t;
	struct record rec;
	struct proc_stat st;
	uint8_t boot[16], span[8];
	char v[256];

	uint8_t inner_span[8];

	start_target_as(&t, "nest");
	pid_t tid_in = (pid_t)await_word(&t, "inner", seen, words, 4);
	uint64_t id_out = await_word(&t, "fork", seen, words, 4);
	struct tls_loc off = tls_locate(t.pid);
	otelid_boot_id(boot);
	assert_int_equal(proc_stat_read(t.pid, 0, &st), 0);
	uint64_t key =
	    otelid_kind_key(otelid_process_key(boot, (uint32_t)t.pid, st.starttime), OTELID_TASK);
	read_thread(t.pid, tid_in, off, &rec);
	assert_int_equal(rec.head[24], 1);
	memcpy(inner_span, rec.head + 16, 8);
	attr_of(&rec, 0, v, sizeof v);
	assert_string_equal(v, "otel-inner");
	assert_int_equal(write(t.in, "go\n", 3), 3);
	pid_t tid_out = (pid_t)await_word(&t, "back", seen, words, 4);
	uint64_t id_in = await_word(&t, "innerfork", seen, words, 4);
	otelid_bytes(span, otelid_span(key, id_in));
	assert_memory_equal(inner_span, span, 8); /* it was the inner task's */
	/* The inner task ran in the outer one's thread, inside its fork. */
	assert_int_equal(tid_out, tid_in);
	read_thread(t.pid, tid_out, off, &rec);
	assert_int_equal(rec.head[24], 1);
	otelid_bytes(span, otelid_span(key, id_out));
	assert_memory_equal(rec.head + 16, span, 8);
	attr_of(&rec, 0, v, sizeof v);
	assert_string_equal(v, "otel-outer");
	assert_int_equal(write(t.in, "go\n", 3), 3);
	int status;
	assert_int_equal(waitpid(t.pid, &status, 0), t.pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	fclose(t.out);
	close(t.in);
}

/* The target's lines, read by a thread of their own while the test
 * samples (a target blocked on a full pipe would stop switching). */
struct lines {
	pthread_mutex_t lock;
	FILE *in;
	char **v;
	size_t n, cap;
	bool eof;
};

static void *lines_read(void *arg)
{
	struct lines *l = arg;
	char buf[256];

	while (fgets(buf, sizeof buf, l->in)) {
		char *dup = strdup(buf);
		assert_non_null(dup);
		pthread_mutex_lock(&l->lock);
		if (l->n == l->cap) {
			l->cap = l->cap ? l->cap * 2 : 256;
			l->v = realloc(l->v, l->cap * sizeof *l->v);
			assert_non_null(l->v);
		}
		l->v[l->n++] = dup;
		pthread_mutex_unlock(&l->lock);
	}
	pthread_mutex_lock(&l->lock);
	l->eof = true;
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

/* Waits (at most 30 s) for a line starting with word; returns it. */
static const char *lines_await(struct lines *l, const char *word)
{
	for (int tries = 0; tries < 30000; tries++) {
		const char *hit = NULL;
		bool eof;
		pthread_mutex_lock(&l->lock);
		for (size_t i = 0; i < l->n && !hit; i++)
			if (strncmp(l->v[i], word, strlen(word)) == 0)
				hit = l->v[i];
		eof = l->eof;
		pthread_mutex_unlock(&l->lock);
		if (hit)
			return hit;
		if (eof)
			break;
		usleep(1000);
	}
	fail_msg("the target never said '%s'", word);
	return NULL;
}

#define SW_SCOPES 3
#define SW_SAMPLES 300

/* A worker running tasks of several scopes in turn: otel_thread_ctx_v1
 * moves from record to record, and every record a reader finds while the
 * thread is stopped, at any instant, is whole: valid, one scope's trace id,
 * name and fork line, and the span of a task of that very scope. */
static void test_switching_scopes(void **state)
{
	(void)state;
	need_reader();
	struct target t;
	struct lines l = {.lock = PTHREAD_MUTEX_INITIALIZER};
	struct record *rec = calloc(SW_SAMPLES, sizeof *rec);
	struct proc_stat st;
	uint8_t boot[16], trace[SW_SCOPES][16];
	int lines[SW_SCOPES], attached = 0, nptr = 0, seen[SW_SCOPES] = {0};
	uint64_t ptrs[SW_SAMPLES];
	pthread_t reader;
	char hex[40];

	assert_non_null(rec);
	start_target_as(&t, "switch");
	l.in = t.out;
	assert_int_equal(pthread_create(&reader, NULL, lines_read, &l), 0);
	pid_t worker = (pid_t)strtol(lines_await(&l, "worker ") + 7, NULL, 10);
	assert_true(worker > 0 && worker != t.pid);
	for (int j = 0; j < SW_SCOPES; j++) {
		char want[32];
		snprintf(want, sizeof want, "line %d ", j);
		lines[j] = atoi(lines_await(&l, want) + strlen(want));
		snprintf(hex, sizeof hex, "%032x", 0x5100 + j);
		assert_true(otelid_hex(hex, trace[j], 16));
	}
	struct tls_loc off = tls_locate(t.pid);
	otelid_boot_id(boot);
	assert_int_equal(proc_stat_read(t.pid, 0, &st), 0);
	uint64_t key =
	    otelid_kind_key(otelid_process_key(boot, (uint32_t)t.pid, st.starttime), OTELID_TASK);

	/* Spread over many rounds, so that the thread's slots are reused by
	 * other scopes too. */
	for (int i = 0; i < SW_SAMPLES; i++) {
		read_thread(t.pid, worker, off, &rec[i]);
		usleep(500);
	}
	assert_int_equal(write(t.in, "stop\n", 5), 5);
	assert_int_equal(pthread_join(reader, NULL), 0);
	int status;
	assert_int_equal(waitpid(t.pid, &status, 0), t.pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(l.n > 0 && strncmp(l.v[l.n - 1], "done", 4) == 0);

	for (int i = 0; i < SW_SAMPLES; i++) {
		struct record *r = &rec[i];
		char v[256], want[32];
		int j, n = 0;
		uint64_t span, id;
		bool found = false;

		if (!r->attached)
			continue; /* between two tasks */
		attached++;
		for (n = 0; n < nptr && ptrs[n] != r->ptr; n++)
			;
		if (n == nptr)
			ptrs[nptr++] = r->ptr;
		assert_int_equal(r->head[24], 1); /* valid */
		assert_int_equal(r->head[25], 1); /* the traceparents' flags */
		attr_of(r, 0, v, sizeof v);
		assert_int_equal(sscanf(v, "sw-%d", &j), 1);
		assert_true(j >= 0 && j < SW_SCOPES);
		seen[j]++;
		assert_memory_equal(r->head, trace[j], 16);
		attr_of(r, 1, v, sizeof v);
		assert_string_equal(v, "sw_fork");
		attr_of(r, 3, v, sizeof v);
		snprintf(want, sizeof want, "%d", lines[j]);
		assert_string_equal(v, want);
		/* The span is that of a task of scope j. */
		span = 0;
		for (int b = 0; b < 8; b++)
			span = span << 8 | r->head[16 + b];
		id = span ^ key;
		snprintf(want, sizeof want, "t %d ", j);
		for (size_t k = 0; k < l.n && !found; k++)
			if (strncmp(l.v[k], want, strlen(want)) == 0) {
				uint64_t tid = strtoull(l.v[k] + strlen(want), NULL, 10);
				found = otelid_span(key, tid) == span;
			}
		if (!found)
			fail_msg("sample %d: span %016llx (task %llu) is no task of sw-%d", i,
				 (unsigned long long)span, (unsigned long long)id, j);
	}
	/* The worker ran tasks nearly all the time: most samples caught one,
	 * and the pointer moved between the scopes' records. */
	print_message("%d of %d samples in a task; %d records; by scope %d %d %d; %zu tasks\n",
		      attached, SW_SAMPLES, nptr, seen[0], seen[1], seen[2], l.n);
	assert_true(attached >= SW_SAMPLES / 10);
	assert_true(nptr >= 2);
	for (size_t k = 0; k < l.n; k++)
		free(l.v[k]);
	free(l.v);
	free(rec);
	fclose(t.out);
	close(t.in);
}

/* The process context is there from the start, before any task runs. */
static void test_process_context_at_start(void **state)
{
	(void)state;
	struct target t;
	struct process_ctx pc;
	char line[64];
	int status;

	start_target_as(&t, "idle");
	expect(&t, "up", line, sizeof line);
	assert_int_equal(read_process_ctx(t.pid, &pc), 0);
	assert_string_equal(pc.schema, "tlsdesc_v1_dev");
	assert_int_equal(write(t.in, "go\n", 3), 3);
	assert_int_equal(waitpid(t.pid, &status, 0), t.pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	fclose(t.out);
	close(t.in);
	for (int i = 0; i < pc.nkeys; i++)
		free(pc.keys[i]);
}

/* SCOPE_OTEL_CONTEXT=0: no mapping, no record. */
static void test_off_by_environment(void **state)
{
	(void)state;
	struct target t;
	struct process_ctx pc;
	char line[256];

	setenv("SCOPE_OTEL_CONTEXT", "0", 1);
	start_target(&t);
	unsetenv("SCOPE_OTEL_CONTEXT");
	expect(&t, "ready ", line, sizeof line);
	expect(&t, "fork ", line, sizeof line);
	assert_int_equal(read_process_ctx(t.pid, &pc), -1);
	assert_int_equal(write(t.in, "go\ngo\ngo\ngo\n", 12), 12);
	int status;
	assert_int_equal(waitpid(t.pid, &status, 0), t.pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	fclose(t.out);
	close(t.in);
}

/* ---- Which record a task gets: in this process, read from inside ---- */

extern __thread struct otel_rec_head {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t valid;
	uint8_t trace_flags;
} * otel_thread_ctx_v1;

struct seen_trace {
	uint8_t trace[16];
	uint8_t flags;
	bool attached;
	_Atomic bool done;
};

/* A task that copies the trace id its thread context shows. */
static int copy_trace(void *arg, void **result)
{
	struct seen_trace *t = arg;

	(void)result;
	t->attached = otel_thread_ctx_v1 != NULL;
	if (t->attached) {
		memcpy(t->trace, otel_thread_ctx_v1->trace_id, 16);
		t->flags = otel_thread_ctx_v1->trace_flags;
	}
	atomic_store(&t->done, true);
	return 0;
}

static void fork_and_see(scope_t *s, struct seen_trace *t)
{
	assert_int_equal(scope_fork(s, copy_trace, t, NULL), 0);
}

/* Root scopes of one name forking from one site, one after another (a
 * request each), more of them than a thread keeps records for, every
 * seventh with a traceparent: each task shows its own tree's trace and
 * flags (the trace the daemon exports the tree under, flags 0; or the
 * traceparent's), the same for the tasks of one tree, though a thread
 * reuses one record for roots SC_OTEL_SLOTS apart and rewrites only the
 * trace id of a record of the same name and site. */
#define NEW_ROOTS 150
static void test_new_roots_keep_their_traces(void **state)
{
	static const char tp[] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
	static struct seen_trace t[NEW_ROOTS][2];
	uint64_t ids[NEW_ROOTS], key;
	uint8_t boot[16], want[16];
	struct proc_stat st;
	(void)state;

	otelid_boot_id(boot);
	assert_int_equal(proc_stat_read(getpid(), 0, &st), 0);
	key = otelid_process_key(boot, (uint32_t)getpid(), st.starttime);
	for (int i = 0; i < NEW_ROOTS; i++) {
		scope_t *s;
		assert_int_equal(scope_open(&s, NULL), 0);
		ids[i] = scope_id(s);
		if (i % 7 == 3)
			assert_int_equal(scope_value_bind(s, "traceparent", tp), 0);
		for (int k = 0; k < 2; k++)
			fork_and_see(s, &t[i][k]);
		assert_int_equal(scope_join(s), 0);
		assert_int_equal(scope_close(s), 0);
	}
	for (int i = 0; i < NEW_ROOTS; i++) {
		if (i % 7 == 3)
			assert_true(otelid_hex(tp + 3, want, 16));
		else
			otelid_trace(want, key, ids[i]);
		for (int k = 0; k < 2; k++) {
			assert_true(t[i][k].attached);
			assert_memory_equal(t[i][k].trace, want, 16);
			assert_int_equal(t[i][k].flags, i % 7 == 3 ? 1 : 0);
		}
	}
}

/* A traceparent bound on a scope after a nested scope was opened below it
 * (both its owner's) reaches the nested scope's later tasks, as
 * scope_value_get() from them would find it. */
static void test_traceparent_bound_after_nested_open(void **state)
{
	static const char tp[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
	struct seen_trace before = {0}, after = {0}, own = {0};
	uint8_t want[16];
	scope_t *p, *c;
	(void)state;

	assert_true(otelid_hex(tp + 3, want, 16));
	assert_int_equal(scope_open(&p, NULL), 0);
	assert_int_equal(scope_open(&c, NULL), 0);
	fork_and_see(c, &before);
	while (!atomic_load(&before.done)) /* it ran before the binding */
		usleep(100);
	assert_int_equal(scope_value_bind(p, "traceparent", tp), 0);
	fork_and_see(c, &after);
	assert_int_equal(scope_join(c), 0);
	assert_int_equal(scope_close(c), 0);
	fork_and_see(p, &own);
	assert_int_equal(scope_join(p), 0);
	assert_int_equal(scope_close(p), 0);
	assert_true(before.attached && after.attached && own.attached);
	assert_memory_not_equal(before.trace, want, 16);
	assert_memory_equal(after.trace, want, 16);
	assert_memory_equal(own.trace, want, 16);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_task_context_read_from_outside),
	    cmocka_unit_test(test_nested_task_restores_outer),
	    cmocka_unit_test(test_switching_scopes),
	    cmocka_unit_test(test_process_context_at_start),
	    cmocka_unit_test(test_off_by_environment),
	    cmocka_unit_test(test_new_roots_keep_their_traces),
	    cmocka_unit_test(test_traceparent_bound_after_nested_open),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
