/*
 * test_sleep_tally.c - what a stretch slept in, from the looks at it
 * (core/sleep_tally.h), and the verdict's "blocked on" taken from it
 * (core/hang_cause.h, decisions.md §44).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>

#include <cmocka.h>

#include "core/sleep_tally.h"

#define MS 1000000ull

static hw_blocked_look in_call(char state, long nr, int fd)
{
    hw_blocked_look l = {.valid = true, .state = state, .in_syscall = true, .syscall = nr, .fd = fd};
    l.wait_fd_count = -1;
    return l;
}

static hw_blocked_look running(void)
{
    hw_blocked_look l = {.valid = true, .state = 'R', .fd = -1, .wait_fd_count = -1};
    return l;
}

static void the_kind_seen_most_wins(void **state)
{
    (void)state;
    hw_sleep_tally t = {0};
    hw_blocked_look nap = in_call('S', SYS_clock_nanosleep, -1), recv = in_call('S', SYS_recvfrom, 5);
    for (int i = 0; i < 6; i++)
        hw_sleep_tally_add(&t, 7, &nap);
    for (int i = 0; i < 2; i++)
        hw_sleep_tally_add(&t, 7, &recv);
    hw_blocked_look run = running();
    hw_sleep_tally_add(&t, 7, &run);
    hw_blocked_look top;
    unsigned looks = 0;
    assert_true(hw_sleep_tally_top(&t, 7, &top, &looks));
    assert_int_equal(top.syscall, SYS_clock_nanosleep);
    assert_int_equal(looks, 6);
    assert_int_equal(t.looks, 9);
    assert_false(hw_sleep_tally_top(&t, 9, &top, &looks)); /* another stretch's */
}

static void a_new_stretch_starts_afresh_and_kinds_are_bounded(void **state)
{
    (void)state;
    hw_sleep_tally t = {0};
    for (int fd = 0; fd < 10; fd++) {
        hw_blocked_look l = in_call('S', SYS_read, fd);
        hw_sleep_tally_add(&t, 3, &l);
    }
    assert_int_equal(t.kinds, HW_SLEEP_KINDS);
    assert_int_equal(t.looks, 10);
    hw_blocked_look run = running();
    hw_sleep_tally_add(&t, 5, &run);
    assert_int_equal(t.kinds, 0);
    assert_int_equal(t.looks, 1);
    hw_blocked_look top;
    unsigned looks;
    assert_false(hw_sleep_tally_top(&t, 5, &top, &looks)); /* never found asleep */
}

static void asleep_means_not_running(void **state)
{
    (void)state;
    hw_blocked_look r = running(), fault = running(), busy_in_kernel = in_call('R', SYS_read, 3);
    fault.state = 'D';
    assert_false(hw_look_asleep(&r));
    assert_true(hw_look_asleep(&fault));
    assert_false(hw_look_asleep(&busy_in_kernel));
    hw_blocked_look a = in_call('S', SYS_read, 3), b = in_call('D', SYS_read, 3), c = in_call('S', SYS_read, 4);
    assert_true(hw_look_same_sleep(&a, &b));
    assert_false(hw_look_same_sleep(&a, &c));
}

/* The verdict's words come from the looks when the capture's found it
 * running: never "asleep outside any system call" for a running thread. */
static void blocked_on_from_the_looks(void **state)
{
    (void)state;
    hw_time_section t = {.present = true, .has_schedstat = true, .window_ns = 2500 * MS};
    t.on_cpu_ns = 300 * MS;
    t.blocked_ns = 2200 * MS;
    t.look = running();
    hw_cause_decide(&t);
    assert_int_equal(t.cause, HW_CAUSE_BLOCKED);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_OTHER);
    char clause[256];
    assert_null(strstr(hw_time_clause(&t, clause, sizeof clause), "outside any system call"));
    assert_non_null(strstr(clause, "it runs now"));
    t.slept = in_call('S', SYS_clock_nanosleep, -1);
    t.slept_looks = 16;
    t.looks = 20;
    hw_cause_decide(&t);
    assert_int_equal(t.blocked_on, HW_BLOCKED_ON_SLEEP);
    assert_non_null(strstr(hw_time_clause(&t, clause, sizeof clause), "in clock_nanosleep (16 of 20 looks"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_kind_seen_most_wins),
        cmocka_unit_test(a_new_stretch_starts_afresh_and_kinds_are_bounded),
        cmocka_unit_test(asleep_means_not_running),
        cmocka_unit_test(blocked_on_from_the_looks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
