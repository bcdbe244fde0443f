/*
 * coarse_clock.h - the clock the observers stamp busy starts with:
 * CLOCK_MONOTONIC_COARSE, a vDSO read (3 ns against 28 ns for
 * CLOCK_MONOTONIC on the reference machine).  Its resolution is paid for in
 * the agent (docs/decisions.md §2).  Shared by the preloaded observer and
 * the C library.
 */
#ifndef HANGWATCH_COARSE_CLOCK_H
#define HANGWATCH_COARSE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t hw_coarse_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
