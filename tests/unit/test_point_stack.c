/*
 * test_point_stack.c - Matrix's early-sampling ring and Point Stack choice,
 * with the worked examples of seeds/000 and seeds/004.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "core/point_stack.h"
#include "core/ring_stacks.h"

#define CAP 20
static hw_sample g_samples[CAP];
static size_t g_repeat[CAP];

static void init(hw_sample_ring *ring, size_t capacity)
{
    hw_ring_init(ring, g_samples, g_repeat, capacity);
}

/* A sample whose top address is `top` over a fixed caller chain. */
static void add_top(hw_sample_ring *ring, uint64_t top)
{
    uint64_t pcs[3] = {top, 0x2000, 0x3000};
    hw_ring_add(ring, pcs, 3, top, 0);
}

static void test_seed000_longest_run_newest_on_tie(void **state)
{
    (void)state;
    /* order 1..9: A A A B A B B B A; counts 0 1 2 0 0 0 1 2 0 -> the 8th. */
    const uint64_t A = 0xA, B = 0xB;
    const uint64_t tops[] = {A, A, A, B, A, B, B, B, A};
    const size_t counts[] = {0, 1, 2, 0, 0, 0, 1, 2, 0};
    hw_sample_ring ring;
    init(&ring, CAP);
    for (size_t i = 0; i < 9; i++)
        add_top(&ring, tops[i]);
    for (size_t i = 0; i < 9; i++)
        assert_int_equal(hw_ring_repeat_at(&ring, i), counts[i]);
    long chosen = hw_ring_point_stack(&ring);
    assert_int_equal(chosen, 7); /* the 8th sample */
    assert_int_equal(hw_ring_at(&ring, (size_t)chosen)->pcs[0], B);
}

static void test_seed004_run_of_c(void **state)
{
    (void)state;
    /* A B C C C C C D D -> repeats 0 0 0 1 2 3 4 0 1 -> index 6. */
    const uint64_t tops[] = {0xA, 0xB, 0xC, 0xC, 0xC, 0xC, 0xC, 0xD, 0xD};
    const size_t counts[] = {0, 0, 0, 1, 2, 3, 4, 0, 1};
    hw_sample_ring ring;
    init(&ring, CAP);
    for (size_t i = 0; i < 9; i++)
        add_top(&ring, tops[i]);
    for (size_t i = 0; i < 9; i++)
        assert_int_equal(hw_ring_repeat_at(&ring, i), counts[i]);
    assert_int_equal(hw_ring_point_stack(&ring), 6);
}

static void test_seed004_short_example(void **state)
{
    (void)state;
    /* A A A B B -> 0 1 2 0 1 -> index 2. */
    hw_sample_ring ring;
    init(&ring, 5);
    const uint64_t tops[] = {0xA, 0xA, 0xA, 0xB, 0xB};
    for (size_t i = 0; i < 5; i++)
        add_top(&ring, tops[i]);
    assert_int_equal(hw_ring_point_stack(&ring), 2);
}

static void test_seed004_repeat_count_table(void **state)
{
    (void)state;
    /* Four stacks, the Point Stack is index 2: counts 4, 4, 3. */
    const uint64_t s0[] = {0x1000, 0x2000, 0x3000, 0x4000};
    const uint64_t s1[] = {0x1000, 0x2000, 0x3000, 0x5000};
    const uint64_t s2[] = {0x1000, 0x2000, 0x3000};
    const uint64_t s3[] = {0x1000, 0x2000, 0x4000, 0x6000};
    hw_sample_ring ring;
    init(&ring, CAP);
    hw_ring_add(&ring, s0, 4, s0[0], 0);
    hw_ring_add(&ring, s1, 4, s1[0], 0);
    hw_ring_add(&ring, s2, 3, s2[0], 0);
    hw_ring_add(&ring, s3, 4, s3[0], 0);
    unsigned counts[3];
    hw_ring_repeat_counts(&ring, 2, counts);
    assert_int_equal(counts[0], 4);
    assert_int_equal(counts[1], 4);
    assert_int_equal(counts[2], 3);
}

static void test_ring_overwrites_oldest(void **state)
{
    (void)state;
    /* Capacity 5, as the seed's ring picture: S5 overwrites S0. */
    hw_sample_ring ring;
    init(&ring, 5);
    for (uint64_t i = 0; i < 6; i++) {
        uint64_t pcs[1] = {0x100 + i};
        hw_ring_add(&ring, pcs, 1, pcs[0], i);
    }
    assert_int_equal(ring.count, 5);
    assert_int_equal(hw_ring_at(&ring, 0)->time_ns, 1); /* S1 is now the oldest */
    assert_int_equal(hw_ring_at(&ring, 4)->time_ns, 5); /* S5 the newest */
    assert_null(hw_ring_at(&ring, 5));
    /* All tops differ: every run is 0, so the newest is chosen. */
    assert_int_equal(hw_ring_point_stack(&ring), 4);
}

static void test_run_continues_across_the_wrap(void **state)
{
    (void)state;
    hw_sample_ring ring;
    init(&ring, 4);
    for (int i = 0; i < 7; i++)
        add_top(&ring, 0xA);
    assert_int_equal(hw_ring_repeat_at(&ring, 3), 6);
    assert_int_equal(hw_ring_point_stack(&ring), 3);
}

static void test_empty_ring_and_clear(void **state)
{
    (void)state;
    hw_sample_ring ring;
    init(&ring, CAP);
    assert_int_equal(hw_ring_point_stack(&ring), -1);
    add_top(&ring, 0xA);
    add_top(&ring, 0xA);
    hw_ring_clear(&ring);
    assert_int_equal(hw_ring_point_stack(&ring), -1);
    add_top(&ring, 0xA); /* a run does not survive a clear */
    assert_int_equal(hw_ring_repeat_at(&ring, 0), 0);
}

static void test_function_keys_make_a_spin_a_run(void **state)
{
    (void)state;
    /* Different pcs in one function (key 0x50): a run of 3 with keys, none
     * with raw top addresses. */
    hw_sample_ring ring;
    init(&ring, CAP);
    const uint64_t pcs[][2] = {{0x51, 0x900}, {0x57, 0x900}, {0x5c, 0x900}, {0x53, 0x900}};
    for (size_t i = 0; i < 4; i++)
        hw_ring_add(&ring, pcs[i], 2, 0x50, 0);
    assert_int_equal(hw_ring_repeat_at(&ring, 3), 3);
    hw_ring_clear(&ring);
    for (size_t i = 0; i < 4; i++)
        hw_ring_add(&ring, pcs[i], 2, pcs[i][0], 0);
    assert_int_equal(hw_ring_repeat_at(&ring, 3), 0);
}

static void test_depth_is_capped(void **state)
{
    (void)state;
    static uint64_t deep[HW_SAMPLE_MAX_FRAMES + 10];
    for (size_t i = 0; i < sizeof deep / sizeof deep[0]; i++)
        deep[i] = i + 1;
    hw_sample_ring ring;
    init(&ring, CAP);
    hw_ring_add(&ring, deep, sizeof deep / sizeof deep[0], deep[0], 0);
    assert_int_equal(hw_ring_at(&ring, 0)->depth, HW_SAMPLE_MAX_FRAMES);
}

/* ---- every sample as distinct stacks (ring_stacks.h) ---- */

static void add_stack(hw_sample_ring *ring, const uint64_t *pcs, size_t depth)
{
    hw_ring_add(ring, pcs, depth, pcs[0], 0);
}

static void test_ring_stacks_count_distinct_stacks(void **state)
{
    (void)state;
    /* A spin: its pc moves (0x11, 0x12), the callers stay; one sleep. */
    const uint64_t spin1[] = {0x11, 0x2000, 0x3000}, spin2[] = {0x12, 0x2000, 0x3000};
    const uint64_t sleep[] = {0x2000, 0x2500, 0x3000, 0x4000};
    hw_sample_ring ring;
    init(&ring, CAP);
    add_stack(&ring, spin1, 3);
    add_stack(&ring, spin2, 3);
    add_stack(&ring, spin1, 3);
    add_stack(&ring, sleep, 4);
    add_stack(&ring, spin1, 3);
    hw_ring_stacks rs;
    assert_int_equal(hw_ring_stacks_of(&ring, 1, 16, &rs), 0);
    assert_int_equal(rs.stack_count, 3);
    assert_int_equal(rs.left_out, 0);
    /* the most frequent first, then the older */
    assert_int_equal(rs.stacks[0].count, 3);
    assert_int_equal(rs.stacks[1].count, 1);
    assert_int_equal(rs.stacks[2].count, 1);
    assert_true(rs.stacks[1].depth == 3 && rs.stacks[2].depth == 4);
    assert_true(!rs.stacks[0].point_stack && rs.stacks[1].point_stack && !rs.stacks[2].point_stack);
    /* 0x2000 is innermost in one stack and a return address in others:
     * two entries; 0x11, 0x12, 0x2000 x2, 0x2500, 0x3000, 0x4000 */
    assert_int_equal(rs.addr_count, 7);
    assert_true(hw_ring_stacks_find(&rs, 0x2000, true) >= 0 && hw_ring_stacks_find(&rs, 0x2000, false) >= 0);
    assert_int_equal(hw_ring_stacks_find(&rs, 0x11, false), -1);
    for (size_t s = 0; s < rs.stack_count; s++) {
        const uint64_t *want = s == 0 ? spin1 : s == 1 ? spin2 : sleep;
        for (size_t k = 0; k < rs.stacks[s].depth; k++) {
            const hw_ring_addr *a = &rs.addrs[rs.frames[rs.stacks[s].first + k]];
            assert_int_equal(a->pc, want[k]);
            assert_int_equal(a->innermost, k == 0);
        }
    }
    assert_int_equal(rs.frame_count, 10);
    hw_ring_stacks_free(&rs);
}

static void test_ring_stacks_bounded(void **state)
{
    (void)state;
    hw_sample_ring ring;
    init(&ring, CAP);
    for (uint64_t i = 0; i < 12; i++) {
        uint64_t pcs[2] = {0x100 + i % 5, 0x9000};
        add_stack(&ring, pcs, 2);
    }
    hw_ring_add(&ring, NULL, 0, 0, 0); /* a sample without a frame */
    hw_ring_stacks rs;
    assert_int_equal(hw_ring_stacks_of(&ring, -1, 2, &rs), 0);
    /* 0x100 and 0x101 three times each, the others twice */
    assert_int_equal(rs.stack_count, 2);
    assert_int_equal(rs.stacks[0].count + rs.stacks[1].count, 6);
    assert_int_equal(rs.left_out, 7);
    assert_int_equal(rs.addrs[rs.frames[rs.stacks[0].first]].pc, 0x100);
    assert_int_equal(rs.addrs[rs.frames[rs.stacks[1].first]].pc, 0x101);
    hw_ring_stacks_free(&rs);

    hw_ring_clear(&ring);
    assert_int_equal(hw_ring_stacks_of(&ring, -1, 2, &rs), 0);
    assert_int_equal(rs.stack_count, 0);
    assert_int_equal(rs.addr_count, 0);
    hw_ring_stacks_free(&rs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed000_longest_run_newest_on_tie),
        cmocka_unit_test(test_seed004_run_of_c),
        cmocka_unit_test(test_seed004_short_example),
        cmocka_unit_test(test_seed004_repeat_count_table),
        cmocka_unit_test(test_ring_overwrites_oldest),
        cmocka_unit_test(test_run_continues_across_the_wrap),
        cmocka_unit_test(test_empty_ring_and_clear),
        cmocka_unit_test(test_function_keys_make_a_spin_a_run),
        cmocka_unit_test(test_depth_is_capped),
        cmocka_unit_test(test_ring_stacks_count_distinct_stacks),
        cmocka_unit_test(test_ring_stacks_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
