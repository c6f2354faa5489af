/* test_termtext.c - what scopecmd and scopetop print of a target's names:
 * controls (C0, DEL, C1) and bytes that are not UTF-8 escaped or replaced,
 * everything else kept byte for byte, cuts at character boundaries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/termtext.h"

static void expect(const char *in, const char *want)
{
	char buf[256];
	size_t n = tt_escape(buf, sizeof buf, in, 0);
	assert_string_equal(buf, want);
	assert_int_equal(n, strlen(want));
	char *d = tt_escape_dup(in);
	assert_string_equal(d, want);
	free(d);
	assert_true(tt_clean(in) == (strcmp(in, want) == 0));
}

static void test_escapes(void **state)
{
	(void)state;
	expect("plain name", "plain name");
	expect("caf\xc3\xa9 \xe2\x80\xa6 \xf0\x9f\x98\x80",
	       "caf\xc3\xa9 \xe2\x80\xa6 \xf0\x9f\x98\x80");
	expect("a\x1b[2Jb", "a\\x1b[2Jb");
	expect("line\nnext\ttab\rret", "line\\nnext\\ttab\\rret");
	expect("bell\x07 del\x7f", "bell\\x07 del\\x7f");
	expect("csi\xc2\x9b"
	       "31m nel\xc2\x85",
	       "csi\\u009b31m nel\\u0085");
	expect("\xc2\xa0nbsp", "\xc2\xa0nbsp"); /* U+00A0 is printable */
	expect("bad\xff\xfe", "bad\\xff\\xfe");
	expect("overlong\xc0\xaf", "overlong\\xc0\\xaf");
	expect("surrogate\xed\xa0\x80", "surrogate\\xed\\xa0\\x80");
	expect("past\xf4\x90\x80\x80", "past\\xf4\\x90\\x80\\x80");
	expect("cut\xe2\x80", "cut\\xe2\\x80");
	expect("", "");
	assert_true(tt_clean(NULL));
}

static void test_replace_and_cut(void **state)
{
	(void)state;
	char buf[16];
	tt_escape(buf, sizeof buf, "a\x1b\xc2\x9b\xff\nb", '?');
	assert_string_equal(buf, "a????b");
	/* A piece that does not fit is left out whole: no half escape, no
	 * half character; the size needed is still reported. */
	assert_int_equal(tt_escape(buf, 6, "abc\x1b", 0), 7);
	assert_string_equal(buf, "abc");
	assert_int_equal(tt_escape(buf, 5, "ab\xe2\x80\xa6", 0), 5);
	assert_string_equal(buf, "ab");
	assert_int_equal(tt_escape(buf, 1, "x", 0), 1);
	assert_string_equal(buf, "");
	const char *s = "clean";
	assert_ptr_equal(tt_safe(s, buf, sizeof buf), s);
	assert_string_equal(tt_safe("a\nb", buf, sizeof buf), "a\\nb");
	assert_null(tt_safe(NULL, buf, sizeof buf));
}

static void test_utf8_fix(void **state)
{
	(void)state;
	const char in[] = "ok\xff\n\xe2\x80\xa6\xed\xa0\x80\xe2\x80";
	char *d = tt_utf8_fix(in, sizeof in - 1);
	assert_string_equal(d, "ok\xef\xbf\xbd\n\xe2\x80\xa6\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
			       "\xef\xbf\xbd\xef\xbf\xbd");
	free(d);
}

static void test_fputs(void **state)
{
	(void)state;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_int_equal(tt_fputs("ok ", f), 0);
	assert_int_equal(tt_fputs("e\x1b]0;t\x07", f), 0);
	fclose(f);
	assert_string_equal(text, "ok e\\x1b]0;t\\x07");
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_escapes),
	    cmocka_unit_test(test_replace_and_cut),
	    cmocka_unit_test(test_utf8_fix),
	    cmocka_unit_test(test_fputs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
