/*
 * fuzz_stats.c - `hangwatch stats`, `export` and `html` on report text: the
 * report summarized (hw_hang_summary_of), grouped with a second report made
 * from the same text (so that stretch linking, medians and sorting have two
 * to work with), printed as the table and as JSON, exported in both
 * formats, and made into the HTML page (its samples' flame graph, its
 * other threads, its timeline).
 *
 * Feeds: the input as the text of a report file (exactly its bytes); what
 * is not JSON or not shaped like a report stops where `stats` would name
 * it.  Output goes to /dev/null, opened once.  A directory of reports may
 * come from anywhere, and `hangwatch stats` may be run by root on it.
 *
 * Proves: no out-of-bounds access, leak or UBSan report whatever the JSON
 * holds (wrong types, negative or huge numbers, times near the ends of the
 * integers, deep or missing stacks); two copies of one hang make one group
 * of two reports; every export and the JSON form are built; the page is
 * made, its data element holds JSON with no '<', '>', '&' or byte beyond
 * ASCII, and the page has exactly its own two scripts.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/export.h"
#include "cli/hang_groups.h"
#include "cli/html.h"
#include "cli/report_read.h"
#include "cli/report_summary.h"
#include "cli/stats.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len);

/* `hangwatch html` reads a group's newest report again: here, the same. */
static json_t *reload_same(const char *path, void *ctx)
{
    (void)path;
    return json_incref((json_t *)ctx);
}

static size_t occurrences(const char *text, const char *what)
{
    size_t n = 0;
    for (const char *p = strstr(text, what); p != NULL; p = strstr(p + 1, what))
        n++;
    return n;
}

/* The page of two copies of the report: made, and its data safe. */
static void check_html(json_t *root, bool is_hang)
{
    hw_html *h = hw_html_new();
    CHECK(h != NULL);
    CHECK(hw_html_add(h, root, "a/fuzz-report.json") == 0);
    CHECK(hw_html_add(h, root, "b/fuzz-report.json") == 0);
    CHECK(hw_html_hang_count(h) == (is_hang ? 2 : 0));
    hw_report_walk_counts counts = {2, 1};
    size_t len = 0;
    char *page = hw_html_render(h, &counts, "bm9uY2Vub25jZW5vbmNlbm9u", 1796000000000LL, reload_same, root, &len);
    CHECK(page != NULL && strlen(page) == len);
    static const char open[] = "<script type=\"application/json\" id=\"hw-data\">";
    const char *data = strstr(page, open);
    CHECK(data != NULL);
    data += sizeof open - 1;
    const char *end = strstr(data, "</script>");
    CHECK(end != NULL);
    for (const char *p = data; p < end; p++)
        CHECK(*p != '<' && *p != '>' && *p != '&' && (unsigned char)*p < 0x80);
    json_error_t err;
    json_t *parsed = json_loadb(data, (size_t)(end - data), 0, &err);
    CHECK(json_is_object(parsed) && json_array_size(json_object_get(parsed, "groups")) == (is_hang ? 1 : 0));
    json_decref(parsed);
    CHECK(occurrences(page, "<script") == 2 && occurrences(page, "</script>") == 2);
    free(page);
    hw_html_free(h);
}

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
    hw_sampled rings[2];
    CHECK(hw_sampled_of(root, &rings[0]) == 0);
    CHECK(hw_sampled_of(root, &rings[1]) == 0);
    check_html(root, s[0].is_hang);
    json_decref(root);

    hw_stats st;
    hw_stats_init(&st);
    CHECK(hw_stats_build(&st, s, 2) == 0);
    CHECK(st.reports == 2);
    if (s[0].is_hang) {
        CHECK(st.group_count == 1 && st.groups[0].reports == 2);
        CHECK(st.groups[0].hangs >= 1 && st.groups[0].hangs + st.groups[0].follow_ups == 2);
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
        json_t *e = hw_export_build(f ? HW_EXPORT_CHROME_TRACE : HW_EXPORT_SPEEDSCOPE, s, rings, 2, 2);
        CHECK(e != NULL);
        json_dumpf(e, out, JSON_COMPACT);
        json_decref(e);
    }
    hw_sampled_free(&rings[0]);
    hw_sampled_free(&rings[1]);
    hw_hang_summary_free(&s[0]);
    hw_hang_summary_free(&s[1]);
    return 0;
}
