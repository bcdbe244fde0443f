/*
 * upload.c - `hangwatch upload [--sentry-dsn DSN] DIR`: send the Sentry
 * events an agent left in DIR/sentry-spool because the server could not be
 * reached (sentry_spool.h).  To --sentry-dsn, else $SENTRY_DSN, else the
 * DSN each envelope was made for.  It takes the spool's lock (waiting up to
 * 10 s for an agent that is sending from it), so an envelope is never sent
 * by two senders at once, and deletes each one the server accepted.
 *
 * Exit status: 0 when nothing is left waiting, 1 when some could not be
 * sent (the server unreachable: they stay for a later try), 2 for a usage
 * error or an unusable directory.
 */
#include "upload.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/common/optional_libs.h"
#include "agent/common/report_dir.h"
#include "agent/exports/exports.h"
#include "core/parse/sentry_dsn.h"
#include "core/text_escape.h"

static const char upload_usage[] =
    "usage: hangwatch upload [--sentry-dsn DSN] DIR\n"
    "\n"
    "Sends the Sentry events waiting in DIR/sentry-spool (DIR is a report\n"
    "directory: events wait there when the server could not be reached) to\n"
    "DSN (default: $SENTRY_DSN, else the DSN each event was made for), and\n"
    "deletes each one the server accepted.  Exits 0 when none is left, 1 when\n"
    "some could not be sent (they stay), 2 for a usage error.\n";

static int usage_error(const char *what)
{
    fprintf(stderr, "hangwatch upload: %s\nTry 'hangwatch upload --help'.\n", what);
    return 2;
}

int hw_upload_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"sentry-dsn", required_argument, NULL, 'D'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *dsn_text = NULL;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'D':
            dsn_text = optarg;
            break;
        case 'h':
            fputs(upload_usage, stdout);
            return 0;
        case ':':
            return usage_error("--sentry-dsn needs a value");
        default:
            return usage_error("unknown option");
        }
    }
    if (optind + 1 != argc)
        return usage_error("one report directory is needed");
    const char *dir = argv[optind];
    if (!dsn_text && getenv("SENTRY_DSN") && *getenv("SENTRY_DSN"))
        dsn_text = getenv("SENTRY_DSN");
    hw_sentry_dsn dsn;
    const char *why = NULL;
    if (dsn_text && hw_sentry_dsn_parse(dsn_text, &dsn, &why) != 0) {
        fprintf(stderr, "hangwatch upload: invalid Sentry DSN: %s (expected https://KEY@HOST/PROJECT_ID)\n", why);
        return 2;
    }
    char shown[512];
    hw_escape_text(dir, shown, sizeof shown);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "hangwatch upload: %s is not a report directory\n", shown);
        return 2;
    }
    /* The same checks as the agent's: ours, and nobody else's to write. */
    hw_report_dir *rd = NULL;
    char reason[512];
    if (hw_report_dir_open(dir, &rd, reason, sizeof reason) != 0) {
        fprintf(stderr, "hangwatch upload: cannot use %s: %s\n", shown, reason);
        return 2;
    }
    hw_sentry_spool *spool = NULL;
    int rc = hw_sentry_spool_open(hw_report_dir_fd(rd), false, &spool, reason, sizeof reason);
    if (rc == -ENOENT) {
        printf("hangwatch upload: no Sentry events wait in %s\n", shown);
        hw_report_dir_close(rd);
        return 0;
    }
    if (rc != 0) {
        fprintf(stderr, "hangwatch upload: cannot use %s/%s: %s\n", shown, HW_SPOOL_DIR, reason);
        hw_report_dir_close(rd);
        return 2;
    }
    int code = 0;
    const hw_curl_api *curl;
    char load_error[256];
    if (hw_sentry_spool_lock(spool, 10000) != 0) {
        fprintf(stderr, "hangwatch upload: another hangwatch is sending from %s/%s; try again later\n", shown,
                HW_SPOOL_DIR);
        code = 1;
    } else if (!(curl = hw_curl_api_load(load_error, sizeof load_error))) {
        fprintf(stderr, "hangwatch upload: %s\n", load_error);
        code = 2;
    } else {
        curl->global_init(CURL_GLOBAL_DEFAULT);
        hw_sentry_flush_result r;
        hw_sentry_flush(spool, dsn_text ? &dsn : NULL, 30, NULL, NULL, &r);
        curl->global_cleanup();
        printf("hangwatch upload: %zu event%s sent", r.sent, r.sent == 1 ? "" : "s");
        if (r.rejected)
            printf(", %zu refused for good by the server (deleted; their reports are kept)", r.rejected);
        printf(", %zu left in %s/%s\n", r.left, shown, HW_SPOOL_DIR);
        if (r.left) {
            fprintf(stderr, "hangwatch upload: %s\n", r.error[0] ? r.error : "some events could not be sent");
            code = 1;
        }
    }
    hw_sentry_spool_close(spool);
    hw_report_dir_close(rd);
    return code;
}
