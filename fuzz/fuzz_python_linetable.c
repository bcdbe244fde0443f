/*
 * fuzz_python_linetable.c - hw_python_line_at, which decodes line tables
 * read out of a watched Python process's memory, in each of its formats.
 *
 * Feeds: the first input byte's low two bits as the format (0 co_lnotab of
 * 3.8/3.9, 1 the 3.10 co_linetable, 2 the 3.11+ location table, 3 no
 * format), the next two bytes as the first line (signed, scaled), the rest
 * as the table, copied into a buffer of exactly its size so ASan sees any
 * read past it; asks for the line of every code unit the table could cover
 * and beyond (a stride through them when that would be slow), and of the
 * largest units, whose byte offsets overflow.
 *
 * Proves: no read beyond the table, no crash or overflow; every answer is
 * -1 (malformed), 0 (no line) or a line within the decoder's bounds; once
 * the table is malformed for a unit it stays malformed for later units; a
 * format that is none of the three is malformed everywhere.  co_lnotab and
 * 3.10: the pairs' offset increments add up to the most bytes they cover;
 * a table of whole pairs (an even length) is never malformed, the fuzzer's
 * lines staying far within bounds; past the last pair a 3.10 table has no
 * line and a co_lnotab keeps its last line, to the largest unit.  Location
 * tables: a unit beyond the most the table could cover has no line.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse/python_linetable.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

#define WORK_BUDGET (1u << 18) /* units asked times table bytes, per input */

/* The code units a co_lnotab or 3.10 table can reach: its offset increments
 * (every other byte from the first) added up, in bytes, rounded up to units. */
static size_t pair_units(const uint8_t *table, size_t len)
{
    size_t bytes = 0;
    for (size_t i = 0; i + 1 < len; i += 2)
        bytes += table[i];
    return (bytes + 1) / 2;
}

static void check_tail(hw_python_lines format, const uint8_t *table, size_t len, int first, size_t end)
{
    int at_end = hw_python_line_at(format, table, len, first, end);
    const size_t beyond[] = {end + 1, end + 1000, SIZE_MAX / 2, SIZE_MAX / 2 + 1, SIZE_MAX};
    for (size_t i = 0; i < sizeof beyond / sizeof beyond[0]; i++) {
        int line = hw_python_line_at(format, table, len, first, beyond[i]);
        if (format == HW_PY_LINES_LNOTAB)
            CHECK(line == at_end); /* the last line runs on */
        else if (format == HW_PY_LINES_310)
            CHECK(line == 0 || (line == -1 && len % 2 == 1));
        else
            CHECK(line <= 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    unsigned format = data[0] & 3;
    int first = (int16_t)(data[1] | data[2] << 8) * 16;
    size_t len = size - 3;
    uint8_t *table = malloc(len ? len : 1);
    if (table == NULL)
        return 0;
    memcpy(table, data + 3, len);
    bool pairs = format == HW_PY_LINES_LNOTAB || format == HW_PY_LINES_310;
    /* Location tables: each entry byte covers at most 8 units. */
    size_t end = pairs ? pair_units(table, len) : len * 8;
    size_t last = pairs ? end + 2 : 2 * end + 1;
    size_t stride = 1 + (last + 1) * (len + 1) / WORK_BUDGET;
    int previous = 0;
    for (size_t unit = 0; unit <= last; unit += stride) {
        int line = hw_python_line_at((hw_python_lines)format, table, len, first, unit);
        CHECK(line >= -1 && line <= 100000000);
        if (format > HW_PY_LINES_LOCATIONS)
            CHECK(line == -1);
        if (previous == -1)
            CHECK(line == -1);
        if (pairs && len % 2 == 0)
            CHECK(line != -1);
        if (format == HW_PY_LINES_310 && unit >= end)
            CHECK(line <= 0);
        if (format == HW_PY_LINES_LOCATIONS && unit >= end)
            CHECK(line <= 0);
        previous = line;
    }
    if (format <= HW_PY_LINES_LOCATIONS)
        check_tail((hw_python_lines)format, table, len, first, end);
    free(table);
    return 0;
}
