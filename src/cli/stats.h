/* stats.h - `hangwatch stats` (stats.c), and the reading of many reports
 * into summaries that `hangwatch export` shares with it. */
#ifndef HANGWATCH_STATS_H
#define HANGWATCH_STATS_H

#include <jansson.h>
#include <stddef.h>

#include "hang_stats.h"
#include "hang_summary.h"
#include "report_read.h"

/* argv[0] is "stats".  0, 1 (no report could be read) or 2 (usage). */
int hw_stats_main(int argc, char **argv);

/*
 * The summaries of every report named by `paths` (files, directories:
 * hw_report_walk), with what could not be read named on stderr and
 * counted in *counts.  0, or -1 (out of memory, said on stderr).
 * Free with hw_free_summaries.
 */
int hw_collect_summaries(char *const *paths, size_t count, hw_hang_summary **out, size_t *out_count,
                         hw_report_walk_counts *counts);
void hw_free_summaries(hw_hang_summary *s, size_t count);

/* The groups as a table for people (every string from a report escaped),
 * or as JSON; `counts` says how many reports were read and failed. */
void hw_stats_print_table(const hw_stats *st, const hw_report_walk_counts *counts, FILE *out);
json_t *hw_stats_to_json(const hw_stats *st, const hw_report_walk_counts *counts);

/* {"function", "file", "line", "object", "language"} of a frame. */
json_t *hw_frame_json(const hw_sframe *f);

#endif
