/*
 * test_python_linetable.c - the location-table decoder (python_linetable.h)
 * against hand-made tables of each entry form, malformed tables, and
 * CPython's own answers for thousands of real code objects (written by
 * python_linetables.py into HW_PY_LINETABLES).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/parse/python_linetable.h"

#define ENTRY(code, units) (uint8_t)(0x80 | ((code) << 3) | ((units) - 1))

static void each_form(void **state)
{
    (void)state;
    const uint8_t table[] = {
        ENTRY(13, 2), 0x00,             /* units 0-1: no columns, delta 0 -> 10 */
        ENTRY(11, 1), 4, 9,             /* unit 2: one line, +1 -> 11 */
        ENTRY(12, 3), 0, 5,             /* units 3-5: +2 -> 13 */
        ENTRY(3, 1), 0x21,              /* unit 6: short form, same line 13 */
        ENTRY(14, 2), 0x06, 0, 1, 2,    /* units 7-8: long form, delta +3 -> 16 */
        ENTRY(15, 1),                   /* unit 9: no location */
        ENTRY(13, 1), 0x05,             /* unit 10: delta -2 -> 14 */
        ENTRY(13, 1), 0x40 | 0x00, 0x02 /* unit 11: two-chunk varint 128 -> +64 -> 78 */
    };
    const int expected[] = {10, 10, 11, 13, 13, 13, 13, 16, 16, 0, 14, 78};
    for (size_t u = 0; u < sizeof expected / sizeof expected[0]; u++)
        assert_int_equal(hw_python_line_at(table, sizeof table, 10, u), expected[u]);
    assert_int_equal(hw_python_line_at(table, sizeof table, 10, 12), 0); /* beyond the table */
}

static void malformed(void **state)
{
    (void)state;
    const uint8_t no_header[] = {0x01, 0x02};
    assert_int_equal(hw_python_line_at(no_header, sizeof no_header, 1, 0), -1);
    const uint8_t cut_varint[] = {ENTRY(13, 1), 0x41};
    assert_int_equal(hw_python_line_at(cut_varint, sizeof cut_varint, 1, 0), -1);
    const uint8_t endless_varint[] = {ENTRY(13, 1), 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f};
    assert_int_equal(hw_python_line_at(endless_varint, sizeof endless_varint, 1, 0), -1);
    const uint8_t huge_line[] = {ENTRY(13, 1), 0x7e, 0x7f, 0x7f, 0x7f, 0x3f}; /* +268 million */
    assert_int_equal(hw_python_line_at(huge_line, sizeof huge_line, 1, 0), -1);
    assert_int_equal(hw_python_line_at(NULL, 0, 1, 0), -1);
    assert_int_equal(hw_python_line_at(huge_line, 0, 1, 0), 0); /* empty: no line */
    /* a negative line is no line */
    const uint8_t below_zero[] = {ENTRY(13, 1), 0x15};
    assert_int_equal(hw_python_line_at(below_zero, sizeof below_zero, 3, 0), 0);
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static void cpython_agrees(void **state)
{
    (void)state;
    const char *path = getenv("HW_PY_LINETABLES");
    if (path == NULL) {
        print_message("HW_PY_LINETABLES is not set\n");
        fail();
    }
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char line[1 << 20];
    static uint8_t table[1 << 19];
    size_t codes = 0, checked = 0;
    while (fgets(line, sizeof line, f)) {
        char *save = NULL;
        int first = atoi(strtok_r(line, " \n", &save));
        const char *hex = strtok_r(NULL, " \n", &save);
        assert_non_null(hex);
        size_t len = 0;
        if (strcmp(hex, "-") != 0)
            for (; hex[2 * len] && hex[2 * len + 1]; len++)
                table[len] = (uint8_t)(hexval(hex[2 * len]) << 4 | hexval(hex[2 * len + 1]));
        for (char *pair; (pair = strtok_r(NULL, " \n", &save)) != NULL;) {
            unsigned unit;
            int want;
            assert_int_equal(sscanf(pair, "%u:%d", &unit, &want), 2);
            int got = hw_python_line_at(table, len, first, unit);
            if (got != want)
                print_message("first line %d, unit %u: got %d, CPython says %d\n", first, unit, got, want);
            assert_int_equal(got, want);
            checked++;
        }
        codes++;
    }
    fclose(f);
    print_message("%zu code objects, %zu instructions agree with CPython\n", codes, checked);
    assert_true(codes > 100 && checked > 10000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(each_form),
        cmocka_unit_test(malformed),
        cmocka_unit_test(cpython_agrees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
