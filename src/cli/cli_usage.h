/*
 * cli_usage.h - `hangwatch --help`: the usage text of every command, and
 * the usage errors that point to it (those of hangwatch itself and of the
 * commands that start the agent: run, watch, attach).  The commands that
 * read reports have their own --help and usage errors (report_command.h).
 */
#ifndef HANGWATCH_CLI_USAGE_H
#define HANGWATCH_CLI_USAGE_H

/* Printed on stdout for `hangwatch --help` and for run, watch and attach's -h. */
extern const char hw_cli_usage_text[];

/* "hangwatch: " and `fmt` with `arg` (fmt holds one %s) on stderr, then
 * "Try 'hangwatch --help'.".  Returns 2, the exit status of a usage error. */
int hw_cli_usage_error(const char *fmt, const char *arg);

#endif
