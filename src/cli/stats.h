/* stats.h - `hangwatch stats` (stats.c): the groups of hang_groups.h
 * printed as a table for people or as JSON for tools. */
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

/* The groups as a table for people (every string from a report escaped),
 * or as JSON; `counts` says how many reports were read and failed. */
void hw_stats_print_table(const hw_stats *st, const hw_report_walk_counts *counts, FILE *out);
json_t *hw_stats_to_json(const hw_stats *st, const hw_report_walk_counts *counts);

/* {"function", "file", "line", "object", "language"} of a frame. */
json_t *hw_frame_json(const hw_sframe *f);

#endif
