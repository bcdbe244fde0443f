/*
 * detector.h - deciding, from a loop slot's reading and the time, whether a
 * loop thread is hung and when to look again.
 *
 * Matrix's condition is kept exactly: hung <=> busy && now - start >
 * threshold (strictly greater: a stretch of exactly the threshold is not a
 * hang).  What differs is *when* the agent looks:
 *
 *   periodic (Matrix): every check period, on a fixed phase; a hang is seen
 *     up to one whole period after it crossed the threshold.
 *   exact (default): the agent looks every poll interval (the smaller of the
 *     check period and half the threshold) while the loop is idle or short
 *     busy, and as soon as it sees a busy stretch it sleeps until that
 *     stretch's start + threshold.  Every stretch longer than the threshold is
 *     seen before it crosses it, so detection lands at the threshold plus the
 *     agent's wake-up latency.
 *
 * `clock_slack_ns` is how early the observer's stamps can be: two
 * CLOCK_MONOTONIC_COARSE ticks for a coarse-stamped page, 0 for exact ones
 * (the counter's, converted to the latest time they can stand for, and the
 * kernel observer's), so a stretch is declared hung only once it is over
 * the threshold even in the worst case.  Tests use 0.
 *
 * Pure code: no OS calls; the caller passes readings and times.
 */
#ifndef HANGWATCH_DETECTOR_H
#define HANGWATCH_DETECTOR_H

#include <stdbool.h>
#include <stdint.h>

#include "core/abi/loop_state.h"

typedef enum hw_check_mode {
    HW_CHECK_EXACT = 0,
    HW_CHECK_PERIODIC = 1,
} hw_check_mode;

const char *hw_check_mode_name(hw_check_mode mode);

typedef struct hw_detector_config {
    uint64_t threshold_ns;    /* Matrix: 2 s */
    uint64_t check_period_ns; /* Matrix: 1 s */
    hw_check_mode mode;
    uint64_t clock_slack_ns;  /* how early the observer's stamps can be */
} hw_detector_config;

void hw_detector_config_default(hw_detector_config *cfg);

typedef enum hw_verdict {
    HW_VERDICT_IDLE = 0,   /* the loop is waiting */
    HW_VERDICT_BUSY,       /* working, not over the threshold (yet) */
    HW_VERDICT_HANG,       /* over the threshold: a hang not reported before */
    HW_VERDICT_STILL_HUNG, /* the stretch already reported goes on */
} hw_verdict;

typedef struct hw_check {
    hw_verdict verdict;
    uint64_t seq;           /* the busy stretch this is about */
    uint64_t busy_start_ns; /* its start (busy verdicts only) */
    uint64_t busy_ns;       /* now - start (busy verdicts only) */
    bool launch;            /* the thread has never reached its wait point */
    bool stutter;           /* not a hang: stutter (stutter.h), set by the agent */
    bool hang_ended;        /* the stretch reported earlier is over */
    uint64_t ended_seq;     /* which one, when hang_ended */
    /* A stretch ended between the last look and this one, which came so
     * late that the stretch may have lasted more than the threshold by
     * HW_LATE_LOOK_NS: it may have been a hang nobody saw (exact mode only;
     * periodic mode misses such stretches by design).  Either the stretch
     * the last look found busy, or one that began and ended between the
     * two looks (its start unknown: it lasted at most their distance). */
    bool ended_unseen;
    uint64_t unseen_seq;     /* which stretch (the first, of several between the looks) */
    uint64_t unseen_min_ns;  /* it lasted at least this (0: begun after the last look) */
    uint64_t unseen_max_ns;  /* and at most this (over by this look) */
    uint64_t unseen_late_ns; /* how long after the threshold it could have crossed this look came */
} hw_check;

/* Matrix's DETECTION_THREAD_JUDGE_SUSPEND_THRESHOLD: a check that comes
 * this much later than scheduled means nobody could observe the loop. */
#define HW_SUSPEND_LATENESS_NS 10000000000ull

/* A look at a stretch's threshold that comes this much later may have
 * missed a hang (hw_check.ended_unseen): the exact mode's looks come within
 * a millisecond or so of their time on a machine that runs the agent. */
#define HW_LATE_LOOK_NS 50000000ull

typedef struct hw_detector {
    hw_detector_config cfg;
    uint64_t reported_seq; /* stretch reported as hung; 0 = none */
    uint64_t next_check_ns;
    /* The busy clock of stretch `restart_seq` counts from `restart_ns`. */
    uint64_t restart_seq, restart_ns;
    /* The last look: its stretch number and its time (0 = none yet); and
     * the stretch it found busy and not hung (0 = none), with its start as
     * the clock counts it. */
    uint64_t last_seq, last_look_ns;
    uint64_t watched_seq, watched_start_ns;
} hw_detector;

/* Matrix's condition.  Sets *busy_ns to the elapsed busy time (0 if idle). */
bool hw_is_hung(const hw_detector_config *cfg, const hw_loop_reading *r, uint64_t now_ns, uint64_t *busy_ns);

void hw_detector_init(hw_detector *d, const hw_detector_config *cfg, uint64_t now_ns);

/*
 * Restart the busy clock of stretch `seq` at `now_ns`: time before it is not
 * held against the loop (the process was stopped, or the agent could not
 * look).  Also forgets that the stretch was reported.  Counts as a look.
 */
void hw_detector_restart_clock(hw_detector *d, uint64_t seq, uint64_t now_ns);

/*
 * Examine one reading taken at `now_ns`; updates d->next_check_ns.  A check
 * more than HW_SUSPEND_LATENESS_NS later than scheduled restarts the busy
 * clock instead of reporting (Matrix's suspend rule).  One that finds over
 * a stretch it would have caught had it come on time says so
 * (hw_check.ended_unseen).
 */
hw_check hw_detector_check(hw_detector *d, const hw_loop_reading *r, uint64_t now_ns);

/* A look that could not read the slot consistently (the loop turned
 * while it read): the loop was turning at `now_ns`, at stretch `seq`, so
 * no stretch before that one can have gone on past it; it counts as a look
 * for hw_check.ended_unseen, and a loop that turns too fast to read is no
 * late look. */
void hw_detector_note_turning(hw_detector *d, uint64_t seq, uint64_t now_ns);

/* How often the exact mode looks at an idle loop. */
uint64_t hw_detector_poll_interval(const hw_detector_config *cfg);

#endif
