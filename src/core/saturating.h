/*
 * saturating.h - adding deadlines that cannot wrap.
 *
 * The detectors add configured durations (any value above zero the command
 * line accepts, up to 2^64 - 1 ns) to the agent's clock.  A sum that wrapped
 * around would put the next look in the past, so the agent would spin, and
 * make every busy stretch look over a threshold.  A sum that saturates means
 * "never", which is what a threshold of centuries means.  Pure.
 */
#ifndef HANGWATCH_SATURATING_H
#define HANGWATCH_SATURATING_H

#include <stdint.h>

static inline uint64_t hw_add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

#endif
