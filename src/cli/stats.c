/*
 * stats.c - `hangwatch stats [--json] REPORT.json|DIR...`: the reports of
 * many runs or machines, grouped by grouping key (hang_groups.h) and printed
 * as a table sorted by total hang time, or as JSON for tools.  The first
 * thing to run on a directory of reports: which hangs cost the most time,
 * how often each happened, since when, where (the culprit frame).
 *
 * Reports are read one at a time and reduced to summaries at once
 * (report_summary.h).  A file that cannot be read, is not JSON or is not a
 * report is named on stderr and the others are still read; the exit status
 * is 1 only when no report at all could be read.
 */
#include "stats.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "foreign_text.h"
#include "hang_groups.h"
#include "report_command.h"
#include "report_read.h"
#include "report_summary.h"
#include "core/text_escape.h"

static const char stats_help[] =
    "usage: hangwatch stats [--json] REPORT.json|DIR...\n"
    "\n"
    "Groups the hangs of the reports given, and of the *.json files found in\n"
    "the directories given (and their subdirectories), by grouping key: the\n"
    "same hang site has the same key in every run, on every machine and in\n"
    "every build of the program.  For each group: how many hangs, their\n"
    "total, median and worst duration (the final duration where the report\n"
    "has it, else the time until detection), when it was first and last\n"
    "seen (UTC), the processes, and the culprit: the innermost Python or\n"
    "JavaScript frame, else the innermost frame of the program's own code.\n"
    "Groups are sorted by total hang time, the largest first.  A hang whose\n"
    "stack moved while it lasted (several reports) counts once, in the\n"
    "group where it began; stutter and snapshot reports are not hangs.\n"
    "\n"
    "  --json   print the groups as JSON instead of a table\n"
    "\n"
    "A file that cannot be read or is not a report is named on stderr and\n"
    "skipped.  The exit status is 0 when at least one report was read, 1\n"
    "when none could be, 2 for a usage error.\n";

/* ---- printing ------------------------------------------------------------- */

/* "2026-11-29 18:01:02" (UTC), or "?" */
static const char *utc_time(bool known, int64_t ms, char *buf, size_t len, bool iso)
{
    struct tm tm;
    time_t t = (time_t)(ms / 1000);
    if (!known || ms < 0 || gmtime_r(&t, &tm) == NULL ||
        strftime(buf, len, iso ? "%Y-%m-%dT%H:%M:%SZ" : "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(buf, len, "?");
    return buf;
}

static const char *seconds(uint64_t us, char *buf, size_t len)
{
    snprintf(buf, len, "%" PRIu64 ".%03" PRIu64 "s", us / 1000000, us % 1000000 / 1000);
    return buf;
}

/* A frame for people: "py handle (app.py:5)", "flush_cache at cache.c:88 (my-server)". */
static void put_frame(FILE *out, const hw_sframe *f)
{
    bool py = strcmp(f->language, "python") == 0, js = strcmp(f->language, "javascript") == 0;
    if (py || js)
        fputs(py ? "py " : "js ", out);
    hw_put_text(out, f->name);
    if (f->file != NULL) {
        fputs(" at ", out);
        hw_put_text(out, f->file);
        if (f->line > 0)
            fprintf(out, ":%" PRId64, f->line);
    }
    if (!py && !js && f->object != NULL) {
        fputs(" (", out);
        hw_put_text(out, f->object);
        fputc(')', out);
    }
}

/* "a, b, c +2 more", escaped */
static void put_processes(FILE *out, const hw_stats_group *g)
{
    size_t shown = g->process_count < 3 ? g->process_count : 3;
    for (size_t i = 0; i < shown; i++) {
        if (i > 0)
            fputs(", ", out);
        hw_put_text(out, g->processes[i]);
    }
    if (g->process_count > shown)
        fprintf(out, " +%zu more", g->process_count - shown);
}

/* "    cause: blocked on network (3), working (1)": the group's hangs by
 * where their time went, most first (nothing when no report says), and
 * "; 1 of them over part of the hang" for verdicts of partial windows. */
static void put_causes(FILE *out, const hw_stats_group *g)
{
    bool done[HW_CAUSE_LABELS] = {false};
    const char *sep = "    cause: ";
    for (;;) {
        size_t best = HW_CAUSE_LABELS;
        for (size_t c = 0; c < HW_CAUSE_LABELS; c++)
            if (!done[c] && g->causes[c] > 0 && (best == HW_CAUSE_LABELS || g->causes[c] > g->causes[best]))
                best = c;
        if (best == HW_CAUSE_LABELS)
            break;
        done[best] = true;
        fprintf(out, "%s%s (%zu)", sep, hw_cause_label_at(best), g->causes[best]);
        sep = ", ";
    }
    if (sep[0] == ',' && g->partial_causes > 0)
        fprintf(out, "; %zu of them over part of the hang", g->partial_causes);
    if (sep[0] == ',')
        fputc('\n', out);
}

void hw_stats_print_table(const hw_stats *st, const hw_report_walk_counts *counts, FILE *out)
{
    fprintf(out, "%zu hang%s in %zu group%s, from %zu report%s", st->hangs, st->hangs == 1 ? "" : "s",
            st->group_count, st->group_count == 1 ? "" : "s", counts->reports, counts->reports == 1 ? "" : "s");
    if (st->not_hangs > 0)
        fprintf(out, " (%zu stutter, snapshot or CPU-high report%s set aside)", st->not_hangs, st->not_hangs == 1 ? "" : "s");
    if (counts->failed > 0)
        fprintf(out, "; %zu file%s or path%s could not be read (named above)", counts->failed,
                counts->failed == 1 ? "" : "s", counts->failed == 1 ? "" : "s");
    fputc('\n', out);
    if (st->group_count == 0)
        return;
    fprintf(out, "\n%-16s %6s %11s %11s %11s  %-19s  %-19s  %s\n", "GROUP", "COUNT", "TOTAL", "MEDIAN", "WORST",
            "FIRST SEEN (UTC)", "LAST SEEN (UTC)", "PROCESSES");
    for (size_t i = 0; i < st->group_count; i++) {
        const hw_stats_group *g = &st->groups[i];
        char total[32], median[32], worst[32], first[32], last[32];
        char key[4 * 16 + 1];
        /* the key is 16 hex digits in every report hangwatch writes */
        hw_escape_bytes(g->key, strlen(g->key) < 16 ? strlen(g->key) : 16, key, sizeof key);
        fprintf(out, "%-16s%s %6zu %11s %11s %11s  %-19s  %-19s  ", key, strlen(g->key) > 16 ? "~" : "", g->hangs,
                seconds(g->total_us, total, sizeof total), seconds(g->median_us, median, sizeof median),
                seconds(g->worst_us, worst, sizeof worst), utc_time(g->seen_known, g->first_seen_ms, first, sizeof first, false),
                utc_time(g->seen_known, g->last_seen_ms, last, sizeof last, false));
        put_processes(out, g);
        fputs("\n    culprit: ", out);
        if (g->has_culprit)
            put_frame(out, &g->culprit);
        else
            fputs("unknown (no frame of the hung thread names a function)", out);
        fputc('\n', out);
        put_causes(out, g);
        if (g->open_hangs > 0)
            fprintf(out, "    %zu of these hangs never had their end recorded: their time until detection is "
                         "counted\n",
                    g->open_hangs);
        if (g->follow_ups > 0)
            fprintf(out, "    and %zu follow-up report%s of these hangs (their culprit moved while they "
                         "lasted)\n",
                    g->follow_ups, g->follow_ups == 1 ? "" : "s");
        for (size_t m = 0; m < g->moved_count; m++) {
            if (g->has_culprit && strcmp(g->moved[m].name, g->culprit.name) == 0)
                continue; /* back where it began */
            fputs("    moved to: ", out);
            put_frame(out, &g->moved[m]);
            fputc('\n', out);
        }
        if (g->moved_more > 0)
            fprintf(out, "    and to %zu more\n", g->moved_more);
    }
}

json_t *hw_frame_json(const hw_sframe *f)
{
    json_t *o = json_object();
    json_object_set_new(o, "function", hw_json_text(f->name));
    if (f->file != NULL)
        json_object_set_new(o, "file", hw_json_text(f->file));
    if (f->line > 0)
        json_object_set_new(o, "line", json_integer(f->line));
    if (f->object != NULL)
        json_object_set_new(o, "object", hw_json_text(f->object));
    json_object_set_new(o, "language", json_string(f->language));
    if (f->in_app >= 0)
        json_object_set_new(o, "in_app", json_boolean(f->in_app == 1));
    return o;
}

json_t *hw_stats_to_json(const hw_stats *st, const hw_report_walk_counts *counts)
{
    json_t *groups = json_array();
    for (size_t i = 0; i < st->group_count; i++) {
        const hw_stats_group *g = &st->groups[i];
        json_t *processes = json_array();
        for (size_t k = 0; k < g->process_count; k++)
            json_array_append_new(processes, hw_json_text(g->processes[k]));
        json_t *o = json_object();
        json_object_set_new(o, "grouping_key", hw_json_text(g->key));
        json_object_set_new(o, "count", hw_json_u64(g->hangs));
        json_object_set_new(o, "total_us", hw_json_u64(g->total_us));
        json_object_set_new(o, "median_us", hw_json_u64(g->median_us));
        json_object_set_new(o, "worst_us", hw_json_u64(g->worst_us));
        json_object_set_new(o, "open_hangs", hw_json_u64(g->open_hangs));
        json_object_set_new(o, "follow_up_reports", hw_json_u64(g->follow_ups));
        json_object_set_new(o, "reports", hw_json_u64(g->reports));
        if (g->seen_known) {
            char first[32], last[32];
            json_object_set_new(o, "first_seen_unix_ms", json_integer(g->first_seen_ms));
            json_object_set_new(o, "last_seen_unix_ms", json_integer(g->last_seen_ms));
            json_object_set_new(o, "first_seen", json_string(utc_time(true, g->first_seen_ms, first, sizeof first, true)));
            json_object_set_new(o, "last_seen", json_string(utc_time(true, g->last_seen_ms, last, sizeof last, true)));
        }
        json_object_set_new(o, "processes", processes);
        json_object_set_new(o, "culprit", g->has_culprit ? hw_frame_json(&g->culprit) : json_null());
        json_t *moved = json_array();
        for (size_t m = 0; m < g->moved_count; m++)
            if (!g->has_culprit || strcmp(g->moved[m].name, g->culprit.name) != 0)
                json_array_append_new(moved, hw_frame_json(&g->moved[m]));
        json_object_set_new(o, "moved_to", moved);
        json_t *causes = json_object();
        for (size_t c = 0; c < HW_CAUSE_LABELS; c++)
            if (g->causes[c] > 0)
                json_object_set_new(causes, hw_cause_label_at(c), hw_json_u64(g->causes[c]));
        json_object_set_new(o, "causes", causes);
        json_object_set_new(o, "partial_causes", hw_json_u64(g->partial_causes));
        json_array_append_new(groups, o);
    }
    json_t *root = json_object();
    json_object_set_new(root, "reports", hw_json_u64(counts->reports));
    json_object_set_new(root, "unreadable", hw_json_u64(counts->failed));
    json_object_set_new(root, "hangs", hw_json_u64(st->hangs));
    json_object_set_new(root, "not_hangs", hw_json_u64(st->not_hangs));
    json_object_set_new(root, "groups", groups);
    return root;
}

/* ---- the command ------------------------------------------------------------ */

/* What the command line says, and the summaries of the reports read. */
typedef struct stats_run {
    bool as_json;
    hw_summaries all;
} stats_run;

static int take_json(const char *value, void *ctx)
{
    (void)value;
    ((stats_run *)ctx)->as_json = true;
    return 0;
}

static int take_report(const char *path, json_t *root, void *ctx)
{
    return hw_summaries_add(&((stats_run *)ctx)->all, path, root);
}

static const hw_report_option stats_options[] = {
    {"--json", NULL, false, take_json},
};

static const hw_report_command stats_command = {
    .name = "stats",
    .help = stats_help,
    .options = stats_options,
    .option_count = sizeof stats_options / sizeof stats_options[0],
    .needs_paths = "stats needs reports or directories: hangwatch stats [--json] REPORT.json|DIR...",
    .take_report = take_report,
    .none_read = "",
};

int hw_stats_main(int argc, char **argv)
{
    stats_run run = {0};
    hw_report_walk_counts counts;
    int rc;
    if (!hw_report_command_read(&stats_command, argc, argv, &run, &counts, &rc)) {
        hw_summaries_free(&run.all);
        return rc;
    }
    hw_stats st;
    hw_stats_init(&st);
    if (hw_stats_build(&st, run.all.s, run.all.count) != 0) {
        fputs("hangwatch: out of memory while grouping the reports\n", stderr);
        rc = 1;
    } else if (run.as_json) {
        json_t *root = hw_stats_to_json(&st, &counts);
        if (root == NULL || json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0) {
            fputs("hangwatch: out of memory while printing the groups\n", stderr);
            rc = 1;
        }
        fputc('\n', stdout);
        json_decref(root);
    } else {
        hw_stats_print_table(&st, &counts, stdout);
    }
    hw_stats_free(&st);
    hw_summaries_free(&run.all);
    return rc;
}
