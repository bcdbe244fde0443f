/*
 * frame_gap.h - the frame-gap detector, the Linux analog of timing
 * CADisplayLink callbacks (seeds/000, "Other approaches"): a periodic timer
 * on the loop itself ticks every frame interval (1/60 s), and a tick that
 * arrives a threshold or more after the previous one is a hang.
 *
 * It is kept for the comparison (`--detector frame-gap`), flaw included:
 * the gap is known only when the late tick finally runs, that is after the
 * hang is over, so the stack captured then is the tick's, never the
 * culprit's (the seed: "it can discover after recovery that a callback was
 * delayed, but it cannot reliably locate the scene").
 *
 * Two sources of ticks, one rule:
 *   - a program using the C library calls hangwatch_loop_frame() from its
 *     own periodic timer; hw_frame_tick() measures the gap there;
 *   - for an unmodified program the agent emulates the timer: a tick is due
 *     every interval and runs when the loop is next seen waiting or turned
 *     over (hw_frame_gap_look()).
 * Pure code.
 */
#ifndef HANGWATCH_FRAME_GAP_H
#define HANGWATCH_FRAME_GAP_H

#include <stdbool.h>
#include <stdint.h>

#include "core/abi/loop_state.h"

#define HW_FRAME_INTERVAL_DEFAULT_NS 16666667ull /* 60 Hz */

/*
 * A tick ran at `now_ns`; `*last_ns` is the previous tick's time (0 = none)
 * and is updated.  Returns the gap if it is a late one (>= threshold), else 0.
 */
static inline uint64_t hw_frame_tick(uint64_t *last_ns, uint64_t now_ns, uint64_t threshold_ns)
{
    uint64_t last = *last_ns;
    *last_ns = now_ns;
    if (last == 0 || now_ns < last)
        return 0;
    uint64_t gap = now_ns - last;
    return gap >= threshold_ns ? gap : 0;
}

/* The agent's emulated display link for a loop it cannot add a timer to. */
typedef struct hw_frame_gap {
    uint64_t threshold_ns;
    uint64_t last_tick_ns; /* when the last tick ran */
    uint64_t seen_seq;     /* the loop's sequence at the last look */
    bool seen;
} hw_frame_gap;

void hw_frame_gap_init(hw_frame_gap *f, uint64_t threshold_ns);

/*
 * One look, once per frame interval: the due tick runs now if the loop
 * waits; if the loop is busy in a new stretch, it ran when the wait before
 * that stretch ended; if the loop is still in the same stretch, it waits.
 * Returns the late gap a tick closed (>= threshold), else 0.
 */
uint64_t hw_frame_gap_look(hw_frame_gap *f, const hw_loop_reading *r, uint64_t now_ns);

#endif
