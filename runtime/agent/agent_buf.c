/* agent_buf.c - the agent thread's output buffer: whole frames appended,
 * written to the non-blocking socket as far as it takes them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "agent.h"

uint8_t *sc_buf_reserve(struct sc_buf *b, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 64 * 1024;
		while (cap < b->len + n)
			cap *= 2;
		if (cap > b->max)
			cap = b->max;
		uint8_t *p = cap >= b->len + n ? realloc(b->p, cap) : NULL;
		if (!p) {
			b->overflow = 1;
			return NULL;
		}
		b->p = p;
		b->cap = cap;
		if (b->frame_at < b->sent) /* the signal handler's view moved too */
			atomic_store_explicit(&sc_exit_rest, p + b->sent, memory_order_relaxed);
	}
	return b->p + b->len;
}

int sc_buf_put_msg(struct sc_buf *b, const struct proto_msg *m, const uint32_t *tids,
		   const uint64_t *addrs)
{
	/* Control frames are small except stack replies; reserve the worst. */
	size_t need = PROTO_HDR_SIZE + 64 + 3 * (PROTO_MAX_STR + 3) + 8 * PROTO_MAX_FRAMES;
	uint8_t *p = sc_buf_reserve(b, need);
	if (!p)
		return -1;
	int n = proto_encode(p, need, m, tids, addrs);
	if (n < 0)
		return -1;
	b->len += (size_t)n;
	return 0;
}

int sc_buf_put_site(struct sc_buf *b, uint32_t id, const struct sc_site *s, uint16_t flags)
{
	uint16_t slen[2];
	uint32_t n = sc_enc_site_size(s, slen);
	uint8_t *p = sc_buf_reserve(b, n);
	if (!p)
		return -1;
	sc_enc_site(p, n, id, s, slen, flags);
	b->len += n;
	return 0;
}

struct define_ctx {
	struct sc_buf *b;
	uint16_t flags;
};

/* A site first numbered by an event the agent encodes itself (a snapshot
 * of a task forked while no daemon listened): defined just ahead of it. */
static void buf_define_site(void *ctx, uint32_t id, const struct sc_site *s)
{
	struct define_ctx *d = ctx;
	(void)sc_buf_put_site(d->b, id, s, d->flags);
}

int sc_buf_put_ev(struct sc_buf *b, const struct sc_ev *ev, uint16_t flags)
{
	struct sc_enc e;
	if (!sc_enc_measure(ev, &e))
		return 0; /* nothing to say about kinds the protocol lacks */
	if (sc_enc_wants_site(&e)) {
		struct define_ctx d = {b, flags};
		e.site = sc_site_number(&ev->site, buf_define_site, &d);
	}
	uint8_t *p = sc_buf_reserve(b, e.size);
	if (!p)
		return -1;
	sc_enc_write(ev, &e, flags, p);
	b->len += e.size;
	return 0;
}

/* Moves frame_at past every frame that is now fully sent, and publishes the
 * unsent rest of the current frame for the fatal-signal handler. */
static void track_boundary(struct sc_buf *b)
{
	if (b->sent == b->len) {
		/* All of it went: the buffer holds whole frames, so this is a
		 * boundary, with nothing left over.  (Walking the frames after
		 * every send was 7% of the agent's time in a fork storm; the
		 * walk is needed only when the socket took part of them.) */
		b->frame_at = b->sent;
		atomic_store_explicit(&sc_exit_rest_len, 0, memory_order_relaxed);
		return;
	}
	while (b->frame_at < b->sent) {
		uint32_t flen;
		memcpy(&flen, b->p + b->frame_at, 4);
		if (b->frame_at + flen > b->sent)
			break;
		b->frame_at += flen;
	}
	if (b->frame_at < b->sent) {
		uint32_t flen;
		memcpy(&flen, b->p + b->frame_at, 4);
		atomic_store_explicit(&sc_exit_rest, b->p + b->sent, memory_order_relaxed);
		atomic_store_explicit(&sc_exit_rest_len, b->frame_at + flen - b->sent,
				      memory_order_relaxed);
	} else {
		atomic_store_explicit(&sc_exit_rest_len, 0, memory_order_relaxed);
	}
}

int sc_buf_flush(struct sc_buf *b, int fd)
{
	while (b->sent < b->len) {
		int idle = 0;
		/* The fatal-signal handler takes the socket for good; after that
		 * the agent writes nothing more. */
		if (!atomic_compare_exchange_strong(&sc_sock_owner, &idle, 1))
			return 0;
		ssize_t n = send(fd, b->p + b->sent, b->len - b->sent, MSG_DONTWAIT | MSG_NOSIGNAL);
		int err = errno;
		if (n > 0) {
			b->sent += (size_t)n;
			track_boundary(b);
		}
		atomic_store_explicit(&sc_sock_owner, 0, memory_order_release);
		if (n < 0) {
			if (err == EINTR)
				continue;
			if (err == EAGAIN || err == EWOULDBLOCK)
				return 0;
			return -1;
		}
	}
	b->len = b->sent = b->frame_at = 0;
	atomic_store_explicit(&sc_exit_rest_len, 0, memory_order_relaxed);
	return 1;
}

void sc_buf_free(struct sc_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}
