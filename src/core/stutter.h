/*
 * stutter.h - stutter: a loop that is busy most of a window without any one
 * stall crossing the hang threshold.  Matrix misses it (its issue #567:
 * 1 s stalls separated by 0.3 s of responsiveness never trip a 2 s
 * threshold), yet the user sees a program that barely responds.
 *
 * The rule (defaults in brackets): over the last `window` [5 s], the loop's
 * stalls (busy stretches of at least `min_stall` [250 ms]) add up to at
 * least `busy_percent` [70 %] of the window, there are at least
 * `min_stalls` [2] of them, and none of them exceeded the hang threshold
 * (that is a hang, reported as such).  The stall in progress counts with the
 * time it has lasted so far, so stutter is declared while the loop is stuck
 * in a stall and its stack can be captured.  After a report, the window
 * starts afresh.
 *
 * The agent feeds it what it sees of the loop slot at each look; stretches
 * are timed from their start stamps and end when their sequence number moves
 * on.  Pure code: no OS calls.
 */
#ifndef HANGWATCH_STUTTER_H
#define HANGWATCH_STUTTER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/abi/loop_state.h"

#define HW_STUTTER_MAX_STALLS 64

typedef struct hw_stutter_config {
    uint64_t window_ns;
    uint64_t min_stall_ns;
    unsigned busy_percent;
    unsigned min_stalls;
    uint64_t threshold_ns; /* the hang threshold: longer stalls are hangs */
} hw_stutter_config;

void hw_stutter_config_default(hw_stutter_config *cfg, uint64_t threshold_ns);

typedef struct hw_stutter {
    hw_stutter_config cfg;
    struct {
        uint64_t start_ns, end_ns;
    } stalls[HW_STUTTER_MAX_STALLS]; /* finished stalls, oldest first */
    unsigned count;
    uint64_t current_seq;      /* the busy stretch being watched, 0 = none */
    uint64_t current_start_ns;
    uint64_t window_start_ns;  /* nothing before this counts (after a report) */
} hw_stutter;

void hw_stutter_init(hw_stutter *s, const hw_stutter_config *cfg, uint64_t now_ns);

typedef struct hw_stutter_verdict {
    bool stutter;
    unsigned stalls;      /* stalls in the window, the current one included */
    uint64_t busy_ns;     /* their total within the window */
    uint64_t window_ns;
} hw_stutter_verdict;

/* One look at the loop at `now_ns`.  Returns stutter = true once per window
 * when the rule holds (the window then starts afresh). */
hw_stutter_verdict hw_stutter_observe(hw_stutter *s, const hw_loop_reading *r, uint64_t now_ns);

/*
 * The process was seen stopped (SIGSTOP, a debugger) in stretch `seq`: the
 * stretch's time so far is not the loop's, so it counts from `now_ns` on,
 * as the detector's busy clock does (hw_detector_restart_clock).
 */
void hw_stutter_restart(hw_stutter *s, uint64_t seq, uint64_t now_ns);

#endif
