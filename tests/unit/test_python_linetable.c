/*
 * test_python_linetable.c - the line-table decoder (python_linetable.h) in
 * each of its formats against hand-made tables of every form, malformed
 * tables, and CPython's own answers for thousands of real code objects
 * (written by python_linetables.py under one interpreter: the file is
 * argv[1] or $HW_PY_LINETABLES, its first line says the format).  When that
 * interpreter is not on the machine, the file says so and the test exits 77
 * (skipped) after the hand-made cases.
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
#define LINE(format, table, first, unit) hw_python_line_at(format, table, sizeof table, first, unit)

static const char *tables_path;

static void lnotab_forms(void **state)
{
    (void)state;
    const uint8_t table[] = {
        0, 1,             /* offset 0: 11 */
        4, 2,             /* offset 4 (unit 2): 13 */
        6, 0xff,          /* offset 10 (unit 5): -1 -> 12 */
        254, 0, 46, 127,  /* offsets 264, 310: 139 ... */
        0, 73,            /* ... and at once 212: a jump of 200 lines in two pairs */
        2, 0x80, 0, 0xe4, /* offset 312: -128 (a line delta, not "no line"), -28 -> 56 */
        2, 1,             /* offset 314 (unit 157): 57, to the end of the code */
    };
    const struct { size_t unit; int line; } want[] = {
        {0, 11}, {1, 11}, {2, 13}, {4, 13}, {5, 12}, {131, 12}, {132, 12}, {154, 12},
        {155, 212}, {156, 56}, {157, 57}, {1000, 57}, {SIZE_MAX, 57},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_int_equal(LINE(HW_PY_LINES_LNOTAB, table, 10, want[i].unit), want[i].line);
    assert_int_equal(hw_python_line_at(HW_PY_LINES_LNOTAB, table, 0, 7, 5), 7); /* empty: the first line */
}

static void lnotab_malformed(void **state)
{
    (void)state;
    const uint8_t half_pair[] = {4, 1, 2};
    assert_int_equal(LINE(HW_PY_LINES_LNOTAB, half_pair, 10, 1), 10); /* the first pair starts after it */
    assert_int_equal(LINE(HW_PY_LINES_LNOTAB, half_pair, 10, 2), -1); /* depends on the half pair */
    assert_int_equal(LINE(HW_PY_LINES_LNOTAB, half_pair, 10, 99), -1);
    const uint8_t up[] = {0, 1};
    assert_int_equal(LINE(HW_PY_LINES_LNOTAB, up, 100000000, 0), -1); /* beyond any real line */
    const uint8_t down[] = {0, 0xfb};
    assert_int_equal(LINE(HW_PY_LINES_LNOTAB, down, 3, 0), 0); /* below 1: no line */
    assert_int_equal(hw_python_line_at(HW_PY_LINES_LNOTAB, NULL, 0, 1, 0), -1);
}

static void linetable_310_forms(void **state)
{
    (void)state;
    const uint8_t table[] = {
        4, 0,       /* units 0-1: 10 */
        6, 2,       /* units 2-4: 12 */
        2, 0x80,    /* unit 5: no line, the line stays 12 */
        0, 127,     /* empty ranges move the line: 139 */
        0, 10,      /* 149 */
        4, 0x81,    /* units 6-7: -127 -> 22 */
        2, 0x80,    /* unit 8: no line */
        2, 1,       /* unit 9: 23 */
    };
    const int want[] = {10, 10, 12, 12, 12, 0, 22, 22, 0, 23, 0 /* beyond the table */};
    for (size_t u = 0; u < sizeof want / sizeof want[0]; u++)
        assert_int_equal(LINE(HW_PY_LINES_310, table, 10, u), want[u]);
    assert_int_equal(LINE(HW_PY_LINES_310, table, 10, SIZE_MAX), 0);
    assert_int_equal(hw_python_line_at(HW_PY_LINES_310, table, 0, 10, 0), 0); /* empty: no line */
}

static void linetable_310_malformed(void **state)
{
    (void)state;
    const uint8_t half_pair[] = {4, 0, 2};
    assert_int_equal(LINE(HW_PY_LINES_310, half_pair, 10, 1), 10);
    assert_int_equal(LINE(HW_PY_LINES_310, half_pair, 10, 2), -1);
    const uint8_t up[] = {2, 1};
    assert_int_equal(LINE(HW_PY_LINES_310, up, 100000000, 0), -1);
    const uint8_t down[] = {2, 0xfb};
    assert_int_equal(LINE(HW_PY_LINES_310, down, 3, 0), 0);
    assert_int_equal(hw_python_line_at(HW_PY_LINES_310, NULL, 0, 1, 0), -1);
    assert_int_equal(LINE((hw_python_lines)3, up, 1, 0), -1); /* no such format */
    for (int f = HW_PY_LINES_LNOTAB; f <= HW_PY_LINES_LOCATIONS; f++) /* a first line beyond any real one */
        assert_int_equal(hw_python_line_at((hw_python_lines)f, up, 0, 100000001, 0), -1);
    assert_int_equal(LINE((hw_python_lines)-1, up, 1, 0), -1);
}

static void locations_forms(void **state)
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
        assert_int_equal(LINE(HW_PY_LINES_LOCATIONS, table, 10, u), expected[u]);
    assert_int_equal(LINE(HW_PY_LINES_LOCATIONS, table, 10, 12), 0); /* beyond the table */
    assert_int_equal(LINE(HW_PY_LINES_LOCATIONS, table, 10, SIZE_MAX), 0);
}

static void locations_malformed(void **state)
{
    (void)state;
    const hw_python_lines F = HW_PY_LINES_LOCATIONS;
    const uint8_t no_header[] = {0x01, 0x02};
    assert_int_equal(LINE(F, no_header, 1, 0), -1);
    const uint8_t cut_varint[] = {ENTRY(13, 1), 0x41};
    assert_int_equal(LINE(F, cut_varint, 1, 0), -1);
    const uint8_t endless_varint[] = {ENTRY(13, 1), 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f};
    assert_int_equal(LINE(F, endless_varint, 1, 0), -1);
    const uint8_t huge_line[] = {ENTRY(13, 1), 0x7e, 0x7f, 0x7f, 0x7f, 0x3f}; /* +268 million */
    assert_int_equal(LINE(F, huge_line, 1, 0), -1);
    assert_int_equal(hw_python_line_at(F, NULL, 0, 1, 0), -1);
    assert_int_equal(hw_python_line_at(F, huge_line, 0, 1, 0), 0); /* empty: no line */
    /* a negative line is no line */
    const uint8_t below_zero[] = {ENTRY(13, 1), 0x15};
    assert_int_equal(LINE(F, below_zero, 3, 0), 0);
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The format named by the fixture's first line "format NAME python VERSION";
 * -1 for "missing REASON" (no such interpreter here), -2 for anything else. */
static int read_header(FILE *f, char *reason, size_t room)
{
    char line[256], name[32];
    if (fgets(line, sizeof line, f) == NULL)
        return -2;
    if (strncmp(line, "missing ", 8) == 0) {
        snprintf(reason, room, "%s", line + 8);
        return -1;
    }
    if (sscanf(line, "format %31s python ", name) != 1)
        return -2;
    return strcmp(name, "lnotab") == 0 ? HW_PY_LINES_LNOTAB
           : strcmp(name, "310") == 0  ? HW_PY_LINES_310
           : strcmp(name, "locations") == 0 ? HW_PY_LINES_LOCATIONS
                                            : -2;
}

/* Parses "FIRST HEX unit:line..." and checks every unit against the decoder;
 * past the last unit CPython maps, 3.10+ tables give no line. */
static size_t check_code(hw_python_lines format, char *line, uint8_t *table, size_t room)
{
    char *save = NULL;
    int first = atoi(strtok_r(line, " \n", &save));
    const char *hex = strtok_r(NULL, " \n", &save);
    assert_non_null(hex);
    size_t len = 0;
    if (strcmp(hex, "-") != 0)
        for (; hex[2 * len] && hex[2 * len + 1]; len++) {
            assert_true(len < room && hexval(hex[2 * len]) >= 0 && hexval(hex[2 * len + 1]) >= 0);
            table[len] = (uint8_t)(hexval(hex[2 * len]) << 4 | hexval(hex[2 * len + 1]));
        }
    size_t checked = 0;
    unsigned unit = 0, end = 0;
    for (char *pair; (pair = strtok_r(NULL, " \n", &save)) != NULL; checked++) {
        int want;
        assert_int_equal(sscanf(pair, "%u:%d", &unit, &want), 2);
        int got = hw_python_line_at(format, table, len, first, unit);
        if (got != want)
            print_message("first line %d, unit %u: got %d, CPython says %d\n", first, unit, got, want);
        assert_int_equal(got, want);
        end = unit + 1 > end ? unit + 1 : end;
    }
    if (format != HW_PY_LINES_LNOTAB)
        assert_int_equal(hw_python_line_at(format, table, len, first, end), 0);
    return checked;
}

static void cpython_agrees(void **state)
{
    (void)state;
    FILE *f = fopen(tables_path, "r");
    assert_non_null(f);
    char reason[256];
    int format = read_header(f, reason, sizeof reason);
    assert_true(format >= 0);
    static char line[1 << 20];
    static uint8_t table[1 << 19];
    size_t codes = 0, checked = 0;
    while (fgets(line, sizeof line, f)) {
        assert_non_null(strchr(line, '\n')); /* the whole line fitted */
        checked += check_code((hw_python_lines)format, line, table, sizeof table);
        codes++;
    }
    fclose(f);
    print_message("%zu code objects, %zu instructions agree with CPython\n", codes, checked);
    assert_true(codes > 1000 && checked > 100000);
}

int main(int argc, char **argv)
{
    tables_path = argc > 1 ? argv[1] : getenv("HW_PY_LINETABLES");
    if (tables_path == NULL) {
        fprintf(stderr, "usage: %s TABLES (written by python_linetables.py; or set HW_PY_LINETABLES)\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(tables_path, "r");
    if (f == NULL) {
        perror(tables_path);
        return 1;
    }
    char reason[256] = "";
    int format = read_header(f, reason, sizeof reason);
    fclose(f);
    const struct CMUnitTest hand_made[] = {
        cmocka_unit_test(lnotab_forms),        cmocka_unit_test(lnotab_malformed),
        cmocka_unit_test(linetable_310_forms), cmocka_unit_test(linetable_310_malformed),
        cmocka_unit_test(locations_forms),     cmocka_unit_test(locations_malformed),
    };
    const struct CMUnitTest from_cpython[] = {cmocka_unit_test(cpython_agrees)};
    int failed = cmocka_run_group_tests(hand_made, NULL, NULL);
    if (format == -1) {
        printf("CPython's answers skipped: %s", reason);
        return failed ? failed : 77;
    }
    return failed + cmocka_run_group_tests(from_cpython, NULL, NULL);
}
