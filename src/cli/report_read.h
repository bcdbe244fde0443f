/*
 * report_read.h - reading report files back, for every command that does
 * (show, stats, export, html), and the command line those that read many
 * reports share (hw_report_command_read).  Reports are foreign input: anyone may have
 * edited a file, and the names in it come from the watched program.  So a
 * file larger than any report is refused before it is read into memory, the
 * JSON is parsed by jansson and checked for the shape of a report before
 * anything is taken from it, every message names the file, and text from a
 * report reaches the terminal only escaped (text_escape.h).
 */
#ifndef HANGWATCH_REPORT_READ_H
#define HANGWATCH_REPORT_READ_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The largest file read as a report: far beyond any report hangwatch writes. */
#define HW_REPORT_MAX_BYTES (64u << 20)

/* Text from a report (or any foreign text), escaped, of any length. */
void hw_put_bytes(FILE *out, const char *s, size_t len);
void hw_put_text(FILE *out, const char *s);

/* "hangwatch: LABEL: " on stderr, the label escaped; the caller ends the line. */
void hw_say_about(const char *label);

/* A usage error of `hangwatch COMMAND`: "hangwatch: MESSAGE 'ARG'" (the
 * argument escaped, left out when NULL) and the pointer to its --help on
 * stderr.  Returns 2, the exit status of a usage error. */
int hw_usage_error(const char *command, const char *message, const char *arg);

/* Text from a report as a JSON string: as it is (valid UTF-8, as jansson
 * read it), else escaped.  NULL only when out of memory. */
json_t *hw_json_text(const char *s);
/* An unsigned count as a JSON integer, saturated at INT64_MAX. */
json_t *hw_json_u64(uint64_t v);

/* Fields of an object that may be anything: the string (or `fallback`),
 * the integer (or `fallback`). */
const char *hw_str_at(json_t *obj, const char *key, const char *fallback);
json_int_t hw_int_at(json_t *obj, const char *key, json_int_t fallback);

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

/*
 * The command line of a command that reads many reports (`hangwatch stats`,
 * `export`, `html`) and the reading, the same for each:
 *
 *   `--` ends the options; --help or -h prints the help and stops (status
 *   0); an argument that is one of the command's options is given to it;
 *   any other argument beginning with '-' (but "-" itself) is a usage
 *   error "unknown option for NAME:"; everything else is a path.  Options
 *   may come after paths.  Then, in this order: the command checks the
 *   options it cannot do without (check_options), no path at all is the
 *   usage error `needs_paths`, the command gets ready to read
 *   (before_reading: e.g. its output file is checked), and the reports of
 *   the paths are read (hw_report_walk), each given to take_report.
 *   Running out of memory while reading is said on stderr (status 1), and
 *   so is reading no report at all: "hangwatch: no report could be
 *   read" followed by `none_read` (status 1).
 *
 * Each command keeps what differs explicitly here: its options and what
 * they do, the checks before reading, what it keeps of each report and the
 * end of its "no report" message.
 */
typedef struct hw_report_option {
    const char *long_name;  /* "--output"; with a value also "--output=VALUE" */
    const char *short_name; /* "-o", or NULL; only as itself (never "-oVALUE") */
    bool has_value;         /* the next argument (or what follows '=') */
    /* Take the option (`value` NULL for one without): 0, or the exit
     * status to stop with, after a message (hw_usage_error). */
    int (*take)(const char *value, void *ctx);
} hw_report_option;

typedef struct hw_report_command {
    const char *name; /* "stats": in messages and "Try 'hangwatch stats --help'" */
    const char *help; /* printed on stdout for --help or -h */
    const hw_report_option *options;
    size_t option_count;
    /* After the command line, before the paths are looked at: 0, or the
     * exit status after a message.  NULL: nothing to check. */
    int (*check_options)(void *ctx);
    const char *needs_paths; /* the usage error when no path is given */
    /* After every usage check, before reading: 0, or the exit status after
     * a message.  NULL: nothing to do. */
    int (*before_reading)(void *ctx);
    /* Each report read (`root` lent for the call): 0, or -1 when out of
     * memory (then no more reports are given to it). */
    int (*take_report)(const char *path, json_t *root, void *ctx);
    const char *none_read; /* after "no report could be read": "" or ": nothing exported" */
} hw_report_command;

/*
 * Run `cmd` on argv (argv[0] is the command's name), `ctx` passed to each
 * of its functions.  True when at least one report was read (*counts says
 * how many were and how many paths failed); else false and *status is the
 * exit status: 0 after --help, 2 after a usage error, 1 when out of memory
 * or no report could be read (the reason said), or whatever a function of
 * `cmd` returned.  Either way the caller frees what its functions kept.
 */
bool hw_report_command_read(const hw_report_command *cmd, int argc, char **argv, void *ctx,
                            hw_report_walk_counts *counts, int *status);

/* The value of an -o/--output FILE option of `command`: 0, or a usage
 * error (given twice, empty). */
int hw_take_output_option(const char *command, const char *value, const char **output);

#endif
