/*
 * test_frame_gap.c - the frame-gap detector: a tick a threshold or more
 * after the previous one is late; the agent's emulated display link runs a
 * tick only when the loop waits or has turned over, so a stall is known
 * only when it is over, with the gap it left; 1.9 s is not a hang at 2 s,
 * 2.1 s is.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "core/frame_gap.h"

#define MS 1000000ull
#define T (2000 * MS)
#define FRAME HW_FRAME_INTERVAL_DEFAULT_NS

static void test_tick_gaps(void **state)
{
    (void)state;
    uint64_t last = 0;
    assert_int_equal(hw_frame_tick(&last, 100 * MS, T), 0); /* the first tick has no gap */
    assert_int_equal(hw_frame_tick(&last, 117 * MS, T), 0);
    assert_int_equal(hw_frame_tick(&last, 117 * MS + T - 1, T), 0);
    assert_int_equal(hw_frame_tick(&last, 117 * MS + T - 1 + T, T), T);
    assert_int_equal(last, 117 * MS + 2 * T - 1);
}

static hw_loop_reading reading(uint64_t seq, uint64_t busy_start_ns)
{
    hw_loop_reading r = {.seq = seq, .busy = (seq & 1) != 0, .activity = 0, .busy_start_ns = busy_start_ns};
    return r;
}

/* Emulate a loop that stalls in one stretch from `start` for `len`, looked
 * at every frame; returns the late gaps seen (count) and the first one. */
static unsigned run_stall(uint64_t start, uint64_t len, uint64_t *first_gap, uint64_t *seen_at)
{
    hw_frame_gap f;
    hw_frame_gap_init(&f, T);
    unsigned late = 0;
    uint64_t seq = 2;
    for (uint64_t now = 0; now < start + len + 500 * MS; now += FRAME) {
        bool stalled = now >= start && now < start + len;
        if (stalled && (seq & 1) == 0)
            seq++; /* the stall begins */
        if (!stalled && (seq & 1) == 1)
            seq++; /* it ended: back in the wait */
        hw_loop_reading r = reading(seq, start);
        uint64_t gap = hw_frame_gap_look(&f, &r, now);
        if (gap && late++ == 0) {
            *first_gap = gap;
            *seen_at = now;
        }
    }
    return late;
}

static void test_a_stall_is_seen_after_it_ends(void **state)
{
    (void)state;
    uint64_t gap = 0, at = 0;
    assert_int_equal(run_stall(1000 * MS, 3000 * MS, &gap, &at), 1);
    assert_true(at >= 4000 * MS); /* only once it was over */
    assert_true(gap >= 3000 * MS && gap <= 3000 * MS + 2 * FRAME);
}

static void test_threshold_edges(void **state)
{
    (void)state;
    uint64_t gap = 0, at = 0;
    assert_int_equal(run_stall(1000 * MS, 1900 * MS, &gap, &at), 0);
    assert_int_equal(run_stall(1000 * MS, 2100 * MS, &gap, &at), 1);
}

static void test_a_busy_loop_that_turns_over_gets_its_ticks(void **state)
{
    (void)state;
    hw_frame_gap f;
    hw_frame_gap_init(&f, T);
    /* busy at every look, but a new stretch each time: never late */
    for (uint64_t i = 0; i < 1000; i++) {
        hw_loop_reading r = reading(2 * i + 1, i * FRAME - FRAME / 2);
        assert_int_equal(hw_frame_gap_look(&f, &r, i * FRAME), 0);
    }
}

/* Looked at just after the stall began (busy, new stretch): the tick ran as
 * the stall began, and the late one measures the whole stall, not less. */
static void test_a_stall_seen_as_it_begins_is_measured_whole(void **state)
{
    (void)state;
    hw_frame_gap f;
    hw_frame_gap_init(&f, T);
    hw_loop_reading idle = reading(2, 0);
    assert_int_equal(hw_frame_gap_look(&f, &idle, 1000 * MS), 0);
    hw_loop_reading stall = reading(3, 1010 * MS); /* began 6 ms before the look */
    assert_int_equal(hw_frame_gap_look(&f, &stall, 1016 * MS), 0);
    for (uint64_t t = 1016 * MS + FRAME; t < 4010 * MS; t += FRAME)
        assert_int_equal(hw_frame_gap_look(&f, &stall, t), 0);
    hw_loop_reading after = reading(4, 0);
    uint64_t gap = hw_frame_gap_look(&f, &after, 4015 * MS);
    assert_true(gap >= 3000 * MS && gap <= 3000 * MS + FRAME);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tick_gaps),
        cmocka_unit_test(test_a_stall_is_seen_after_it_ends),
        cmocka_unit_test(test_threshold_edges),
        cmocka_unit_test(test_a_busy_loop_that_turns_over_gets_its_ticks),
        cmocka_unit_test(test_a_stall_seen_as_it_begins_is_measured_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
