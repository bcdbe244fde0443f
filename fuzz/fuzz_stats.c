/*
 * fuzz_stats.c - `hangwatch stats` and `export` on report text: the report
 * summarized (hw_hang_summary_of), grouped with a second report made from
 * the same text (so that stretch linking, medians and sorting have two to
 * work with), printed as the table and as JSON, and exported in both
 * formats.
 *
 * Feeds: the input as the text of a report file (exactly its bytes); what
 * is not JSON or not shaped like a report stops where `stats` would name
 * it.  Output goes to /dev/null, opened once.  A directory of reports may
 * come from anywhere, and `hangwatch stats` may be run by root on it.
 *
 * Proves: no out-of-bounds access, leak or UBSan report whatever the JSON
 * holds (wrong types, negative or huge numbers, times near the ends of the
 * integers, deep or missing stacks); two copies of one hang make one group
 * of two reports; every export and the JSON form are built.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "export.h"
#include "hang_stats.h"
#include "hang_summary.h"
#include "report_read.h"
#include "stats.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len)
{
    static FILE *out;
    if (out == NULL) {
        out = fopen("/dev/null", "w");
        CHECK(out != NULL);
    }
    json_t *root = hw_report_parse("fuzz-report.json", (const char *)in, len);
    if (root == NULL)
        return 0;
    if (!hw_report_check_shape("fuzz-report.json", root)) {
        json_decref(root);
        return 0;
    }
    hw_hang_summary s[2];
    CHECK(hw_hang_summary_of(root, "a/fuzz-report.json", &s[0]) == 0);
    CHECK(hw_hang_summary_of(root, "b/fuzz-report.json", &s[1]) == 0);
    json_decref(root);

    hw_stats st;
    hw_stats_init(&st);
    CHECK(hw_stats_build(&st, s, 2) == 0);
    CHECK(st.reports == 2);
    if (s[0].is_hang) {
        CHECK(st.group_count == 1 && st.groups[0].reports == 2);
        CHECK(st.groups[0].hangs >= 1 && st.groups[0].hangs + st.groups[0].moved_here == 2);
        CHECK(st.groups[0].worst_us <= st.groups[0].total_us && st.groups[0].median_us <= st.groups[0].worst_us);
    } else {
        CHECK(st.group_count == 0 && st.not_hangs == 2);
    }
    hw_report_walk_counts counts = {2, 0};
    hw_stats_print_table(&st, &counts, out);
    json_t *j = hw_stats_to_json(&st, &counts);
    CHECK(j != NULL);
    json_dumpf(j, out, JSON_COMPACT);
    json_decref(j);
    hw_stats_free(&st);

    for (int f = 0; f < 2; f++) {
        json_t *e = hw_export_build(f ? HW_EXPORT_CHROME_TRACE : HW_EXPORT_SPEEDSCOPE, s, 2, 2);
        CHECK(e != NULL);
        json_dumpf(e, out, JSON_COMPACT);
        json_decref(e);
    }
    hw_hang_summary_free(&s[0]);
    hw_hang_summary_free(&s[1]);
    return 0;
}
