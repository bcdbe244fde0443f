/* test_duration.c - the CLI's durations: what parses, what is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "core/parse/duration.h"

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
    assert_non_null(strstr(parse_fails("2 s"), "space between the number and the unit"));
    assert_non_null(strstr(parse_fails("2sec"), "unknown unit"));
    assert_non_null(strstr(parse_fails("-1s"), "negative"));
    assert_non_null(strstr(parse_fails(""), "empty"));
    assert_non_null(strstr(parse_fails("s"), "number"));
    assert_non_null(strstr(parse_fails("."), "number"));
    assert_non_null(strstr(parse_fails("99999999999999999999s"), "too large"));
    assert_non_null(strstr(parse_fails("400000000000m"), "too large"));
    parse_fails(NULL);
}

static void test_exponents(void **state)
{
    (void)state;
    assert_int_equal(parse_ok("1e3s"), 1000000000000ull);
    assert_int_equal(parse_ok("1E3ms"), 1000000000ull);
    assert_int_equal(parse_ok("1.5e1s"), 15000000000ull);
    assert_int_equal(parse_ok("1e+3us"), 1000000ull);
    assert_int_equal(parse_ok("2500e-3s"), 2500000000ull);
    assert_int_equal(parse_ok("1e-10s"), 0ull); /* below a nanosecond */
    assert_int_equal(parse_ok("0e999999s"), 0ull);
    assert_int_equal(parse_ok("1.8446744073709551615e19ns"), UINT64_MAX);
    assert_int_equal(parse_ok("18446744073709551615ns"), UINT64_MAX);
    assert_int_equal(parse_ok("000000000000000000000002s"), 2000000000ull); /* leading zeros are not significant */
    assert_int_equal(parse_ok("0.000000000000000000000001e24ns"), 1ull);
}

/* Every refusal says what is actually wrong with the text. */
static void test_reasons_are_true(void **state)
{
    (void)state;
    assert_string_equal(parse_fails("--"), "not a number (e.g. 500ms or 2s)");
    assert_string_equal(parse_fails("-"), "not a number (e.g. 500ms or 2s)");
    assert_non_null(strstr(parse_fails("-0.5s"), "negative"));
    assert_non_null(strstr(parse_fails("-.5s"), "negative"));
    assert_non_null(strstr(parse_fails("+2s"), "sign is not accepted"));
    assert_non_null(strstr(parse_fails("nan"), "not a number"));
    assert_non_null(strstr(parse_fails("NaNs"), "not a number"));
    assert_non_null(strstr(parse_fails("inf"), "not a number"));
    assert_non_null(strstr(parse_fails("infinitys"), "not a number"));
    assert_non_null(strstr(parse_fails("fast"), "not a number"));
    assert_non_null(strstr(parse_fails("1e309s"), "too large"));
    assert_non_null(strstr(parse_fails("1e309s"), "out of range"));
    assert_non_null(strstr(parse_fails("1e99999999999999999999s"), "too large"));
    assert_non_null(strstr(parse_fails("18446744073709551616ns"), "too large"));
    assert_non_null(strstr(parse_fails("18446744073.709551616s"), "too large"));
    assert_non_null(strstr(parse_fails("307445734561825861m"), "too large"));
    assert_non_null(strstr(parse_fails("0x10s"), "hexadecimal"));
    assert_non_null(strstr(parse_fails("1e+s"), "exponent without digits"));
    assert_non_null(strstr(parse_fails("1e3"), "missing unit"));
    assert_non_null(strstr(parse_fails("1.5"), "missing unit"));
    assert_non_null(strstr(parse_fails("2\ts"), "space between"));
    assert_non_null(strstr(parse_fails("2s "), "after the unit"));
    assert_non_null(strstr(parse_fails("2s5"), "after the unit"));
    assert_non_null(strstr(parse_fails("2ms!"), "after the unit"));
    assert_non_null(strstr(parse_fails("2.5.3s"), "after the number"));
    assert_non_null(strstr(parse_fails("2,5s"), "after the number"));
    assert_non_null(strstr(parse_fails("2S"), "unknown unit"));
    assert_non_null(strstr(parse_fails("5h"), "unknown unit"));
    assert_non_null(strstr(parse_fails("  2s"), "not a number"));
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
        cmocka_unit_test(test_exponents),
        cmocka_unit_test(test_reasons_are_true),
        cmocka_unit_test(test_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
