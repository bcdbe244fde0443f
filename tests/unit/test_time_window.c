/*
 * test_time_window.c - a hang's `time` section made from two readings of
 * a thread's counters (agent/capture/thread_time.h): the window's shares,
 * the captures' stops kept out of it, and a thread waiting for a CPU at
 * the window's end, whose wait the kernel has not counted yet, found by
 * its voluntary switches (decisions.md §44); a loop thread's wait for a
 * CPU between its wake-up and its stretch's start, told apart where it was
 * given a CPU once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <string.h>

#include <cmocka.h>

#include "agent/capture/thread_time.h"

#define MS 1000000ull

static hw_thread_counters reading(uint64_t at_ms, uint64_t on_ms, uint64_t queue_ms, uint64_t voluntary,
                                  uint64_t stops)
{
    hw_thread_counters c = {.valid = true, .has_schedstat = true, .has_faults = true, .has_switches = true};
    c.at_ns = at_ms * MS;
    c.on_cpu_ns = on_ms * MS;
    c.runqueue_ns = queue_ms * MS;
    c.voluntary_switches = voluntary;
    c.agent_stops = stops;
    c.state = 'R';
    return c;
}

static void fill(hw_time_section *t, const hw_thread_counters *from, const hw_thread_counters *to)
{
    hw_time_section_fill(t, from, to, NULL, -ENOENT, from->at_ns, from->at_ns, "stretch_start", NULL);
}

static void a_thread_that_never_slept_waited_for_a_cpu(void **state)
{
    (void)state;
    /* 2 s: 100 ms on a CPU, 200 ms of counted run-queue wait, and 1.7 s
     * the kernel has not counted: no voluntary switch at all */
    hw_thread_counters from = reading(1000, 500, 50, 40, 0), to = reading(3000, 600, 250, 40, 0);
    hw_time_section t;
    fill(&t, &from, &to);
    assert_true(t.present);
    assert_int_equal(t.blocked_ns, 0);
    assert_int_equal(t.runqueue_pending_ns, 1700 * MS);
    assert_int_equal(t.runqueue_ns, 1900 * MS);
    assert_int_equal(t.cause, HW_CAUSE_STARVED);
    char clause[256];
    assert_null(strstr(hw_time_clause(&t, clause, sizeof clause), "asleep"));
}

static void the_captures_stops_are_not_its_sleeps(void **state)
{
    (void)state;
    /* one voluntary switch, and one capture stopped it: still never slept */
    hw_thread_counters from = reading(1000, 500, 50, 40, 3), to = reading(3000, 600, 250, 41, 4);
    hw_time_section t;
    fill(&t, &from, &to);
    assert_int_equal(t.cause, HW_CAUSE_STARVED);
    assert_int_equal(t.runqueue_pending_ns, 1700 * MS);
    /* two switches and one stop: it slept once, and the rest is asleep */
    to.voluntary_switches = 42;
    fill(&t, &from, &to);
    assert_int_equal(t.runqueue_pending_ns, 0);
    assert_int_equal(t.blocked_ns, 1700 * MS);
    assert_int_equal(t.cause, HW_CAUSE_BLOCKED);
}

static void a_thread_asleep_all_along_is_asleep(void **state)
{
    (void)state;
    /* in recv from before the window (read at an earlier look) to its
     * end: no switch either, but it slept */
    hw_thread_counters from = reading(1000, 500, 50, 40, 0), to = reading(3000, 500, 50, 40, 0);
    from.state = to.state = 'S';
    hw_time_section t;
    hw_time_section_fill(&t, &from, &to, NULL, -ENOENT, from.at_ns, from.at_ns - 50 * MS, "earlier_look", NULL);
    assert_int_equal(t.runqueue_pending_ns, 0);
    assert_int_equal(t.blocked_ns, 2000 * MS);
    /* asleep at the earlier look, woken just now and waiting for a CPU:
     * how long it slept is not known, so nothing moves */
    to.state = 'R';
    hw_time_section_fill(&t, &from, &to, NULL, -ENOENT, from.at_ns, from.at_ns - 50 * MS, "earlier_look", NULL);
    assert_int_equal(t.runqueue_pending_ns, 0);
    /* runnable at the earlier look and at the end, no switch: runnable all along */
    from.state = 'R';
    hw_time_section_fill(&t, &from, &to, NULL, -ENOENT, from.at_ns, from.at_ns - 50 * MS, "earlier_look", NULL);
    assert_int_equal(t.runqueue_pending_ns, 2000 * MS);
}

static void without_the_switch_count_nothing_is_guessed(void **state)
{
    (void)state;
    hw_thread_counters from = reading(1000, 500, 50, 40, 0), to = reading(3000, 600, 250, 40, 0);
    to.has_switches = false;
    hw_time_section t;
    fill(&t, &from, &to);
    assert_int_equal(t.runqueue_pending_ns, 0);
    assert_int_equal(t.blocked_ns, 1700 * MS);
}

static void a_working_thread_is_unchanged(void **state)
{
    (void)state;
    /* on a CPU all along: the tick's lag is the only rest */
    hw_thread_counters from = reading(1000, 500, 50, 40, 0), to = reading(3000, 2496, 50, 40, 0);
    hw_time_section t;
    fill(&t, &from, &to);
    assert_int_equal(t.cause, HW_CAUSE_WORKING);
    assert_true(t.runqueue_pending_ns <= 4 * MS);
}

/* A window from a look 1.2 s into a 2 s stretch is partial, and the
 * clause says what it leaves out; one 50 ms in is the whole hang's. */
static void a_window_of_part_of_the_stretch_says_so(void **state)
{
    (void)state;
    hw_thread_counters from = reading(2200, 500, 50, 40, 0), to = reading(3000, 1290, 50, 40, 0);
    hw_time_section t;
    hw_time_section_fill(&t, &from, &to, NULL, -ENOENT, from.at_ns, 1000 * MS, "earlier_look", NULL);
    assert_true(t.partial);
    assert_int_equal(t.window_offset_ns, 1200 * MS);
    char clause[256];
    assert_non_null(strstr(hw_time_clause(&t, clause, sizeof clause), "(partial: the stretch's first 1.2 s"));
    from.at_ns = 1050 * MS;
    hw_time_section_fill(&t, &from, &to, NULL, -ENOENT, from.at_ns, 1000 * MS, "earlier_look", NULL);
    assert_false(t.partial);
    assert_null(strstr(hw_time_clause(&t, clause, sizeof clause), "partial"));
}

static void a_wait_for_a_cpu_before_the_stretch_is_told(void **state)
{
    (void)state;
    /* Asleep in its wait at 1 s; woken, it waited 400 ms for a CPU, got it
     * once and started its stretch, and sleeps in it at the look at 1.8 s. */
    hw_thread_counters in_wait = reading(1000, 500, 50, 40, 0);
    in_wait.state = 'S';
    in_wait.timeslices = 90;
    hw_thread_counters in_stretch = reading(1800, 501, 450, 41, 0);
    in_stretch.state = 'S';
    in_stretch.timeslices = 91;
    uint64_t wait = 0;
    assert_true(hw_wait_before_stretch(&in_wait, &in_stretch, &wait));
    assert_int_equal(wait, 400 * MS);
    /* Held to the time between the readings (the program's counters are its word). */
    in_stretch.runqueue_ns = 5000 * MS;
    assert_true(hw_wait_before_stretch(&in_wait, &in_stretch, &wait));
    assert_int_equal(wait, 800 * MS);
    in_stretch.runqueue_ns = 450 * MS;
    /* Given a CPU twice: some of the wait may be the stretch's. */
    in_stretch.timeslices = 92;
    assert_false(hw_wait_before_stretch(&in_wait, &in_stretch, &wait));
    in_stretch.timeslices = 91;
    /* Running at the first reading (on its way into its wait): no wake-up to tell. */
    in_wait.state = 'R';
    assert_false(hw_wait_before_stretch(&in_wait, &in_stretch, &wait));
    in_wait.state = 'S';
    /* A kernel without the timeslice count. */
    in_wait.timeslices = 0;
    in_stretch.timeslices = 1;
    assert_false(hw_wait_before_stretch(&in_wait, &in_stretch, &wait));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_thread_that_never_slept_waited_for_a_cpu),
        cmocka_unit_test(the_captures_stops_are_not_its_sleeps),
        cmocka_unit_test(a_thread_asleep_all_along_is_asleep),
        cmocka_unit_test(without_the_switch_count_nothing_is_guessed),
        cmocka_unit_test(a_working_thread_is_unchanged),
        cmocka_unit_test(a_window_of_part_of_the_stretch_says_so),
        cmocka_unit_test(a_wait_for_a_cpu_before_the_stretch_is_told),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
