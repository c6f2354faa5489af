/* peer_glib.c - GLib's GThreadPool on the scheduler workloads W1 and W2
 * (a pool has no join: a counter under a mutex and a condition stands in),
 * one round: prints "W1 ns", "W2 ns" for bench_sched to compare.  W3 needs
 * nested joins, which a GThreadPool cannot do without deadlocking. */
#include <glib.h>
#include <stdio.h>

#include "bench.h"
#include "peer_work.h"

static GMutex lock;
static GCond done;
static int left;

static void run(gpointer data, gpointer user)
{
	(void)data;
	(void)user;
	peer_nothing();
	g_mutex_lock(&lock);
	if (--left == 0)
		g_cond_signal(&done);
	g_mutex_unlock(&lock);
}

static GThreadPool *pool;

static void fan(int n)
{
	g_mutex_lock(&lock);
	left = n;
	g_mutex_unlock(&lock);
	for (int i = 0; i < n; i++)
		g_thread_pool_push(pool, GINT_TO_POINTER(1), NULL);
	g_mutex_lock(&lock);
	while (left > 0)
		g_cond_wait(&done, &lock);
	g_mutex_unlock(&lock);
}

static void w1(void)
{
	fan(1);
}

static void w2(void)
{
	fan(PEER_W2_TASKS);
}

static long long now(void)
{
	return bench_now_ns();
}

int main(void)
{
	static const struct peer_load w[] = {
	    {"W1", w1, 1},
	    {"W2", w2, PEER_W2_TASKS},
	};

	pool = g_thread_pool_new(run, NULL, (int)g_get_num_processors(), FALSE, NULL);
	if (!pool)
		return 1;
	peer_run(w, 2, now);
	g_thread_pool_free(pool, FALSE, TRUE);
	return 0;
}
