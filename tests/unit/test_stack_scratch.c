/*
 * test_stack_scratch.c - the capturing thread's kept stack buffers
 * (src/agent/capture/stack_scratch.c): a buffer given back is lent again
 * without a new allocation, what was read into it comes back whole in a
 * buffer of its own, the hung thread's size keeps its slot whatever the
 * other threads take, and a capture that asks for more than is kept still
 * gets buffers with their pages in.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/capture/stack_scratch.h"

#define BIG (512u << 10)
#define SMALL (64u << 10)

static void test_reused_and_copied_out(void **state)
{
    (void)state;
    bool kept = false;
    unsigned char *buf = hw_stack_scratch_take(BIG, &kept);
    assert_non_null(buf);
    assert_true(kept);
    for (size_t i = 0; i < 5000; i++)
        buf[i] = (unsigned char)(i * 7);
    unsigned char *copy = hw_stack_scratch_give_back(buf, 5000);
    assert_non_null(copy);
    assert_ptr_not_equal(copy, buf);
    for (size_t i = 0; i < 5000; i++)
        assert_int_equal(copy[i], (unsigned char)(i * 7));
    free(copy);
    /* the same buffer, lent again */
    unsigned char *again = hw_stack_scratch_take(BIG, &kept);
    assert_ptr_equal(again, buf);
    assert_true(kept);
    /* lent: a second one of that size is a new buffer, not kept */
    bool second_kept = true;
    unsigned char *second = hw_stack_scratch_take(BIG, &second_kept);
    assert_non_null(second);
    assert_false(second_kept);
    free(second);
    assert_null(hw_stack_scratch_give_back(again, 0)); /* nothing read: no copy */
    hw_stack_scratch_release_all();
}

static void test_big_slot_kept_beside_many_small(void **state)
{
    (void)state;
    unsigned char *small[HW_STACK_SCRATCH_SLOTS + 2];
    bool kept[HW_STACK_SCRATCH_SLOTS + 2];
    size_t kept_count = 0;
    for (size_t i = 0; i < HW_STACK_SCRATCH_SLOTS + 2; i++) {
        small[i] = hw_stack_scratch_take(SMALL, &kept[i]);
        assert_non_null(small[i]);
        kept_count += kept[i];
    }
    assert_int_equal(kept_count, HW_STACK_SCRATCH_SLOTS - 1); /* every slot but the big one */
    bool big_kept = false;
    unsigned char *big = hw_stack_scratch_take(BIG, &big_kept);
    assert_non_null(big);
    assert_true(big_kept);
    for (size_t i = 0; i < HW_STACK_SCRATCH_SLOTS + 2; i++) {
        if (kept[i])
            free(hw_stack_scratch_give_back(small[i], 16));
        else
            free(small[i]);
    }
    free(hw_stack_scratch_give_back(big, 16));
    hw_stack_scratch_release_all();
    /* a pointer that was never lent is not taken for one */
    unsigned char other[8];
    assert_null(hw_stack_scratch_give_back(other, 8));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reused_and_copied_out),
        cmocka_unit_test(test_big_slot_kept_beside_many_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
