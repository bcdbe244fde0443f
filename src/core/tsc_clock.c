/*
 * tsc_clock.c - the counter-to-CLOCK_MONOTONIC conversion (tsc_clock.h):
 * a line through pairs the agent measured, with an error bound for every
 * conversion.  All integer arithmetic saturates instead of wrapping: the
 * values converted come from the watched program and may be anything.
 */
#include "tsc_clock.h"

#define NS_PER_S 1000000000ull
#define PPB 1000000000ull
#define JUMP_RATE_ERR_PPB (HW_TSC_JUMP_PPM * 1000ull) /* after a jump: the old rate, to 1000 ppm */

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

uint64_t hw_tsc_mul_shift32(uint64_t a, uint64_t b)
{
    /* 32-bit halves, so that no compiler extension is needed. */
    uint64_t ah = a >> 32, al = a & 0xffffffffu, bh = b >> 32, bl = b & 0xffffffffu;
    uint64_t hh = ah * bh, hl = ah * bl, lh = al * bh, ll = al * bl;
    if (hh > 0xffffffffu)
        return UINT64_MAX;
    uint64_t mid = (ll >> 32) + (hl & 0xffffffffu) + (lh & 0xffffffffu);
    uint64_t high = hh + (hl >> 32) + (lh >> 32) + (mid >> 32); /* bits 64.. of a*b */
    if (high > 0xffffffffu)
        return UINT64_MAX;
    return (high << 32) | (mid & 0xffffffffu);
}

/* x * ppb / 10^9 without overflow (ppb <= 10^9). */
static uint64_t scale_ppb(uint64_t x, uint64_t ppb)
{
    if (ppb > PPB)
        ppb = PPB;
    return add_sat((x / PPB) * ppb, (x % PPB) * ppb / PPB);
}

hw_tsc_sample hw_tsc_sample_make(uint64_t before, uint64_t ns, uint64_t after)
{
    hw_tsc_sample s = {.tsc = after, .ns = ns, .spread = 0};
    if (after >= before) {
        s.tsc = before + (after - before) / 2;
        s.spread = after - before;
    }
    return s;
}

void hw_tsc_init(hw_tsc_calibration *c, uint64_t skew_ns)
{
    *c = (hw_tsc_calibration){.skew_ns = skew_ns};
}

bool hw_tsc_ready(const hw_tsc_calibration *c)
{
    return c->mult != 0;
}

static uint64_t ticks_to_ns(const hw_tsc_calibration *c, uint64_t ticks)
{
    return hw_tsc_mul_shift32(ticks, c->mult);
}

uint64_t hw_tsc_to_ns(const hw_tsc_calibration *c, uint64_t tsc, uint64_t *err_ns)
{
    if (!hw_tsc_ready(c)) {
        if (err_ns)
            *err_ns = UINT64_MAX;
        return 0;
    }
    uint64_t ns, off;
    if (tsc >= c->ref.tsc) {
        off = ticks_to_ns(c, tsc - c->ref.tsc);
        ns = add_sat(c->ref.ns, off);
    } else {
        off = ticks_to_ns(c, c->ref.tsc - tsc);
        ns = off > c->ref.ns ? 0 : c->ref.ns - off;
    }
    if (err_ns) {
        uint64_t e = ticks_to_ns(c, c->ref.spread / 2 + 1); /* where the newest pair lies */
        e = add_sat(e, scale_ppb(off, c->rate_err_ppb));  /* the rate's error over the distance */
        *err_ns = add_sat(e, c->skew_ns);                /* another CPU's counter */
    }
    return ns;
}

uint64_t hw_tsc_to_ns_latest(const hw_tsc_calibration *c, uint64_t tsc)
{
    uint64_t err;
    uint64_t ns = hw_tsc_to_ns(c, tsc, &err);
    return hw_tsc_ready(c) ? add_sat(ns, err) : UINT64_MAX;
}

/* Start afresh from `s` (the first pair, or the first after a jump). */
static void restart(hw_tsc_calibration *c, hw_tsc_sample s)
{
    c->history[0] = s;
    c->first = 0;
    c->count = 1;
    c->ref = s;
    c->base = s;
}

/* The rate from `from` to `to`, if they are far enough apart. */
static void measure_rate(hw_tsc_calibration *c, hw_tsc_sample from, hw_tsc_sample to)
{
    if (to.ns < from.ns || to.ns - from.ns < HW_TSC_MIN_SPAN_NS || to.tsc <= from.tsc)
        return;
    uint64_t dns = to.ns - from.ns, dticks = to.tsc - from.tsc;
    /* A double is exact enough here (53 bits for a value near 2^31), and
     * it neither overflows nor needs a 128-bit division. */
    double mult = (double)dns * 4294967296.0 / (double)dticks + 0.5;
    if (!(mult >= 1.0 && mult < 18446744073709549568.0))
        return; /* a counter over 2^32 times faster or slower than 1 GHz is no counter we know */
    c->mult = (uint64_t)mult;
    c->base = from;
    /* Each end is known to +-spread/2 ticks; the fixed point adds one part
     * in 2^32 of the rate at most. */
    double uncertain = (double)(from.spread / 2) + (double)(to.spread / 2) + 1.0;
    double ppb = uncertain * (double)PPB / (double)dticks;
    c->rate_err_ppb = ppb >= (double)PPB ? PPB : (uint64_t)ppb + 1;
}

bool hw_tsc_add(hw_tsc_calibration *c, hw_tsc_sample s)
{
    if (c->count == 0) {
        restart(c, s);
        return true;
    }
    bool agrees = s.tsc >= c->ref.tsc && s.ns >= c->ref.ns;
    if (agrees && hw_tsc_ready(c)) {
        uint64_t err;
        uint64_t predicted = hw_tsc_to_ns(c, s.tsc, &err);
        uint64_t off = predicted > s.ns ? predicted - s.ns : s.ns - predicted;
        uint64_t allowed = add_sat(add_sat(err, ticks_to_ns(c, s.spread / 2 + 1)),
                                   add_sat(HW_TSC_JUMP_NS, (s.ns - c->ref.ns) / 1000000ull * HW_TSC_JUMP_PPM));
        agrees = off <= allowed;
    }
    if (!agrees) {
        c->jumps++;
        restart(c, s);
        if (hw_tsc_ready(c))
            c->rate_err_ppb = JUMP_RATE_ERR_PPB;
        return false;
    }
    const hw_tsc_sample *newest = &c->history[(c->first + c->count - 1) % HW_TSC_HISTORY];
    if (s.ns - newest->ns >= HW_TSC_SPACING_NS) {
        if (c->count == HW_TSC_HISTORY) {
            c->first = (c->first + 1) % HW_TSC_HISTORY;
            c->count--;
        }
        c->history[(c->first + c->count) % HW_TSC_HISTORY] = s;
        c->count++;
    }
    c->ref = s;
    measure_rate(c, c->history[c->first], s);
    return true;
}
