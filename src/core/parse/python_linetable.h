/*
 * python_linetable.h - the source line of a CPython 3.11+ instruction, from
 * its code object's location table (co_linetable).
 *
 * The table is read out of another process's memory, so it is untrusted:
 * the decoder stops at the end of the buffer, never reads past it, and
 * bounds every number it decodes.  The format is CPython's own
 * (Objects/locations.md): entries of one header byte (bit 7 set; bits 3-6 a
 * code; bits 0-2 the number of code units covered, minus one) followed by
 * the entry's data; codes 13 and 14 carry a signed line delta as a 6-bit
 * varint, codes 11 and 12 mean +1 and +2 lines, 15 means "no line", the
 * others keep the line.  Written here rather than taken from libpython
 * because the agent must not load the interpreter of the program it reads.
 *
 * Pure code: no allocation, no OS calls.
 */
#ifndef HANGWATCH_PYTHON_LINETABLE_H
#define HANGWATCH_PYTHON_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

/* The line of the instruction at code unit `unit` (0 = the first) of a code
 * object whose first line is `first_line`; 0 when the instruction has no
 * line or lies beyond the table, -1 when the table is malformed before it. */
int hw_python_line_at(const uint8_t *table, size_t len, int first_line, size_t unit);

#endif
