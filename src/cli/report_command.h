/*
 * report_command.h - the command line that the commands reading many
 * reports (`hangwatch stats`, `export`, `html`) share, so that they take
 * their arguments, read the reports and say what went wrong alike, and
 * their usage errors ("Try 'hangwatch COMMAND --help'").
 */
#ifndef HANGWATCH_REPORT_COMMAND_H
#define HANGWATCH_REPORT_COMMAND_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "report_read.h"

/* A usage error of `hangwatch COMMAND`: "hangwatch: MESSAGE 'ARG'" (the
 * argument escaped, left out when NULL) and the pointer to its --help on
 * stderr.  Returns 2, the exit status of a usage error. */
int hw_usage_error(const char *command, const char *message, const char *arg);

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
