/*
 * test_clock_source.c - the agent's side of the observers' clock
 * (src/agent/watch/clock_source.c): asked for the coarse clock it falls back to
 * it and refuses counter-stamped pages; only coarse-stamped pages get the
 * detector's slack; a counter-stamped busy start is read back as the latest
 * CLOCK_MONOTONIC time it can stand for, other pages' as they are; and
 * where this machine's counter is found usable, a fresh counter value
 * converts to the clock's present, whether the agent checked every CPU
 * itself or the kernel's clocksource vouched for the counter (a fixed
 * allowance for another CPU's stamp then); no busy start is read as earlier than
 * the process's birth (a counter that jumped back, a scribbled page).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/abi/tsc_read.h"
#include "core/abi/registration.h"
#include "agent/watch/watch.h"

#define MS 1000000ull
#define S 1000000000ull

static hw_agent_options g_opts;

static agent *new_agent(void)
{
    agent *a = calloc(1, sizeof *a);
    assert_non_null(a);
    memset(&g_opts, 0, sizeof g_opts);
    hw_detector_config_default(&g_opts.detector);
    g_opts.detector.clock_slack_ns = 8 * MS;
    g_opts.quiet = true;
    a->opts = &g_opts;
    return a;
}

/* A page of one busy slot whose start is `start` in the page's clock. */
static hw_shared_page *busy_page(uint32_t clock, uint64_t start)
{
    hw_shared_page *page = aligned_alloc(HW_PAGE_SIZE, HW_PAGE_SIZE);
    assert_non_null(page);
    memset(page, 0, HW_PAGE_SIZE);
    page->clock = clock;
    hw_observe(&page->slots[0], HW_ACTIVITY_AFTER_WAITING, start);
    return page;
}

static void test_asked_for_coarse_falls_back(void **state)
{
    (void)state;
    agent *a = new_agent();
    setenv(HW_ENV_CLOCK, "coarse", 1);
    clock_source_init(a);
    unsetenv(HW_ENV_CLOCK);
    assert_false(a->clock.tsc_usable);
    assert_non_null(strstr(a->clock.why, "coarse"));
    assert_true(clock_source_accepts(a, HW_PAGE_CLOCK_COARSE));
    assert_true(clock_source_accepts(a, HW_PAGE_CLOCK_MONOTONIC));
    assert_false(clock_source_accepts(a, HW_PAGE_CLOCK_TSC)); /* no calibration to read it with */
    assert_false(clock_source_accepts(a, 3));                 /* no clock at all */
    clock_source_refresh(a);                                  /* nothing to refresh, nothing breaks */
    assert_false(hw_tsc_ready(&a->clock.tsc));
    free(a);
}

static void test_only_coarse_pages_get_slack(void **state)
{
    (void)state;
    agent *a = new_agent();
    watched_process w = {0};
    w.clock = HW_PAGE_CLOCK_COARSE;
    assert_int_equal(clock_source_slack(a, &w), 8 * MS);
    w.clock = HW_PAGE_CLOCK_TSC;
    assert_int_equal(clock_source_slack(a, &w), 0);
    w.clock = HW_PAGE_CLOCK_MONOTONIC;
    assert_int_equal(clock_source_slack(a, &w), 0);
    free(a);
}

static void test_counter_stamps_read_as_their_latest_time(void **state)
{
    (void)state;
    agent *a = new_agent();
    /* A counter at exactly 2 GHz that read 10^12 at 100 s. */
    a->clock.tsc_usable = true;
    hw_tsc_init(&a->clock.tsc, 0);
    hw_tsc_add(&a->clock.tsc, hw_tsc_sample_make(1000000000000ull - 50, 100 * S, 1000000000000ull + 50));
    hw_tsc_add(&a->clock.tsc, hw_tsc_sample_make(1000004000000ull - 50, 100 * S + 2 * MS, 1000004000000ull + 50));
    assert_true(hw_tsc_ready(&a->clock.tsc));

    /* Stamped 0.5 s before the newest pair. */
    uint64_t stamp = 1000004000000ull - 1000000000ull;
    watched_process w = {0};
    w.clock = HW_PAGE_CLOCK_TSC;
    w.page = busy_page(HW_PAGE_CLOCK_TSC, stamp);
    hw_loop_reading r;
    assert_true(clock_source_read(a, &w, 0, &r));
    assert_true(r.busy);
    uint64_t truth = 100 * S + 2 * MS - 500 * MS;
    assert_true(r.busy_start_ns >= truth);          /* never earlier than it was */
    assert_true(r.busy_start_ns - truth < 200000);  /* and within 0.2 ms of it */
    assert_int_equal(r.busy_start_ns, hw_tsc_to_ns_latest(&a->clock.tsc, stamp));

    /* A coarse page's start is taken as it is, counter or no counter. */
    free((void *)w.page);
    w.clock = HW_PAGE_CLOCK_COARSE;
    w.page = busy_page(HW_PAGE_CLOCK_COARSE, 77 * S);
    assert_true(clock_source_read(a, &w, 0, &r));
    assert_int_equal(r.busy_start_ns, 77 * S);
    /* The clock read when the page came counts, not what the page says now. */
    ((hw_shared_page *)w.page)->clock = HW_PAGE_CLOCK_TSC;
    assert_true(clock_source_read(a, &w, 0, &r));
    assert_int_equal(r.busy_start_ns, 77 * S);
    free((void *)w.page);
    free(a);
}

static void test_no_stretch_before_the_process(void **state)
{
    (void)state;
    agent *a = new_agent();
    watched_process w = {0};
    w.clock = HW_PAGE_CLOCK_MONOTONIC;
    w.born_ns = 50 * S;
    hw_loop_reading r;
    /* A start before the process began: its birth instead. */
    w.page = busy_page(HW_PAGE_CLOCK_MONOTONIC, 3 * S);
    assert_true(clock_source_read(a, &w, 0, &r));
    assert_true(r.busy);
    assert_int_equal(r.busy_start_ns, 50 * S);
    free((void *)w.page);
    w.page = busy_page(HW_PAGE_CLOCK_MONOTONIC, 0);
    assert_true(clock_source_read(a, &w, 0, &r));
    assert_int_equal(r.busy_start_ns, 50 * S);
    free((void *)w.page);
    /* A start after it: as it is. */
    w.page = busy_page(HW_PAGE_CLOCK_MONOTONIC, 60 * S);
    assert_true(clock_source_read(a, &w, 0, &r));
    assert_int_equal(r.busy_start_ns, 60 * S);
    free((void *)w.page);
    /* Birth unknown (0): nothing is changed. */
    w.born_ns = 0;
    w.page = busy_page(HW_PAGE_CLOCK_MONOTONIC, 3 * S);
    assert_true(clock_source_read(a, &w, 0, &r));
    assert_int_equal(r.busy_start_ns, 3 * S);
    free((void *)w.page);
    /* A counter stamp converted to before the birth: the birth. */
    a->clock.tsc_usable = true;
    hw_tsc_init(&a->clock.tsc, 0);
    hw_tsc_add(&a->clock.tsc, hw_tsc_sample_make(1000000000000ull - 50, 100 * S, 1000000000000ull + 50));
    hw_tsc_add(&a->clock.tsc, hw_tsc_sample_make(1000004000000ull - 50, 100 * S + 2 * MS, 1000004000000ull + 50));
    w.clock = HW_PAGE_CLOCK_TSC;
    w.born_ns = 90 * S;
    w.page = busy_page(HW_PAGE_CLOCK_TSC, 1000000000000ull - 40000000000ull); /* 20 s before 100 s */
    assert_true(clock_source_read(a, &w, 0, &r));
    assert_int_equal(r.busy_start_ns, 90 * S);
    free((void *)w.page);
    free(a);
}

/* This machine's counter, the kernel's clocksource read from
 * `clocksource_path` (NULL: the real one).  False when it is not used. */
static bool check_this_machines_counter(const char *clocksource_path, agent *a)
{
    unsetenv(HW_ENV_CLOCK);
    if (clocksource_path)
        clock_source_init_with(a, clocksource_path);
    else
        clock_source_init(a);
    if (!a->clock.tsc_usable) {
        /* Then it says why, and counter-stamped pages are refused. */
        print_message("the counter is not used here: %s\n", a->clock.why);
        assert_true(a->clock.why[0] != '\0');
        assert_false(clock_source_accepts(a, HW_PAGE_CLOCK_TSC));
        return false;
    }
    assert_true(HW_HAVE_TSC);
    assert_true(clock_source_accepts(a, HW_PAGE_CLOCK_TSC));
    /* Decided without a pause: the rate comes at the first wake-up a
     * millisecond on, which the loop is told of; until then a stamp reads
     * as no stretch yet (the latest time there is).  (A preemption in the
     * middle of the check may have made the two pairs far enough apart
     * already.) */
    for (int tries = 0; !hw_tsc_ready(&a->clock.tsc) && tries < 1000; tries++) {
        uint64_t due = clock_source_due(a);
        assert_true(due != UINT64_MAX && due <= hw_monotonic_ns() + 1 * MS);
        assert_int_equal(hw_tsc_to_ns_latest(&a->clock.tsc, hw_tsc_read()), UINT64_MAX);
        while (hw_monotonic_ns() < due)
            ;
        clock_source_refresh(a); /* not ready after it only when preempted between its reads */
    }
    assert_true(hw_tsc_ready(&a->clock.tsc));
    assert_int_equal(clock_source_due(a), UINT64_MAX);
    uint64_t before = hw_monotonic_ns();
    uint64_t tsc = hw_tsc_read();
    uint64_t after = hw_monotonic_ns();
    uint64_t err;
    uint64_t ns = hw_tsc_to_ns(&a->clock.tsc, tsc, &err);
    print_message("a fresh counter value converts to %lld ns from the clock's reads around it, +-%llu ns\n",
                  (long long)(ns - before), (unsigned long long)err);
    /* Generous: a preemption between the reads must not fail the test. */
    assert_true(ns + 1 * MS >= before && ns <= after + 1 * MS);
    assert_true(err < 1 * MS);
    return true;
}

static void test_this_machines_counter_if_usable(void **state)
{
    (void)state;
    agent *a = new_agent();
    check_this_machines_counter(NULL, a);
    free(a);
}

/* The kernel keeps its time with the counter: no CPU is visited, and the
 * allowance for another CPU's stamp is the fixed one (twice 1 us). */
static void test_kernel_vouches_for_the_counter(void **state)
{
    (void)state;
    char path[] = "/tmp/hw-clocksource-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "tsc\n", 4), 4);
    close(fd);
    agent *a = new_agent();
    if (check_this_machines_counter(path, a))
        assert_int_equal(a->clock.tsc.skew_ns, 2000);
    free(a);
    unlink(path);
}

/* Another clocksource (or none to read): the agent checks every CPU's
 * counter itself, its allowance what it measured (under twice its limit). */
static void test_agent_checks_each_cpu_itself(void **state)
{
    (void)state;
    agent *a = new_agent();
    if (check_this_machines_counter("/nonexistent/current_clocksource", a))
        assert_true(a->clock.tsc.skew_ns < 2 * 20000);
    free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_asked_for_coarse_falls_back),
        cmocka_unit_test(test_only_coarse_pages_get_slack),
        cmocka_unit_test(test_counter_stamps_read_as_their_latest_time),
        cmocka_unit_test(test_no_stretch_before_the_process),
        cmocka_unit_test(test_this_machines_counter_if_usable),
        cmocka_unit_test(test_kernel_vouches_for_the_counter),
        cmocka_unit_test(test_agent_checks_each_cpu_itself),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
