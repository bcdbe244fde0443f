/*
 * test_hang_stats.c - `hangwatch stats`' model: reports summarized from
 * JSON (report_summary.c: the culprit frame, fields of the wrong type or out
 * of range), the reports of one busy stretch linked into one hang
 * (hang_stretches.c), and the groups (hang_groups.c): count, total, median
 * (odd and even counts), worst, first and last seen, processes, the culprit
 * of the newest report, hangs whose end was never recorded, and the order by
 * total hang time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/hang_groups.h"
#include "cli/hang_stretches.h"
#include "cli/report_summary.h"

/* A report as hangwatch writes one, with what the tests vary. */
static json_t *report(const char *key, int64_t pid, int64_t detected_ms, int64_t block_us, int64_t final_us,
                      unsigned stretch_index, const char *process, const char *culprit)
{
    json_t *frames = json_pack("[{s:s, s:s}, {s:s, s:s, s:s, s:i}, {s:s, s:s}]", "symbol_name", "clock_nanosleep",
                               "object_name", "libc.so.6", "symbol_name", culprit, "object_name", process,
                               "source_file", "prog.c", "source_line", 42, "symbol_name", "main", "object_name",
                               process);
    json_t *apm = json_pack("{s:s, s:s, s:I, s:I, s:I, s:{s:I, s:i}, s:{}}", "grouping_key", key, "hang_type", "hang",
                            "detected_at_unix_ms", (json_int_t)detected_ms, "block_duration_us", (json_int_t)block_us,
                            "stretch_report_index", (json_int_t)stretch_index, "hung_thread", "thread_identifier",
                            (json_int_t)pid, "report_array_index", 0, "collection");
    if (final_us >= 0) {
        json_object_set_new(apm, "final_duration_us", json_integer(final_us));
        json_object_set_new(apm, "hang_end", json_string("returned_to_wait"));
    }
    return json_pack("{s:{s:s, s:I}, s:{s:[{s:s, s:I, s:{s:o}}]}, s:o}", "report", "process_name", process, "pid",
                     (json_int_t)pid, "crash", "threads", "name", process, "thread_identifier", (json_int_t)pid,
                     "backtrace", "contents", frames, "hangwatch", apm);
}

typedef struct set {
    hw_hang_summary s[16];
    size_t n;
} set;

static void add(set *set, json_t *root)
{
    assert_non_null(root);
    char path[32];
    snprintf(path, sizeof path, "r%zu.json", set->n);
    assert_int_equal(hw_hang_summary_of(root, path, &set->s[set->n]), 0);
    set->n++;
    json_decref(root);
}

static void free_set(set *set)
{
    for (size_t i = 0; i < set->n; i++)
        hw_hang_summary_free(&set->s[i]);
}

static const hw_stats_group *group(const hw_stats *st, const char *key)
{
    for (size_t i = 0; i < st->group_count; i++)
        if (strcmp(st->groups[i].key, key) == 0)
            return &st->groups[i];
    fail_msg("no group %s", key);
    return NULL;
}

/* Three groups: A three times (odd median), B twice (even median, the
 * largest total), C once; sorted by total, B, A, C. */
static void test_groups_sorted_by_total_with_medians(void **state)
{
    (void)state;
    set s = {0};
    /* A: 3 s, 1 s, 2 s in three processes seen at 5000, 1000, 9000 ms */
    add(&s, report("aaaa", 101, 5000, 2000000, 3000000, 0, "alpha", "hang_in_a"));
    add(&s, report("aaaa", 102, 1000, 2000000, 1000000, 0, "beta", "hang_in_a"));
    add(&s, report("aaaa", 103, 9000, 2000000, 2000000, 0, "alpha", "hang_in_a"));
    /* B: 4 s and 7 s: median 5.5 s, total 11 s */
    add(&s, report("bbbb", 104, 3000, 2000000, 4000000, 0, "gamma", "hang_in_b"));
    add(&s, report("bbbb", 105, 4000, 2000000, 7000000, 0, "gamma", "hang_in_b"));
    /* C: one hang whose end was never recorded: its busy time counts */
    add(&s, report("cccc", 106, 2000, 2500000, -1, 0, "delta", "hang_in_c"));

    hw_stats st;
    hw_stats_init(&st);
    assert_int_equal(hw_stats_build(&st, s.s, s.n), 0);
    assert_int_equal(st.group_count, 3);
    assert_int_equal(st.hangs, 6);
    assert_string_equal(st.groups[0].key, "bbbb");
    assert_string_equal(st.groups[1].key, "aaaa");
    assert_string_equal(st.groups[2].key, "cccc");

    const hw_stats_group *a = group(&st, "aaaa");
    assert_int_equal(a->hangs, 3);
    assert_int_equal(a->total_us, 6000000);
    assert_int_equal(a->median_us, 2000000);
    assert_int_equal(a->worst_us, 3000000);
    assert_true(a->seen_known);
    assert_int_equal(a->first_seen_ms, 1000);
    assert_int_equal(a->last_seen_ms, 9000);
    assert_int_equal(a->process_count, 2);
    assert_string_equal(a->processes[0], "alpha");
    assert_string_equal(a->processes[1], "beta");
    assert_true(a->has_culprit);
    assert_string_equal(a->culprit.name, "hang_in_a");
    assert_string_equal(a->culprit.file, "prog.c");
    assert_int_equal(a->culprit.line, 42);
    assert_int_equal(a->open_hangs, 0);

    const hw_stats_group *b = group(&st, "bbbb");
    assert_int_equal(b->hangs, 2);
    assert_int_equal(b->total_us, 11000000);
    assert_int_equal(b->median_us, 5500000);
    assert_int_equal(b->worst_us, 7000000);

    const hw_stats_group *c = group(&st, "cccc");
    assert_int_equal(c->hangs, 1);
    assert_int_equal(c->total_us, 2500000);
    assert_int_equal(c->open_hangs, 1);
    hw_stats_free(&st);
    free_set(&s);
}

/* Equal totals: more hangs first, then the key; a median of two huge
 * durations does not overflow; totals saturate. */
static void test_ties_and_huge_durations(void **state)
{
    (void)state;
    set s = {0};
    add(&s, report("zz", 1, 1000, 1, 4000000, 0, "p", "f"));
    add(&s, report("yy", 2, 1000, 1, 2000000, 0, "p", "f"));
    add(&s, report("yy", 3, 1000, 1, 2000000, 0, "p", "f"));
    add(&s, report("xx", 4, 1000, 1, 4000000, 0, "p", "f"));
    add(&s, report("big", 5, 1000, 1, INT64_MAX, 0, "p", "f"));
    add(&s, report("big", 6, 1000, 1, INT64_MAX - 2, 0, "p", "f"));
    hw_stats st;
    hw_stats_init(&st);
    assert_int_equal(hw_stats_build(&st, s.s, s.n), 0);
    assert_string_equal(st.groups[0].key, "big");
    assert_int_equal(st.groups[0].total_us, (uint64_t)INT64_MAX * 2 - 2);
    assert_int_equal(st.groups[0].median_us, (uint64_t)INT64_MAX - 1);
    assert_string_equal(st.groups[1].key, "yy"); /* 4 s in 2 hangs before 4 s in one */
    assert_string_equal(st.groups[2].key, "xx");
    assert_string_equal(st.groups[3].key, "zz");
    hw_stats_free(&st);

    /* saturation: three more of the largest */
    set t = {0};
    for (int i = 0; i < 3; i++)
        add(&t, report("big", 10 + i, 1000, 1, INT64_MAX, 0, "p", "f"));
    hw_stats_init(&st);
    assert_int_equal(hw_stats_build(&st, t.s, t.n), 0);
    assert_int_equal(st.groups[0].total_us, UINT64_MAX);
    hw_stats_free(&st);
    free_set(&t);
    free_set(&s);
}

/* One busy stretch whose stack moved (annealing) has reports 0, 1, 2 of the
 * same thread, detected later and later, their starts (detection less busy
 * time) a millisecond apart: one hang, counted with its whole duration in
 * the group where it began, where the others count as its follow-ups.  A later
 * stretch of the same thread is another hang. */
static void test_stretch_reports_are_one_hang(void **state)
{
    (void)state;
    set s = {0};
    /* started at 10 000 ms: detected after 2 s, then 4 s, then 7 s */
    add(&s, report("bbbb", 7, 14001, 4000000, 10000000, 1, "p", "in_b"));
    add(&s, report("aaaa", 7, 12000, 2000000, 10000000, 0, "p", "in_a"));
    add(&s, report("cccc", 7, 16999, 7000000, 10000000, 2, "p", "in_c"));
    /* the next stretch of the thread, at 30 000 ms, where A was again */
    add(&s, report("aaaa", 7, 32000, 2000000, 3000000, 0, "p", "in_a"));
    /* a report whose first report is missing (not among these): a hang */
    add(&s, report("dddd", 8, 50000, 5000000, 6000000, 3, "p", "in_d"));

    size_t stretch[5];
    assert_int_equal(hw_link_stretches(s.s, s.n, stretch), 0);
    assert_int_equal(stretch[0], 1);
    assert_int_equal(stretch[1], 1);
    assert_int_equal(stretch[2], 1);
    assert_int_equal(stretch[3], 3);
    assert_int_equal(stretch[4], 4);

    hw_stats st;
    hw_stats_init(&st);
    assert_int_equal(hw_stats_build(&st, s.s, s.n), 0);
    assert_int_equal(st.hangs, 3);
    const hw_stats_group *a = group(&st, "aaaa");
    assert_int_equal(a->hangs, 2);
    assert_int_equal(a->total_us, 13000000);
    assert_int_equal(a->follow_ups, 2); /* B and C: the first stretch moved there */
    assert_int_equal(a->reports, 4);
    /* no group of zero hangs for where the stack moved */
    for (size_t i = 0; i < st.group_count; i++)
        assert_true(st.groups[i].hangs > 0);
    assert_int_equal(st.group_count, 2);
    const hw_stats_group *d = group(&st, "dddd");
    assert_int_equal(d->hangs, 1);
    assert_int_equal(d->total_us, 6000000);
    assert_string_equal(st.groups[0].key, "aaaa");
    hw_stats_free(&st);
    free_set(&s);
}

/* Not hangs: stutter and snapshots are counted apart, not grouped. */
static void test_stutter_and_snapshots_are_not_grouped(void **state)
{
    (void)state;
    set s = {0};
    json_t *r = report("ssss", 1, 1000, 1, 1, 0, "p", "f");
    json_object_set_new(json_object_get(r, "hangwatch"), "hang_type", json_string("stutter"));
    add(&s, r);
    r = report("tttt", 2, 1000, 0, -1, 0, "p", "f");
    json_object_set_new(json_object_get(r, "hangwatch"), "hang_type", json_string("snapshot"));
    add(&s, r);
    r = report("llll", 3, 1000, 3000000, 5000000, 0, "p", "f");
    json_object_set_new(json_object_get(r, "hangwatch"), "hang_type", json_string("launch_hang"));
    add(&s, r);
    hw_stats st;
    hw_stats_init(&st);
    assert_int_equal(hw_stats_build(&st, s.s, s.n), 0);
    assert_int_equal(st.reports, 3);
    assert_int_equal(st.not_hangs, 2);
    assert_int_equal(st.group_count, 1);
    assert_string_equal(st.groups[0].key, "llll");
    hw_stats_free(&st);
    free_set(&s);
}

/* The culprit: a Python frame where there is one; the program's own
 * executable, named by the report; the process name where it is not;
 * the newest report's culprit for the group. */
static void test_culprit_frame(void **state)
{
    (void)state;
    hw_sframe frames[] = {
        {.name = "clock_nanosleep", .named = true, .object = "libc.so.6", .language = "native"},
        {.name = "helper", .named = true, .object = "libhelper.so", .language = "native"},
        {.name = "on_request", .named = true, .object = "my-long-server-name", .language = "native"},
        {.name = "handle", .named = true, .file = "app.py", .line = 5, .language = "python"},
        {.name = "main", .named = true, .object = "my-long-server-name", .language = "native"},
    };
    assert_int_equal(hw_culprit_frame(frames, 5, "/usr/bin/python3.11", "python3"), 3);
    assert_int_equal(hw_culprit_frame(frames, 3, "/opt/bin/my-long-server-name", "x"), 2);
    assert_int_equal(hw_culprit_frame(frames, 3, NULL, "my-long-server-"), 2);
    assert_int_equal(hw_culprit_frame(frames, 3, NULL, "other"), 0);
    hw_sframe unnamed[] = {{.name = "??", .language = "native"}, {.name = "libx.so+0x10", .language = "native"}};
    assert_int_equal(hw_culprit_frame(unnamed, 2, NULL, NULL), HW_NO_FRAME);
    assert_int_equal(hw_culprit_frame(NULL, 0, NULL, NULL), HW_NO_FRAME);

    /* from a report: hangwatch.executable names the program's image */
    json_t *r = report("kkkk", 1, 1000, 1, 1, 0, "prog", "hang_here");
    json_object_set_new(json_object_get(r, "hangwatch"), "executable", json_string("/srv/prog"));
    hw_hang_summary s;
    assert_int_equal(hw_hang_summary_of(r, "r.json", &s), 0);
    assert_int_equal(s.culprit, 1);
    assert_string_equal(s.frames[s.culprit].name, "hang_here");
    hw_hang_summary_free(&s);
    json_decref(r);

    /* the group's culprit comes from its newest report */
    set t = {0};
    add(&t, report("kkkk", 1, 9000, 1, 1, 0, "prog", "newest"));
    add(&t, report("kkkk", 2, 1000, 1, 1, 0, "prog", "oldest"));
    hw_stats st;
    hw_stats_init(&st);
    assert_int_equal(hw_stats_build(&st, t.s, t.n), 0);
    assert_string_equal(st.groups[0].culprit.name, "newest");
    hw_stats_free(&st);
    free_set(&t);
}

/* Fields of the wrong type or out of range: unknown, never trusted. */
static void test_hostile_fields(void **state)
{
    (void)state;
    json_t *r = json_pack("{s:{s:i, s:s}, s:{s:[i, {s:i}]}, s:{s:i, s:s, s:I, s:I, s:I, s:{s:I, s:I}, s:s, "
                          "s:{s:{s:{s:[{s:i, s:i, s:i}]}, s:s}}}}",
                          "report", "process_name", 7, "pid", "x", "crash", "threads", 1, "backtrace", 3, "hangwatch",
                          "grouping_key", 12, "hang_type", "hang", "detected_at_unix_ms", (json_int_t)INT64_MAX,
                          "block_duration_us", (json_int_t)-5, "final_duration_us", (json_int_t)-1, "hung_thread",
                          "report_array_index", (json_int_t)99, "thread_identifier", (json_int_t)-3, "hang_end", "x",
                          "collection", "main_thread", "backtrace", "contents", "symbol_name", 1, "source_line", -4,
                          "repeat_count", -9, "sample_count", "many");
    assert_non_null(r);
    hw_hang_summary s;
    assert_int_equal(hw_hang_summary_of(r, "hostile.json", &s), 0);
    assert_string_equal(s.key, "?");
    assert_string_equal(s.process_name, "?");
    assert_int_equal(s.pid, -1);
    assert_int_equal(s.tid, -1);
    assert_int_equal(s.frame_count, 0);
    assert_int_equal(s.culprit, HW_NO_FRAME);
    assert_int_equal(s.block_us, 0);
    assert_false(s.final_known);
    assert_true(s.seen_known);
    int64_t start;
    assert_false(hw_stretch_start_us(&s, &start)); /* INT64_MAX ms is no time in us */
    assert_int_equal(s.point_count, 1);
    assert_string_equal(s.point[0].name, "??");
    assert_int_equal(s.point[0].line, 0);
    assert_int_equal(s.point[0].repeat_count, 0);
    hw_stats st;
    hw_stats_init(&st);
    assert_int_equal(hw_stats_build(&st, &s, 1), 0);
    assert_int_equal(st.group_count, 1);
    assert_false(st.groups[0].has_culprit);
    hw_stats_free(&st);
    hw_hang_summary_free(&s);
    json_decref(r);

    /* frames beyond HW_SUMMARY_MAX_FRAMES are dropped */
    json_t *contents = json_array();
    for (int i = 0; i < HW_SUMMARY_MAX_FRAMES + 10; i++)
        json_array_append_new(contents, json_pack("{s:s, s:s, s:i}", "object_name", "libdeep.so",
                                                  "symbol_name", "deep", "object_offset", i));
    r = json_pack("{s:{}, s:{s:[{s:{s:o}}]}, s:{s:{s:i}}}", "report", "crash", "threads", "backtrace", "contents",
                  contents, "hangwatch", "hung_thread", "report_array_index", 0);
    assert_int_equal(hw_hang_summary_of(r, "deep.json", &s), 0);
    assert_int_equal(s.frame_count, HW_SUMMARY_MAX_FRAMES);
    hw_hang_summary_free(&s);
    json_decref(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_groups_sorted_by_total_with_medians),
        cmocka_unit_test(test_ties_and_huge_durations),
        cmocka_unit_test(test_stretch_reports_are_one_hang),
        cmocka_unit_test(test_stutter_and_snapshots_are_not_grouped),
        cmocka_unit_test(test_culprit_frame),
        cmocka_unit_test(test_hostile_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
