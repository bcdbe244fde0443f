/*
 * test_annealing.c - Matrix's annealing back-off, row by row from the
 * seed's tables (seeds/000), plus the "same stack" rule for a thread that
 * spins in one function.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "core/annealing.h"

/* Function keys, innermost first; all share the loop's outer frames. */
static const uint64_t STACK_A[] = {0x10, 0x11, 0x12, 0xA0, 0x900, 0x901};
static const uint64_t STACK_B[] = {0x10, 0x11, 0x12, 0xB0, 0x900, 0x901};
static const uint64_t STACK_C[] = {0x20, 0xC0, 0x900, 0x901};
#define N(s) (sizeof(s) / sizeof((s)[0]))

static void test_seed_abc_table(void **state)
{
    (void)state;
    /* Captured stack, generate report?, wait until next check (periods). */
    static const struct {
        const uint64_t *stack;
        size_t len;
        int report;
        unsigned wait;
    } rows[] = {
        {STACK_A, N(STACK_A), 1, 1}, {STACK_A, N(STACK_A), 0, 2}, {STACK_A, N(STACK_A), 0, 3},
        {STACK_A, N(STACK_A), 0, 5}, {STACK_A, N(STACK_A), 0, 8}, {STACK_B, N(STACK_B), 1, 1},
        {STACK_C, N(STACK_C), 1, 1}, {STACK_C, N(STACK_C), 0, 2}, {STACK_C, N(STACK_C), 0, 3},
        {STACK_A, N(STACK_A), 1, 1},
    };
    hw_annealing a;
    hw_annealing_reset(&a);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        hw_anneal_decision d = hw_annealing_step(&a, rows[i].stack, rows[i].len);
        assert_int_equal(d.report, rows[i].report);
        assert_int_equal(d.wait_periods, rows[i].wait);
    }
}

static void test_backoff_is_fibonacci(void **state)
{
    (void)state;
    /* Check times 0, 1, 3, 6, 11 s of the seed's second table, then on. */
    hw_annealing a;
    hw_annealing_reset(&a);
    uint64_t t = 0;
    const uint64_t expected_times[] = {0, 1, 3, 6, 11, 19, 32, 53};
    for (size_t i = 0; i < sizeof expected_times / sizeof expected_times[0]; i++) {
        assert_int_equal(t, expected_times[i]);
        hw_anneal_decision d = hw_annealing_step(&a, STACK_A, N(STACK_A));
        assert_int_equal(d.report, i == 0);
        t += d.wait_periods;
    }
}

static void test_reset_forgets_the_saved_stack(void **state)
{
    (void)state;
    hw_annealing a;
    hw_annealing_reset(&a);
    assert_true(hw_annealing_step(&a, STACK_A, N(STACK_A)).report);
    assert_false(hw_annealing_step(&a, STACK_A, N(STACK_A)).report);
    hw_annealing_reset(&a); /* the loop went idle */
    hw_anneal_decision d = hw_annealing_step(&a, STACK_A, N(STACK_A));
    assert_true(d.report);
    assert_int_equal(d.wait_periods, 1);
}

static void test_spinning_thread_is_one_stack(void **state)
{
    (void)state;
    /* A spin in spin() (0x50), sometimes caught inside a helper of the
     * program's own it calls (0x60); what runs under the culprit (libc,
     * the vDSO) is not in the keys the worker passes. */
    const uint64_t in_spin[] = {0x50, 0x51, 0x900, 0x901};
    const uint64_t in_helper[] = {0x60, 0x50, 0x51, 0x900, 0x901};
    hw_annealing a;
    hw_annealing_reset(&a);
    assert_true(hw_annealing_step(&a, in_helper, N(in_helper)).report);
    assert_false(hw_annealing_step(&a, in_spin, N(in_spin)).report);
    assert_false(hw_annealing_step(&a, in_helper, N(in_helper)).report);
    assert_false(hw_annealing_step(&a, in_spin, N(in_spin)).report);
    /* Leaving spin() for a sibling is a change. */
    const uint64_t elsewhere[] = {0x80, 0x51, 0x900, 0x901};
    assert_true(hw_annealing_step(&a, elsewhere, N(elsewhere)).report);
}

static void test_new_callee_is_a_move_once(void **state)
{
    (void)state;
    /* First reported in spin() itself; then caught in its helper, code the
     * report did not name: one report more, after which spin() and the
     * helper are one stack. */
    const uint64_t in_spin[] = {0x50, 0x51, 0x900, 0x901};
    const uint64_t in_helper[] = {0x60, 0x50, 0x51, 0x900, 0x901};
    hw_annealing a;
    hw_annealing_reset(&a);
    assert_true(hw_annealing_step(&a, in_spin, N(in_spin)).report);
    assert_true(hw_annealing_step(&a, in_helper, N(in_helper)).report);
    assert_false(hw_annealing_step(&a, in_spin, N(in_spin)).report);
    assert_false(hw_annealing_step(&a, in_helper, N(in_helper)).report);
    /* Recursion: deeper, through functions the reported stack holds. */
    const uint64_t recursing[] = {0x60, 0x50, 0x60, 0x50, 0x51, 0x900, 0x901};
    assert_false(hw_annealing_step(&a, recursing, N(recursing)).report);
}

static void test_empty_capture_is_no_change(void **state)
{
    (void)state;
    hw_annealing a;
    hw_annealing_reset(&a);
    assert_true(hw_annealing_step(&a, STACK_A, N(STACK_A)).report);
    hw_anneal_decision d = hw_annealing_step(&a, NULL, 0);
    assert_false(d.report);
    assert_int_equal(d.wait_periods, 2);
    /* ...but the very first capture is reported even when empty. */
    hw_annealing_reset(&a);
    assert_true(hw_annealing_step(&a, NULL, 0).report);
}

static void test_same_rule(void **state)
{
    (void)state;
    const uint64_t x[] = {1, 2, 3};
    const uint64_t deeper[] = {9, 1, 2, 3};
    const uint64_t recursed[] = {1, 2, 1, 2, 3};
    const uint64_t other[] = {1, 2, 4};
    assert_true(hw_stacks_same(x, 3, x, 3));
    /* on into a new callee: a move (a launch's first report in its
     * compiler, the script's spin later) */
    assert_false(hw_stacks_same(x, 3, deeper, 4));
    /* back up from it: the same */
    assert_true(hw_stacks_same(deeper, 4, x, 3));
    /* deeper into functions it was in (recursion): the same */
    assert_true(hw_stacks_same(x, 3, recursed, 5));
    assert_false(hw_stacks_same(x, 3, other, 3));
    assert_false(hw_stacks_same(x, 3, NULL, 0));
    assert_true(hw_stacks_same(NULL, 0, NULL, 0));
}

static void test_very_deep_stacks_compare_on_outer_frames(void **state)
{
    (void)state;
    static uint64_t deep[HW_ANNEAL_MAX_FRAMES + 50];
    for (size_t i = 0; i < N(deep); i++)
        deep[i] = 1000 + i;
    hw_annealing a;
    hw_annealing_reset(&a);
    assert_true(hw_annealing_step(&a, deep, N(deep)).report);
    assert_false(hw_annealing_step(&a, deep, N(deep)).report);
    deep[N(deep) - 1] = 7; /* a different outermost frame */
    assert_true(hw_annealing_step(&a, deep, N(deep)).report);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_abc_table),
        cmocka_unit_test(test_backoff_is_fibonacci),
        cmocka_unit_test(test_reset_forgets_the_saved_stack),
        cmocka_unit_test(test_spinning_thread_is_one_stack),
        cmocka_unit_test(test_new_callee_is_a_move_once),
        cmocka_unit_test(test_empty_capture_is_no_change),
        cmocka_unit_test(test_same_rule),
        cmocka_unit_test(test_very_deep_stacks_compare_on_outer_frames),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
