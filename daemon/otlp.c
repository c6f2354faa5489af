/* otlp.c - --otlp: ready scope trees leave the event loop as OTLP/HTTP
 * protobuf requests for a sender thread (libcurl), which retries with
 * backoff.  The loop never waits for it: past a bounded queue, requests are
 * dropped and counted. */
#include "otlp.h"

#include "log.h"
#include "loop.h"
#include "otelid.h"
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

#define TAKE_MS 200	       /* how often ready trees are collected */
#define MAX_REQUEST (1u << 20) /* bytes of spans per request, about */
#define MAX_QUEUED 32	       /* requests waiting for the sender */
#define ATTEMPTS 6	       /* per request, the first included */
#define BACKOFF_FIRST_MS 250
#define BACKOFF_MAX_MS 8000
#define REQUEST_TIMEOUT_MS 10000

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
	uint8_t boot_id[16]; /* the host's, for the span ids (common/otelid.h) */
};

static struct otlp *the; /* --otlp is one per daemon */

int otlp_check(const struct options *opt, char *err, size_t errlen)
{
	const char *u = opt->otlp;
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
	return 0;
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

static void *sender(void *arg)
{
	struct otlp *o = arg;
	CURL *c = curl_easy_init();
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/x-protobuf");
	if (c) {
		curl_easy_setopt(c, CURLOPT_URL, o->url);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
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
		if (c)
			send_one(o, c, r);
		else
			trace_count(TRACE_DROP_FAILED, r->spans);
		free(r->body);
		free(r);
	}
	curl_slist_free_all(h);
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
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->cond, NULL);
	int rc = pthread_create(&o->thread, NULL, sender, o);
	if (rc) {
		free(o);
		return -rc;
	}
	o->started = true;
	int64_t id = loop_timer_add(d->loop, TAKE_MS, on_timer, o);
	o->timer = id > 0 ? id : 0;
	the = o;
	trace_configure(&c);
	log_info("exporting scope trees to %s (OTLP/HTTP protobuf; %ld per mille of the trees "
		 "that went well)",
		 o->url, d->opt.otlp_sample);
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
	curl_global_cleanup();
	free(o);
	the = NULL;
}
