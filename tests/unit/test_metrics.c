/* test_metrics.c - the agent's Prometheus counts and their exposition text
 * (src/agent/exports/metrics.c): what a scrape reads after hangs, reports, drops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/exports/metrics.h"

/* The value on the line that starts with `series` (name and labels, as
 * rendered), or -1 when there is none. */
static double value_of(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (strncmp(line, series, n) == 0 && line[n] == ' ')
            return strtod(line + n + 1, NULL);
    }
    return -1;
}

static size_t count_lines_starting(const char *text, const char *prefix)
{
    size_t count = 0, n = strlen(prefix);
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
        if (strncmp(line, prefix, n) == 0)
            count++;
    return count;
}

static void test_hangs_and_histogram(void **state)
{
    (void)state;
    hw_metrics *m = hw_metrics_new("runloop");
    assert_non_null(m);
    hw_metrics_watched(m, "my-server", 1);
    hw_metrics_hang_detected(m, "my-server", HW_METRICS_HANG, HW_CAUSE_BLOCKED, false);
    hw_metrics_hang_ended(m, "my-server", HW_METRICS_HANG, 2500000000ull); /* 2.5 s */
    hw_metrics_hang_detected(m, "my-server", HW_METRICS_HANG, HW_CAUSE_BLOCKED, true);
    hw_metrics_hang_ended(m, "my-server", HW_METRICS_HANG, 100000000ull); /* exactly 0.1 s: le="0.1" */
    hw_metrics_hung_time(m, "my-server", 2600000000ull);
    size_t len = 0;
    char *text = hw_metrics_render(m, &len);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    assert_true(value_of(text, "hangwatch_hangs_total{process=\"my-server\",detector=\"runloop\",hang_type=\"hang\",cause=\"blocked\"}") == 2);
    assert_true(value_of(text, "hangwatch_hangs_total{process=\"my-server\",detector=\"runloop\",hang_type=\"hang\",cause=\"working\"}") == 0);
    /* one of the two verdicts was over part of its hang */
    assert_true(value_of(text, "hangwatch_partial_verdicts_total{process=\"my-server\",detector=\"runloop\",hang_type=\"hang\"}") == 1);
    const char *h = "hangwatch_hang_duration_seconds";
    char series[256];
    snprintf(series, sizeof series, "%s_count{process=\"my-server\",detector=\"runloop\",hang_type=\"hang\"}", h);
    assert_true(value_of(text, series) == 2);
    snprintf(series, sizeof series, "%s_sum{process=\"my-server\",detector=\"runloop\",hang_type=\"hang\"}", h);
    assert_true(value_of(text, series) == 2.6);
    /* Buckets are cumulative and "le" is "less than or equal". */
    snprintf(series, sizeof series, "%s_bucket{process=\"my-server\",detector=\"runloop\",hang_type=\"hang\",le=\"0.1\"}", h);
    assert_true(value_of(text, series) == 1);
    snprintf(series, sizeof series, "%s_bucket{process=\"my-server\",detector=\"runloop\",hang_type=\"hang\",le=\"2\"}", h);
    assert_true(value_of(text, series) == 1);
    snprintf(series, sizeof series, "%s_bucket{process=\"my-server\",detector=\"runloop\",hang_type=\"hang\",le=\"3\"}", h);
    assert_true(value_of(text, series) == 2);
    snprintf(series, sizeof series, "%s_bucket{process=\"my-server\",detector=\"runloop\",hang_type=\"hang\",le=\"+Inf\"}", h);
    assert_true(value_of(text, series) == 2);
    assert_true(value_of(text, "hangwatch_hung_seconds_total{process=\"my-server\",detector=\"runloop\"}") == 2.6);
    assert_true(value_of(text, "hangwatch_watched_processes{process=\"my-server\"}") == 1);
    /* One HELP and one TYPE per family, before its samples. */
    assert_int_equal(count_lines_starting(text, "# TYPE hangwatch_hang_duration_seconds histogram"), 1);
    assert_int_equal(count_lines_starting(text, "# HELP hangwatch_hangs_total "), 1);
    assert_true(strstr(text, "# TYPE hangwatch_hangs_total counter\nhangwatch_hangs_total{") != NULL);
    /* No Sentry metrics without Sentry. */
    assert_null(strstr(text, "sentry"));
    free(text);
    hw_metrics_free(m);
}

static void test_counters_exist_at_zero(void **state)
{
    (void)state;
    hw_metrics *m = hw_metrics_new("ping");
    hw_metrics_watched(m, "idle", 1);
    char *text = hw_metrics_render(m, NULL);
    /* A counter must be there at 0 before its first hang, or increase()
     * misses that hang. */
    assert_true(value_of(text, "hangwatch_hangs_total{process=\"idle\",detector=\"ping\",hang_type=\"hang\",cause=\"unknown\"}") == 0);
    assert_true(value_of(text, "hangwatch_hang_duration_seconds_count{process=\"idle\",detector=\"ping\",hang_type=\"hang\"}") == 0);
    assert_true(value_of(text, "hangwatch_reports_dropped_total{process=\"idle\",reason=\"daily_limit\"}") == 0);
    /* Types that never happened are not shown. */
    assert_null(strstr(text, "hang_type=\"launch_hang\""));
    assert_null(strstr(text, "hang_type=\"stutter\""));
    free(text);
    hw_metrics_watched(m, "idle", -1);
    text = hw_metrics_render(m, NULL);
    assert_true(value_of(text, "hangwatch_watched_processes{process=\"idle\"}") == 0);
    free(text);
    hw_metrics_free(m);
}

static void test_reports_and_drops(void **state)
{
    (void)state;
    hw_metrics *m = hw_metrics_new("runloop");
    hw_metrics_report_written(m, "a", HW_METRICS_HANG);
    hw_metrics_report_written(m, "a", HW_METRICS_STUTTER);
    hw_metrics_report_written(m, "a", HW_METRICS_CPU_HIGH);
    hw_metrics_report_dropped(m, "a", HW_METRICS_DROP_DAILY_LIMIT);
    hw_metrics_report_dropped(m, "a", HW_METRICS_DROP_IGNORED);
    hw_metrics_report_dropped(m, "a", HW_METRICS_DROP_QUEUE_FULL);
    hw_metrics_report_dropped(m, "a", HW_METRICS_DROP_QUEUE_FULL);
    hw_metrics_report_dropped(m, "a", (hw_metrics_drop_reason)99); /* ignored */
    hw_metrics_refused(m);
    char *text = hw_metrics_render(m, NULL);
    assert_true(value_of(text, "hangwatch_reports_written_total{process=\"a\",hang_type=\"hang\"}") == 1);
    assert_true(value_of(text, "hangwatch_reports_written_total{process=\"a\",hang_type=\"stutter\"}") == 1);
    assert_true(value_of(text, "hangwatch_reports_dropped_total{process=\"a\",reason=\"daily_limit\"}") == 1);
    assert_true(value_of(text, "hangwatch_reports_dropped_total{process=\"a\",reason=\"queue_full\"}") == 2);
    assert_true(value_of(text, "hangwatch_reports_dropped_total{process=\"a\",reason=\"ignored\"}") == 1);
    /* a CPU-high report is a report, not a hang */
    assert_true(value_of(text, "hangwatch_reports_written_total{process=\"a\",hang_type=\"cpu_high\"}") == 1);
    assert_int_equal(count_lines_starting(text, "hangwatch_hangs_total{process=\"a\",detector=\"runloop\",hang_type=\"cpu_high\""), 0);
    assert_int_equal(count_lines_starting(text, "hangwatch_hang_duration_seconds_count{process=\"a\",detector=\"runloop\",hang_type=\"cpu_high\""), 0);
    assert_true(value_of(text, "hangwatch_registrations_refused_total") == 1);
    /* stutter has no final duration: no histogram for it */
    assert_null(strstr(text, "hangwatch_hang_duration_seconds_count{process=\"a\",detector=\"runloop\",hang_type=\"stutter\"}"));
    free(text);
    hw_metrics_free(m);
}

static void test_labels_escaped_and_bounded(void **state)
{
    (void)state;
    hw_metrics *m = hw_metrics_new("runloop");
    hw_metrics_watched(m, "a\"b\\c\nd\x1b", 1);
    for (int i = 0; i < HW_METRICS_MAX_PROCESSES + 10; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        hw_metrics_hang_detected(m, name, HW_METRICS_HANG, HW_CAUSE_BLOCKED, false);
    }
    char *text = hw_metrics_render(m, NULL);
    /* The comm as hw_escape_text prints it (\\, \n, \x1b), then the
     * exposition format's own escapes of '"' and '\'. */
    assert_non_null(strstr(text, "hangwatch_watched_processes{process=\"a\\\"b\\\\\\\\c\\\\nd\\\\x1b\"} 1\n"));
    /* 32 names, then "(other)" for the rest (11 of the p's). */
    assert_true(value_of(text, "hangwatch_hangs_total{process=\"(other)\",detector=\"runloop\",hang_type=\"hang\",cause=\"blocked\"}") == 11);
    assert_int_equal(count_lines_starting(text, "hangwatch_watched_processes{"), HW_METRICS_MAX_PROCESSES + 1);
    /* Every line is a comment or NAME{...} VALUE / NAME VALUE, no stray
     * newline inside a label. */
    for (const char *line = text; *line; line = strchr(line, '\n') + 1) {
        assert_true(line[0] == '#' || strncmp(line, "hangwatch_", 10) == 0);
        assert_non_null(strchr(line, '\n'));
    }
    free(text);
    hw_metrics_free(m);
}

static void test_sentry_and_null(void **state)
{
    (void)state;
    /* A NULL registry (metrics off) takes every call. */
    hw_metrics_hang_detected(NULL, "x", HW_METRICS_HANG, HW_CAUSE_BLOCKED, false);
    hw_metrics_sentry_sent(NULL);
    assert_null(hw_metrics_render(NULL, NULL));
    hw_metrics *m = hw_metrics_new("runloop");
    uint64_t v0 = hw_metrics_version(m);
    hw_metrics_sentry_spooled(m, 3);
    hw_metrics_sentry_sent(m);
    hw_metrics_sentry_dropped(m, HW_METRICS_SENTRY_REJECTED);
    assert_true(hw_metrics_version(m) > v0);
    char *text = hw_metrics_render(m, NULL);
    assert_true(value_of(text, "hangwatch_sentry_events_sent_total") == 1);
    assert_true(value_of(text, "hangwatch_sentry_events_dropped_total{reason=\"rejected\"}") == 1);
    assert_true(value_of(text, "hangwatch_sentry_spool_events") == 3);
    free(text);
    hw_metrics_free(m);
    assert_int_equal(hw_metrics_hang_type_of("launch_hang"), HW_METRICS_LAUNCH_HANG);
    assert_int_equal(hw_metrics_hang_type_of("stutter"), HW_METRICS_STUTTER);
    assert_int_equal(hw_metrics_hang_type_of("snapshot"), HW_METRICS_HANG);
    assert_int_equal(hw_metrics_hang_type_of(NULL), HW_METRICS_HANG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hangs_and_histogram),   cmocka_unit_test(test_counters_exist_at_zero),
        cmocka_unit_test(test_reports_and_drops),     cmocka_unit_test(test_labels_escaped_and_bounded),
        cmocka_unit_test(test_sentry_and_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
