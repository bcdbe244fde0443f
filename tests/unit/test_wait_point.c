/*
 * test_wait_point.c - the "shallowest repeated wait" rule that tells the
 * loop's own wait from waits nested in callbacks, including the cases that
 * could fool it.  Stacks grow down: deeper means a lower stack pointer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "core/abi/wait_point.h"

#define LOOP_SITE 0x401000u
#define LOOP_SP 0x7ffff000u
#define NESTED_SITE 0x402000u
#define NESTED_SP (LOOP_SP - 0x400u)

static void test_every_wait_counts_until_one_repeats(void **state)
{
    (void)state;
    hw_wait_point wp;
    memset(&wp, 0, sizeof wp);
    assert_true(hw_wait_point_is_loop(&wp, LOOP_SITE, LOOP_SP));
    assert_true(hw_wait_point_is_loop(&wp, NESTED_SITE, NESTED_SP)); /* nothing learned yet */
    assert_int_equal(wp.loop_sp, 0);
}

static void test_nested_wait_is_work_once_the_loop_is_known(void **state)
{
    (void)state;
    hw_wait_point wp;
    memset(&wp, 0, sizeof wp);
    /* loop wait, callback's synchronous poll, loop wait again ... */
    assert_true(hw_wait_point_is_loop(&wp, LOOP_SITE, LOOP_SP));
    hw_wait_point_is_loop(&wp, NESTED_SITE, NESTED_SP);
    assert_true(hw_wait_point_is_loop(&wp, LOOP_SITE, LOOP_SP)); /* repeated: the loop */
    assert_int_equal(wp.loop_sp, LOOP_SP);
    assert_false(hw_wait_point_is_loop(&wp, NESTED_SITE, NESTED_SP));
    /* a nested epoll from another site, deeper still */
    assert_false(hw_wait_point_is_loop(&wp, 0x403000u, NESTED_SP - 0x100u));
    assert_true(hw_wait_point_is_loop(&wp, LOOP_SITE, LOOP_SP));
}

static void test_same_site_deeper_is_nested(void **state)
{
    (void)state;
    /* An interpreter calls every wait from one C function: only the depth
     * tells a synchronous select() in a callback from the loop's. */
    hw_wait_point wp;
    memset(&wp, 0, sizeof wp);
    hw_wait_point_is_loop(&wp, LOOP_SITE, LOOP_SP);
    hw_wait_point_is_loop(&wp, LOOP_SITE, LOOP_SP);
    assert_false(hw_wait_point_is_loop(&wp, LOOP_SITE, NESTED_SP));
}

static void test_nested_wait_repeating_first_cannot_lock_the_level(void **state)
{
    (void)state;
    /* The first callback polls its socket twice before the loop waits again. */
    hw_wait_point wp;
    memset(&wp, 0, sizeof wp);
    hw_wait_point_is_loop(&wp, LOOP_SITE, LOOP_SP);
    hw_wait_point_is_loop(&wp, NESTED_SITE, NESTED_SP);
    hw_wait_point_is_loop(&wp, NESTED_SITE, NESTED_SP); /* repeats first */
    assert_int_equal(wp.loop_sp, NESTED_SP);
    assert_true(hw_wait_point_is_loop(&wp, LOOP_SITE, LOOP_SP)); /* shallower: still the loop's */
    assert_int_equal(wp.loop_sp, LOOP_SP);                        /* and the level moves up */
    assert_false(hw_wait_point_is_loop(&wp, NESTED_SITE, NESTED_SP));
}

static void test_one_off_shallow_wait_at_start_does_not_fool_it(void **state)
{
    (void)state;
    /* main() polls once (shallower), then runs its loop deeper. */
    hw_wait_point wp;
    memset(&wp, 0, sizeof wp);
    hw_wait_point_is_loop(&wp, 0x400500u, LOOP_SP + 0x200u);
    hw_wait_point_is_loop(&wp, LOOP_SITE, LOOP_SP);
    assert_true(hw_wait_point_is_loop(&wp, LOOP_SITE, LOOP_SP));
    assert_int_equal(wp.loop_sp, LOOP_SP);
    for (int i = 0; i < 100; i++)
        assert_true(hw_wait_point_is_loop(&wp, LOOP_SITE, LOOP_SP));
}

static void test_busy_polling_loop_is_its_own_wait(void **state)
{
    (void)state;
    hw_wait_point wp;
    memset(&wp, 0, sizeof wp);
    for (int i = 0; i < 1000; i++)
        assert_true(hw_wait_point_is_loop(&wp, LOOP_SITE, LOOP_SP));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_wait_counts_until_one_repeats),
        cmocka_unit_test(test_nested_wait_is_work_once_the_loop_is_known),
        cmocka_unit_test(test_same_site_deeper_is_nested),
        cmocka_unit_test(test_nested_wait_repeating_first_cannot_lock_the_level),
        cmocka_unit_test(test_one_off_shallow_wait_at_start_does_not_fool_it),
        cmocka_unit_test(test_busy_polling_loop_is_its_own_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
