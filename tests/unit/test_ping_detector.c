/*
 * test_ping_detector.c - the sub-thread ping (ANREye): one ping per
 * threshold, a ping unanswered after the threshold is one hang however long
 * the loop stays stuck, the late answer ends it and the next ping follows,
 * and the seeds' flaws: a stall pinged late is measured from the post, so
 * 800 ms + 1.7 s goes unseen.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "core/ping_detector.h"

#define MS 1000000ull
#define T (2000 * MS)

static void test_answered_pings_repeat_every_threshold(void **state)
{
    (void)state;
    hw_ping_detector d;
    hw_ping_init(&d, T, 0);
    hw_ping_step_result r = hw_ping_step(&d, 0, false, true);
    assert_true(r.post);
    assert_int_equal(d.token, 1);
    assert_int_equal(d.next_ns, T);
    /* answered at once, seen early: the sleep still runs out */
    r = hw_ping_step(&d, 5 * MS, true, true);
    assert_false(r.post);
    assert_false(r.missed);
    assert_int_equal(d.next_ns, T);
    r = hw_ping_step(&d, T, false, true); /* nothing outstanding: post */
    assert_true(r.post);
    assert_int_equal(d.token, 2);
    /* answered and only seen at the deadline: the next ping goes at once */
    r = hw_ping_step(&d, 2 * T, true, true);
    assert_true(r.post);
    assert_false(r.missed);
    assert_int_equal(d.token, 3);
}

static void test_a_long_stall_is_one_miss_then_a_late_answer(void **state)
{
    (void)state;
    hw_ping_detector d;
    hw_ping_init(&d, T, 0);
    hw_ping_step(&d, 0, false, true);
    hw_ping_step_result r = hw_ping_step(&d, T, false, true);
    assert_true(r.missed);
    assert_false(r.post);
    assert_int_equal(r.waited_ns, T);
    assert_int_equal(d.next_ns, T + d.answer_poll_ns);
    for (uint64_t t = T + 10 * MS; t < 3 * T; t += 10 * MS) {
        r = hw_ping_step(&d, t, false, true);
        assert_false(r.missed); /* reported once */
        assert_false(r.post);   /* and no new ping while the old one waits */
    }
    r = hw_ping_step(&d, 3 * T, true, true);
    assert_true(r.answered_late);
    assert_int_equal(r.waited_ns, 3 * T);
    assert_true(r.post);
    assert_int_equal(d.token, 2);
}

/* seeds/000: "If the main thread has already been busy for 800ms before Ping
 * is sent, Ping does not count the previous 800ms." */
static void test_a_stall_pinged_late_is_measured_from_the_post(void **state)
{
    (void)state;
    hw_ping_detector d;
    hw_ping_init(&d, T, 0);
    /* the stall runs from 0 to 2500 ms; the ping is posted at 800 ms */
    hw_ping_step(&d, 800 * MS, false, true);
    hw_ping_step_result r = hw_ping_step(&d, 2500 * MS, true, true); /* answered when it ends */
    assert_false(r.missed);
    assert_false(r.answered_late);
    r = hw_ping_step(&d, 2800 * MS, false, true);
    assert_false(r.missed);
    assert_true(r.post);
}

static void test_may_post_holds_the_next_ping_back(void **state)
{
    (void)state;
    hw_ping_detector d;
    hw_ping_init(&d, T, 0);
    hw_ping_step_result r = hw_ping_step(&d, 0, false, false);
    assert_false(r.post);
    assert_int_equal(d.token, 0);
    assert_int_equal(d.next_ns, d.answer_poll_ns);
    r = hw_ping_step(&d, 30 * MS, false, true);
    assert_true(r.post);
    assert_int_equal(d.posted_ns, 30 * MS);
}

/* Looked at more often than the sleep (the semaphore detector looks every
 * 50 ms): still one ping per threshold. */
static void test_early_looks_do_not_post(void **state)
{
    (void)state;
    hw_ping_detector d;
    hw_ping_init(&d, T, 0);
    unsigned posts = 0;
    for (uint64_t t = 0; t < 10 * T; t += 50 * MS) {
        hw_ping_step_result r = hw_ping_step(&d, t, true, true);
        posts += r.post;
        assert_false(r.missed);
    }
    assert_int_equal(posts, 10);
}

/* Found by fuzz_page: with a timeout near 2^64 ns (--threshold takes it),
 * posted + timeout wrapped, so every ping was missed at its first look and
 * the next step was scheduled in the past. */
static void test_huge_timeout_never_wraps(void **state)
{
    (void)state;
    hw_ping_detector d;
    hw_ping_init(&d, UINT64_MAX - 3, 50 * MS);
    hw_ping_step_result r = hw_ping_step(&d, 50 * MS, false, true);
    assert_true(r.post);
    assert_true(d.next_ns > 50 * MS);
    r = hw_ping_step(&d, 100000 * T, false, true);
    assert_false(r.missed);
    assert_false(r.post);
    assert_true(d.next_ns > 100000 * T);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answered_pings_repeat_every_threshold),
        cmocka_unit_test(test_a_long_stall_is_one_miss_then_a_late_answer),
        cmocka_unit_test(test_a_stall_pinged_late_is_measured_from_the_post),
        cmocka_unit_test(test_may_post_holds_the_next_ping_back),
        cmocka_unit_test(test_early_looks_do_not_post),
        cmocka_unit_test(test_huge_timeout_never_wraps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
