/*
 * tsc_read.h - reading the time-stamp counter: the clock the preloaded
 * observer stamps busy starts with when the agent says it may
 * (docs/decisions.md §2), and what the agent pairs with CLOCK_MONOTONIC to
 * convert those stamps (src/core/tsc_clock.h).  One instruction, no memory
 * touched, no system call.  x86-64 only; elsewhere HW_HAVE_TSC is 0 and the
 * observers keep the coarse clock.
 */
#ifndef HANGWATCH_TSC_READ_H
#define HANGWATCH_TSC_READ_H

#include <stdint.h>

#if defined(__x86_64__)
#define HW_HAVE_TSC 1
static inline uint64_t hw_tsc_read(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

/* The same, after every earlier instruction has completed: for the agent's
 * pairs of (counter, clock), whose reads must not pass each other. */
static inline uint64_t hw_tsc_read_ordered(void)
{
    uint32_t lo, hi;
    __asm__ volatile("lfence\n\trdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return ((uint64_t)hi << 32) | lo;
}
#else
#define HW_HAVE_TSC 0
static inline uint64_t hw_tsc_read(void)
{
    return 0;
}
static inline uint64_t hw_tsc_read_ordered(void)
{
    return 0;
}
#endif

#endif
