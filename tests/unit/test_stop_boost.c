/*
 * test_stop_boost.c - a thread that waits for a CPU to take its stop on is
 * lent one (hw_rt_lend, in snapshot.c's await_stop), and gets its own
 * scheduling back: its policy, nice and reset-on-fork flag; a sleeping or
 * real-time thread is left alone.  The capture case starves a child of
 * CPU 0 (at nice 19, beside a spinning sibling at nice -19, both pinned
 * there: without the loan the child would wait seconds) and stops it.
 * Changing another process's policy needs CAP_SYS_NICE: skipped without.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/capture/snapshot.h"
#include "agent/common/priority_lender.h"
#include "agent/common/proc_read.h"

#ifndef SCHED_RESET_ON_FORK
#define SCHED_RESET_ON_FORK 0x40000000
#endif

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static volatile unsigned long sink;

/* A child that sets its own scheduling, pins itself to CPU 0 when asked,
 * and spins (or sleeps). */
static pid_t child(int policy, int nice, bool spin, bool pin)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (pin) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(0, &set);
            sched_setaffinity(0, sizeof set, &set);
        }
        struct sched_param p = {.sched_priority = (policy & ~SCHED_RESET_ON_FORK) == SCHED_FIFO ? 1 : 0};
        if (sched_setscheduler(0, policy, &p) != 0 || setpriority(PRIO_PROCESS, 0, nice) != 0)
            _exit(3);
        for (;;) {
            if (spin)
                sink = sink * 7 + 1;
            else
                pause();
        }
    }
    return pid;
}

static void end_child(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static bool may_change_others(void)
{
    return geteuid() == 0;
}

/* The child has set itself up: its nice reads what it asked for. */
static void wait_set_up(pid_t pid, int nice)
{
    uint64_t deadline = now_ns() + 10000000000ull;
    for (;;) {
        errno = 0;
        int got = getpriority(PRIO_PROCESS, (id_t)pid);
        if (errno == 0 && got == nice)
            return;
        assert_true(now_ns() < deadline);
        usleep(1000);
    }
}

/* The child's time on a CPU so far (schedstat's first field), ns: exact
 * for a thread that is not running. */
static unsigned long long on_cpu_ns(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
    FILE *f = fopen(path, "r");
    unsigned long long on_cpu = 0;
    if (f != NULL) {
        if (fscanf(f, "%llu", &on_cpu) != 1)
            on_cpu = 0;
        fclose(f);
    }
    return on_cpu;
}

/* Until the child has not run for 50 ms (past the first slice a task set
 * to nice 19 may still be given, in which it would stop on its own), or
 * 10 s have passed (the capture then tells). */
static void wait_starved(pid_t pid)
{
    uint64_t deadline = now_ns() + 10000000000ull;
    while (now_ns() < deadline) {
        unsigned long long before = on_cpu_ns(pid);
        usleep(50000);
        if (on_cpu_ns(pid) == before)
            return;
    }
}

static void test_runnable_thread_boosted_then_given_back(void **state)
{
    (void)state;
    if (!may_change_others())
        skip();
    pid_t pid = child(SCHED_BATCH | SCHED_RESET_ON_FORK, 7, true, false);
    wait_set_up(pid, 7);
    hw_rt_loan loan;
    assert_true(hw_rt_lend(pid, pid, 1, &loan));
    assert_int_equal(sched_getscheduler(pid) & ~SCHED_RESET_ON_FORK, SCHED_FIFO);
    assert_true(hw_rt_loan_end(&loan));
    assert_int_equal(sched_getscheduler(pid), SCHED_BATCH | SCHED_RESET_ON_FORK);
    errno = 0;
    assert_int_equal(getpriority(PRIO_PROCESS, (id_t)pid), 7);
    end_child(pid);
}

static void test_sleeping_or_real_time_thread_left_alone(void **state)
{
    (void)state;
    if (!may_change_others())
        skip();
    pid_t sleeper = child(SCHED_OTHER, 4, false, false);
    wait_set_up(sleeper, 4);
    uint64_t deadline = now_ns() + 10000000000ull;
    while (hw_task_state(sleeper, sleeper) != 'S')
        assert_true(now_ns() < deadline);
    hw_rt_loan loan;
    assert_false(hw_rt_lend(sleeper, sleeper, 1, &loan));
    assert_int_equal(sched_getscheduler(sleeper), SCHED_OTHER);
    assert_true(hw_rt_loan_end(&loan)); /* nothing to give back */
    end_child(sleeper);

    pid_t fifo = child(SCHED_FIFO, 0, true, false);
    deadline = now_ns() + 10000000000ull;
    while (sched_getscheduler(fifo) != SCHED_FIFO)
        assert_true(now_ns() < deadline);
    struct sched_param p;
    assert_false(hw_rt_lend(fifo, fifo, 1, &loan));
    assert_int_equal(sched_getparam(fifo, &p), 0);
    assert_int_equal(p.sched_priority, 1);
    end_child(fifo);
}

/* A starved child's stop: lent a CPU, stopped within the capture's
 * 500 ms deadline (without the loan it is not: it would wait seconds),
 * and at nice 19 again after. */
static void test_capture_lends_a_starved_thread_a_cpu(void **state)
{
    (void)state;
    if (!may_change_others())
        skip();
    pid_t hog = child(SCHED_OTHER, -19, true, true);
    pid_t starved = child(SCHED_OTHER, 19, true, true);
    wait_set_up(hog, -19);
    wait_set_up(starved, 19);
    wait_starved(starved);
    hw_capture_options o;
    hw_capture_options_default(&o, starved);
    o.all_threads = false;
    o.target_stack_bytes = o.other_stack_bytes = 0;
    hw_process_snapshot snap;
    assert_int_equal(hw_capture_process(starved, &o, &snap), 0);
    bool stopped = snap.thread_count == 1 && snap.threads[0].status == HW_THREAD_CAPTURED;
    bool boosted = snap.target_boosted;
    hw_process_snapshot_free(&snap);
    end_child(hog);
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)starved);
    int policy = sched_getscheduler(starved);
    end_child(starved);
    assert_true(stopped);
    assert_true(boosted);
    assert_int_equal(policy, SCHED_OTHER);
    assert_int_equal(nice, 19);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runnable_thread_boosted_then_given_back),
        cmocka_unit_test(test_sleeping_or_real_time_thread_left_alone),
        cmocka_unit_test(test_capture_lends_a_starved_thread_a_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
