/*
 * test_loop_state.c - the observer's busy rule (Matrix's, kept exactly) and
 * the slot's consistent-read protocol, with an injected clock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "core/abi/loop_state.h"

static hw_loop_reading read_slot(const hw_loop_slot *slot)
{
    hw_loop_reading r;
    assert_true(hw_loop_read(slot, &r, 1));
    return r;
}

static void test_only_first_busy_activity_stamps_start(void **state)
{
    (void)state;
    hw_loop_slot slot;
    memset(&slot, 0, sizeof slot);

    hw_observe(&slot, HW_ACTIVITY_AFTER_WAITING, 100);
    hw_observe(&slot, HW_ACTIVITY_BEFORE_TIMERS, 200);
    hw_observe(&slot, HW_ACTIVITY_BEFORE_SOURCES, 300);
    hw_loop_reading r = read_slot(&slot);
    assert_true(r.busy);
    assert_int_equal(r.busy_start_ns, 100);
    assert_int_equal(r.activity, HW_ACTIVITY_BEFORE_SOURCES);
}

static void test_each_busy_activity_can_start_a_stretch(void **state)
{
    (void)state;
    const hw_activity starters[] = {HW_ACTIVITY_AFTER_WAITING, HW_ACTIVITY_BEFORE_TIMERS, HW_ACTIVITY_BEFORE_SOURCES};
    for (size_t i = 0; i < 3; i++) {
        hw_loop_slot slot;
        memset(&slot, 0, sizeof slot);
        hw_observe(&slot, starters[i], 500 + i);
        hw_loop_reading r = read_slot(&slot);
        assert_true(r.busy);
        assert_int_equal(r.busy_start_ns, 500 + i);
    }
}

static void test_before_waiting_and_exit_clear_busy(void **state)
{
    (void)state;
    hw_loop_slot slot;
    memset(&slot, 0, sizeof slot);

    hw_observe(&slot, HW_ACTIVITY_AFTER_WAITING, 10);
    hw_observe(&slot, HW_ACTIVITY_BEFORE_WAITING, 0);
    assert_false(read_slot(&slot).busy);

    hw_observe(&slot, HW_ACTIVITY_BEFORE_SOURCES, 20);
    assert_true(read_slot(&slot).busy);
    hw_observe(&slot, HW_ACTIVITY_EXIT, 0);
    assert_false(read_slot(&slot).busy);

    /* The next stretch gets its own start. */
    hw_observe(&slot, HW_ACTIVITY_AFTER_WAITING, 30);
    hw_loop_reading r = read_slot(&slot);
    assert_true(r.busy);
    assert_int_equal(r.busy_start_ns, 30);
}

static void test_entry_changes_nothing(void **state)
{
    (void)state;
    hw_loop_slot slot;
    memset(&slot, 0, sizeof slot);
    hw_observe(&slot, HW_ACTIVITY_ENTRY, 5);
    assert_false(read_slot(&slot).busy);
    hw_observe(&slot, HW_ACTIVITY_AFTER_WAITING, 6);
    hw_observe(&slot, HW_ACTIVITY_ENTRY, 7);
    hw_loop_reading r = read_slot(&slot);
    assert_true(r.busy);
    assert_int_equal(r.busy_start_ns, 6);
}

static void test_seq_counts_transitions_not_calls(void **state)
{
    (void)state;
    hw_loop_slot slot;
    memset(&slot, 0, sizeof slot);
    for (int i = 0; i < 5; i++) {
        hw_observe(&slot, HW_ACTIVITY_AFTER_WAITING, (uint64_t)i);
        hw_observe(&slot, HW_ACTIVITY_BEFORE_SOURCES, (uint64_t)i);
        hw_observe(&slot, HW_ACTIVITY_BEFORE_WAITING, 0);
        hw_observe(&slot, HW_ACTIVITY_BEFORE_WAITING, 0); /* a second one is no transition */
    }
    assert_int_equal(read_slot(&slot).seq, 10);
}

static void test_activity_validation(void **state)
{
    (void)state;
    assert_true(hw_activity_is_valid(HW_ACTIVITY_ENTRY));
    assert_true(hw_activity_is_valid(HW_ACTIVITY_EXIT));
    assert_false(hw_activity_is_valid(0));
    assert_false(hw_activity_is_valid(3));
    assert_false(hw_activity_is_valid(1u << 8));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_only_first_busy_activity_stamps_start),
        cmocka_unit_test(test_each_busy_activity_can_start_a_stretch),
        cmocka_unit_test(test_before_waiting_and_exit_clear_busy),
        cmocka_unit_test(test_entry_changes_nothing),
        cmocka_unit_test(test_seq_counts_transitions_not_calls),
        cmocka_unit_test(test_activity_validation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
