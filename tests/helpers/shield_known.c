/* shield_known.c - a libscope program whose scopes carry every cancellation
 * fact the daemon shows: an explicitly cancelled scope whose handler ran, a
 * shield (with its cleanup deadline) opened below it with a handler armed,
 * and below the shield a scope cancelled by its parent, whose handler ran.
 * Prints one JSON line with the scope ids, then waits until killed. */
#include <stdio.h>
#include <unistd.h>

#include "scope.h"

#define HOUR (3600LL * 1000000000)

static void on_cancel(void *ctx)
{
	(void)ctx;
}

static scope_t *open_named(const char *name, unsigned flags, int64_t timeout)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	scope_t *s = NULL;

	cfg.name = name;
	cfg.flags = flags;
	cfg.timeout_ns = timeout;
	if (scope_open(&s, &cfg) < 0) {
		fprintf(stderr, "shield_known: cannot open %s\n", name);
		return NULL;
	}
	return s;
}

int main(int argc, char **argv)
{
	static scope_cancel_handler_t ha, hb, hc;
	scope_t *outer, *cleanup, *mid, *inner;

	(void)argv;
	if (argc > 1) {
		fprintf(stderr, "usage: shield_known (runs until killed)\n");
		return 2;
	}
	/* outer: cancelled explicitly, its handler ran. */
	if (!(outer = open_named("outer", 0, 0)))
		return 1;
	scope_cancel_handler_add(&ha, on_cancel, NULL);
	scope_cancel(outer);
	/* cleanup: a shield below the cancelled outer, a handler armed. */
	if (!(cleanup = open_named("cleanup", SCOPE_F_SHIELD, HOUR)))
		return 1;
	scope_cancel_handler_add(&hb, on_cancel, NULL);
	/* mid, cancelled explicitly; inner below it, cancelled by it. */
	if (!(mid = open_named("mid", 0, 0)) || !(inner = open_named("inner", 0, 0)))
		return 1;
	scope_cancel_handler_add(&hc, on_cancel, NULL);
	scope_cancel(mid);
	printf("{\"pid\":%d,\"outer\":%llu,\"cleanup\":%llu,\"mid\":%llu,\"inner\":%llu}\n",
	       getpid(), (unsigned long long)scope_id(outer), (unsigned long long)scope_id(cleanup),
	       (unsigned long long)scope_id(mid), (unsigned long long)scope_id(inner));
	fflush(stdout);
	for (;;)
		pause();
}
