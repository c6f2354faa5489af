/* test_utf8.c - peers' text kept and sent as valid UTF-8 without controls:
 * a table of byte strings and what the daemon keeps of each, and the JSON
 * writer's output for bytes no peer should have sent, parsed back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../daemon/jbuf.h"
#include "../../daemon/utf8.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define R "\xef\xbf\xbd" /* U+FFFD */

static const struct {
	const char *in;
	size_t len;
	const char *kept;
} cases[] = {
    {"plain", 5, "plain"},
    {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
    {"\xff", 1, R},
    {"a\nb", 3, "a" R "b"},
    {"\x1b[31mred", 8, R "[31mred"},
    {"del\x7f", 4, "del" R},
    {"c1\xc2\x9b", 4, "c1" R},		       /* CSI as C1 */
    {"nbsp\xc2\xa0", 6, "nbsp\xc2\xa0"},       /* not a control */
    {"over\xc0\xaf", 6, "over" R R},	       /* overlong '/' */
    {"sur\xed\xa0\x80", 6, "sur" R R R},       /* a surrogate */
    {"big\xf4\x90\x80\x80", 7, "big" R R R R}, /* past U+10FFFF */
    {"cut\xe2\x82", 5, "cut" R R},
    {"nul\0x", 5, "nul" R "x"},
};

static void test_clean(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t n;
		char *c = text_clean_dup(cases[i].in, cases[i].len, &n);
		assert_non_null(c);
		if (strcmp(c, cases[i].kept) != 0 || n != strlen(cases[i].kept))
			fail_msg("case %zu: kept '%s', want '%s'", i, c, cases[i].kept);
		assert_true(text_is_clean(c, n));
		assert_int_equal(text_is_clean(cases[i].in, cases[i].len),
				 strcmp(cases[i].in, cases[i].kept) == 0 && cases[i].len == n);
		free(c);
	}
}

/* Whatever bytes reach the writer, its output parses, and controls and
 * invalid bytes do not come out raw. */
static void test_json_writer(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct jbuf b;
		jb_init(&b);
		jb_arr(&b);
		jb_strn(&b, cases[i].in, cases[i].len);
		jb_arr_end(&b);
		json_error_t err;
		json_t *j = json_loadb(b.p, b.len, JSON_ALLOW_NUL, &err);
		if (!j)
			fail_msg("case %zu: the output does not parse: %s", i, err.text);
		for (size_t k = 0; k < b.len; k++) {
			unsigned char c = (unsigned char)b.p[k];
			if (c < 0x20 || c == 0x7f || c == 0xff)
				fail_msg("case %zu: byte 0x%02x written raw", i, c);
		}
		json_decref(j);
		jb_free(&b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_clean),
	    cmocka_unit_test(test_json_writer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
