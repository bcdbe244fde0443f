/*
 * test_text_escape.c - hw_escape_text and hw_escape_bytes, the filter
 * between foreign names and a terminal: printable ASCII passes, a backslash
 * doubles, ESC, other control bytes and every UTF-8 byte become \xHH, the
 * output is always NUL-terminated within its buffer, and an escape that
 * does not fit is left out whole, never cut.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "core/text_escape.h"

static void test_printable_ascii_passes(void **state)
{
    (void)state;
    char out[64];
    assert_string_equal(hw_escape_text("nginx: worker #1 (a=b)", out, sizeof out), "nginx: worker #1 (a=b)");
    assert_string_equal(hw_escape_text("~ !", out, sizeof out), "~ !");
    assert_string_equal(hw_escape_text("", out, sizeof out), "");
}

static void test_esc_and_control_bytes_are_escaped(void **state)
{
    (void)state;
    char out[64];
    assert_string_equal(hw_escape_text("\x1b[2Jx", out, sizeof out), "\\x1b[2Jx");
    /* a newline, carriage return and tab as a reader writes them */
    assert_string_equal(hw_escape_text("a\tb\nc\r\x7f\x01", out, sizeof out), "a\\tb\\nc\\r\\x7f\\x01");
    assert_null(strchr(out, '\x1b'));
}

static void test_backslash_doubles(void **state)
{
    (void)state;
    char out[64];
    /* so that a name containing the text "\x1b" cannot pass for an escape */
    assert_string_equal(hw_escape_text("C:\\x1b", out, sizeof out), "C:\\\\x1b");
    assert_string_equal(hw_escape_text("\\", out, sizeof out), "\\\\");
}

static void test_utf8_bytes_are_escaped(void **state)
{
    (void)state;
    char out[64];
    assert_string_equal(hw_escape_text("Gr\xc3\xbc\xc3\x9f" "e", out, sizeof out), "Gr\\xc3\\xbc\\xc3\\x9fe");
    assert_string_equal(hw_escape_text("\xff\x80", out, sizeof out), "\\xff\\x80");
}

static void test_bytes_include_nul(void **state)
{
    (void)state;
    char out[64];
    assert_string_equal(hw_escape_bytes("a\0b", 3, out, sizeof out), "a\\x00b");
    assert_string_equal(hw_escape_bytes("abc", 0, out, sizeof out), "");
}

static void test_null_prints_as_question_mark(void **state)
{
    (void)state;
    char out[8];
    assert_string_equal(hw_escape_text(NULL, out, sizeof out), "?");
}

static void test_truncation_never_cuts_an_escape(void **state)
{
    (void)state;
    char out[16];
    memset(out, 'Z', sizeof out);
    /* "ab\x1b" needs 6 + NUL: with 6 bytes the escape is left out whole */
    assert_string_equal(hw_escape_text("ab\x1b", out, 6), "ab");
    assert_string_equal(hw_escape_text("ab\x1b", out, 7), "ab\\x1b");
    assert_string_equal(hw_escape_text("a\\b", out, 3), "a");
    assert_string_equal(hw_escape_text("a\\b", out, 4), "a\\\\");
    memset(out, 'Z', sizeof out);
    assert_string_equal(hw_escape_text("abcdef", out, 4), "abc");
    assert_int_equal(out[4], 'Z'); /* nothing written past the buffer */
    assert_string_equal(hw_escape_text("\x1b", out, 4), "");
    assert_string_equal(hw_escape_text("abc", out, 1), "");
}

static void test_returns_its_buffer(void **state)
{
    (void)state;
    char out[8];
    assert_ptr_equal(hw_escape_text("x", out, sizeof out), out);
    assert_ptr_equal(hw_escape_bytes("x", 1, out, sizeof out), out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_printable_ascii_passes),
        cmocka_unit_test(test_esc_and_control_bytes_are_escaped),
        cmocka_unit_test(test_backslash_doubles),
        cmocka_unit_test(test_utf8_bytes_are_escaped),
        cmocka_unit_test(test_bytes_include_nul),
        cmocka_unit_test(test_null_prints_as_question_mark),
        cmocka_unit_test(test_truncation_never_cuts_an_escape),
        cmocka_unit_test(test_returns_its_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
