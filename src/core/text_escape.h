/*
 * text_escape.h - printing text that came from another process.
 *
 * Process and thread names, file names and symbol names reach hangwatch from
 * the programs it watches (and from report files anyone may have edited).
 * Printed raw on a terminal, an ESC byte in one of them is a command to that
 * terminal.  Everything hangwatch prints that it did not write itself goes
 * through hw_escape_text first: printable ASCII stays as it is, a backslash
 * becomes "\\", a newline, carriage return and tab "\n", "\r" and "\t"
 * (as a reader expects them), and every other byte becomes "\xHH".  UTF-8 is escaped too:
 * a name is rarely anything but ASCII, and a byte-exact form is what a person
 * comparing two names needs.  Pure.
 */
#ifndef HANGWATCH_TEXT_ESCAPE_H
#define HANGWATCH_TEXT_ESCAPE_H

#include <stddef.h>

/*
 * Escape `in_len` bytes of `in` into `out` (`out_size` > 0), always
 * NUL-terminated; an escape that does not fit is left out whole, never cut.
 * Returns `out`, so that a call can stand in a printf argument list.
 */
const char *hw_escape_bytes(const char *in, size_t in_len, char *out, size_t out_size);

/* The same for a NUL-terminated string (NULL prints as "?"). */
const char *hw_escape_text(const char *in, char *out, size_t out_size);

#endif
