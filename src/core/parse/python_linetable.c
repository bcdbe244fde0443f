/*
 * python_linetable.c - decoding CPython's line tables (co_lnotab of 3.8 and
 * 3.9, PEP 626's co_linetable of 3.10, the location table of 3.11+) to find
 * an instruction's line (python_linetable.h).
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
#define NO_LINE_310 (-128) /* 3.10: the range has no line */

static bool line_in_bounds(long line)
{
    return line >= -LINE_LIMIT && line <= LINE_LIMIT;
}

/* What the caller gets for a line: a line below 1 is no line. */
static int answer(long line)
{
    return line > 0 ? (int)line : 0;
}

/* The byte offset of code unit `unit` (2 bytes each), or SIZE_MAX, beyond
 * any table, when that does not fit. */
static size_t byte_offset(size_t unit)
{
    return unit > SIZE_MAX / 2 ? SIZE_MAX : unit * 2;
}

/* 3.8, 3.9: (offset increment, line increment) pairs.  The line of `target`
 * is the line after the last pair whose offset is at or before it; the
 * first pair's offset counts from 0.  Every offset has a line. */
static int lnotab_line(const uint8_t *table, size_t len, long line, size_t target)
{
    size_t addr = 0;
    for (size_t pos = 0; pos < len; pos += 2) {
        if (len - pos < 2)
            return -1; /* half a pair, where the answer depends on it */
        if (table[pos] > target - addr)
            break; /* this pair starts after the target: addr <= target still */
        addr += table[pos];
        line += (int8_t)table[pos + 1];
        if (!line_in_bounds(line))
            return -1;
    }
    return answer(line);
}

/* 3.10: (range length in bytes, line delta) pairs, ranges back to back from
 * offset 0.  A delta of -128 means the range has no line and leaves the
 * line alone; a range of length 0 covers nothing but may move the line. */
static int linetable_310_line(const uint8_t *table, size_t len, long line, size_t target)
{
    size_t start = 0;
    for (size_t pos = 0; pos < len; pos += 2) {
        if (len - pos < 2)
            return -1;
        size_t length = table[pos];
        int delta = (int8_t)table[pos + 1];
        if (delta != NO_LINE_310) {
            line += delta;
            if (!line_in_bounds(line))
                return -1;
        }
        if (target - start < length) /* start <= target < start + length */
            return delta == NO_LINE_310 ? 0 : answer(line);
        start += length; /* still <= target */
    }
    return 0; /* beyond the table */
}

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

/* 3.11+: the location table, entries of a header byte and its data. */
static int locations_line(const uint8_t *table, size_t len, long line, size_t unit)
{
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
        if (!line_in_bounds(line))
            return -1;
        if (unit - start < units) /* start <= unit < start + units */
            return code == CODE_NO_LOCATION ? 0 : answer(line);
        start += units;
        /* the entry's remaining bytes (columns): up to the next header */
        while (pos < len && !(table[pos] & 128))
            pos++;
    }
    return 0;
}

int hw_python_line_at(hw_python_lines format, const uint8_t *table, size_t len, int first_line, size_t unit)
{
    if (table == NULL || !line_in_bounds(first_line))
        return -1; /* no table, or a first line no real code has */
    switch (format) {
    case HW_PY_LINES_LNOTAB:
        return lnotab_line(table, len, first_line, byte_offset(unit));
    case HW_PY_LINES_310:
        return linetable_310_line(table, len, first_line, byte_offset(unit));
    case HW_PY_LINES_LOCATIONS:
        return locations_line(table, len, first_line, unit);
    }
    return -1;
}
