/*
 * report_write.c - a report's way out: Matrix's daily limit and the
 * directory's size cap, the file (written atomically through the report
 * directory's descriptor), the line on stderr, and the exports
 * (hw_exports_publish: the metrics, the library's callbacks, Sentry).
 *
 * A report of a hang that is still going on is published twice: when it
 * is written, and once the hang is over and its final duration has been
 * added (then it is complete, and Sentry makes its event of it).  Its
 * content is kept for that only while a sink wants it.
 *
 * Nothing is lost silently: a report the limits refuse or the disk cannot
 * take is counted in the metrics and by the worker, and the reason is said
 * once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/common/report_dir.h"
#include "core/report_limits.h"
#include "report_internal.h"

/* The process name and hang type a report of ours names. */
static const char *report_process(const json_t *report)
{
    return json_string_value(json_object_get(json_object_get(report, "report"), "process_name"));
}

/* Its metrics' key: the process name and its container's label. */
static const char *report_metrics_key(const json_t *report, char *out, size_t len)
{
    const json_t *container = json_object_get(json_object_get(report, "hangwatch"), "container");
    return hw_metrics_key(report_process(report), json_string_value(json_object_get(container, "label")), out, len);
}

static const char *report_hang_type(const json_t *report)
{
    return json_string_value(json_object_get(json_object_get(report, "hangwatch"), "hang_type"));
}

/* Matrix's daily limit and the directory cap: may this report be written? */
static bool report_allowed(report_worker *wk, json_t *report)
{
    const hw_agent_options *o = wk->opts;
    hw_report_dir_usage u = hw_report_dir_usage_now(o->report_dir_handle);
    uint64_t expected = wk->last_report_bytes > 8192 ? wk->last_report_bytes : 8192;
    hw_limit_verdict v = hw_report_allowed(&o->limits, &u, expected);
    if (v == HW_LIMIT_OK)
        return true;
    wk->dropped_by_limits++;
    char key[96];
    hw_metrics_report_dropped(hw_exports_metrics(wk->exports), report_metrics_key(report, key, sizeof key),
                              v == HW_LIMIT_DAILY ? HW_METRICS_DROP_DAILY_LIMIT : HW_METRICS_DROP_SIZE_CAP);
    if (!wk->said_limits && !o->quiet) {
        wk->said_limits = true;
        if (v == HW_LIMIT_DAILY)
            fprintf(stderr,
                    "hangwatch: %s already holds %u reports from the last 24 h (the daily limit): further hangs "
                    "are detected but not written (--daily-limit changes it)\n",
                    o->report_dir, u.reports_last_day);
        else
            fprintf(stderr,
                    "hangwatch: %s would grow past its size cap of %llu bytes: further hangs are detected but not "
                    "written (--max-dir-size changes it)\n",
                    o->report_dir, (unsigned long long)o->limits.max_dir_bytes);
    }
    return false;
}

/* A refused write: counted, the reason said once (a full disk stays
 * full); later hangs still get their line. */
static void write_failed(report_worker *wk, json_t *report, const char *line, int rc)
{
    const hw_agent_options *o = wk->opts;
    char key[96];
    hw_metrics_report_dropped(hw_exports_metrics(wk->exports), report_metrics_key(report, key, sizeof key),
                              HW_METRICS_DROP_WRITE_ERROR);
    if (wk->write_failures++ == 0) {
        wk->first_write_error = -rc;
        if (!o->quiet)
            fprintf(stderr, "%s; no report: cannot write to %s: %s (further failures are counted)\n",
                    line ? line : "hangwatch: hang", o->report_dir, strerror(-rc));
    } else if (!o->quiet && line) {
        fprintf(stderr, "%s; no report (not written, as said above)\n", line);
    }
}

/* Keep the name of a hang's report (for its final duration and the line
 * of a fatal hang), and its content while a sink will want it complete. */
static void keep_name(report_worker *wk, hang_record *h, const char *file_name, json_t *report, bool complete)
{
    for (size_t i = 0; i < MAX_STRETCH_REPORTS; i++) {
        if (!h->names[i]) {
            h->names[i] = strdup(file_name);
            if (h->names[i] && !complete && hw_exports_want_content(wk->exports))
                h->kept[i] = json_incref(report);
            return;
        }
    }
}

void write_report(report_worker *wk, hang_record *h, json_t *report, const char *line, pid_t pid, pid_t tid,
                  int64_t detected_unix_ns, uint64_t busy_ns, bool complete)
{
    const hw_agent_options *o = wk->opts;
    if (!report_allowed(wk, report))
        return;
    char file_name[128], stamp[32];
    time_t secs = (time_t)(detected_unix_ns / 1000000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    snprintf(file_name, sizeof file_name, "hang-%s-%d-%u.json", stamp, (int)pid, ++wk->report_serial);
    int rc = hw_report_write(o->report_dir_handle, file_name, report);
    if (rc != 0) {
        write_failed(wk, report, line, rc);
        return;
    }
    uint64_t bytes = 0;
    if (hw_report_dir_file_size(o->report_dir_handle, file_name, &bytes) == 0)
        wk->last_report_bytes = bytes;
    char *path = NULL;
    if (asprintf(&path, "%s/%s", hw_report_dir_path(o->report_dir_handle), file_name) < 0)
        path = NULL;
    hw_published_report pub = {.file_name = file_name,
                               .path = path,
                               .tid = tid,
                               .busy_ns = busy_ns,
                               .process = report_process(report),
                               .hang_type = report_hang_type(report),
                               .report = report,
                               .written = true,
                               .complete = complete};
    hw_exports_publish(wk->exports, &pub);
    if (!o->quiet && line)
        fprintf(stderr, "%s; report %s\n", line, path ? path : file_name);
    free(path);
    if (h)
        keep_name(wk, h, file_name, report, complete);
}

void write_final_durations(report_worker *wk, hang_record *h, const hw_hang_end *e)
{
    const hw_agent_options *o = wk->opts;
    for (size_t i = 0; i < MAX_STRETCH_REPORTS; i++) {
        if (!h->names[i])
            continue;
        int rc = hw_report_add_final_duration(o->report_dir_handle, h->names[i], e);
        if (rc != 0 && !o->quiet)
            fprintf(stderr, "hangwatch: cannot add the final duration to %s/%s: %s\n",
                    hw_report_dir_path(o->report_dir_handle), h->names[i], strerror(-rc));
        if (h->kept[i])
            hw_report_set_final(h->kept[i], e);
        hw_published_report pub = {.file_name = h->names[i],
                                   .process = report_process(h->kept[i]),
                                   .hang_type = report_hang_type(h->kept[i]),
                                   .report = h->kept[i],
                                   .complete = true};
        hw_exports_publish(wk->exports, &pub);
    }
}
