/*
 * clock.h - the two clocks the agent reads: CLOCK_MONOTONIC for every
 * deadline, busy start and duration (the observers stamp with it, or with
 * a counter turned into it: watch/clock_source.c), CLOCK_REALTIME only for
 * the wall-clock time a report names.
 */
#ifndef HANGWATCH_CLOCK_H
#define HANGWATCH_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC, in nanoseconds. */
uint64_t hw_monotonic_ns(void);

/* CLOCK_REALTIME, in nanoseconds since the Unix epoch. */
int64_t hw_realtime_ns(void);

#endif
