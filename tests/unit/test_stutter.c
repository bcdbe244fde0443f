/*
 * test_stutter.c - the stutter rule: Matrix's issue #567 (1 s stalls with
 * 0.3 s gaps) is stutter; short stalls, a mostly idle loop, and a real hang
 * are not; one verdict per window.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include <cmocka.h>

#include "core/stutter.h"

#define MS 1000000ull
#define S 1000000000ull
#define TICK (50 * MS)

/* Drive a loop that is busy for `busy` then waits `gap`, forever, looking
 * every 50 ms; return the time of the first stutter verdict (0: none) within
 * `horizon`. */
static uint64_t first_stutter(uint64_t busy, uint64_t gap, uint64_t horizon, unsigned *verdicts)
{
    hw_stutter_config cfg;
    hw_stutter_config_default(&cfg, 2 * S);
    hw_stutter st;
    hw_stutter_init(&st, &cfg, 0);
    uint64_t first = 0;
    *verdicts = 0;
    for (uint64_t t = 0; t <= horizon; t += TICK) {
        uint64_t period = busy + gap;
        uint64_t k = t / period, in = t % period;
        hw_loop_reading r = {.seq = 2 * k + (in < busy ? 1 : 2), .busy_start_ns = k * period, .busy = in < busy};
        if (hw_stutter_observe(&st, &r, t).stutter) {
            (*verdicts)++;
            if (!first)
                first = t;
        }
    }
    return first;
}

static void test_matrix_issue_567_is_stutter(void **state)
{
    (void)state;
    unsigned n;
    uint64_t t = first_stutter(1 * S, 300 * MS, 20 * S, &n);
    assert_true(t >= 5 * S && t <= 7 * S); /* once a full window has been seen */
    assert_true(n >= 2 && n <= 4);         /* one per window, not one per look */
}

static void test_short_stalls_are_not_stutter(void **state)
{
    (void)state;
    unsigned n;
    assert_int_equal(first_stutter(200 * MS, 50 * MS, 20 * S, &n), 0); /* 80% busy, but no stall >= 250 ms */
}

static void test_a_mostly_idle_loop_is_not_stutter(void **state)
{
    (void)state;
    unsigned n;
    assert_int_equal(first_stutter(1 * S, 1500 * MS, 20 * S, &n), 0); /* 40% busy */
}

static void test_a_hang_is_not_stutter(void **state)
{
    (void)state;
    unsigned n;
    assert_int_equal(first_stutter(2500 * MS, 300 * MS, 20 * S, &n), 0); /* each stall is a hang */
}

/* A stall the process spent stopped (a debugger's breakpoint) does not
 * count: #567's pattern with the first 0.9 s of every 1 s stall stopped
 * (the last look that saw it stopped at 0.85 s) leaves 0.15 s stalls,
 * under the 250 ms a stall needs. */
static void test_stopped_time_is_not_a_stall(void **state)
{
    (void)state;
    hw_stutter_config cfg;
    hw_stutter_config_default(&cfg, 2 * S);
    hw_stutter st;
    hw_stutter_init(&st, &cfg, 0);
    uint64_t period = 1 * S + 300 * MS;
    for (uint64_t t = 0; t <= 20 * S; t += TICK) {
        uint64_t k = t / period, in = t % period;
        bool busy = in < 1 * S;
        hw_loop_reading r = {.seq = 2 * k + (busy ? 1 : 2), .busy_start_ns = k * period, .busy = busy};
        if (busy && in < 900 * MS)
            hw_stutter_restart(&st, r.seq, t); /* seen stopped: the clock starts again */
        assert_false(hw_stutter_observe(&st, &r, t).stutter);
    }
    /* Only the stretch the restart names is moved, and only forwards. */
    hw_loop_reading r = {.seq = 101, .busy_start_ns = 30 * S, .busy = true};
    hw_stutter_observe(&st, &r, 30 * S);
    hw_stutter_restart(&st, 99, 31 * S);
    assert_int_equal(st.current_start_ns, 30 * S);
    hw_stutter_restart(&st, 101, 29 * S);
    assert_int_equal(st.current_start_ns, 30 * S);
    hw_stutter_restart(&st, 101, 31 * S);
    assert_int_equal(st.current_start_ns, 31 * S);
}

static void test_defaults(void **state)
{
    (void)state;
    hw_stutter_config cfg;
    hw_stutter_config_default(&cfg, 2 * S);
    assert_int_equal(cfg.window_ns, 5 * S);
    assert_int_equal(cfg.min_stall_ns, 250 * MS);
    assert_int_equal(cfg.busy_percent, 70);
    assert_int_equal(cfg.min_stalls, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix_issue_567_is_stutter),
        cmocka_unit_test(test_short_stalls_are_not_stutter),
        cmocka_unit_test(test_a_mostly_idle_loop_is_not_stutter),
        cmocka_unit_test(test_a_hang_is_not_stutter),
        cmocka_unit_test(test_stopped_time_is_not_a_stall),
        cmocka_unit_test(test_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
