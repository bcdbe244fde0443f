/*
 * test_cpu_window.c - the CPU-high rule: a whole window over the
 * percentage is reported, then again after 1, 2, 3, 5 ... windows while it
 * stays hot (annealing), at once again after it cooled down (a whole window
 * under the percentage: a process hovering at it is not reported at every
 * crossing); never before a
 * whole window; a CPU time that goes backwards starts afresh; and the
 * option's parser.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/cpu_window.h"

#define MS 1000000ull
#define S 1000000000ull

/* Feed `w` a process using `share` (of one CPU, in percent) from `from` to
 * `to`, one reading per tick; return the report times in `at` (their
 * count). */
static unsigned drive(hw_cpu_window *w, uint64_t *cpu, uint64_t from, uint64_t to, unsigned share, uint64_t *at,
                      unsigned max)
{
    uint64_t tick = hw_cpu_tick_ns(&w->cfg);
    unsigned n = 0;
    for (uint64_t t = from; t <= to; t += tick) {
        hw_cpu_verdict v = hw_cpu_window_add(w, t, *cpu);
        if (v.report && n < max)
            at[n++] = t;
        *cpu += tick * share / 100;
    }
    return n;
}

static void test_hot_process_reported_with_annealing(void **state)
{
    (void)state;
    hw_cpu_high_config cfg = {.percent = 80, .window_ns = 5 * S};
    hw_cpu_window w;
    hw_cpu_window_init(&w, &cfg);
    uint64_t cpu = 0, at[16];
    unsigned n = drive(&w, &cpu, 0, 100 * S, 100, at, 16);
    /* Reports at 5 s, then after 1, 2, 3, 5, 8 windows: 10, 20, 35, 60, 100. */
    uint64_t want[] = {5, 10, 20, 35, 60, 100};
    assert_int_equal(n, 6);
    for (unsigned i = 0; i < n; i++)
        assert_true(at[i] >= want[i] * S && at[i] <= want[i] * S + hw_cpu_tick_ns(&cfg));
}

static void test_cool_or_short_is_not_reported(void **state)
{
    (void)state;
    hw_cpu_high_config cfg = {.percent = 80, .window_ns = 5 * S};
    hw_cpu_window w;
    hw_cpu_window_init(&w, &cfg);
    uint64_t cpu = 0, at[4];
    assert_int_equal(drive(&w, &cpu, 0, 30 * S, 79, at, 4), 0); /* under the percentage */
    hw_cpu_window_init(&w, &cfg);
    cpu = 0;
    assert_int_equal(drive(&w, &cpu, 0, 4800 * MS, 100, at, 4), 0); /* never a whole window */
    /* Exactly the percentage is not over it. */
    hw_cpu_window_init(&w, &cfg);
    cpu = 0;
    assert_int_equal(drive(&w, &cpu, 0, 30 * S, 80, at, 4), 0);
}

static void test_cooling_down_resets_the_annealing(void **state)
{
    (void)state;
    hw_cpu_high_config cfg = {.percent = 50, .window_ns = 2 * S};
    hw_cpu_window w;
    hw_cpu_window_init(&w, &cfg);
    uint64_t cpu = 0, at[8];
    assert_int_equal(drive(&w, &cpu, 0, 2100 * MS, 100, at, 8), 1);
    assert_int_equal(drive(&w, &cpu, 2200 * MS, 8 * S, 0, at, 8), 0); /* idle: cooled down */
    unsigned n = drive(&w, &cpu, 8100 * MS, 10300 * MS, 100, at, 8);
    assert_int_equal(n, 1); /* hot again: reported once a whole hot window is seen */
    assert_true(at[0] >= 9 * S && at[0] <= 10300 * MS);
}

/* A process at the percentage's edge: over it, under it for less than a
 * window, over again.  Its reports follow the annealing (the second a
 * whole window after the first), not each crossing. */
static void test_hovering_is_not_reported_at_each_crossing(void **state)
{
    (void)state;
    hw_cpu_high_config cfg = {.percent = 50, .window_ns = 2 * S};
    hw_cpu_window w;
    hw_cpu_window_init(&w, &cfg);
    uint64_t cpu = 0, at[8];
    unsigned n = drive(&w, &cpu, 0, 2100 * MS, 60, at, 8);
    assert_int_equal(n, 1);
    uint64_t first = at[0];
    /* Idle for 0.6 s: the window's average dips under 50 % (39 % at 2.8 s),
     * not for a window. */
    assert_int_equal(drive(&w, &cpu, 2200 * MS, 2800 * MS, 0, at, 8), 0);
    n = drive(&w, &cpu, 2900 * MS, 3900 * MS, 90, at, 8);
    assert_int_equal(n, 0); /* hot again within the annealing's wait: not reported */
    n = drive(&w, &cpu, 4000 * MS, 4500 * MS, 90, at, 8);
    assert_int_equal(n, 1); /* a window after the first */
    assert_true(at[0] >= first + 2 * S);
}

static void test_backwards_cpu_starts_afresh(void **state)
{
    (void)state;
    hw_cpu_high_config cfg = {.percent = 10, .window_ns = 1 * S};
    hw_cpu_window w;
    hw_cpu_window_init(&w, &cfg);
    assert_false(hw_cpu_window_add(&w, 0, 5 * S).whole);
    assert_false(hw_cpu_window_add(&w, 1100 * MS, 1 * S).whole); /* backwards: afresh */
    hw_cpu_verdict v = hw_cpu_window_add(&w, 2200 * MS, 2 * S);
    assert_true(v.whole && v.hot && v.report);
    assert_int_equal(v.tenths, 909); /* 1 s of CPU in 1.1 s */
    /* Huge values saturate, they do not wrap. */
    v = hw_cpu_window_add(&w, UINT64_MAX, UINT64_MAX);
    assert_true(v.whole && v.hot);
}

static void test_parse(void **state)
{
    (void)state;
    hw_cpu_high_config c;
    const char *why = NULL;
    assert_int_equal(hw_cpu_high_parse("80%/5s", &c, &why), 0);
    assert_int_equal(c.percent, 80);
    assert_int_equal(c.window_ns, 5 * S);
    assert_int_equal(hw_cpu_high_parse("150", &c, &why), 0);
    assert_int_equal(c.percent, 150);
    assert_int_equal(c.window_ns, 60 * S);
    assert_int_equal(hw_cpu_high_parse("80%", &c, &why), 0);
    assert_int_equal(hw_cpu_high_parse("50/2m", &c, &why), 0);
    assert_int_equal(c.window_ns, 120 * S);
    const char *bad[] = {"", "%", "0", "0%/5s", "-5", "80%%", "80%/", "80%/5", "80%/500ms", "80x", "100001",
                         "99999999999999999999", "80%/5s junk", "80 %"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why = NULL;
        assert_int_equal(hw_cpu_high_parse(bad[i], &c, &why), -1);
        assert_non_null(why);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hot_process_reported_with_annealing),
        cmocka_unit_test(test_cool_or_short_is_not_reported),
        cmocka_unit_test(test_cooling_down_resets_the_annealing),
        cmocka_unit_test(test_hovering_is_not_reported_at_each_crossing),
        cmocka_unit_test(test_backwards_cpu_starts_afresh),
        cmocka_unit_test(test_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
