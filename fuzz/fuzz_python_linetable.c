/*
 * fuzz_python_linetable.c - hw_python_line_at, which decodes location
 * tables read out of a watched Python process's memory.
 *
 * Feeds: the first two input bytes as the first line (signed, scaled), the
 * rest as the table; asks for the line of every code unit up to twice the
 * most the table could cover, each table copied into a buffer of exactly
 * its size so ASan sees any read past it.
 *
 * Proves: no read beyond the table, no crash or overflow; every answer is
 * -1 (malformed), 0 (no line) or a line within the decoder's bounds; once
 * the table is malformed for a unit it stays malformed for later units; and
 * a unit beyond what the table covers has no line.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse/python_linetable.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int first = (int16_t)(data[0] | data[1] << 8) * 16;
    size_t len = size - 2;
    uint8_t *table = malloc(len ? len : 1);
    if (table == NULL)
        return 0;
    memcpy(table, data + 2, len);
    size_t most_units = len * 8; /* each entry byte covers at most 8 units */
    int previous = 0;
    for (size_t unit = 0; unit <= 2 * most_units + 1; unit++) {
        int line = hw_python_line_at(table, len, first, unit);
        CHECK(line >= -1 && line <= 100000000);
        if (previous == -1)
            CHECK(line == -1);
        if (unit >= most_units)
            CHECK(line <= 0);
        previous = line;
    }
    free(table);
    return 0;
}
