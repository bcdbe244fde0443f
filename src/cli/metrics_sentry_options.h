/*
 * metrics_sentry_options.h - the command line's options for Prometheus and
 * Sentry (--metrics-listen, --metrics-file, --sentry-dsn and SENTRY_DSN),
 * kept out of agent_options.c's option table so that they are checked in
 * one place: a malformed value is a usage error (exit 2) before anything
 * starts.
 */
#ifndef HANGWATCH_METRICS_SENTRY_OPTIONS_H
#define HANGWATCH_METRICS_SENTRY_OPTIONS_H

#include <getopt.h>

#include "agent/agent.h"

/* getopt_long codes, above every character. */
enum {
    HW_OPT_METRICS_LISTEN = 0x1001,
    HW_OPT_METRICS_FILE,
    HW_OPT_SENTRY_DSN,
};

#define HW_METRICS_SENTRY_LONG_OPTIONS                                                                                 \
    {"metrics-listen", required_argument, NULL, HW_OPT_METRICS_LISTEN},                                               \
        {"metrics-file", required_argument, NULL, HW_OPT_METRICS_FILE},                                               \
        {"sentry-dsn", required_argument, NULL, HW_OPT_SENTRY_DSN}

/* For run, watch and attach's usage text. */
#define HW_METRICS_SENTRY_USAGE                                                                                        \
    "  --metrics-listen ADDR:PORT  serve Prometheus metrics at\n"                                                      \
    "                       http://ADDR:PORT/metrics (127.0.0.1:9464; :9464 is\n"                                     \
    "                       every interface); docs/metrics.md\n"                                                       \
    "  --metrics-file PATH  write the same metrics to PATH atomically, for\n"                                          \
    "                       node_exporter's textfile collector (name it *.prom)\n"                                     \
    "  --sentry-dsn DSN     send each report to Sentry as an app-hang event\n"                                        \
    "                       (default: $SENTRY_DSN); events the server cannot\n"                                       \
    "                       take now wait in REPORT_DIR/sentry-spool, sent later\n"                                   \
    "                       by the agent or by hangwatch upload\n"

/* Handle option `code` with `value`: 1 when it was one of these, 0 when it
 * is not, 2 after a usage error was said. */
int hw_metrics_sentry_option(int code, const char *value, hw_agent_options *opts);

/* After the options: SENTRY_DSN when --sentry-dsn was not given (`from_env`
 * false for the C library's agent, which takes only what its config says).
 * 0, or 2 after a usage error was said. */
int hw_metrics_sentry_finish(hw_agent_options *opts, int from_env);

#endif
