/*
 * test_semaphore_detector.c - the seeds' semaphore detector: five 50 ms
 * timeouts in a row in BEFORE_SOURCES or AFTER_WAITING are a lag (and a
 * long hang is a lag every five), a signal resets the count, and the idle
 * BEFORE_WAITING state never counts (the flaw seeds/002 fixes with a ping).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "core/semaphore_detector.h"

static hw_loop_reading at(uint64_t seq, uint32_t activity)
{
    hw_loop_reading r = {.seq = seq, .busy_start_ns = 0, .activity = activity, .busy = (seq & 1) != 0};
    return r;
}

static void test_five_timeouts_are_a_lag(void **state)
{
    (void)state;
    hw_semaphore_detector d;
    hw_semaphore_init(&d);
    hw_loop_reading busy = at(3, HW_ACTIVITY_AFTER_WAITING);
    assert_false(hw_semaphore_step(&d, &busy)); /* the activity itself: a signal */
    for (int i = 1; i <= 4; i++)
        assert_false(hw_semaphore_step(&d, &busy));
    assert_true(hw_semaphore_step(&d, &busy)); /* the fifth timeout */
    /* still stuck: the next lag five timeouts later (every 250 ms) */
    for (int i = 1; i <= 4; i++)
        assert_false(hw_semaphore_step(&d, &busy));
    assert_true(hw_semaphore_step(&d, &busy));
}

static void test_a_signal_resets_the_count(void **state)
{
    (void)state;
    hw_semaphore_detector d;
    hw_semaphore_init(&d);
    hw_loop_reading a = at(3, HW_ACTIVITY_BEFORE_SOURCES);
    hw_semaphore_step(&d, &a);
    for (int i = 0; i < 4; i++)
        assert_false(hw_semaphore_step(&d, &a));
    hw_loop_reading b = at(5, HW_ACTIVITY_AFTER_WAITING); /* the loop turned over */
    assert_false(hw_semaphore_step(&d, &b));
    for (int i = 0; i < 4; i++)
        assert_false(hw_semaphore_step(&d, &b));
    assert_true(hw_semaphore_step(&d, &b));
}

static void test_waiting_never_counts(void **state)
{
    (void)state;
    hw_semaphore_detector d;
    hw_semaphore_init(&d);
    hw_loop_reading idle = at(4, HW_ACTIVITY_BEFORE_WAITING);
    for (int i = 0; i < 100; i++)
        assert_false(hw_semaphore_step(&d, &idle));
    /* BEFORE_TIMERS is not one of the two states either */
    hw_loop_reading timers = at(5, HW_ACTIVITY_BEFORE_TIMERS);
    for (int i = 0; i < 100; i++)
        assert_false(hw_semaphore_step(&d, &timers));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_five_timeouts_are_a_lag),
        cmocka_unit_test(test_a_signal_resets_the_count),
        cmocka_unit_test(test_waiting_never_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
