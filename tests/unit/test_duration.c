/* test_duration.c - the CLI's durations: what parses, what is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "duration.h"

static uint64_t parse_ok(const char *text)
{
    uint64_t ns = 0;
    const char *why = NULL;
    assert_int_equal(hw_parse_duration(text, &ns, &why), 0);
    return ns;
}

static const char *parse_fails(const char *text)
{
    uint64_t ns = 12345;
    const char *why = NULL;
    assert_int_equal(hw_parse_duration(text, &ns, &why), -1);
    assert_non_null(why);
    assert_int_equal(ns, 12345); /* untouched on failure */
    return why;
}

static void test_units(void **state)
{
    (void)state;
    assert_int_equal(parse_ok("2s"), 2000000000ull);
    assert_int_equal(parse_ok("500ms"), 500000000ull);
    assert_int_equal(parse_ok("250us"), 250000ull);
    assert_int_equal(parse_ok("7ns"), 7ull);
    assert_int_equal(parse_ok("1m"), 60000000000ull);
    assert_int_equal(parse_ok("0s"), 0ull);
}

static void test_fractions_are_exact(void **state)
{
    (void)state;
    assert_int_equal(parse_ok("1.5s"), 1500000000ull);
    assert_int_equal(parse_ok("0.001s"), 1000000ull);
    assert_int_equal(parse_ok(".25s"), 250000000ull);
    assert_int_equal(parse_ok("2.5ms"), 2500000ull);
    assert_int_equal(parse_ok("1.123456789s"), 1123456789ull);
    assert_int_equal(parse_ok("1.5us"), 1500ull);
}

static void test_refused(void **state)
{
    (void)state;
    assert_non_null(strstr(parse_fails("2"), "missing unit"));
    assert_non_null(strstr(parse_fails("2 s"), "unknown unit"));
    assert_non_null(strstr(parse_fails("2sec"), "unknown unit"));
    assert_non_null(strstr(parse_fails("-1s"), "negative"));
    assert_non_null(strstr(parse_fails(""), "empty"));
    assert_non_null(strstr(parse_fails("s"), "number"));
    assert_non_null(strstr(parse_fails("."), "number"));
    assert_non_null(strstr(parse_fails("99999999999999999999s"), "too large"));
    assert_non_null(strstr(parse_fails("400000000000m"), "too large"));
    parse_fails(NULL);
}

static void test_format(void **state)
{
    (void)state;
    char buf[32];
    hw_format_duration(2000000000ull, buf, sizeof buf);
    assert_string_equal(buf, "2s");
    hw_format_duration(1500000000ull, buf, sizeof buf);
    assert_string_equal(buf, "1.5s");
    hw_format_duration(2004000000ull, buf, sizeof buf);
    assert_string_equal(buf, "2.004s");
    hw_format_duration(500000000ull, buf, sizeof buf);
    assert_string_equal(buf, "500ms");
    hw_format_duration(250000ull, buf, sizeof buf);
    assert_string_equal(buf, "250us");
    hw_format_duration(7ull, buf, sizeof buf);
    assert_string_equal(buf, "7ns");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units),
        cmocka_unit_test(test_fractions_are_exact),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
