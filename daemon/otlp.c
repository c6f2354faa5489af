/* otlp.c - --otlp: ready scope trees leave the event loop as OTLP/HTTP
 * protobuf requests for a sender thread (libcurl), which rewrites them as
 * OTLP/JSON and gzips them when told to, adds the configured headers, and
 * retries with backoff.  The loop never waits for it: past a bounded queue,
 * requests are dropped and counted. */
#include "otlp.h"

#include "jbuf.h"
#include "log.h"
#include "loop.h"
#include "otelid.h"
#include "otlp_json.h"
#include "trace.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <zlib.h>

#define TAKE_MS 200	       /* how often ready trees are collected */
#define MAX_REQUEST (1u << 20) /* bytes of spans per request, about */
#define MAX_QUEUED 32	       /* requests waiting for the sender */
#define ATTEMPTS 6	       /* per request, the first included */
#define BACKOFF_FIRST_MS 250
#define BACKOFF_MAX_MS 8000
#define REQUEST_TIMEOUT_MS 10000
#define MAX_HEADERS 32
#define MAX_HEADER 4096 /* bytes of one name and value, decoded */

struct request {
	struct request *next;
	char *body;
	size_t len;
	uint64_t spans;
};

struct otlp {
	struct daemon *d;
	int64_t timer;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct request *head, **tail; /* under lock */
	unsigned queued;	      /* under lock */
	bool stop;		      /* under lock */
	_Atomic bool stopping;	      /* read by curl's progress callback */
	char url[1024];
	uint8_t boot_id[16];	    /* the host's, for the span ids (common/otelid.h) */
	int protocol, compression;  /* enum otlp_protocol, enum otlp_compression */
	struct curl_slist *headers; /* Content-Type, Content-Encoding, the user's */
};

static struct otlp *the; /* --otlp is one per daemon */

/* The headers spec names: --otlp-headers, else the OpenTelemetry SDKs'
 * variables. */
static const char *headers_spec(const struct options *opt, const char **from)
{
	const char *v;
	*from = "--otlp-headers";
	if (opt->otlp_headers)
		return opt->otlp_headers;
	*from = "OTEL_EXPORTER_OTLP_TRACES_HEADERS";
	if ((v = getenv(*from)) && *v)
		return v;
	*from = "OTEL_EXPORTER_OTLP_HEADERS";
	return getenv(*from);
}

static int hexdigit(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

/* Percent-decodes s[0..n) into out (cap bytes); -1 on a bad escape, a
 * control byte (CR, LF: a header injected) or no room. */
static int pct_decode(const char *s, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)s[i];
		if (c == '%') {
			if (i + 2 >= n || hexdigit(s[i + 1]) < 0 || hexdigit(s[i + 2]) < 0)
				return -1;
			c = hexdigit(s[i + 1]) << 4 | hexdigit(s[i + 2]);
			i += 2;
		}
		if (c < 0x20 || c == 0x7f || o + 1 >= cap)
			return -1;
		out[o++] = (char)c;
	}
	out[o] = '\0';
	return (int)o;
}

/* Parses "k1=v1,k2=v2" (OTEL_EXPORTER_OTLP_HEADERS's format: W3C Baggage
 * without properties, percent-encoded) into "K: V" header lines appended to
 * *list (NULL: only checked).  0, or -1 with the reason in err. */
static int headers_parse(const char *spec, const char *from, struct curl_slist **list, char *err,
			 size_t errlen)
{
	static const char token[] = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz"
				    "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
	char key[MAX_HEADER], val[MAX_HEADER], line[2 * MAX_HEADER + 4];
	int count = 0;
	for (const char *p = spec; p && *p;) {
		const char *end = strchr(p, ','), *eq;
		if (!end)
			end = p + strlen(p);
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		const char *last = end;
		while (last > p && (last[-1] == ' ' || last[-1] == '\t'))
			last--;
		if (p == last) { /* an empty member, as "a=1,,b=2" */
			p = *end ? end + 1 : end;
			continue;
		}
		eq = memchr(p, '=', (size_t)(last - p));
		size_t klen = eq ? (size_t)(eq - p) : 0;
		while (klen && (p[klen - 1] == ' ' || p[klen - 1] == '\t'))
			klen--;
		const char *v = eq ? eq + 1 : NULL;
		while (v && v < last && (*v == ' ' || *v == '\t'))
			v++;
		if (!eq || klen == 0 || pct_decode(p, klen, key, sizeof key) < 0 ||
		    strspn(key, token) != strlen(key) ||
		    pct_decode(v, (size_t)(last - v), val, sizeof val) < 0) {
			snprintf(err, errlen,
				 "%s: '%.*s' is not a header as name=value (the name a token, the "
				 "value percent-encoded, no control characters)",
				 from, (int)(last - p > 80 ? 80 : last - p), p);
			return -1;
		}
		if (++count > MAX_HEADERS) {
			snprintf(err, errlen, "%s: more than %d headers", from, MAX_HEADERS);
			return -1;
		}
		if (list) {
			snprintf(line, sizeof line, "%s: %s", key, val);
			struct curl_slist *l = curl_slist_append(*list, line);
			if (!l) {
				snprintf(err, errlen, "%s: out of memory", from);
				return -1;
			}
			*list = l;
		}
		p = *end ? end + 1 : end;
	}
	return 0;
}

int otlp_check(const struct options *opt, char *err, size_t errlen)
{
	const char *u = opt->otlp, *from = NULL;
	if (!u)
		return 0;
	if ((strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) ||
	    strlen(u) >= 1024) {
		snprintf(err, errlen,
			 "--otlp takes an http:// or https:// URL (the collector's "
			 "/v1/traces), not '%s'",
			 u);
		return -1;
	}
	const char *spec = headers_spec(opt, &from);
	return headers_parse(spec, from, NULL, err, errlen);
}

static int progress(void *ctx, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t e)
{
	(void)a, (void)b, (void)c, (void)e;
	return atomic_load(&((struct otlp *)ctx)->stopping) ? 1 : 0;
}

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
	(void)p, (void)ctx;
	return size * n;
}

/* Sleeps ms unless told to stop; false when told. */
static bool pause_ms(struct otlp *o, long ms)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&o->lock);
	while (!o->stop && pthread_cond_timedwait(&o->cond, &o->lock, &until) != ETIMEDOUT)
		;
	bool go = !o->stop;
	pthread_mutex_unlock(&o->lock);
	return go;
}

/* Sends one request; retries what may succeed later (no answer, 429, 5xx). */
static void send_one(struct otlp *o, CURL *c, struct request *r)
{
	long backoff = BACKOFF_FIRST_MS;
	for (int attempt = 1;; attempt++) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->len);
		CURLcode rc = curl_easy_perform(c);
		long status = 0;
		if (rc == CURLE_OK)
			curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		if (rc == CURLE_OK && status >= 200 && status < 300) {
			trace_count(TRACE_EXPORTED, r->spans);
			return;
		}
		bool again = rc != CURLE_OK || status == 429 || status == 502 || status == 503 ||
			     status == 504;
		if (!again || attempt == ATTEMPTS || atomic_load(&o->stopping)) {
			trace_count(TRACE_DROP_FAILED, r->spans);
			return;
		}
		if (!pause_ms(o, backoff)) {
			trace_count(TRACE_DROP_FAILED, r->spans);
			return;
		}
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
}

/* gzip (RFC 1952) of in[0..n) into a new buffer; NULL when memory ran out. */
static char *gzip(const char *in, size_t n, size_t *outlen)
{
	z_stream z;
	memset(&z, 0, sizeof z);
	if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return NULL;
	uLong cap = deflateBound(&z, (uLong)n);
	char *out = malloc(cap);
	if (out) {
		z.next_in = (Bytef *)(uintptr_t)in;
		z.avail_in = (uInt)n;
		z.next_out = (Bytef *)out;
		z.avail_out = (uInt)cap;
		if (deflate(&z, Z_FINISH) == Z_STREAM_END) {
			*outlen = z.total_out;
		} else {
			free(out);
			out = NULL;
		}
	}
	deflateEnd(&z);
	return out;
}

/* Turns r's protobuf body into what goes on the wire: OTLP/JSON and gzip
 * when configured.  false when memory ran out (r is then dropped). */
static bool encode(const struct otlp *o, struct request *r)
{
	if (o->protocol == OTLP_JSON) {
		struct jbuf j;
		jb_init(&j);
		if (otlp_json_request(r->body, r->len, &j) < 0) {
			jb_free(&j);
			return false;
		}
		free(r->body);
		r->body = j.p; /* j's buffer goes with the request */
		r->len = j.len;
	}
	if (o->compression == OTLP_GZIP) {
		size_t n;
		char *z = gzip(r->body, r->len, &n);
		if (!z)
			return false;
		free(r->body);
		r->body = z;
		r->len = n;
	}
	return true;
}

static void *sender(void *arg)
{
	struct otlp *o = arg;
	CURL *c = curl_easy_init();
	if (c) {
		curl_easy_setopt(c, CURLOPT_URL, o->url);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, o->headers);
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)REQUEST_TIMEOUT_MS);
		curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, progress);
		curl_easy_setopt(c, CURLOPT_XFERINFODATA, o);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	}
	for (;;) {
		pthread_mutex_lock(&o->lock);
		while (!o->head && !o->stop)
			pthread_cond_wait(&o->cond, &o->lock);
		struct request *r = o->head;
		if (o->stop || !r) {
			pthread_mutex_unlock(&o->lock);
			break;
		}
		o->head = r->next;
		if (!o->head)
			o->tail = &o->head;
		o->queued--;
		pthread_mutex_unlock(&o->lock);
		if (c && encode(o, r))
			send_one(o, c, r);
		else
			trace_count(TRACE_DROP_FAILED, r->spans);
		free(r->body);
		free(r);
	}
	if (c)
		curl_easy_cleanup(c);
	return NULL;
}

/* Hands body (malloc'ed, taken) to the sender, or drops it when the queue is full. */
static void enqueue(struct otlp *o, char *body, size_t len, uint64_t spans)
{
	struct request *r = malloc(sizeof *r);
	pthread_mutex_lock(&o->lock);
	bool room = r && o->queued < MAX_QUEUED && !o->stop;
	if (room) {
		*r = (struct request){NULL, body, len, spans};
		*o->tail = r;
		o->tail = &r->next;
		o->queued++;
		pthread_cond_signal(&o->cond);
	}
	pthread_mutex_unlock(&o->lock);
	if (!room) {
		trace_count(TRACE_DROP_QUEUE, spans);
		free(body);
		free(r);
	}
}

/* Collects every process's ready trees, a request per process and ~1 MiB. */
static int64_t on_timer(struct loop *l, void *ctx)
{
	(void)l;
	struct otlp *o = ctx;
	for (struct proc *p = o->d->procs; p; p = p->next) {
		struct trace_resource r = {
		    (int)p->pid,
		    p->name,
		    p->exe,
		    p->runtime_version,
		    p->clk.mono,
		    p->clk.real,
		    otelid_process_key(o->boot_id, (uint32_t)p->pid, p->starttime)};
		for (;;) {
			struct jbuf b;
			jb_init(&b);
			uint64_t n = trace_take(&p->model, &r, &b, MAX_REQUEST);
			if (!n || b.oom) {
				if (n)
					trace_count(TRACE_DROP_MEMORY, n);
				jb_free(&b);
				break;
			}
			enqueue(o, b.p, b.len, n); /* b's buffer goes with it */
		}
	}
	return TAKE_MS;
}

int otlp_start(struct daemon *d)
{
	if (!d->opt.otlp)
		return 0;
	struct trace_config c = {
	    .on = true,
	    .sample_permille = (unsigned)d->opt.otlp_sample,
	    .max_spans = (uint64_t)d->opt.otlp_max_spans,
	    .max_spans_per_s = (uint64_t)d->opt.otlp_max_rate,
	};
	if (getrandom(&c.seed, sizeof c.seed, 0) != sizeof c.seed)
		c.seed = (uint64_t)loop_now_ns();
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -EIO;
	struct otlp *o = calloc(1, sizeof *o);
	if (!o)
		return -ENOMEM;
	o->d = d;
	o->tail = &o->head;
	snprintf(o->url, sizeof o->url, "%s", d->opt.otlp);
	otelid_boot_id(o->boot_id);
	o->protocol = d->opt.otlp_protocol;
	o->compression = d->opt.otlp_compression;
	const char *from, *spec = headers_spec(&d->opt, &from);
	char err[256];
	o->headers = curl_slist_append(NULL, o->protocol == OTLP_JSON
						 ? "Content-Type: application/json"
						 : "Content-Type: application/x-protobuf");
	if (o->headers && o->compression == OTLP_GZIP &&
	    !curl_slist_append(o->headers, "Content-Encoding: gzip")) {
		curl_slist_free_all(o->headers);
		o->headers = NULL;
	}
	if (!o->headers || headers_parse(spec, from, &o->headers, err, sizeof err) < 0) {
		int bad = o->headers ? -EINVAL : -ENOMEM;
		if (o->headers)
			log_error("%s", err); /* the environment changed since otlp_check() */
		curl_slist_free_all(o->headers);
		free(o);
		return bad;
	}
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->cond, NULL);
	int rc = pthread_create(&o->thread, NULL, sender, o);
	if (rc) {
		curl_slist_free_all(o->headers);
		free(o);
		return -rc;
	}
	o->started = true;
	int64_t id = loop_timer_add(d->loop, TAKE_MS, on_timer, o);
	o->timer = id > 0 ? id : 0;
	the = o;
	trace_configure(&c);
	log_info("exporting scope trees to %s (OTLP/HTTP %s%s; %ld per mille of the trees "
		 "that went well)",
		 o->url, o->protocol == OTLP_JSON ? "JSON" : "protobuf",
		 o->compression == OTLP_GZIP ? ", gzip" : "", d->opt.otlp_sample);
	return id < 0 ? (int)id : 0;
}

void otlp_stop(struct daemon *d)
{
	struct otlp *o = the;
	if (!o)
		return;
	if (o->timer)
		loop_timer_del(d->loop, o->timer);
	pthread_mutex_lock(&o->lock);
	o->stop = true;
	atomic_store(&o->stopping, true);
	pthread_cond_broadcast(&o->cond);
	pthread_mutex_unlock(&o->lock);
	if (o->started)
		pthread_join(o->thread, NULL);
	for (struct request *r = o->head, *next; r; r = next) {
		next = r->next;
		trace_count(TRACE_DROP_FAILED, r->spans);
		free(r->body);
		free(r);
	}
	pthread_mutex_destroy(&o->lock);
	pthread_cond_destroy(&o->cond);
	curl_slist_free_all(o->headers);
	curl_global_cleanup();
	free(o);
	the = NULL;
}
