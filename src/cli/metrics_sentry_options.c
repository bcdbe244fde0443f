/*
 * metrics_sentry_options.c - see metrics_sentry_options.h.
 */
#include "metrics_sentry_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse/listen_address.h"
#include "core/parse/sentry_dsn.h"
#include "core/text_escape.h"

static int usage(const char *option, const char *value, const char *why)
{
    char shown[256];
    fprintf(stderr, "hangwatch: invalid %s '%s': %s\nTry 'hangwatch --help'.\n", option,
            hw_escape_text(value, shown, sizeof shown), why);
    return 2;
}

/* A DSN's problems, the key never printed (it is a credential). */
static int check_dsn(const char *where, const char *dsn)
{
    hw_sentry_dsn parsed;
    const char *why = NULL;
    if (hw_sentry_dsn_parse(dsn, &parsed, &why) == 0)
        return 0;
    fprintf(stderr, "hangwatch: invalid %s: %s (expected https://KEY@HOST/PROJECT_ID, as Sentry shows it)\n"
                    "Try 'hangwatch --help'.\n",
            where, why);
    return 2;
}

int hw_metrics_sentry_option(int code, const char *value, hw_agent_options *opts)
{
    const char *why = NULL;
    switch (code) {
    case HW_OPT_METRICS_LISTEN: {
        hw_listen_address addr;
        if (hw_listen_address_parse(value, &addr, &why) != 0)
            return usage("--metrics-listen", value, why);
        opts->metrics_listen = value;
        return 1;
    }
    case HW_OPT_METRICS_FILE:
        if (value[0] == '\0' || value[strlen(value) - 1] == '/')
            return usage("--metrics-file", value, "a file's path is needed");
        opts->metrics_file = value;
        return 1;
    case HW_OPT_SENTRY_DSN:
        if (check_dsn("--sentry-dsn", value) != 0)
            return 2;
        opts->sentry_dsn = value;
        return 1;
    default:
        return 0;
    }
}

int hw_metrics_sentry_finish(hw_agent_options *opts, int from_env)
{
    if (opts->sentry_dsn || !from_env)
        return 0;
    const char *env = getenv("SENTRY_DSN");
    if (!env || !*env)
        return 0; /* unset or empty: off, as for Sentry's SDKs */
    if (check_dsn("SENTRY_DSN", env) != 0)
        return 2;
    opts->sentry_dsn = env;
    return 0;
}
