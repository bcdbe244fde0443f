/*
 * report_read.h - reading report files back, for every command that does
 * (show, stats, export, html).  Reports are foreign input: anyone may have
 * edited a file, and the names in it come from the watched program.  So a
 * file larger than any report is refused before it is read into memory, the
 * JSON is parsed by jansson and checked for the shape of a report before
 * anything is taken from it, every message names the file, and text from a
 * report reaches the terminal only escaped (foreign_text.h).  The command
 * line of the commands that read many reports is in report_command.h.
 */
#ifndef HANGWATCH_REPORT_READ_H
#define HANGWATCH_REPORT_READ_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The largest file read as a report: far beyond any report hangwatch writes. */
#define HW_REPORT_MAX_BYTES (64u << 20)

/*
 * Read the whole file `path` (a regular file, or a pipe given by name) into
 * a malloc'd buffer, at most HW_REPORT_MAX_BYTES: 0, or 1 after a message
 * naming the file (cannot open or read it, a directory, too large).
 * With `regular_only`, anything but a regular file is refused unopened-for-
 * reading (a FIFO found in a directory would block the reader).
 */
int hw_report_read_file(const char *path, bool regular_only, char **text, size_t *len);

/* Parse `len` bytes as JSON (a "\u0000" in a string is kept): the root,
 * or NULL after a message naming `label` and the line of the error. */
json_t *hw_report_parse(const char *label, const char *text, size_t len);

/* Is `root` shaped like a report (report and hangwatch objects, a
 * crash.threads array)?  Says why not on stderr, naming `label`. */
bool hw_report_check_shape(const char *label, json_t *root);

/* Read, parse and check one file: the root, or NULL after a message. */
json_t *hw_report_load(const char *path, bool regular_only);

/*
 * Every report named by `paths`: a file is read as a report whatever its
 * name; a directory is searched for files whose names end in ".json",
 * through its subdirectories (not through symbolic links to directories),
 * in name order.  `each` is called with every report that could be read
 * (it may keep `root`: a new reference is passed, the callee owns it).
 * Files that cannot be read, are not JSON or are not reports, paths that
 * do not exist and directories without any report file are each named in
 * one message on stderr and skipped.
 */
typedef struct hw_report_walk_counts {
    size_t reports; /* passed to `each` */
    size_t failed;  /* files and paths named in a message */
} hw_report_walk_counts;

typedef void (*hw_report_fn)(const char *path, json_t *root, void *ctx);

void hw_report_walk(char *const *paths, size_t count, hw_report_fn each, void *ctx, hw_report_walk_counts *counts);

#endif
