/*
 * hang_stretches.h - hangs in time: a hang is a busy stretch, and a
 * stretch whose stack moved while it stayed hung has several reports
 * (annealing, decisions.md §10).  Here its reports are found among many
 * summaries and linked, and when it began and ended is worked out, for
 * the grouping of `hangwatch stats` (hang_groups.c), the timelines of
 * `hangwatch export` and the timeline of `hangwatch html`'s page.  Only
 * hangs have stretches: stutter, snapshot and CPU-high reports do not.
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

/* `after_us` after `start_us`, clamped at INT64_MAX: a moment of a stretch
 * (a report's numbers may be anything). */
int64_t hw_stretch_time_at(int64_t start_us, uint64_t after_us);

/*
 * The stretches of the hangs among `s` (hw_link_stretches on the hangs
 * only): head[i] is the index in `s` of the report that opens summary i's
 * stretch; a summary that is no hang is its own (head[i] == i).  0, or -1
 * when out of memory.
 */
int hw_link_hangs(const hw_hang_summary *s, size_t count, size_t *head);

/* One hang: a stretch and all of its reports. */
typedef struct hw_stretch {
    const hw_hang_summary *first;    /* the report that opens it */
    const hw_hang_summary **reports; /* every report of it (first too), in the order given */
    size_t report_count;
    bool start_known; /* first says when it was detected (hw_stretch_start_us) */
    int64_t start_us; /* then when it began, Unix us (may be before 1970); else 0 */
    bool ended;       /* a report of it says its final duration */
    uint64_t final_us; /* then the longest they say; else 0 */
} hw_stretch;

typedef struct hw_stretches {
    hw_stretch *stretches; /* in the order of their first reports */
    size_t count;
} hw_stretches;

/* The hangs among the `count` summaries `s` as stretches (`s` is lent to
 * *out: it must outlive it).  0, or -1 when out of memory (then *out holds
 * nothing to free). */
int hw_stretches_of(const hw_hang_summary *s, size_t count, hw_stretches *out);
void hw_stretches_free(hw_stretches *all);

#endif
