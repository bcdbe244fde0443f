/*
 * python_linetable.h - the source line of a CPython instruction, from its
 * code object's line table, in each of the three formats CPython has used
 * since 3.8.
 *
 * The table is read out of another process's memory, so it is untrusted:
 * the decoder stops at the end of the buffer, never reads past it, and
 * bounds every number it decodes.  The formats are CPython's own:
 *
 * - 3.8, 3.9: co_lnotab (Objects/lnotab_notes.txt), pairs of (unsigned
 *   byte: bytecode offset increment, signed byte: line increment); the line
 *   of an offset is that of the last pair at or before it, and every offset
 *   has one, beyond the last pair too (PyCode_Addr2Line).
 * - 3.10: co_linetable (PEP 626; that version's lnotab_notes.txt), pairs of
 *   (unsigned byte: length of a range of bytecode in bytes, signed byte:
 *   line delta), a line delta of -128 meaning "no line" for the range and
 *   leaving the line unchanged for the next one.
 * - 3.11 and later: the location table (Objects/locations.md), entries of
 *   one header byte (bit 7 set; bits 3-6 a code; bits 0-2 the number of
 *   code units covered, minus one) followed by the entry's data; codes 13
 *   and 14 carry a signed line delta as a 6-bit varint, codes 11 and 12
 *   mean +1 and +2 lines, 15 means "no line", the others keep the line.
 *
 * Written here rather than taken from libpython because the agent must not
 * load the interpreter of the program it reads.
 *
 * Pure code: no allocation, no OS calls.
 */
#ifndef HANGWATCH_PYTHON_LINETABLE_H
#define HANGWATCH_PYTHON_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

/* Which line table a code object has.  python_layout.h declares the same
 * enum; whichever header comes first defines it. */
typedef enum hw_python_lines {
    HW_PY_LINES_LNOTAB = 0, /* 3.8, 3.9: co_lnotab */
    HW_PY_LINES_310,        /* 3.10: co_linetable, PEP 626's pairs */
    HW_PY_LINES_LOCATIONS   /* 3.11+: co_linetable, the location table */
} hw_python_lines;

/* The line of the instruction at code unit `unit` (0 = the first; a code
 * unit is 2 bytes of bytecode: f_lasti / 2 in 3.8 and 3.9, f_lasti in 3.10)
 * of a code object whose first line is `first_line` and whose line table
 * in `format` is `table`; 0 when the instruction has no line or lies
 * beyond the table (never, for co_lnotab: its last line runs on), -1 when
 * the table is malformed before it, a line passes 100 million either way
 * (the first line too), or `format` is none of the three. */
int hw_python_line_at(hw_python_lines format, const uint8_t *table, size_t len, int first_line, size_t unit);

#endif
