/*
 * test_tsc_clock.c - converting time-stamp counter values to
 * CLOCK_MONOTONIC (src/core/tsc_clock.h), against a simulated counter whose
 * true relation to the clock the test knows: conversions land within the
 * error they claim and that error is small; the rate gets finer as pairs
 * accumulate and follows a clock whose rate changes; a jump restarts the
 * calibration; nothing converts before there is a rate; any counter value,
 * however absurd, converts without wrapping around.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/tsc_clock.h"

#define US 1000ull
#define MS 1000000ull
#define S 1000000000ull

/* A simulated machine: the counter runs at `hz` from `tsc0` at clock `ns0`
 * (rates in whole Hz keep the arithmetic exact for the test itself). */
typedef struct machine {
    uint64_t hz;
    uint64_t tsc0, ns0;
} machine;

/* The counter value at clock time `ns`, before or after ns0 (exact to a
 * tick for the ranges used). */
static uint64_t tsc_at(const machine *m, uint64_t ns)
{
    uint64_t dns = ns >= m->ns0 ? ns - m->ns0 : m->ns0 - ns;
    uint64_t dticks = dns / S * m->hz + dns % S * m->hz / S;
    return ns >= m->ns0 ? m->tsc0 + dticks : m->tsc0 - dticks;
}

/* A pair taken at clock time `ns` whose two counter reads lie `spread`
 * ticks apart around it. */
static hw_tsc_sample pair_at(const machine *m, uint64_t ns, uint64_t spread)
{
    uint64_t t = tsc_at(m, ns);
    return hw_tsc_sample_make(t - spread / 2, ns, t + (spread - spread / 2));
}

/* The same with the clock read at the very start (`late` false) or end of
 * the two counter reads: the worst a pair can be off its midpoint. */
static hw_tsc_sample pair_at_edge(const machine *m, uint64_t ns, uint64_t spread, bool late)
{
    uint64_t t = tsc_at(m, ns);
    return late ? hw_tsc_sample_make(t - spread, ns, t) : hw_tsc_sample_make(t, ns, t + spread);
}

static uint64_t distance(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

static void test_mul_shift_is_exact_and_saturates(void **state)
{
    (void)state;
    assert_int_equal(hw_tsc_mul_shift32(0, UINT64_MAX), 0);
    assert_int_equal(hw_tsc_mul_shift32(1ull << 40, 1ull << 31), 1ull << 39);
    assert_int_equal(hw_tsc_mul_shift32(3, 1ull << 32), 3);
    /* The largest product that still fits after the shift, and one past it. */
    assert_int_equal(hw_tsc_mul_shift32(UINT64_MAX, 1ull << 32), UINT64_MAX);
    assert_int_equal(hw_tsc_mul_shift32(UINT64_MAX, (1ull << 32) + 1), UINT64_MAX);
    assert_int_equal(hw_tsc_mul_shift32(1ull << 63, 1ull << 33), UINT64_MAX);
#ifdef __SIZEOF_INT128__
    /* Against the compiler's 128-bit arithmetic, on awkward operands. */
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 2000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint64_t a = x >> (i % 40), b = (x * 0x2545f4914f6cdd1dull) >> (i % 23);
        unsigned __int128 p = ((unsigned __int128)a * b) >> 32;
        uint64_t want = p > UINT64_MAX ? UINT64_MAX : (uint64_t)p;
        assert_int_equal(hw_tsc_mul_shift32(a, b), want);
    }
#endif
}

static void test_sample_is_the_midpoint_of_its_reads(void **state)
{
    (void)state;
    hw_tsc_sample s = hw_tsc_sample_make(1000, 77, 1100);
    assert_int_equal(s.tsc, 1050);
    assert_int_equal(s.ns, 77);
    assert_int_equal(s.spread, 100);
    /* A counter that went backwards between the reads: the later read, and
     * no claim of precision it does not have. */
    s = hw_tsc_sample_make(1100, 77, 1000);
    assert_int_equal(s.tsc, 1000);
    assert_int_equal(s.spread, 0);
}

static void test_nothing_converts_before_a_rate(void **state)
{
    (void)state;
    machine m = {2100000000ull, 5000000000ull, 10 * S};
    hw_tsc_calibration c;
    hw_tsc_init(&c, 0);
    uint64_t err = 0;
    assert_false(hw_tsc_ready(&c));
    assert_int_equal(hw_tsc_to_ns(&c, m.tsc0, &err), 0);
    assert_int_equal(err, UINT64_MAX);
    assert_true(hw_tsc_add(&c, pair_at(&m, 10 * S, 60)));
    /* A second pair only 0.5 ms later: too close to measure a rate. */
    assert_true(hw_tsc_add(&c, pair_at(&m, 10 * S + 500 * US, 60)));
    assert_false(hw_tsc_ready(&c));
    /* Unconvertible stamps read as "started in the future": never hung. */
    assert_int_equal(hw_tsc_to_ns_latest(&c, m.tsc0), UINT64_MAX);
    assert_true(hw_tsc_add(&c, pair_at(&m, 10 * S + 2 * MS, 60)));
    assert_true(hw_tsc_ready(&c));
}

static void test_conversion_lands_within_its_claimed_error(void **state)
{
    (void)state;
    machine m = {2095995000ull, 123456789012ull, 50 * S};
    hw_tsc_calibration c;
    hw_tsc_init(&c, 0);
    /* The agent's start-up: two pairs 2 ms apart, 200 ticks of spread, the
     * clock read at opposite ends of them: the rate is as far off as such
     * pairs allow. */
    hw_tsc_add(&c, pair_at_edge(&m, 50 * S, 200, false));
    hw_tsc_add(&c, pair_at_edge(&m, 50 * S + 2 * MS, 200, true));
    assert_true(hw_tsc_ready(&c));
    /* Stamps taken up to the threshold before the newest pair and a little
     * after it: each converts to within its error of the truth, and that
     * error stays far below a millisecond. */
    const uint64_t stamps[] = {50 * S - 500 * MS, 50 * S, 50 * S + 1 * MS, 50 * S + 2 * MS, 50 * S + 3 * MS};
    for (size_t i = 0; i < sizeof stamps / sizeof stamps[0]; i++) {
        uint64_t err;
        uint64_t ns = hw_tsc_to_ns(&c, tsc_at(&m, stamps[i]), &err);
        assert_true(distance(ns, stamps[i]) <= err);
        assert_true(err < 100 * US);
        /* The latest reading is never before the truth. */
        assert_true(hw_tsc_to_ns_latest(&c, tsc_at(&m, stamps[i])) >= stamps[i]);
    }
}

static void test_rate_gets_finer_as_pairs_accumulate(void **state)
{
    (void)state;
    machine m = {3000000000ull, 1ull << 40, 100 * S};
    hw_tsc_calibration c;
    hw_tsc_init(&c, 0);
    hw_tsc_add(&c, pair_at(&m, 100 * S, 200));
    hw_tsc_add(&c, pair_at(&m, 100 * S + 2 * MS, 200));
    uint64_t early_ppb = c.rate_err_ppb;
    uint64_t early_err;
    hw_tsc_to_ns(&c, tsc_at(&m, 100 * S + 2 * MS - 2 * S), &early_err);
    /* The agent wakes every 250 ms for 20 s. */
    for (uint64_t t = 100 * S + 250 * MS; t <= 120 * S; t += 250 * MS)
        assert_true(hw_tsc_add(&c, pair_at(&m, t, 200)));
    assert_true(c.rate_err_ppb * 100 < early_ppb);
    assert_true(c.count <= HW_TSC_HISTORY);
    uint64_t err;
    uint64_t truth = 120 * S - 2 * S;
    uint64_t ns = hw_tsc_to_ns(&c, tsc_at(&m, truth), &err);
    assert_true(distance(ns, truth) <= err);
    assert_true(err * 10 < early_err);
    assert_true(err < 1 * US);
}

static void test_rate_follows_a_clock_whose_rate_changed(void **state)
{
    (void)state;
    /* CLOCK_MONOTONIC as NTP steers it: for 30 s the counter runs at
     * 2.0 GHz against it, then at 2.0 GHz + 100 ppm (the clock slowed). */
    machine before = {2000000000ull, 1ull << 36, 0};
    hw_tsc_calibration c;
    hw_tsc_init(&c, 0);
    uint64_t t;
    for (t = 1 * S; t <= 30 * S; t += 1 * S)
        assert_true(hw_tsc_add(&c, pair_at(&before, t, 100)));
    machine after = {2000200000ull, tsc_at(&before, 30 * S), 30 * S};
    for (t = 31 * S; t <= 30 * S + (HW_TSC_HISTORY + 2) * S; t += 1 * S)
        assert_true(hw_tsc_add(&c, pair_at(&after, t, 100)));
    /* The history has forgotten the old rate: half a second back converts
     * to within a microsecond, as it would with the old rate nowhere. */
    uint64_t err, truth = t - 1 * S - 500 * MS;
    uint64_t ns = hw_tsc_to_ns(&c, tsc_at(&after, truth), &err);
    assert_true(distance(ns, truth) <= err);
    assert_true(distance(ns, truth) < 1 * US);
    assert_int_equal(c.jumps, 0);
}

static void test_a_jump_restarts_the_calibration(void **state)
{
    (void)state;
    machine m = {2500000000ull, 1ull << 38, 10 * S};
    hw_tsc_calibration c;
    hw_tsc_init(&c, 0);
    for (uint64_t t = 10 * S; t <= 20 * S; t += 1 * S)
        assert_true(hw_tsc_add(&c, pair_at(&m, t, 100)));
    /* The virtual machine resumed somewhere whose counter is 3 s ahead. */
    machine moved = {m.hz, tsc_at(&m, 21 * S) + 3ull * m.hz, 21 * S};
    assert_false(hw_tsc_add(&c, pair_at(&moved, 21 * S, 100)));
    assert_int_equal(c.jumps, 1);
    assert_int_equal(c.count, 1);
    /* Converting from the new line at once, with the old rate, trusted
     * only to 1000 ppm until measured again. */
    assert_true(hw_tsc_ready(&c));
    assert_int_equal(c.rate_err_ppb, HW_TSC_JUMP_PPM * 1000);
    uint64_t err;
    uint64_t ns = hw_tsc_to_ns(&c, tsc_at(&moved, 21 * S - 100 * MS), &err);
    assert_true(distance(ns, 21 * S - 100 * MS) <= err);
    assert_true(hw_tsc_add(&c, pair_at(&moved, 21 * S + 5 * MS, 100)));
    assert_true(c.rate_err_ppb < HW_TSC_JUMP_PPM * 1000 / 10);
    /* A counter that went backwards is a jump too. */
    assert_false(hw_tsc_add(&c, hw_tsc_sample_make(1000, 22 * S, 1100)));
    assert_int_equal(c.jumps, 2);
}

static void test_pairs_within_the_noise_are_no_jump(void **state)
{
    (void)state;
    machine m = {2000000000ull, 1ull << 38, 1 * S};
    hw_tsc_calibration c;
    hw_tsc_init(&c, 0);
    for (uint64_t t = 1 * S; t <= 10 * S; t += 1 * S)
        assert_true(hw_tsc_add(&c, pair_at(&m, t, 100)));
    /* 50 us off after a minute asleep (NTP slewing at 500 ppm would make
     * 30 ms): within what the clock may do, not a jump. */
    hw_tsc_sample s = pair_at(&m, 70 * S, 100);
    s.ns += 50 * US;
    assert_true(hw_tsc_add(&c, s));
    assert_int_equal(c.jumps, 0);
}

static void test_absurd_stamps_saturate(void **state)
{
    (void)state;
    /* A counter that read 2^50 (6.5 days at 2 GHz) when the clock read
     * 1000 s: counter 0 is days before the clock's 0. */
    machine m = {2000000000ull, 1ull << 50, 1000 * S};
    hw_tsc_calibration c;
    hw_tsc_init(&c, 0);
    hw_tsc_add(&c, pair_at(&m, 1000 * S, 100));
    hw_tsc_add(&c, pair_at(&m, 1000 * S + 10 * MS, 100));
    uint64_t err;
    /* Before the clock's 0: 0, not a time near UINT64_MAX. */
    assert_int_equal(hw_tsc_to_ns(&c, 0, &err), 0);
    /* Centuries ahead (2^64 ticks at 2 GHz: 292 years), never wrapped to a
     * small value, and its latest reading no earlier. */
    uint64_t far = hw_tsc_to_ns(&c, UINT64_MAX, &err);
    assert_true(far > 1000 * S + 100ull * 365 * 24 * 3600 * S);
    assert_true(hw_tsc_to_ns_latest(&c, UINT64_MAX) >= far);
    /* A program that writes 2^63 ticks. */
    assert_true(hw_tsc_to_ns(&c, 1ull << 63, &err) > 1000 * S);
    /* A counter near stopped (2 s per tick, a rate of 2^63 in 32.32 fixed
     * point): a far stamp saturates instead of wrapping. */
    hw_tsc_calibration slow;
    hw_tsc_init(&slow, UINT64_MAX);
    hw_tsc_add(&slow, hw_tsc_sample_make(10, 1 * S, 10));
    hw_tsc_add(&slow, hw_tsc_sample_make(11, 3 * S, 11));
    assert_true(hw_tsc_ready(&slow));
    assert_int_equal(hw_tsc_to_ns(&slow, UINT64_MAX, &err), UINT64_MAX);
    assert_int_equal(err, UINT64_MAX);
}

static void test_skew_widens_every_conversion(void **state)
{
    (void)state;
    machine m = {2000000000ull, 1ull << 38, 1 * S};
    hw_tsc_calibration with, without;
    hw_tsc_init(&with, 7 * US);
    hw_tsc_init(&without, 0);
    hw_tsc_add(&with, pair_at(&m, 1 * S, 100));
    hw_tsc_add(&with, pair_at(&m, 1 * S + 2 * MS, 100));
    hw_tsc_add(&without, pair_at(&m, 1 * S, 100));
    hw_tsc_add(&without, pair_at(&m, 1 * S + 2 * MS, 100));
    uint64_t e1, e2;
    uint64_t n1 = hw_tsc_to_ns(&with, tsc_at(&m, 900 * MS), &e1);
    uint64_t n2 = hw_tsc_to_ns(&without, tsc_at(&m, 900 * MS), &e2);
    assert_int_equal(n1, n2);
    assert_int_equal(e1, e2 + 7 * US);
    assert_int_equal(hw_tsc_to_ns_latest(&with, tsc_at(&m, 900 * MS)), n1 + e1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mul_shift_is_exact_and_saturates),
        cmocka_unit_test(test_sample_is_the_midpoint_of_its_reads),
        cmocka_unit_test(test_nothing_converts_before_a_rate),
        cmocka_unit_test(test_conversion_lands_within_its_claimed_error),
        cmocka_unit_test(test_rate_gets_finer_as_pairs_accumulate),
        cmocka_unit_test(test_rate_follows_a_clock_whose_rate_changed),
        cmocka_unit_test(test_a_jump_restarts_the_calibration),
        cmocka_unit_test(test_pairs_within_the_noise_are_no_jump),
        cmocka_unit_test(test_absurd_stamps_saturate),
        cmocka_unit_test(test_skew_widens_every_conversion),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
