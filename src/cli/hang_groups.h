/*
 * hang_groups.h - hangs grouped by their grouping key, as `hangwatch stats`
 * prints them and `hangwatch html` shows them: for each group, how many
 * hangs, their total, median and worst duration, when the group was first
 * and last seen, by which processes, and its culprit frame; groups sorted
 * by total hang time, the largest first.  (The types and functions are
 * named for the figures they hold: hw_stats, hw_stats_group, hw_stats_build.)
 *
 * A hang is a busy stretch, not a report: a stretch whose stack moved
 * while it stayed hung has several reports (annealing, decisions.md §10).
 * It is counted once, in the group of its first report, with its whole
 * duration; its later reports count in their own groups as "moved here"
 * (the hang was there too, its time is counted where it began).
 * Stutter and snapshot reports are no hangs: they are counted apart.
 */
#ifndef HANGWATCH_HANG_GROUPS_H
#define HANGWATCH_HANG_GROUPS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "report_summary.h"

typedef struct hw_stats_group {
    char *key;
    size_t hangs;          /* stretches that began in this group */
    size_t moved_here;     /* later reports of stretches (annealing): counted, not timed */
    size_t reports;        /* every report of the group */
    uint64_t total_us;     /* the hangs' durations, added (saturating) */
    uint64_t median_us;    /* of the hangs' durations (the mean of the middle two for an even count) */
    uint64_t worst_us;
    size_t open_hangs;     /* hangs whose end was never recorded: the time until detection counts */
    bool seen_known;
    int64_t first_seen_ms, last_seen_ms; /* over every report of the group, Unix ms */
    char **processes;      /* process names, sorted, each once */
    size_t process_count;
    bool has_culprit;
    hw_sframe culprit;     /* from the group's newest report that names one */
    /* internal */
    uint64_t *durations;
    size_t duration_count, duration_cap;
    int64_t culprit_seen_ms;
    bool culprit_seen_known;
} hw_stats_group;

typedef struct hw_stats {
    hw_stats_group *groups; /* sorted by hw_stats_finish */
    size_t group_count, group_cap;
    size_t reports;   /* summaries given */
    size_t hangs;     /* stretches counted */
    size_t not_hangs; /* stutter and snapshot reports, not grouped */
    json_t *index;    /* internal: key -> group */
} hw_stats;

void hw_stats_init(hw_stats *st);

/*
 * Add one report's summary.  `opens_stretch`: it is the first report of
 * its stretch among those added (hw_link_stretches), so it counts as a
 * hang.  0, or -1 when out of memory.
 */
int hw_stats_add(hw_stats *st, const hw_hang_summary *s, bool opens_stretch);

/* Medians, then the groups in order: total time, then hang count, the
 * largest first, then grouping key. */
void hw_stats_finish(hw_stats *st);

/* All of it for `count` summaries: stretches linked, added, finished.
 * 0, or -1 when out of memory. */
int hw_stats_build(hw_stats *st, const hw_hang_summary *s, size_t count);

void hw_stats_free(hw_stats *st);

#endif
