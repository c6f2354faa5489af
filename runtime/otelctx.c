/* otelctx.c - OpenTelemetry's context for profilers outside the process: the
 * thread context of OTEP 4947 (the exported TLS pointer otel_thread_ctx_v1,
 * moved between a thread's records, one per scope and fork site it runs
 * tasks of, when it starts and ends a task) and the process context of
 * OTEP 4719 (a mapping named OTEL_CTX whose protobuf payload names the
 * record's schema and attribute keys). */
#include "otelctx.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "otelid.h"
#include "procstat.h"

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

/* OTEP 4947's schema: the stored text says tlsdesc_v1_dev until the OTEP
 * is merged (then tls_v1), and the eBPF profiler reads that one. */
#define SCHEMA_VERSION "tlsdesc_v1_dev"
#define VALUE_MAX 160 /* bytes of one attribute value: the record stays under 640 */

/* The attribute keys, by the index the record's entries carry. */
enum { KEY_SCOPE, KEY_FUNC, KEY_FILE, KEY_LINE };
static const char *const attribute_keys[] = {
    [KEY_SCOPE] = "scoped.scope.name",
    [KEY_FUNC] = "code.function.name",
    [KEY_FILE] = "code.file.path",
    [KEY_LINE] = "code.line.number",
};

/* The pointer OTEP 4947 names: exported in .dynsym, reached through a TLS
 * descriptor (the object is built with -mtls-dialect=gnu2 where the
 * compiler has it), written once per thread, so its access model costs
 * nothing per task. */
__attribute__((visibility("default"), used)) _Thread_local struct sc_otel_rec *otel_thread_ctx_v1;

_Atomic bool sc_otel_on = true;
_Atomic uint64_t sc_otel_task_key;
_Thread_local struct sc_otel_thread *sc_otel_mine __attribute__((tls_model("initial-exec")));

static pthread_mutex_t proc_lock = PTHREAD_MUTEX_INITIALIZER;
/* The process the key and the mapping are for (0: none yet, or a fork
 * child's parent), and its key: written under proc_lock, the key before
 * the pid, so that a reader that sees the pid sees its keys. */
static _Atomic pid_t proc_pid;
_Atomic uint64_t sc_otel_trace_hi, sc_otel_trace_lo;
static pthread_key_t thread_key; /* frees a thread's record at its exit */
static bool thread_key_ok, env_read;

/* ---- the process context (OTEP 4719) */

/* The mapping's header, as OTEP 4719 lays it out (32 bytes). */
struct ctx_header {
	char signature[8];
	uint32_t version;
	uint32_t payload_size;
	uint64_t published_at_ns;
	uint64_t payload; /* an address in this process */
};

/* A protobuf writer into a fixed buffer; a message that does not fit is
 * not published. */
struct pbw {
	uint8_t *p;
	size_t len, cap;
	bool full;
};

static void pb_raw(struct pbw *w, const void *src, size_t n)
{
	if (w->full || n > w->cap - w->len) {
		w->full = true;
		return;
	}
	memcpy(w->p + w->len, src, n);
	w->len += n;
}

static void pb_varint(struct pbw *w, uint64_t v)
{
	uint8_t b[10];
	size_t n = 0;

	do {
		b[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	pb_raw(w, b, n);
}

static void pb_tag(struct pbw *w, unsigned field, unsigned wire)
{
	pb_varint(w, (uint64_t)field << 3 | wire);
}

/* A length-delimited field is begun with its tag and ended once its body
 * is written: end slides the body to make room for the length. */
static size_t pb_begin(struct pbw *w, unsigned field)
{
	pb_tag(w, field, 2);
	return w->len;
}

static void pb_end(struct pbw *w, size_t at)
{
	uint8_t b[10];
	size_t body, n = 0;
	uint64_t v;

	if (w->full)
		return;
	body = w->len - at;
	v = body;
	do {
		b[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	if (n > w->cap - w->len) {
		w->full = true;
		return;
	}
	memmove(w->p + at + n, w->p + at, body);
	memcpy(w->p + at, b, n);
	w->len += n;
}

static void pb_string(struct pbw *w, unsigned field, const char *s)
{
	size_t at = pb_begin(w, field);

	pb_raw(w, s, strlen(s));
	pb_end(w, at);
}

/* A KeyValue (as field) whose AnyValue is a string or, with s NULL, an
 * int. */
static void pb_attr(struct pbw *w, unsigned field, const char *key, const char *s, int64_t i)
{
	size_t kv = pb_begin(w, field), any;

	pb_string(w, 1, key);
	any = pb_begin(w, 2);
	if (s) {
		pb_string(w, 1, s);
	} else {
		pb_tag(w, 3, 0);
		pb_varint(w, (uint64_t)i);
	}
	pb_end(w, any);
	pb_end(w, kv);
}

static void service_name(char *out, size_t n)
{
	const char *env = getenv("OTEL_SERVICE_NAME");
	FILE *f;

	if (!env || !*env)
		env = getenv("SCOPED_NAME");
	if (env && *env) {
		snprintf(out, n, "%s", env);
		return;
	}
	f = fopen("/proc/self/comm", "re");
	if (!f || !fgets(out, (int)n, f))
		snprintf(out, n, "unknown");
	if (f)
		fclose(f);
	out[strcspn(out, "\n")] = '\0';
}

/* The payload: a ProcessContext (opentelemetry.proto.processcontext.
 * v1development): resource = 1, attributes = 2 (OTEP 4947's threadlocal.*
 * keys). */
static void encode_payload(struct pbw *w, pid_t pid)
{
	char name[256];
	size_t res, attr, any, arr;

	service_name(name, sizeof name);
	res = pb_begin(w, 1);
	pb_attr(w, 1, "service.name", name, 0);
	pb_attr(w, 1, "process.pid", NULL, pid);
	pb_attr(w, 1, "process.runtime.name", "libscope", 0);
	pb_attr(w, 1, "process.runtime.version", SCOPE_VERSION_STRING, 0);
	pb_end(w, res);
	pb_attr(w, 2, "threadlocal.schema_version", SCHEMA_VERSION, 0);
	attr = pb_begin(w, 2);
	pb_string(w, 1, "threadlocal.attribute_key_map");
	any = pb_begin(w, 2);
	arr = pb_begin(w, 5); /* AnyValue.array_value */
	for (size_t i = 0; i < sizeof attribute_keys / sizeof attribute_keys[0]; i++) {
		size_t v = pb_begin(w, 1);
		pb_string(w, 1, attribute_keys[i]);
		pb_end(w, v);
	}
	pb_end(w, arr);
	pb_end(w, any);
	pb_end(w, attr);
}

/* OTEP 4719's publication protocol, step by step.  Failure is silent: the
 * process simply has no context for readers.  proc_lock held. */
static void publish(pid_t pid)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t size = page > 0 ? (size_t)page * 2 : 8192;
	uint8_t buf[2048];
	struct pbw w = {buf, 0, sizeof buf, false};
	struct ctx_header *h;
	struct timespec ts;
	void *map = MAP_FAILED;
	int fd;

	encode_payload(&w, pid);
	if (w.full || sizeof(*h) + w.len > size)
		return;
	/* A memfd named OTEL_CTX, mapped and closed; an anonymous mapping
	 * where memfds are refused. */
	fd = memfd_create("OTEL_CTX", MFD_CLOEXEC | MFD_NOEXEC_SEAL);
	if (fd < 0)
		fd = memfd_create("OTEL_CTX", MFD_CLOEXEC);
	if (fd >= 0) {
		if (ftruncate(fd, (off_t)size) == 0)
			map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
		close(fd);
	}
	if (map == MAP_FAILED)
		map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		return;
	/* A fork child must not show its parent's context. */
	if (madvise(map, size, MADV_DONTFORK) != 0) {
		munmap(map, size);
		return;
	}
	h = map;
	memcpy(h + 1, buf, w.len); /* the payload follows the header */
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
		munmap(map, size);
		return;
	}
	h->version = 2;
	h->published_at_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	h->payload_size = (uint32_t)w.len;
	h->payload = (uint64_t)(uintptr_t)(h + 1);
	atomic_thread_fence(memory_order_seq_cst);
	memcpy(h->signature, "OTEL_CTX", 8); /* last: readers trust what it covers */
	/* Unconditionally, even where the kernel cannot name mappings: readers
	 * may watch prctl itself. */
	(void)prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, map, size, "OTEL_CTX");
}

/* ---- the thread context (OTEP 4947) */

static void thread_gone(void *arg)
{
	struct sc_otel_thread *o = arg;

	sc_otel_point(o->tls, NULL);
	sc_otel_mine = NULL;
	for (int i = 0; i < SC_OTEL_SLOTS; i++)
		free(o->slot[i].rec);
	free(o);
}

static void after_fork_child(void)
{
	/* A new pid: a new key, a new context; the surviving thread's records
	 * hold ids of the parent's key (scopes' built blocks say whose they
	 * are: sc_otel_fill rebuilds them). */
	atomic_store(&proc_pid, 0);
	if (sc_otel_mine)
		for (int i = 0; i < SC_OTEL_SLOTS; i++)
			sc_otel_mine->slot[i].src = 0;
}

/* The key and the process context of this process (again after a fork).
 * proc_lock held. */
static void process_ready(void)
{
	pid_t pid = getpid();
	uint8_t boot[16];
	struct proc_stat st;
	uint64_t key;

	if (atomic_load(&proc_pid) == pid)
		return;
	if (!thread_key_ok) {
		thread_key_ok = pthread_key_create(&thread_key, thread_gone) == 0;
		(void)pthread_atfork(NULL, NULL, after_fork_child);
	}
	otelid_boot_id(boot);
	if (proc_stat_read(0, 0, &st) != 0)
		st.starttime = 0;
	key = otelid_process_key(boot, (uint32_t)pid, st.starttime);
	atomic_store(&sc_otel_trace_hi, otelid_kind_key(key, OTELID_TRACE_HI));
	atomic_store(&sc_otel_trace_lo, otelid_kind_key(key, OTELID_TRACE_LO));
	atomic_store(&sc_otel_task_key, otelid_kind_key(key, OTELID_TASK));
	publish(pid);
	atomic_store(&proc_pid, pid);
}

void sc_otel_enable(bool on)
{
	pthread_mutex_lock(&proc_lock);
	env_read = true;
	atomic_store(&sc_otel_on, on);
	pthread_mutex_unlock(&proc_lock);
}

/* Reads SCOPE_OTEL_CONTEXT once and, unless it says 0, makes the key and
 * publishes the process context.  proc_lock held. */
static void process_start(void)
{
	const char *env;

	if (!env_read) {
		env_read = true;
		env = getenv("SCOPE_OTEL_CONTEXT");
		if (env && strcmp(env, "0") == 0)
			atomic_store(&sc_otel_on, false);
	}
	if (atomic_load(&sc_otel_on))
		process_ready();
}

/* OTEP 4947 has the SDK publish its reference data at process startup, so
 * a profiler that meets the process finds it at once. */
__attribute__((constructor)) static void otel_library_init(void)
{
	pthread_mutex_lock(&proc_lock);
	process_start();
	pthread_mutex_unlock(&proc_lock);
}

struct sc_otel_thread *sc_otel_thread_init(void)
{
	struct sc_otel_thread *o;

	pthread_mutex_lock(&proc_lock);
	process_start();
	pthread_mutex_unlock(&proc_lock);
	if (!atomic_load(&sc_otel_on) || !thread_key_ok)
		return NULL;
	o = aligned_alloc(_Alignof(struct sc_otel_thread), sizeof(*o));
	if (!o)
		return NULL;
	memset(o, 0, sizeof(*o));
	if (pthread_setspecific(thread_key, o) != 0) {
		free(o);
		return NULL;
	}
	/* Its address is the thread's for the thread's life: taken once, so
	 * that a task switch does not go through the TLS descriptor. */
	o->tls = &otel_thread_ctx_v1;
	sc_otel_mine = o;
	return o;
}

/* Attribute entries being put together, written to the record at once. */
struct attrs {
	uint8_t b[SC_OTEL_ATTRS_MAX];
	size_t n;
};

/* Appends one entry of n bytes; a value longer than VALUE_MAX keeps its
 * tail (the end of a path says most), cut at a UTF-8 character's start. */
static void attr_put(struct attrs *a, unsigned key, const char *v, size_t n)
{
	if (n > VALUE_MAX) {
		v += n - VALUE_MAX;
		n = VALUE_MAX;
		while (n && ((unsigned char)*v & 0xc0) == 0x80)
			v++, n--;
	}
	if (a->n + 2 + n > sizeof a->b)
		return;
	a->b[a->n] = (uint8_t)key;
	a->b[a->n + 1] = (uint8_t)n;
	/* A loop, not memcpy: for these few bytes the compiler would inline a
	 * rep movs, which costs more to start than the copy. */
	for (size_t i = 0; i < n; i++)
		a->b[a->n + 2 + i] = (uint8_t)v[i];
	a->n += 2 + n;
}

/* The traceparent binding nearest to s (as scope_value_get() would find
 * it from a task of s); NULL when none. */
static const char *traceparent_of(const scope_t *s, const scope_t **root)
{
	for (; s; s = s->parent) {
		*root = s;
		for (const struct sc_value *v =
			 atomic_load_explicit(&s->values, memory_order_acquire);
		     v; v = v->next)
			if (strcmp(v->key, "traceparent") == 0)
				return v->value;
	}
	return NULL;
}

/* Builds the trace and attributes of task's scope and fork site into c
 * (room for SC_OTEL_ATTRS_MAX bytes of attributes); same, when not NULL,
 * was built for the scope at another site, and its trace is taken as it
 * is. */
static void build(struct sc_otel_built *c, const scope_task_t *task,
		  const struct sc_otel_built *same)
{
	const scope_t *s = task->scope, *root = s;
	const char *tp;
	uint8_t parent[8], flags = 0;
	char digits[12], *d = digits + sizeof digits;
	struct attrs a;

	if (same) {
		memcpy(c->trace_id, same->trace_id, 16);
		flags = same->trace_flags;
	} else {
		/* A traceparent joins the task to the caller's trace (its
		 * flags too); without one the tree has a trace of its own, the
		 * one the daemon exports it under. */
		tp = traceparent_of(s, &root);
		if (!tp || !otelid_traceparent(tp, c->trace_id, parent, &flags)) {
			if (tp) /* an invalid binding: the tree's own trace */
				while (root->parent)
					root = root->parent;
			otelid_trace_keyed(c->trace_id, atomic_load(&sc_otel_trace_hi),
					   atomic_load(&sc_otel_trace_lo), root->id);
			flags = 0;
		}
	}
	c->trace_flags = flags;
	a.n = 0;
	attr_put(&a, KEY_SCOPE, s->name, strlen(s->name));
	if (task->site.func)
		attr_put(&a, KEY_FUNC, task->site.func, strlen(task->site.func));
	if (task->site.file)
		attr_put(&a, KEY_FILE, task->site.file, strlen(task->site.file));
	if (task->site.line > 0) {
		for (unsigned v = (unsigned)task->site.line; v; v /= 10)
			*--d = (char)('0' + v % 10);
		attr_put(&a, KEY_LINE, d, (size_t)(digits + sizeof digits - d));
	}
	memcpy(c->attrs_data, a.b, a.n);
	c->attrs_data_size = (uint16_t)a.n;
	c->pid = atomic_load(&proc_pid);
	c->src = atomic_load_explicit(&s->trace_src, memory_order_relaxed);
	c->func = task->site.func;
	c->file = task->site.file;
	c->line = task->site.line;
}

/* The block task's scope keeps built (made, and hung off the scope, by
 * the first thread to need it; a thread that loses the race frees its
 * own); NULL when memory ran out. */
static const struct sc_otel_built *scope_built(const scope_task_t *task, struct sc_otel_built *tmp)
{
	scope_t *s = task->scope;
	struct sc_otel_built *b = atomic_load_explicit(&s->otel, memory_order_acquire), *mine;

	if (b && b->pid == atomic_load(&proc_pid))
		return b;
	if (b) /* a fork child's: the parent's key made it */
		return NULL;
	build(tmp, task, NULL);
	mine = malloc(sizeof(*mine) + tmp->attrs_data_size);
	if (!mine)
		return NULL;
	memcpy(mine, tmp, sizeof(*mine) + tmp->attrs_data_size);
	if (!atomic_compare_exchange_strong_explicit(&s->otel, &b, mine, memory_order_acq_rel,
						     memory_order_acquire)) {
		free(mine);
		return b->pid == tmp->pid ? b : NULL;
	}
	return mine;
}

void sc_otel_scope_free(scope_t *s)
{
	/* The scope's tasks have all ended: nothing races with this. */
	struct sc_otel_built *b = atomic_load_explicit(&s->otel, memory_order_acquire);

	if (b) {
		free(b);
		atomic_store_explicit(&s->otel, NULL, memory_order_relaxed);
	}
}

struct sc_otel_rec *sc_otel_fill(struct sc_otel_slot *e, const scope_task_t *task)
{
	const scope_t *s = task->scope;
	uint64_t src = atomic_load_explicit(&s->trace_src, memory_order_relaxed);
	union {
		struct sc_otel_built b;
		uint8_t room[sizeof(struct sc_otel_built) + SC_OTEL_ATTRS_MAX];
	} tmp;
	const struct sc_otel_built *b;
	struct sc_otel_rec *r = e->rec;

	if (!atomic_load(&proc_pid)) {
		pthread_mutex_lock(&proc_lock);
		process_ready();
		pthread_mutex_unlock(&proc_lock);
	}
	b = scope_built(task, &tmp.b);
	if (b && b->src != src) {
		/* A traceparent bound above the scope after its block was
		 * built (a nested scope its owner opened first): built anew
		 * each time, which only such a scope pays. */
		build(&tmp.b, task, NULL);
		b = &tmp.b;
	} else if (!b || b->func != task->site.func || b->line != task->site.line ||
		   b->file != task->site.file) {
		/* Another fork site of the scope (or no block): its
		 * attributes, and the scope's trace when there is one. */
		build(&tmp.b, task, b);
		b = &tmp.b;
	}
	e->src = 0; /* until filled */
	if (!r || e->cap < b->attrs_data_size) {
		/* Room for what a few more bytes of another key need, so a
		 * record is seldom made again. */
		size_t cap = b->attrs_data_size + 32u < SC_OTEL_ATTRS_MAX ? b->attrs_data_size + 32u
									  : SC_OTEL_ATTRS_MAX;
		struct sc_otel_rec *n = malloc(offsetof(struct sc_otel_rec, attrs_data) + cap);
		if (!n)
			return NULL;
		free(r);
		r = e->rec = n;
		e->cap = (uint16_t)cap;
		r->valid = 1; /* for good: the pointer says when it counts */
	}
	memcpy(r->trace_id, b->trace_id, 16);
	r->trace_flags = b->trace_flags;
	memcpy(r->attrs_data, b->attrs_data, b->attrs_data_size);
	r->attrs_data_size = b->attrs_data_size;
	e->src = src;
	e->name = s->name_key;
	e->func = task->site.func;
	e->file = task->site.file;
	e->line = task->site.line;
	return r;
}
