/* metrics.c - the /metrics HTTP endpoint: libmicrohttpd without threads of its
 * own, driven by scoped's event loop through MHD's epoll descriptor, so that
 * a scrape reads the model with no lock and no copy. */
#include "metrics.h"

#include "log.h"
#include "loop.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define METRICS_MAX_CONNECTIONS 16
#define METRICS_CONN_TIMEOUT_S 10
#define METRICS_IDLE_MS 1000 /* MHD runs at least this often, for its timeouts */
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct metrics {
	struct daemon *d;
	int listen_fd, epoll_fd;
	struct MHD_Daemon *mhd;
	int64_t timer;
	char address[INET6_ADDRSTRLEN + 16];
	struct metrics_stacks stacks[METRICS_SOURCES];
};

int metrics_parse_addr(const char *spec, struct sockaddr_storage *sa, socklen_t *salen, char *err,
		       size_t errlen)
{
	char host[256] = "", port[16];
	const char *colon = strrchr(spec, ':');
	const char *p = colon ? colon + 1 : spec;
	size_t hlen = colon ? (size_t)(colon - spec) : 0;
	if (hlen >= 2 && spec[0] == '[' && spec[hlen - 1] == ']') {
		spec++;
		hlen -= 2;
	} else if (colon && memchr(spec, ':', hlen)) {
		snprintf(err, errlen,
			 "--metrics '%s': write an IPv6 address in brackets, "
			 "as [::1]:9464",
			 spec);
		return -1;
	}
	char *end;
	errno = 0;
	long n = strtol(p, &end, 10);
	if (!*p || *end || errno || n < 0 || n > 65535 || hlen >= sizeof host) {
		snprintf(err, errlen, "--metrics takes [ADDR:]PORT with PORT 0..65535, not '%s'",
			 colon ? spec : p);
		return -1;
	}
	memcpy(host, spec, hlen);
	host[hlen] = 0;
	snprintf(port, sizeof port, "%ld", n);
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai;
	int rc = getaddrinfo(hlen ? host : "127.0.0.1", port, &hints, &ai);
	if (rc) {
		snprintf(err, errlen, "--metrics: cannot resolve '%s': %s", host, gai_strerror(rc));
		return -1;
	}
	memcpy(sa, ai->ai_addr, ai->ai_addrlen);
	*salen = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

/* "ADDR:PORT" of a bound socket. */
static void name_socket(int fd, char *out, size_t len)
{
	struct sockaddr_storage sa;
	socklen_t sl = sizeof sa;
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (getsockname(fd, (struct sockaddr *)&sa, &sl) == 0) {
		if (sa.ss_family == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&sa;
			inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof host);
			port = ntohs(s6->sin6_port);
			snprintf(out, len, "[%s]:%u", host, port);
			return;
		}
		struct sockaddr_in *s4 = (struct sockaddr_in *)&sa;
		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof host);
		port = ntohs(s4->sin_port);
	}
	snprintf(out, len, "%s:%u", host, port);
}

int metrics_open(struct daemon *d, char *err, size_t errlen)
{
	struct sockaddr_storage sa;
	socklen_t salen;
	if (metrics_parse_addr(d->opt.metrics, &sa, &salen, err, errlen) < 0)
		return -1;
	int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, salen) < 0 || listen(fd, 64) < 0) {
		snprintf(err, errlen,
			 "cannot serve metrics on '%s': %s; is another program on that port?",
			 d->opt.metrics, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	struct metrics *m = calloc(1, sizeof *m);
	if (!m) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	m->d = d;
	m->listen_fd = fd;
	m->epoll_fd = -1;
	m->stacks[0].source = "bpf";
	m->stacks[1].source = "signal";
	name_socket(fd, m->address, sizeof m->address);
	d->metrics = m;
	return 0;
}

const char *metrics_address(const struct daemon *d)
{
	return d->metrics ? d->metrics->address : "";
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
			     char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
	if (!r) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result rc = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result text(struct MHD_Connection *conn, unsigned status, const char *msg)
{
	return reply(conn, status, "text/plain; charset=utf-8", (char *)msg, strlen(msg),
		     MHD_RESPMEM_PERSISTENT);
}

/* MHD's request handler: GET /metrics renders, the rest is refused. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	(void)version, (void)upload, (void)upload_size, (void)con_cls;
	struct metrics *m = cls;
	bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0;
	if (!get && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (strcmp(url, "/") == 0)
		return text(conn, MHD_HTTP_OK, "scoped: metrics at /metrics\n");
	if (strcmp(url, "/metrics") != 0)
		return text(conn, MHD_HTTP_NOT_FOUND, "not found; metrics are at /metrics\n");
	struct jbuf b;
	jb_init(&b);
	metrics_render(m->d, &b);
	if (b.oom) {
		jb_free(&b);
		return text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
	}
	/* The buffer goes to MHD, which frees it once sent. */
	return reply(conn, MHD_HTTP_OK, CONTENT_TYPE, b.p, b.len, MHD_RESPMEM_MUST_FREE);
}

/* Runs MHD and says in how many ms it wants to run again. */
static int64_t run_mhd(struct metrics *m)
{
	MHD_run(m->mhd);
	MHD_UNSIGNED_LONG_LONG ms;
	if (MHD_get_timeout(m->mhd, &ms) == MHD_YES && ms < METRICS_IDLE_MS)
		return (int64_t)ms;
	return METRICS_IDLE_MS;
}

static int64_t on_timer(struct loop *l, void *ctx)
{
	(void)l;
	return run_mhd(ctx);
}

static void on_epoll(struct loop *l, int fd, unsigned events, void *ctx)
{
	(void)fd, (void)events;
	struct metrics *m = ctx;
	int64_t next = run_mhd(m);
	if (next < METRICS_IDLE_MS) {
		/* MHD has work left (its epoll is edge-triggered, so our fd
		 * may not wake us again): come back when it asks. */
		loop_timer_del(l, m->timer);
		m->timer = loop_timer_add(l, next, on_timer, m);
	}
}

int metrics_start(struct daemon *d)
{
	struct metrics *m = d->metrics;
	if (!m)
		return 0;
	m->mhd =
	    MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, m,
			     MHD_OPTION_LISTEN_SOCKET, m->listen_fd, MHD_OPTION_CONNECTION_LIMIT,
			     (unsigned)METRICS_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
			     (unsigned)METRICS_CONN_TIMEOUT_S, MHD_OPTION_END);
	if (!m->mhd)
		return errno ? -errno : -EIO;
	m->listen_fd = -1; /* MHD closes it when it stops */
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	int rc = info ? 0 : -ENOTSUP;
	if (!rc) {
		m->epoll_fd = info->epoll_fd;
		rc = loop_add(d->loop, m->epoll_fd, LOOP_READ, on_epoll, m);
	}
	if (!rc) {
		int64_t id = loop_timer_add(d->loop, METRICS_IDLE_MS, on_timer, m);
		rc = id < 0 ? (int)id : 0;
		m->timer = id;
	}
	if (rc)
		return rc;
	log_info("serving metrics on http://%s/metrics", m->address);
	return 0;
}

void metrics_stop(struct daemon *d)
{
	struct metrics *m = d->metrics;
	if (!m)
		return;
	if (m->mhd) {
		if (m->epoll_fd >= 0)
			loop_del(d->loop, m->epoll_fd);
		if (m->timer > 0)
			loop_timer_del(d->loop, m->timer);
		MHD_stop_daemon(m->mhd);
	}
	if (m->listen_fd >= 0)
		close(m->listen_fd);
	free(m);
	d->metrics = NULL;
}

void metrics_stack_done(struct daemon *d, const struct stack_req *r, bool ok)
{
	struct metrics *m = d->metrics;
	if (!m || !r->source)
		return;
	for (size_t i = 0; i < METRICS_SOURCES; i++)
		if (strcmp(m->stacks[i].source, r->source) == 0) {
			*(ok ? &m->stacks[i].ok : &m->stacks[i].failed) += 1;
			tally_hist_add(&m->stacks[i].duration, loop_now_ns() - r->started_ns);
			return;
		}
}

const struct metrics_stacks *metrics_stack_stats(const struct daemon *d)
{
	return d->metrics ? d->metrics->stacks : NULL;
}
