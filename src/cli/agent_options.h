/*
 * agent_options.h - the options of the commands that start the agent
 * (`hangwatch run`, `watch` and `attach`), parsed into the agent's options
 * in one place: detection, sampling and report options, metrics and
 * Sentry options (metrics_sentry_options.h), and the few that belong to
 * one command only (--observer to run, -p and --duration to watch,
 * --socket to attach ...).  Every value is checked here: a malformed one,
 * or an option given to a command it does not belong to, is a usage error
 * (exit 2) before anything starts.
 */
#ifndef HANGWATCH_AGENT_OPTIONS_H
#define HANGWATCH_AGENT_OPTIONS_H

#include <stddef.h>
#include <sys/types.h>

#include "agent/agent.h"
#include "core/process_select.h"

/* Which command the options are for. */
typedef enum hw_agent_command {
    HW_AGENT_RUN,    /* hangwatch run: starts PROG */
    HW_AGENT_ATTACH, /* hangwatch attach: internal, started by the C library */
    HW_AGENT_WATCH,  /* hangwatch watch: processes already running */
} hw_agent_command;

/* The most processes one `hangwatch watch` takes (-p, repeated). */
#define HW_MAX_WATCH_PIDS 64
/* The most --ignore-frame patterns. */
#define HW_MAX_IGNORE_FRAMES 64
/* The most --in-app and --not-in-app rules, together. */
#define HW_MAX_IN_APP_RULES 64
/* The most selectors of watch --all (--comm, --exe, --cgroup, --user, --exclude). */
#define HW_MAX_SELECTORS 64

/* What a command line says: the agent's options and what they point to. */
typedef struct hw_agent_command_line {
    hw_agent_options opts;
    pid_t watch_pids[HW_MAX_WATCH_PIDS]; /* -p of watch; opts.watch_pids is set by the command */
    size_t watch_pid_count;
    const char *ignore_frames[HW_MAX_IGNORE_FRAMES]; /* opts.ignore_frames points here */
    hw_in_app_rule in_app_rules[HW_MAX_IN_APP_RULES]; /* opts.in_app_rules points here */
    hw_process_selector selectors[HW_MAX_SELECTORS];  /* opts.selectors points here */
    int operands; /* the index in argv of the first argument after the options */
} hw_agent_command_line;

/*
 * Add an --in-app (`in_app`) or --not-in-app rule of `value` at
 * rules[*count] (HW_MAX_IN_APP_RULES entries): -1 when taken, else 2 after
 * saying why (a pattern core/in_app.h refuses, or one too many).  `value`
 * must outlive the rules.
 */
int hw_take_in_app_rule(const char *value, bool in_app, hw_in_app_rule *rules, size_t *count);

/* Does the long option `name` (without its dashes) take a value: 1, 0
 * (a flag), or -1 when no command that starts the agent has it. */
int hw_agent_option_takes_value(const char *name);

/*
 * Parse argv (argv[0] is the command's name) for `command` into *line,
 * from the defaults (report directory hangwatch-reports, 100 reports a
 * day, 256 MiB, the detector's defaults), then fill in what follows from
 * the options given (sample and frame intervals, ring size, SENTRY_DSN for
 * run and watch).  -1 when the options are good; else the exit status to
 * stop with: 0 after --help (the usage printed), 2 after a usage error was
 * said.  opts points into *line: it must not be moved.  Options stop at
 * the first argument that is not one: PROG's own flags are PROG's.
 */
int hw_agent_options_parse(hw_agent_command command, int argc, char **argv, hw_agent_command_line *line);

#endif
