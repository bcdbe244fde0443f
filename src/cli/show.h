/* show.h - `hangwatch show`: a report, read back and printed for people. */
#ifndef HANGWATCH_SHOW_H
#define HANGWATCH_SHOW_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "report_read.h"

/* The largest file show reads: far beyond any report hangwatch writes. */
#define HW_SHOW_MAX_BYTES HW_REPORT_MAX_BYTES

/*
 * Parse `len` bytes of `text` (any bytes at all: it never crashes on them)
 * as a report and print its summary to `out`, every string from the report
 * escaped (text_escape.h).  `label` names it in the output and in messages
 * (a file name).  0, or 1 with a message on stderr when the text is not a
 * hangwatch report or is longer than HW_SHOW_MAX_BYTES.
 */
int hw_show_text(const char *label, const char *text, size_t len, FILE *out);

/* hw_show_json's flags: print every thread's whole stack, not the hung
 * thread's and one line for each other thread (`hangwatch stack`). */
#define HW_SHOW_EVERY_STACK 1u

/*
 * Print a report already parsed (`root`, trusted no more than text) as
 * hw_show_text does, `label` before its first line unless NULL.  0, or 1
 * with a message on stderr when it is not shaped like a report.
 */
int hw_show_json(const char *label, json_t *root, unsigned flags, FILE *out);

/* The same for a file, read with at most HW_SHOW_MAX_BYTES in memory; a
 * larger one is refused before it is read.  `flags` as hw_show_json's. */
int hw_show_file(const char *path, unsigned flags, FILE *out);

/* `hangwatch show [--every-stack] FILE...`: argv[0] is "show". */
int hw_show_main(int argc, char **argv);

#endif
