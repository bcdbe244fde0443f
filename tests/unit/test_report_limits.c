/* test_report_limits.c - the daily limit and the directory cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "core/report_limits.h"

static void test_daily_limit(void **state)
{
    (void)state;
    hw_report_limits l = {.daily_limit = 100, .max_dir_bytes = 0};
    hw_report_dir_usage u = {.reports_last_day = 99, .bytes = 1ull << 40};
    assert_int_equal(hw_report_allowed(&l, &u, 10000), HW_LIMIT_OK);
    u.reports_last_day = 100;
    assert_int_equal(hw_report_allowed(&l, &u, 10000), HW_LIMIT_DAILY);
    l.daily_limit = 0; /* no limit */
    assert_int_equal(hw_report_allowed(&l, &u, 10000), HW_LIMIT_OK);
}

static void test_directory_cap(void **state)
{
    (void)state;
    hw_report_limits l = {.daily_limit = 0, .max_dir_bytes = 1000};
    hw_report_dir_usage u = {.reports_last_day = 0, .bytes = 900};
    assert_int_equal(hw_report_allowed(&l, &u, 100), HW_LIMIT_OK); /* exactly at the cap */
    assert_int_equal(hw_report_allowed(&l, &u, 101), HW_LIMIT_DIR_SIZE);
    l.daily_limit = 1;
    u.reports_last_day = 1;
    assert_int_equal(hw_report_allowed(&l, &u, 101), HW_LIMIT_DAILY); /* the daily limit says first */
}

static void test_parse_size(void **state)
{
    (void)state;
    uint64_t v = 0;
    assert_int_equal(hw_parse_size("100M", &v, NULL), 0);
    assert_int_equal(v, 100ull << 20);
    assert_int_equal(hw_parse_size("4k", &v, NULL), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(hw_parse_size("2G", &v, NULL), 0);
    assert_int_equal(v, 2ull << 30);
    assert_int_equal(hw_parse_size("0", &v, NULL), 0);
    assert_int_equal(v, 0);
    const char *why = NULL;
    assert_int_equal(hw_parse_size("10MB", &v, &why), -1);
    assert_non_null(why);
    assert_int_equal(hw_parse_size("-1", &v, NULL), -1);
    assert_int_equal(hw_parse_size("", &v, NULL), -1);
    assert_int_equal(hw_parse_size("99999999999999999999", &v, NULL), -1);
    assert_int_equal(hw_parse_size("99999999999G", &v, NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_daily_limit),
        cmocka_unit_test(test_directory_cap),
        cmocka_unit_test(test_parse_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
