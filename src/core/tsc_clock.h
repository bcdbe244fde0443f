/*
 * tsc_clock.h - turning the time-stamp counter into CLOCK_MONOTONIC.
 *
 * The preloaded observer stamps busy starts with the raw counter (rdtsc):
 * no page of the kernel's or libc's to touch, and exact to the nanosecond
 * where the coarse clock is up to two 4 ms ticks early.  The conversion
 * happens in the agent, the only reader, from pairs of (counter,
 * CLOCK_MONOTONIC) it takes itself whenever it wakes:
 *
 *   ns(tsc) = ref.ns + (tsc - ref.tsc) * rate
 *
 * where `ref` is the newest pair and `rate` (ns per tick) comes from the
 * oldest pair kept and the newest, so it gets finer as the agent runs (a
 * history of pairs at least a second apart; the oldest is at most
 * HW_TSC_HISTORY of them old, so a rate that NTP changes is followed).
 * Every conversion also says how far off it may be: each pair is known only
 * to within the two counter reads around its clock read, which also bounds
 * the rate, and the counters of different CPUs may disagree by a measured
 * skew.  A pair that contradicts the line (the counter jumped or changed
 * its rate: a migrated or resumed virtual machine) restarts the history.
 *
 * Pure arithmetic, unit-tested (tests/unit/test_tsc_clock.c); reading the
 * counter and deciding whether it can be trusted at all is the agent's
 * (src/agent/watch/clock_source.c).
 */
#ifndef HANGWATCH_TSC_CLOCK_H
#define HANGWATCH_TSC_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

#define HW_TSC_HISTORY 16
#define HW_TSC_SPACING_NS 1000000000ull /* a pair joins the history at most once a second */
#define HW_TSC_MIN_SPAN_NS 1000000ull   /* no rate from pairs closer together than 1 ms */
/* A pair further off the line than this (plus its own uncertainty) means
 * the counter jumped: 100 us, plus 1000 ppm of the time since the newest
 * pair (twice the most NTP ever slews CLOCK_MONOTONIC). */
#define HW_TSC_JUMP_NS 100000ull
#define HW_TSC_JUMP_PPM 1000ull

/* CLOCK_MONOTONIC read between two counter reads. */
typedef struct hw_tsc_sample {
    uint64_t tsc;    /* midway between the two counter reads */
    uint64_t ns;     /* CLOCK_MONOTONIC */
    uint64_t spread; /* ticks between the two counter reads: tsc is known to +-spread/2 */
} hw_tsc_sample;

typedef struct hw_tsc_calibration {
    hw_tsc_sample history[HW_TSC_HISTORY]; /* a ring, oldest at `first` */
    unsigned count, first;
    hw_tsc_sample ref; /* the newest pair (valid once count > 0) */
    hw_tsc_sample base; /* the pair the rate was measured from, with ref */
    uint64_t mult;      /* ns per tick, 32.32 fixed point; 0 = no rate yet */
    uint64_t rate_err_ppb; /* how far off the rate may be, parts per 10^9 */
    uint64_t skew_ns;   /* the counters of different CPUs disagree by up to this */
    unsigned jumps;     /* pairs that contradicted the line (history restarted) */
} hw_tsc_calibration;

/* The pair made of the counter read `before`, the clock read `ns`, and the
 * counter read `after`.  A counter that went backwards gives spread 0 and
 * the later read. */
hw_tsc_sample hw_tsc_sample_make(uint64_t before, uint64_t ns, uint64_t after);

void hw_tsc_init(hw_tsc_calibration *c, uint64_t skew_ns);

/*
 * Add a pair (taken after every earlier one).  Returns false if it
 * contradicts the calibration so far: the history then restarts from it and
 * the rate, kept, is trusted only to 1000 ppm until it is measured again.
 */
bool hw_tsc_add(hw_tsc_calibration *c, hw_tsc_sample s);

/* Can counter values be converted yet (two pairs at least 1 ms apart)? */
bool hw_tsc_ready(const hw_tsc_calibration *c);

/*
 * `tsc` as CLOCK_MONOTONIC nanoseconds (clamped to 0 .. UINT64_MAX), and in
 * *err_ns (if not NULL) how far off that may be either way.  Before
 * hw_tsc_ready, returns 0 with *err_ns = UINT64_MAX.
 */
uint64_t hw_tsc_to_ns(const hw_tsc_calibration *c, uint64_t tsc, uint64_t *err_ns);

/* The latest CLOCK_MONOTONIC time `tsc` can stand for (conversion + error,
 * saturated): a busy start converted this way is never early, so a stretch
 * is never declared hung before it has lasted the threshold. */
uint64_t hw_tsc_to_ns_latest(const hw_tsc_calibration *c, uint64_t tsc);

/* (a * b) >> 32, saturated to UINT64_MAX: the conversion's multiply, exact
 * for any operands (exposed for the tests). */
uint64_t hw_tsc_mul_shift32(uint64_t a, uint64_t b);

#endif
