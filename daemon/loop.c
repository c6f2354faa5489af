/* loop.c - the epoll half of scoped's event loop: per-fd handlers and a short timer list. */
#include "loop.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

struct fd_slot {
	loop_fd_fn fn;
	void *ctx;
	unsigned events;
};

struct timer {
	int64_t id, when_ns;
	loop_timer_fn fn;
	void *ctx;
	struct timer *next;
};

struct loop {
	int epfd;
	int stop;
	struct fd_slot *slots;
	int nslots;
	struct timer *timers; /* unsorted: scoped keeps only a handful */
	int64_t next_timer_id;
};

int64_t loop_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct loop *loop_new(void)
{
	struct loop *l = calloc(1, sizeof *l);
	if (!l)
		return NULL;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		free(l);
		return NULL;
	}
	return l;
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	while (l->timers) {
		struct timer *t = l->timers;
		l->timers = t->next;
		free(t);
	}
	close(l->epfd);
	free(l->slots);
	free(l);
}

static uint32_t to_epoll(unsigned events)
{
	return (events & LOOP_READ ? EPOLLIN : 0) | (events & LOOP_WRITE ? EPOLLOUT : 0);
}

int loop_add(struct loop *l, int fd, unsigned events, loop_fd_fn fn, void *ctx)
{
	if (fd < 0)
		return -EBADF;
	if (fd >= l->nslots) {
		int n = l->nslots ? l->nslots : 64;
		while (n <= fd)
			n *= 2;
		struct fd_slot *s = realloc(l->slots, (size_t)n * sizeof *s);
		if (!s)
			return -ENOMEM;
		for (int i = l->nslots; i < n; i++)
			s[i] = (struct fd_slot){0};
		l->slots = s;
		l->nslots = n;
	}
	struct epoll_event ev = {.events = to_epoll(events), .data.fd = fd};
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	l->slots[fd] = (struct fd_slot){fn, ctx, events};
	return 0;
}

int loop_mod(struct loop *l, int fd, unsigned events)
{
	if (fd < 0 || fd >= l->nslots || !l->slots[fd].fn)
		return -EBADF;
	if (l->slots[fd].events == events)
		return 0;
	struct epoll_event ev = {.events = to_epoll(events), .data.fd = fd};
	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
		return -errno;
	l->slots[fd].events = events;
	return 0;
}

void loop_del(struct loop *l, int fd)
{
	if (fd < 0 || fd >= l->nslots || !l->slots[fd].fn)
		return;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
	l->slots[fd] = (struct fd_slot){0};
}

int64_t loop_timer_add(struct loop *l, int64_t ms, loop_timer_fn fn, void *ctx)
{
	struct timer *t = malloc(sizeof *t);
	if (!t)
		return -ENOMEM;
	*t = (struct timer){++l->next_timer_id, loop_now_ns() + ms * 1000000, fn, ctx, l->timers};
	l->timers = t;
	return t->id;
}

void loop_timer_del(struct loop *l, int64_t id)
{
	for (struct timer **p = &l->timers; *p; p = &(*p)->next)
		if ((*p)->id == id) {
			struct timer *t = *p;
			*p = t->next;
			free(t);
			return;
		}
}

static int next_timeout_ms(struct loop *l)
{
	if (!l->timers)
		return 1000;
	int64_t now = loop_now_ns(), soonest = INT64_MAX;
	for (struct timer *t = l->timers; t; t = t->next)
		if (t->when_ns < soonest)
			soonest = t->when_ns;
	if (soonest <= now)
		return 0;
	int64_t ms = (soonest - now + 999999) / 1000000;
	return ms > 1000 ? 1000 : (int)ms;
}

/* Runs due timers; a callback may add or delete timers, so restart the walk
 * after each call instead of holding a pointer into the list. */
static void run_timers(struct loop *l)
{
	int64_t now = loop_now_ns();
	for (;;) {
		struct timer *due = NULL;
		for (struct timer *t = l->timers; t; t = t->next)
			if (t->when_ns <= now) {
				due = t;
				break;
			}
		if (!due)
			return;
		int64_t id = due->id;
		due->when_ns = INT64_MAX; /* not due again while running */
		int64_t again = due->fn(l, due->ctx);
		for (struct timer *t = l->timers; t; t = t->next)
			if (t->id == id) {
				if (again < 0)
					loop_timer_del(l, id);
				else
					t->when_ns = now + again * 1000000;
				break;
			}
	}
}

int loop_run(struct loop *l)
{
	struct epoll_event evs[64];
	l->stop = 0;
	while (!l->stop) {
		int n = epoll_wait(l->epfd, evs, 64, next_timeout_ms(l));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (int i = 0; i < n && !l->stop; i++) {
			int fd = evs[i].data.fd;
			if (fd >= l->nslots || !l->slots[fd].fn)
				continue; /* deleted by an earlier handler of this batch */
			unsigned mask = 0;
			if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))
				mask |= LOOP_READ;
			if (evs[i].events & EPOLLOUT)
				mask |= LOOP_WRITE;
			mask &= l->slots[fd].events | LOOP_READ;
			l->slots[fd].fn(l, fd, mask, l->slots[fd].ctx);
		}
		run_timers(l);
	}
	return 0;
}

void loop_stop(struct loop *l)
{
	l->stop = 1;
}
