/* stats.h - `hangwatch stats` (stats.c), and the reading of many reports
 * into summaries that `hangwatch export` shares with it. */
#ifndef HANGWATCH_STATS_H
#define HANGWATCH_STATS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "hang_groups.h"
#include "report_read.h"
#include "report_summary.h"

/* argv[0] is "stats".  0, 1 (no report could be read) or 2 (usage). */
int hw_stats_main(int argc, char **argv);

/*
 * The summaries of many reports, one added at a time (as
 * hw_report_command_read reads them).  Start from {0}, or with
 * `with_samples` set to keep each report's early samples too (sampled[i]
 * is s[i]'s, hw_sampled_of); free with hw_summaries_free.
 */
typedef struct hw_summaries {
    hw_hang_summary *s;
    hw_sampled *sampled; /* with_samples: count entries, else NULL */
    size_t count, cap;
    bool with_samples;
} hw_summaries;

/* Add the summary of `root` (lent), read from `path`: 0, or -1 when out
 * of memory. */
int hw_summaries_add(hw_summaries *all, const char *path, json_t *root);
void hw_summaries_free(hw_summaries *all);

/* The groups as a table for people (every string from a report escaped),
 * or as JSON; `counts` says how many reports were read and failed. */
void hw_stats_print_table(const hw_stats *st, const hw_report_walk_counts *counts, FILE *out);
json_t *hw_stats_to_json(const hw_stats *st, const hw_report_walk_counts *counts);

/* {"function", "file", "line", "object", "language"} of a frame. */
json_t *hw_frame_json(const hw_sframe *f);

#endif
