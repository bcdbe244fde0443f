/*
 * python_linetable.c - decoding CPython's location table to find an
 * instruction's line (python_linetable.h).
 */
#include "python_linetable.h"

#include <stdbool.h>

#define CODE_NO_LOCATION 15
#define CODE_LONG 14
#define CODE_NO_COLUMNS 13
#define CODE_ONE_LINE1 11
#define CODE_ONE_LINE2 12
#define MAX_VARINT_CHUNKS 5 /* 30 bits: more than any real line number */
#define LINE_LIMIT 100000000 /* lines beyond this are nonsense */

/* An unsigned varint of 6-bit chunks, least significant first, bit 6 set on
 * every chunk but the last.  False when it runs past the end or is too long. */
static bool read_varint(const uint8_t *table, size_t len, size_t *pos, uint32_t *out)
{
    uint32_t value = 0;
    for (unsigned i = 0; i < MAX_VARINT_CHUNKS; i++) {
        if (*pos >= len)
            return false;
        uint8_t b = table[(*pos)++];
        value |= (uint32_t)(b & 63) << (6 * i);
        if (!(b & 64)) {
            *out = value;
            return true;
        }
    }
    return false;
}

int hw_python_line_at(const uint8_t *table, size_t len, int first_line, size_t unit)
{
    if (table == NULL)
        return -1;
    long line = first_line;
    size_t pos = 0, start = 0;
    while (pos < len) {
        uint8_t head = table[pos++];
        if (!(head & 128))
            return -1; /* every entry starts with bit 7 set */
        unsigned code = (head >> 3) & 15;
        size_t units = (size_t)(head & 7) + 1;
        long delta = 0;
        if (code == CODE_LONG || code == CODE_NO_COLUMNS) {
            uint32_t v;
            if (!read_varint(table, len, &pos, &v))
                return -1;
            delta = (v & 1) ? -(long)(v >> 1) : (long)(v >> 1);
        } else if (code == CODE_ONE_LINE1) {
            delta = 1;
        } else if (code == CODE_ONE_LINE2) {
            delta = 2;
        }
        line += delta;
        if (line < -LINE_LIMIT || line > LINE_LIMIT)
            return -1;
        if (unit >= start && unit < start + units)
            return code == CODE_NO_LOCATION || line < 0 ? 0 : (int)line;
        start += units;
        /* the entry's remaining bytes (columns): up to the next header */
        while (pos < len && !(table[pos] & 128))
            pos++;
    }
    return 0;
}
