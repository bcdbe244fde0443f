/*
 * duration.h - parsing and printing the durations the CLI takes ("500ms",
 * "2s", "1.5s", "250us").  Pure code, unit-tested.
 */
#ifndef HANGWATCH_DURATION_H
#define HANGWATCH_DURATION_H

#include <stddef.h>
#include <stdint.h>

/*
 * Parse `text` into nanoseconds.  Accepted: a decimal number (fraction and
 * exponent allowed: "1.5s", ".25s", "1e3ms") immediately followed by one of
 * the units ns, us, ms, s, m; a fraction of a nanosecond is dropped.
 * Returns 0 on success; -1 with a short reason in *why on failure (empty,
 * not a number, negative, hexadecimal, missing unit, space before the unit,
 * unknown unit, junk after the number or the unit, too large for 64-bit
 * nanoseconds).  *out_ns is untouched on failure.
 */
int hw_parse_duration(const char *text, uint64_t *out_ns, const char **why);

/* Format `ns` compactly for people: "2s", "1.5s", "500ms", "250us". */
void hw_format_duration(uint64_t ns, char *buf, size_t len);

#endif
