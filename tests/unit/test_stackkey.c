/* test_stackkey.c - the key of a dump's thread entries: the same threads
 * are the same whatever their state and blocked_in; any other input that a
 * thread's entry is written from (name, error, lock, a frame, the order of
 * the threads, one thread more) makes it another. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../daemon/stackkey.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define N 3

static uint64_t frames[N][4] = {{1, 2, 3, 4}, {1, 2, 3, 4}, {7, 8, 0, 0}};

static void threads(struct stack_thread *t)
{
	memset(t, 0, N * sizeof *t);
	for (int i = 0; i < N; i++) {
		t[i].tid = 100 + (uint32_t)i;
		memcpy(t[i].comm, "worker-0", 9);
		t[i].comm[7] = (char)('0' + i);
		t[i].state = "WAITING";
		t[i].blocked_in = "futex";
		t[i].frames = frames[i];
		t[i].nframes = i == 2 ? 2 : 4;
	}
}

static void test_same_but_state(void **state)
{
	(void)state;
	struct stack_thread t[N];
	struct stack_key k = {0};
	threads(t);
	assert_false(stack_key_same(&k, t, N)); /* not made yet */
	assert_true(stack_key_set(&k, t, N));
	assert_true(stack_key_same(&k, t, N));
	t[1].state = "RUNNABLE";
	t[1].blocked_in = NULL;
	assert_true(stack_key_same(&k, t, N));
	stack_key_free(&k);
}

/* Each change, made alone to the threads the key was made of. */
static void test_each_input(void **state)
{
	(void)state;
	struct stack_thread t[N];
	uint64_t other[4] = {1, 2, 9, 4};
	struct stack_key k = {0};
	threads(t);
	assert_true(stack_key_set(&k, t, N));
	for (int c = 0; c < 12; c++) {
		threads(t);
		switch (c) {
		case 0:
			t[0].comm[0] = 'W';
			break;
		case 1:
			t[1].error = -ESRCH;
			break;
		case 2:
			t[1].error_why = "gone";
			break;
		case 3:
			t[2].approximate = true;
			break;
		case 4:
			t[2].approximate_why = "on a CPU";
			break;
		case 5:
			t[0].lock_addr = 0x1000;
			break;
		case 6:
			t[0].lock_owner = 101;
			break;
		case 7:
			t[0].lock_class = "pthread_mutex_t";
			break;
		case 8:
			strcpy(t[0].lock_owner_comm, "holder");
			break;
		case 9:
			t[1].frames = other;
			break; /* one return address */
		case 10:
			t[2].nframes = 1;
			break;
		case 11:
			t[0].tid = 99;
			break;
		}
		assert_false(stack_key_same(&k, t, N));
	}
	threads(t);
	assert_false(stack_key_same(&k, t, N - 1)); /* a thread fewer */
	struct stack_thread swapped[N] = {t[1], t[0], t[2]};
	assert_false(stack_key_same(&k, swapped, N));
	stack_key_free(&k);
}

/* Made again from other threads, the key is theirs alone. */
static void test_set_again(void **state)
{
	(void)state;
	struct stack_thread t[N];
	struct stack_key k = {0};
	threads(t);
	assert_true(stack_key_set(&k, t, N));
	assert_true(stack_key_set(&k, t + 1, N - 1));
	assert_true(stack_key_same(&k, t + 1, N - 1));
	assert_false(stack_key_same(&k, t, N));
	stack_key_free(&k);
	assert_false(stack_key_same(&k, t + 1, N - 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_same_but_state),
	    cmocka_unit_test(test_each_input),
	    cmocka_unit_test(test_set_again),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
