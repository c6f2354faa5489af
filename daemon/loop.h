/* loop.h - scoped's small event loop: file events and timers (epoll underneath). */
#ifndef DAEMON_LOOP_H
#define DAEMON_LOOP_H

#include <stdint.h>

#define LOOP_READ 1u /* also reported on hang-up and error, so the reader sees EOF */
#define LOOP_WRITE 2u

struct loop;

typedef void (*loop_fd_fn)(struct loop *l, int fd, unsigned events, void *ctx);
/* A timer callback returns the milliseconds until it runs again, or -1 to end. */
typedef int64_t (*loop_timer_fn)(struct loop *l, void *ctx);

/* New loop, or NULL with errno set. */
struct loop *loop_new(void);
void loop_free(struct loop *l);

/* Watches fd for events (LOOP_READ|LOOP_WRITE) and calls fn with ctx.
 * Returns 0 or a negative errno. */
int loop_add(struct loop *l, int fd, unsigned events, loop_fd_fn fn, void *ctx);
/* Changes what fd is watched for. */
int loop_mod(struct loop *l, int fd, unsigned events);
/* Stops watching fd (call before close()). */
void loop_del(struct loop *l, int fd);

/* Runs fn in ms milliseconds.  Returns a timer id (> 0) or a negative errno. */
int64_t loop_timer_add(struct loop *l, int64_t ms, loop_timer_fn fn, void *ctx);
void loop_timer_del(struct loop *l, int64_t id);

/* Serves events until loop_stop().  Returns 0, or a negative errno when
 * epoll itself failed. */
int loop_run(struct loop *l);
void loop_stop(struct loop *l);

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t loop_now_ns(void);

#endif
