/*
 * test_detector.c - Matrix's hang condition and the two check schedules,
 * driven by a fake clock: exactly at the threshold is no hang, one
 * nanosecond over is; idle never reports; one report per busy stretch;
 * exact mode wakes at start + threshold; periodic keeps its phase; a
 * stretch over by a look that came late past its threshold is said.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "core/detector.h"

#define MS 1000000ull
#define S 1000000000ull

static hw_loop_reading busy_since(uint64_t seq, uint64_t start)
{
    hw_loop_reading r = {.seq = seq, .busy_start_ns = start, .activity = HW_ACTIVITY_AFTER_WAITING, .busy = true};
    return r;
}

static hw_loop_reading idle_at(uint64_t seq)
{
    hw_loop_reading r = {.seq = seq, .busy_start_ns = 0, .activity = HW_ACTIVITY_BEFORE_WAITING, .busy = false};
    return r;
}

static hw_detector_config config(hw_check_mode mode)
{
    hw_detector_config c;
    hw_detector_config_default(&c);
    c.mode = mode;
    return c;
}

static void test_defaults_are_matrix(void **state)
{
    (void)state;
    hw_detector_config c;
    hw_detector_config_default(&c);
    assert_int_equal(c.threshold_ns, 2 * S);
    assert_int_equal(c.check_period_ns, 1 * S);
    assert_int_equal(c.mode, HW_CHECK_EXACT);
}

static void test_exactly_at_threshold_is_not_a_hang(void **state)
{
    (void)state;
    hw_detector_config c = config(HW_CHECK_PERIODIC);
    hw_loop_reading r = busy_since(3, 10 * S);
    uint64_t busy;
    assert_false(hw_is_hung(&c, &r, 12 * S, &busy));
    assert_int_equal(busy, 2 * S);
    assert_true(hw_is_hung(&c, &r, 12 * S + 1, &busy));
    assert_int_equal(busy, 2 * S + 1);
}

static void test_clock_slack_delays_the_verdict(void **state)
{
    (void)state;
    hw_detector_config c = config(HW_CHECK_EXACT);
    c.clock_slack_ns = 4 * MS;
    hw_loop_reading r = busy_since(3, 10 * S);
    assert_false(hw_is_hung(&c, &r, 12 * S + 4 * MS, NULL));
    assert_true(hw_is_hung(&c, &r, 12 * S + 4 * MS + 1, NULL));
}

static void test_idle_never_reports(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        hw_detector d;
        hw_detector_config c = config((hw_check_mode)mode);
        hw_detector_init(&d, &c, 0);
        hw_loop_reading r = idle_at(4);
        for (uint64_t t = 0; t < 1000 * S; t += 7 * S) {
            hw_check k = hw_detector_check(&d, &r, t);
            assert_int_equal(k.verdict, HW_VERDICT_IDLE);
        }
        /* A stale start left over from an old stretch means nothing. */
        r.busy_start_ns = 1;
        assert_false(hw_is_hung(&c, &r, 900 * S, NULL));
    }
}

static void test_one_report_per_stretch(void **state)
{
    (void)state;
    hw_detector d;
    hw_detector_config c = config(HW_CHECK_PERIODIC);
    hw_detector_init(&d, &c, 0);
    hw_loop_reading r = busy_since(7, 0);
    assert_int_equal(hw_detector_check(&d, &r, 1 * S).verdict, HW_VERDICT_BUSY);
    assert_int_equal(hw_detector_check(&d, &r, 2 * S).verdict, HW_VERDICT_BUSY);
    hw_check k = hw_detector_check(&d, &r, 3 * S);
    assert_int_equal(k.verdict, HW_VERDICT_HANG);
    assert_int_equal(k.busy_ns, 3 * S);
    assert_int_equal(k.seq, 7);
    assert_int_equal(hw_detector_check(&d, &r, 4 * S).verdict, HW_VERDICT_STILL_HUNG);

    /* The loop waits again: the hang is over. */
    hw_loop_reading w = idle_at(8);
    k = hw_detector_check(&d, &w, 5 * S);
    assert_int_equal(k.verdict, HW_VERDICT_IDLE);
    assert_true(k.hang_ended);
    assert_int_equal(k.ended_seq, 7);

    /* A new long stretch is a new hang. */
    hw_loop_reading r2 = busy_since(9, 5 * S);
    k = hw_detector_check(&d, &r2, 8 * S);
    assert_int_equal(k.verdict, HW_VERDICT_HANG);
    assert_false(k.hang_ended);
}

static void test_new_stretch_after_hang_is_seen_as_ended(void **state)
{
    (void)state;
    hw_detector d;
    hw_detector_config c = config(HW_CHECK_PERIODIC);
    hw_detector_init(&d, &c, 0);
    hw_loop_reading r = busy_since(1, 0);
    assert_int_equal(hw_detector_check(&d, &r, 3 * S).verdict, HW_VERDICT_HANG);
    /* Between two checks the loop waited once and is busy again (short). */
    hw_loop_reading r2 = busy_since(3, 3500 * MS);
    hw_check k = hw_detector_check(&d, &r2, 4 * S);
    assert_true(k.hang_ended);
    assert_int_equal(k.verdict, HW_VERDICT_BUSY);
}

static void test_launch_is_the_first_stretch(void **state)
{
    (void)state;
    hw_detector d;
    hw_detector_config c = config(HW_CHECK_EXACT);
    hw_detector_init(&d, &c, 0);
    hw_loop_reading r = busy_since(1, 0);
    hw_check k = hw_detector_check(&d, &r, 3 * S);
    assert_int_equal(k.verdict, HW_VERDICT_HANG);
    assert_true(k.launch);
    hw_loop_reading later = busy_since(5, 10 * S);
    k = hw_detector_check(&d, &later, 13 * S);
    assert_int_equal(k.verdict, HW_VERDICT_HANG);
    assert_false(k.launch);
}

static void test_exact_mode_wakes_at_threshold(void **state)
{
    (void)state;
    hw_detector d;
    hw_detector_config c = config(HW_CHECK_EXACT);
    c.clock_slack_ns = 4 * MS;
    hw_detector_init(&d, &c, 0);
    assert_int_equal(d.next_check_ns, 0);

    /* Idle: look again after the poll interval (half the threshold at most). */
    hw_loop_reading idle = idle_at(2);
    hw_detector_check(&d, &idle, 0);
    assert_int_equal(d.next_check_ns, 1 * S);

    /* Busy since 0.3 s, seen at 1 s: sleep until 0.3 + 2 s + slack, just past. */
    hw_loop_reading r = busy_since(3, 300 * MS);
    hw_check k = hw_detector_check(&d, &r, 1 * S);
    assert_int_equal(k.verdict, HW_VERDICT_BUSY);
    assert_int_equal(d.next_check_ns, 2300 * MS + 4 * MS + 1);
    k = hw_detector_check(&d, &r, d.next_check_ns);
    assert_int_equal(k.verdict, HW_VERDICT_HANG);
    assert_int_equal(k.busy_ns, 2 * S + 4 * MS + 1);
}

static void test_exact_poll_interval_follows_a_short_threshold(void **state)
{
    (void)state;
    hw_detector_config c = config(HW_CHECK_EXACT);
    c.threshold_ns = 500 * MS;
    assert_int_equal(hw_detector_poll_interval(&c), 250 * MS);
    c.threshold_ns = 1 * MS;
    assert_int_equal(hw_detector_poll_interval(&c), 1 * MS);
}

static void test_exact_mode_detects_every_long_stretch_on_time(void **state)
{
    (void)state;
    /* Whatever the phase of a stretch against the polls, the agent must see
     * it before its threshold and wake right after it. */
    for (uint64_t phase = 0; phase < 1000 * MS; phase += 37 * MS) {
        hw_detector d;
        hw_detector_config c = config(HW_CHECK_EXACT);
        hw_detector_init(&d, &c, 0);
        uint64_t start = 5 * S + phase;
        uint64_t detected = 0;
        while (d.next_check_ns < 20 * S) {
            uint64_t t = d.next_check_ns;
            hw_loop_reading r = t < start ? idle_at(2) : busy_since(3, start);
            if (hw_detector_check(&d, &r, t).verdict == HW_VERDICT_HANG) {
                detected = t;
                break;
            }
        }
        assert_int_equal(detected, start + 2 * S + 1);
    }
}

static void test_periodic_mode_keeps_matrix_phase(void **state)
{
    (void)state;
    hw_detector d;
    hw_detector_config c = config(HW_CHECK_PERIODIC);
    hw_detector_init(&d, &c, 0);
    assert_int_equal(d.next_check_ns, 1 * S);
    hw_loop_reading idle = idle_at(2);
    hw_detector_check(&d, &idle, 1 * S + 3 * MS); /* woke a little late */
    assert_int_equal(d.next_check_ns, 2 * S);
    /* A stretch starting at 2.1 s is seen hung only at the 5 s check. */
    hw_loop_reading r = busy_since(3, 2100 * MS);
    uint64_t t = d.next_check_ns;
    hw_verdict v;
    while ((v = hw_detector_check(&d, &r, t).verdict) != HW_VERDICT_HANG)
        t = d.next_check_ns;
    assert_int_equal(t, 5 * S);
    /* Far behind (agent descheduled): start again from now. */
    hw_detector_check(&d, &idle, 60 * S);
    assert_int_equal(d.next_check_ns, 61 * S);
}

static void test_start_in_the_future_is_not_trusted(void **state)
{
    (void)state;
    hw_detector d;
    hw_detector_config c = config(HW_CHECK_EXACT);
    hw_detector_init(&d, &c, 0);
    hw_loop_reading r = busy_since(3, 500 * S);
    hw_check k = hw_detector_check(&d, &r, 10 * S);
    assert_int_equal(k.verdict, HW_VERDICT_BUSY);
    assert_int_equal(k.busy_ns, 0);
    assert_int_equal(d.next_check_ns, 12 * S + 1);
}

/* Found by fuzz_page: the command line takes any duration up to 2^64 - 1 ns,
 * and threshold + slack or now + threshold used to wrap around, so a
 * threshold of centuries made every stretch a hang at once and the next
 * look land in the past.  Deadlines now saturate: centuries mean never. */
static void test_huge_threshold_and_period_never_wrap(void **state)
{
    (void)state;
    for (int mode = HW_CHECK_EXACT; mode <= HW_CHECK_PERIODIC; mode++) {
        hw_detector d;
        hw_detector_config c = config((hw_check_mode)mode);
        c.threshold_ns = UINT64_MAX - 5;
        c.check_period_ns = UINT64_MAX - 7;
        c.clock_slack_ns = 4 * MS;
        hw_detector_init(&d, &c, 100 * S);
        assert_true(d.next_check_ns >= 100 * S);
        hw_loop_reading r = busy_since(3, 1 * S);
        hw_check k = hw_detector_check(&d, &r, 105 * S); /* on time: no suspend restart */
        assert_int_equal(k.verdict, HW_VERDICT_BUSY);
        assert_int_equal(k.busy_ns, 104 * S);
        assert_true(d.next_check_ns > 105 * S);
        hw_loop_reading idle = idle_at(4);
        assert_int_equal(hw_detector_check(&d, &idle, 7200 * S).verdict, HW_VERDICT_IDLE);
        assert_true(d.next_check_ns > 7200 * S);
    }
}

static void test_late_check_restarts_the_clock(void **state)
{
    (void)state;
    /* Matrix: a round that took > 10 s (suspend, agent descheduled) restarts
     * the busy clock instead of reporting. */
    hw_detector d;
    hw_detector_config c = config(HW_CHECK_PERIODIC);
    hw_detector_init(&d, &c, 0);
    hw_loop_reading r = busy_since(3, 500 * MS);
    assert_int_equal(hw_detector_check(&d, &r, 1 * S).verdict, HW_VERDICT_BUSY);
    /* Scheduled for 2 s, woken at 20 s: not a hang, the clock restarts. */
    hw_check k = hw_detector_check(&d, &r, 20 * S);
    assert_int_equal(k.verdict, HW_VERDICT_BUSY);
    assert_int_equal(k.busy_start_ns, 20 * S);
    assert_int_equal(k.busy_ns, 0);
    /* The same stretch still busy 2 s later, checked on time: a hang. */
    uint64_t t = d.next_check_ns;
    while ((k = hw_detector_check(&d, &r, t)).verdict != HW_VERDICT_HANG)
        t = d.next_check_ns;
    assert_int_equal(t, 23 * S);
    assert_int_equal(k.busy_ns, 3 * S);
}

static void test_late_by_less_than_ten_seconds_still_reports(void **state)
{
    (void)state;
    hw_detector d;
    hw_detector_config c = config(HW_CHECK_PERIODIC);
    hw_detector_init(&d, &c, 0);
    hw_loop_reading r = busy_since(3, 0);
    hw_check k = hw_detector_check(&d, &r, 1 * S + 9 * S); /* 9 s late */
    assert_int_equal(k.verdict, HW_VERDICT_HANG);
    assert_int_equal(k.busy_ns, 10 * S);
}

static void test_restart_clock_for_a_stopped_process(void **state)
{
    (void)state;
    hw_detector d;
    hw_detector_config c = config(HW_CHECK_EXACT);
    hw_detector_init(&d, &c, 0);
    hw_loop_reading r = busy_since(5, 0);
    assert_int_equal(hw_detector_check(&d, &r, 2 * S + 1).verdict, HW_VERDICT_HANG);
    /* The agent finds the process stopped: not hung, start again. */
    hw_detector_restart_clock(&d, 5, 2 * S + 1);
    hw_check k = hw_detector_check(&d, &r, 3 * S);
    assert_int_equal(k.verdict, HW_VERDICT_BUSY);
    assert_int_equal(d.next_check_ns, 4 * S + 2);
    assert_int_equal(hw_detector_check(&d, &r, 4 * S + 2).verdict, HW_VERDICT_HANG);
    /* Another stretch is not affected by the restart. */
    hw_loop_reading other = busy_since(7, 10 * S);
    k = hw_detector_check(&d, &other, 12 * S + 1);
    assert_int_equal(k.verdict, HW_VERDICT_HANG);
    assert_int_equal(k.busy_start_ns, 10 * S);
}

static void test_stretch_over_by_a_late_look_is_said(void **state)
{
    (void)state;
    hw_detector d;
    hw_detector_config c = config(HW_CHECK_EXACT);
    hw_detector_init(&d, &c, 0);
    hw_loop_reading r = busy_since(5, 1 * S);
    hw_check k = hw_detector_check(&d, &r, 1 * S + 100 * MS);
    assert_int_equal(k.verdict, HW_VERDICT_BUSY);
    assert_false(k.ended_unseen);
    assert_int_equal(d.next_check_ns, 3 * S + 1);
    /* The look due at 3 s comes at 3.6 s and finds the loop waiting: the
     * stretch lasted 0.1 to 2.6 s, and a look on time might have caught it. */
    hw_loop_reading w = idle_at(6);
    k = hw_detector_check(&d, &w, 3 * S + 600 * MS);
    assert_int_equal(k.verdict, HW_VERDICT_IDLE);
    assert_true(k.ended_unseen);
    assert_int_equal(k.unseen_seq, 5);
    assert_int_equal(k.unseen_min_ns, 100 * MS);
    assert_int_equal(k.unseen_max_ns, 2 * S + 600 * MS);
    assert_int_equal(k.unseen_late_ns, 600 * MS);
    /* Said once. */
    assert_false(hw_detector_check(&d, &w, 4 * S).ended_unseen);
    /* Also when the next look finds the next stretch already busy. */
    hw_loop_reading next = busy_since(9, 5 * S);
    assert_int_equal(hw_detector_check(&d, &next, 5 * S + 1).verdict, HW_VERDICT_BUSY);
    hw_loop_reading after = busy_since(11, 8 * S);
    k = hw_detector_check(&d, &after, 8 * S + 100 * MS);
    assert_true(k.ended_unseen);
    assert_int_equal(k.unseen_seq, 9);
    assert_int_equal(k.verdict, HW_VERDICT_BUSY);
}

static void test_stretch_over_by_a_timely_look_is_not_said(void **state)
{
    (void)state;
    hw_detector d;
    hw_detector_config c = config(HW_CHECK_EXACT);
    hw_detector_init(&d, &c, 0);
    hw_loop_reading r = busy_since(5, 0);
    assert_int_equal(hw_detector_check(&d, &r, 1 * S).verdict, HW_VERDICT_BUSY);
    /* At its threshold, up to HW_LATE_LOOK_NS late: ended before it, or so
     * little after that it is no hang worth the word. */
    hw_loop_reading w = idle_at(6);
    assert_false(hw_detector_check(&d, &w, 2 * S + HW_LATE_LOOK_NS).ended_unseen);
    /* A hang seen is no unseen end either. */
    hw_loop_reading h = busy_since(7, 3 * S);
    assert_int_equal(hw_detector_check(&d, &h, 3 * S + 1).verdict, HW_VERDICT_BUSY);
    assert_int_equal(hw_detector_check(&d, &h, 5 * S + 1).verdict, HW_VERDICT_HANG);
    hw_loop_reading w8 = idle_at(8);
    hw_check k = hw_detector_check(&d, &w8, 9 * S);
    assert_true(k.hang_ended);
    assert_false(k.ended_unseen);
    /* Nor one whose clock restarted (the process was stopped) and that
     * ended before its new threshold. */
    hw_loop_reading s = busy_since(9, 10 * S);
    assert_int_equal(hw_detector_check(&d, &s, 10 * S + 1).verdict, HW_VERDICT_BUSY);
    hw_detector_restart_clock(&d, 9, 11 * S);
    hw_loop_reading w10 = idle_at(10);
    assert_false(hw_detector_check(&d, &w10, 13 * S).ended_unseen);
    /* Nor a whole stretch between two looks at a waiting loop on time. */
    hw_loop_reading w12 = idle_at(12);
    assert_false(hw_detector_check(&d, &w12, 14 * S).ended_unseen);
}

static void test_stretch_begun_and_over_between_late_looks_is_said(void **state)
{
    (void)state;
    hw_detector d;
    hw_detector_config c = config(HW_CHECK_EXACT);
    hw_detector_init(&d, &c, 0);
    hw_loop_reading w = idle_at(4);
    assert_int_equal(hw_detector_check(&d, &w, 1 * S).verdict, HW_VERDICT_IDLE);
    /* The next look, due at 2 s, comes at 4 s: stretch 5 began and ended
     * meanwhile, up to 3 s long. */
    hw_loop_reading later = idle_at(6);
    hw_check k = hw_detector_check(&d, &later, 4 * S);
    assert_true(k.ended_unseen);
    assert_int_equal(k.unseen_seq, 5);
    assert_int_equal(k.unseen_min_ns, 0);
    assert_int_equal(k.unseen_max_ns, 3 * S);
    assert_int_equal(k.unseen_late_ns, 1 * S);
    /* From a busy look: the stretch seen is said, with what is known of it. */
    hw_loop_reading b = busy_since(7, 4 * S + 500 * MS);
    assert_int_equal(hw_detector_check(&d, &b, 4 * S + 600 * MS).verdict, HW_VERDICT_BUSY);
    hw_loop_reading busy_again = busy_since(11, 9 * S);
    k = hw_detector_check(&d, &busy_again, 9 * S + 1);
    assert_true(k.ended_unseen);
    assert_int_equal(k.unseen_seq, 7);
    assert_int_equal(k.unseen_min_ns, 100 * MS);
    /* A loop turning too fast to read for longer than the threshold is no
     * late look: each failed read says it was turning then. */
    hw_loop_reading w12 = idle_at(12);
    assert_int_equal(hw_detector_check(&d, &w12, 10 * S).verdict, HW_VERDICT_IDLE);
    for (uint64_t t = 10 * S + 100 * MS, seq = 100; t < 14 * S; t += 100 * MS, seq += 1000)
        hw_detector_note_turning(&d, seq, t);
    hw_loop_reading w_late = idle_at(40000);
    assert_false(hw_detector_check(&d, &w_late, 14 * S).ended_unseen);
    /* A page whose number goes backwards (the program's word) is no stretch. */
    hw_loop_reading back = idle_at(2);
    assert_false(hw_detector_check(&d, &back, 20 * S).ended_unseen);
}

static void test_periodic_mode_says_no_unseen_end(void **state)
{
    (void)state;
    /* Matrix's fixed phase misses short hangs by design: not a late look. */
    hw_detector d;
    hw_detector_config c = config(HW_CHECK_PERIODIC);
    hw_detector_init(&d, &c, 0);
    hw_loop_reading r = busy_since(3, 500 * MS);
    assert_int_equal(hw_detector_check(&d, &r, 1 * S).verdict, HW_VERDICT_BUSY);
    hw_loop_reading w = idle_at(4);
    assert_false(hw_detector_check(&d, &w, 5 * S).ended_unseen);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_matrix),
        cmocka_unit_test(test_exactly_at_threshold_is_not_a_hang),
        cmocka_unit_test(test_clock_slack_delays_the_verdict),
        cmocka_unit_test(test_idle_never_reports),
        cmocka_unit_test(test_one_report_per_stretch),
        cmocka_unit_test(test_new_stretch_after_hang_is_seen_as_ended),
        cmocka_unit_test(test_launch_is_the_first_stretch),
        cmocka_unit_test(test_exact_mode_wakes_at_threshold),
        cmocka_unit_test(test_exact_poll_interval_follows_a_short_threshold),
        cmocka_unit_test(test_exact_mode_detects_every_long_stretch_on_time),
        cmocka_unit_test(test_periodic_mode_keeps_matrix_phase),
        cmocka_unit_test(test_start_in_the_future_is_not_trusted),
        cmocka_unit_test(test_huge_threshold_and_period_never_wrap),
        cmocka_unit_test(test_late_check_restarts_the_clock),
        cmocka_unit_test(test_late_by_less_than_ten_seconds_still_reports),
        cmocka_unit_test(test_restart_clock_for_a_stopped_process),
        cmocka_unit_test(test_stretch_over_by_a_late_look_is_said),
        cmocka_unit_test(test_stretch_over_by_a_timely_look_is_not_said),
        cmocka_unit_test(test_stretch_begun_and_over_between_late_looks_is_said),
        cmocka_unit_test(test_periodic_mode_says_no_unseen_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
