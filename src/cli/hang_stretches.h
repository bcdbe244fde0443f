/*
 * hang_stretches.h - hangs in time: a hang is a busy stretch, and a
 * stretch whose stack moved while it stayed hung has several reports
 * (annealing, decisions.md §10).  Here its reports are found among many
 * summaries and linked, and the moment it began is worked out, for the
 * grouping of `hangwatch stats` (hang_groups.c), the timelines of
 * `hangwatch export` and the page of `hangwatch html`.
 */
#ifndef HANGWATCH_HANG_STRETCHES_H
#define HANGWATCH_HANG_STRETCHES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "report_summary.h"

/*
 * Reports of one busy stretch: a stretch whose stack moved while it stayed
 * hung has a report for each stack (annealing: stretch_report_index 0, 1,
 * 2 ...), all of the same process and thread, whose stretch began at the
 * same moment (detection time less busy time, to within
 * HW_STRETCH_SLACK_US: the two clocks it is measured with differ by a
 * millisecond or so).  hw_link_stretches gives each summary its stretch:
 * stretch[i] is the index in `s` of the report that opens summary i's
 * stretch (its earliest report among `s`: itself for a stretch's first
 * report, and for a later one whose earlier reports are not among `s`).
 * 0, or -1 when out of memory.
 */
#define HW_STRETCH_SLACK_US 50000
int hw_link_stretches(const hw_hang_summary *s, size_t count, size_t *stretch);

/* The moment a stretch began, in Unix microseconds: detection less busy
 * time.  false when the report does not say when it was detected. */
bool hw_stretch_start_us(const hw_hang_summary *s, int64_t *start_us);

#endif
