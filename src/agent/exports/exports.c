/*
 * exports.c - the agent's exports beyond the machine: Prometheus
 * metrics (metrics.h, metrics_server.h) and Sentry events
 * (sentry_sender.h), started before the program and stopped after the last
 * report.  The watch thread's part in them is a few counter updates here;
 * everything that formats, serves, writes or sends runs on threads of its
 * own (docs/decisions.md §29-30).
 */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/watch/watch.h"
#include "metrics.h"
#include "metrics_server.h"
#include "agent/common/report_dir.h"
#include "sentry_event.h"
#include "sentry_sender.h"

static char server_name[256]; /* the host's name, for Sentry events */

int exports_start(agent *a)
{
    const hw_agent_options *o = a->opts;
    if (o->metrics_listen || o->metrics_file) {
        a->metrics = hw_metrics_new(hw_detector_kind_name(o->detector_kind));
        if (!a->metrics) {
            fprintf(stderr, "hangwatch: out of memory\n");
            return -12;
        }
        char why[512];
        int rc = hw_metrics_exporter_start(a->metrics, o->metrics_listen, o->metrics_file, &a->exporter, why,
                                           sizeof why);
        if (rc != 0) {
            fprintf(stderr, "hangwatch: %s\n", why);
            hw_metrics_free(a->metrics);
            a->metrics = NULL;
            return rc;
        }
    }
    if (o->sentry_dsn) {
        curl_global_init(CURL_GLOBAL_DEFAULT); /* before any thread of ours uses libcurl */
        if (gethostname(server_name, sizeof server_name - 1) != 0)
            server_name[0] = '\0';
        char why[512];
        int rc = hw_sentry_sender_start(o->sentry_dsn, hw_report_dir_fd(o->report_dir_handle),
                                        hw_report_dir_path(o->report_dir_handle), o->quiet, a->metrics, &a->sentry,
                                        why, sizeof why);
        if (rc != 0) {
            fprintf(stderr, "hangwatch: %s\n", why);
            exports_stop(a);
            return rc;
        }
    }
    return 0;
}

void exports_stop(agent *a)
{
    if (a->sentry) {
        hw_sentry_sender_stop(a->sentry); /* one last attempt at what waits */
        a->sentry = NULL;
        curl_global_cleanup();
    }
    hw_metrics_exporter_stop(a->exporter); /* the textfile's last write has the final counts */
    a->exporter = NULL;
    hw_metrics_free(a->metrics);
    a->metrics = NULL;
}

/* ---- a hang's metrics, on the watch thread ---- */

void exports_hang_begin(agent *a, const watched_process *w, loop_watch *l, const hw_check *c, uint64_t now)
{
    if (!a->metrics)
        return;
    snprintf(l->metrics_process, sizeof l->metrics_process, "%s", w->metrics_name);
    l->metrics_launch = c->launch;
    l->metrics_counted_ns = now;
    if (c->launch)
        return; /* a launch is a hang only if the process turns out to be a loop */
    hw_metrics_hang_detected(a->metrics, l->metrics_process, HW_METRICS_HANG);
    hw_metrics_loops_hung(a->metrics, l->metrics_process, 1);
    /* It has been busy since its start. */
    hw_metrics_hung_time(a->metrics, l->metrics_process, now > l->hung_start_ns ? now - l->hung_start_ns : 0);
}

void exports_hang_still_on(agent *a, loop_watch *l, uint64_t now)
{
    if (!a->metrics || l->metrics_launch || now <= l->metrics_counted_ns)
        return;
    hw_metrics_hung_time(a->metrics, l->metrics_process, now - l->metrics_counted_ns);
    l->metrics_counted_ns = now;
}

void exports_hang_end(agent *a, loop_watch *l, uint64_t now, uint64_t final_ns, bool keep_launch)
{
    if (!a->metrics)
        return;
    if (l->metrics_launch) {
        if (!keep_launch)
            return; /* a command that simply ran: no loop, no hang */
        hw_metrics_hang_detected(a->metrics, l->metrics_process, HW_METRICS_LAUNCH_HANG);
        hw_metrics_hung_time(a->metrics, l->metrics_process, final_ns);
        hw_metrics_hang_ended(a->metrics, l->metrics_process, HW_METRICS_LAUNCH_HANG, final_ns);
        return;
    }
    exports_hang_still_on(a, l, now);
    hw_metrics_loops_hung(a->metrics, l->metrics_process, -1);
    hw_metrics_hang_ended(a->metrics, l->metrics_process, HW_METRICS_HANG, final_ns);
}

/* ---- the report worker's ---- */

void exports_report_complete(agent *a, const char *file_name)
{
    if (!a->sentry)
        return;
    char *text = NULL;
    size_t len = 0;
    const char *why = "unreadable";
    json_t *report = NULL;
    if (hw_report_dir_read(a->opts->report_dir_handle, file_name, &text, &len) == 0)
        report = json_loadb(text, len, 0, NULL);
    free(text);
    char event_id[33];
    char *envelope = report ? hw_sentry_envelope_from_report(report, hw_sentry_sender_dsn(a->sentry), server_name,
                                                             event_id, &len, &why)
                            : NULL;
    json_decref(report);
    if (!envelope) {
        hw_metrics_sentry_dropped(a->metrics, HW_METRICS_SENTRY_UNREADABLE);
        if (!a->opts->quiet)
            fprintf(stderr, "hangwatch: no Sentry event for %s: %s\n", file_name, why);
        return;
    }
    hw_sentry_sender_submit(a->sentry, event_id, envelope, len);
    free(envelope);
}
