/* test_daemon_watch.c - the daemon's "gone" list (daemon/watch.c): parts
 * that hold pointers to processes and clients register once and are told,
 * in registration order, before one goes; the agents' replies go to the
 * part that registered for them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../daemon/daemon.h"

#include <string.h>

static char calls[64];
static size_t ncalls;

static void note(char c)
{
	if (ncalls < sizeof calls - 1)
		calls[ncalls++] = c;
}

static void a_ended(struct daemon *d, struct proc *p)
{
	(void)d, (void)p;
	note('e');
}
static void a_freed(struct daemon *d, struct proc *p)
{
	(void)d, (void)p;
	note('f');
}
static void a_client(struct daemon *d, struct client *c)
{
	(void)d, (void)c;
	note('c');
}
static void b_client(struct daemon *d, struct client *c)
{
	(void)d, (void)c;
	note('C');
}

static void a_msg(struct daemon *d, const struct proto_msg *m, struct proc *p)
{
	(void)d, (void)p;
	note(m->type == PROTO_STACK_DONE ? 'm' : '?');
}

static const struct watcher wa = {
    .proc_ended = a_ended, .proc_freed = a_freed, .client_gone = a_client, .agent_msg = a_msg};
static const struct watcher wb = {.client_gone = b_client};

static void test_watchers_told_once_each_in_order(void **state)
{
	(void)state;
	static struct daemon d;
	struct proc p;
	struct client c;

	memset(calls, 0, sizeof calls);
	ncalls = 0;
	/* Nobody registered: nothing to tell. */
	daemon_proc_ended(&d, &p);
	daemon_client_gone(&d, &c);
	assert_int_equal(ncalls, 0);

	daemon_watch(&d, &wa);
	daemon_watch(&d, &wb);
	daemon_watch(&d, &wa); /* again: still once */
	assert_int_equal(d.nwatch, 2);
	daemon_proc_ended(&d, &p);
	daemon_proc_freed(&d, &p);
	daemon_client_gone(&d, &c);
	struct proto_msg m = {.type = PROTO_STACK_DONE};
	daemon_agent_msg(&d, &m, &p);
	assert_string_equal(calls, "efcCm");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_watchers_told_once_each_in_order),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
