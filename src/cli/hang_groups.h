/*
 * hang_groups.h - hangs grouped by their grouping key, as `hangwatch stats`
 * prints them and `hangwatch html` shows them: for each group, how many
 * hangs, their total, median and worst duration, when the group was first
 * and last seen, by which processes, and its culprit frame; groups sorted
 * by total hang time, the largest first.  (The types and functions are
 * named for the figures they hold: hw_stats, hw_stats_group, hw_stats_build.)
 *
 * A hang is a busy stretch, not a report: a stretch whose culprit moved
 * while it stayed hung has several reports (annealing, decisions.md §10,
 * §39).  It is counted once, in the group of its first report, with its
 * whole duration; its later reports join that group as follow-ups (never
 * a group of their own, which would hold no hang).
 * Stutter and snapshot reports are no hangs: they are counted apart.
 */
#ifndef HANGWATCH_HANG_GROUPS_H
#define HANGWATCH_HANG_GROUPS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "report_summary.h"

#define HW_STATS_MOVED_MAX 8

typedef struct hw_stats_group {
    char *key;
    size_t hangs;          /* stretches that began in this group */
    size_t follow_ups;     /* later reports of its hangs (annealing): counted, not timed */
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
    size_t causes[HW_CAUSE_LABELS]; /* its hangs by where their time went (hw_cause_label_at) */
    size_t partial_causes;          /* of which found over part of the hang */
    /* where its hangs moved: the culprits of its follow-up reports that are
     * not the group's, each once, in the order seen (at most
     * HW_STATS_MOVED_MAX; moved_more counts the others) */
    hw_sframe moved[HW_STATS_MOVED_MAX];
    size_t moved_count, moved_more;
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
 * Add one report's summary.  `first` is the first report of its stretch
 * among those added (hw_link_stretches): `s` itself when it opens the
 * stretch, which then counts as a hang in its group; else `s` is a
 * follow-up in `first`'s group.  0, or -1 when out of memory.
 */
int hw_stats_add(hw_stats *st, const hw_hang_summary *s, const hw_hang_summary *first);

/* Medians, then the groups in order: total time, then hang count, the
 * largest first, then grouping key. */
void hw_stats_finish(hw_stats *st);

/* All of it for `count` summaries: stretches linked, added, finished.
 * 0, or -1 when out of memory. */
int hw_stats_build(hw_stats *st, const hw_hang_summary *s, size_t count);

void hw_stats_free(hw_stats *st);

#endif
