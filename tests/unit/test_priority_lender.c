/*
 * test_priority_lender.c - the lender (priority_lender.c) on a real
 * priority inversion: everything on one CPU, a thread at SCHED_IDLE takes
 * a plain mutex (no priority inheritance, like the allocator's), a CPU hog
 * process then leaves it no time, and a SCHED_FIFO thread wants the mutex.
 * Without the lender the real-time thread still waits after a second (the
 * holder needs 10 ms of CPU at SCHED_IDLE's 0.3 % share); with it, and a
 * step open, it gets the mutex at once (a few lends of a millisecond);
 * a real-time waiter that spins in sched_yield, as a sanitizer's lock
 * does, is lent through too (its holder on the other CPU, beside the
 * hog), and so is a waiter at the normal policy
 * asleep in futex (the agent's set-up), but not one at the normal policy
 * that runs; with no step open no lend is made; a policy the holder is given during a
 * lend is the one it has after it; threads setting their own policies at
 * once, more than are marked changing outside the lender's lock, all get
 * theirs.  Needs the right to SCHED_FIFO (root);
 * skipped without it.  Run under ThreadSanitizer too (label concurrency).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/common/priority_lender.h"

#define HOLD_CPU_MS 10
#define DEADLINE_MS 10000 /* for conditions polled */

static uint64_t now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void nap_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

typedef struct {
    pthread_mutex_t lock; /* plain: no priority inheritance */
    atomic_int tid;
    atomic_bool locked, go, released, may_end;
} holder;

/* At SCHED_IDLE: take the lock, wait for the hog, then use HOLD_CPU_MS of
 * CPU holding it. */
static void *hold(void *arg)
{
    holder *h = arg;
    struct sched_param zero = {0};
    hw_thread_policy_set(gettid(), SCHED_IDLE, &zero);
    pthread_mutex_lock(&h->lock);
    atomic_store(&h->tid, gettid());
    atomic_store(&h->locked, true);
    while (!atomic_load(&h->go))
        ;
    uint64_t until = now_ns(CLOCK_THREAD_CPUTIME_ID) + HOLD_CPU_MS * 1000000ull;
    while (now_ns(CLOCK_THREAD_CPUTIME_ID) < until)
        ;
    pthread_mutex_unlock(&h->lock);
    atomic_store(&h->released, true);
    while (!atomic_load(&h->may_end))
        nap_us(1000);
    return NULL;
}

typedef struct {
    pthread_t thread;
    holder h;
    pid_t hog;
} scene;

/* This thread on CPU 0 at SCHED_FIFO 2 (what it creates inherits the CPU,
 * not the policy); false when it may not be real-time. */
static bool pinned_to_cpu0(void)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    return sched_setaffinity(0, sizeof one, &one) == 0;
}

static bool real_time_on_cpu0(void)
{
    struct sched_param two = {.sched_priority = 2};
    return pinned_to_cpu0() && sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &two) == 0;
}

static void normal_again(void)
{
    struct sched_param zero = {0};
    sched_setscheduler(0, SCHED_OTHER, &zero);
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int i = 0; i < CPU_SETSIZE; i++)
        CPU_SET(i, &all);
    sched_setaffinity(0, sizeof all, &all);
}

/* The holder with its lock, then the hog beside it, then go. */
static void set_scene(scene *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->h.lock, NULL);
    assert_int_equal(pthread_create(&s->thread, NULL, hold, &s->h), 0);
    uint64_t deadline = now_ns(CLOCK_MONOTONIC) + DEADLINE_MS * 1000000ull;
    while (!atomic_load(&s->h.locked) && now_ns(CLOCK_MONOTONIC) < deadline)
        nap_us(200);
    assert_true(atomic_load(&s->h.locked));
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    s->hog = fork();
    assert_true(s->hog >= 0);
    if (s->hog == 0) { /* the hog: on CPU 0 (inherited), at the normal policy (reset on fork) */
        char c = 1;
        if (write(ready[1], &c, 1) != 1)
            _exit(1);
        for (;;)
            ;
    }
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    close(ready[0]);
    close(ready[1]);
    atomic_store(&s->h.go, true);
}

static void end_scene(scene *s)
{
    kill(s->hog, SIGKILL);
    waitpid(s->hog, NULL, 0);
    atomic_store(&s->h.may_end, true);
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->h.lock);
}

/* The lock, waited for at most `ms`: 0 or ETIMEDOUT; how long in *waited_ms. */
static int take(holder *h, long ms, double *waited_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    uint64_t t0 = now_ns(CLOCK_MONOTONIC);
    int rc = pthread_mutex_timedlock(&h->lock, &until);
    *waited_ms = (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e6;
    if (rc == 0)
        pthread_mutex_unlock(&h->lock);
    return rc;
}

/* The scene with the lender started, this thread on CPU 0 at SCHED_FIFO 2
 * (`real_time`) or at the normal policy; the test skipped without the
 * right to real time.  The lends made before it. */
static unsigned long lent_scene(scene *s, bool real_time)
{
    if (!(real_time ? real_time_on_cpu0() : pinned_to_cpu0()))
        skip();
    int e = hw_priority_lender_start(3);
    if (!real_time && e != 0)
        skip(); /* the lender is real-time, this thread need not be */
    assert_int_equal(e, 0);
    unsigned long before = hw_priority_lends();
    set_scene(s);
    return before;
}

static void end_lent_scene(scene *s)
{
    end_scene(s);
    hw_rt_step_leave();
    hw_priority_lender_stop();
    normal_again();
}

/* The holder's policy once no lend holds it (polled). */
static int policy_after_lend(const holder *h)
{
    uint64_t deadline = now_ns(CLOCK_MONOTONIC) + DEADLINE_MS * 1000000ull;
    while ((sched_getscheduler(atomic_load(&h->tid)) & ~SCHED_RESET_ON_FORK) == SCHED_FIFO &&
           now_ns(CLOCK_MONOTONIC) < deadline)
        nap_us(200);
    return sched_getscheduler(atomic_load(&h->tid)) & ~SCHED_RESET_ON_FORK;
}

static void inversion_holds_without_the_lender(void **state)
{
    (void)state;
    if (!real_time_on_cpu0())
        skip();
    scene s;
    set_scene(&s);
    double waited;
    int rc = take(&s.h, 1000, &waited);
    end_scene(&s);
    normal_again();
    assert_int_equal(rc, ETIMEDOUT); /* else the scene proves nothing */
}

static void a_stuck_step_is_lent_through(void **state)
{
    (void)state;
    scene s;
    unsigned long before = lent_scene(&s, true);
    hw_rt_step_open();
    double waited;
    int rc = take(&s.h, 5000, &waited);
    assert_true(hw_rt_step_close());
    int policy = policy_after_lend(&s.h); /* given back: at idle time again */
    end_lent_scene(&s);
    print_message("waited %.1f ms for the lock, %lu lends\n", waited, hw_priority_lends() - before);
    assert_int_equal(rc, 0);
    assert_true(waited < 1000.0); /* about HOLD_CPU_MS in lends of HW_LEND_NS every HW_LEND_AFTER_NS */
    assert_true(hw_priority_lends() > before);
    assert_int_equal(policy, SCHED_IDLE);
}

/* The holder and the hog on CPU 1, the waiter staying on CPU 0. */
static bool move_scene_to_cpu1(scene *s)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(1, &one);
    return sched_setaffinity(atomic_load(&s->h.tid), sizeof one, &one) == 0 &&
           sched_setaffinity(s->hog, sizeof one, &one) == 0;
}

static void a_spinning_waiter_is_lent_through(void **state)
{
    (void)state;
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        skip();
    scene s;
    unsigned long before = lent_scene(&s, true);
    assert_true(move_scene_to_cpu1(&s));
    hw_rt_step_open();
    uint64_t t0 = now_ns(CLOCK_MONOTONIC), deadline = t0 + 5000000000ull;
    while (!atomic_load(&s.h.released) && now_ns(CLOCK_MONOTONIC) < deadline)
        sched_yield(); /* at SCHED_FIFO 2: it yields only to its own priority */
    double waited = (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e6;
    (void)hw_rt_step_close();
    bool released = atomic_load(&s.h.released);
    end_lent_scene(&s);
    print_message("spun %.1f ms for the lock, %lu lends\n", waited, hw_priority_lends() - before);
    assert_true(released);
    assert_true(waited < 2000.0);
    assert_true(hw_priority_lends() > before);
}

static void a_normal_waiter_in_futex_is_lent_through(void **state)
{
    (void)state;
    scene s;
    unsigned long before = lent_scene(&s, false);
    hw_rt_step_open();
    double waited;
    int rc = take(&s.h, 5000, &waited);
    (void)hw_rt_step_close();
    end_lent_scene(&s);
    print_message("waited %.1f ms at the normal policy, %lu lends\n", waited, hw_priority_lends() - before);
    assert_int_equal(rc, 0);
    assert_true(waited < 1000.0);
    assert_true(hw_priority_lends() > before);
}

static void a_normal_thread_that_runs_is_not_lent_for(void **state)
{
    (void)state;
    scene s;
    unsigned long before = lent_scene(&s, false);
    hw_rt_step_open();
    /* 3 * HW_LEND_AFTER_RUNNING_NS of this thread's CPU, beside the hog */
    uint64_t until = now_ns(CLOCK_THREAD_CPUTIME_ID) + 3 * HW_LEND_AFTER_RUNNING_NS;
    while (now_ns(CLOCK_THREAD_CPUTIME_ID) < until)
        ;
    (void)hw_rt_step_close();
    unsigned long lends = hw_priority_lends() - before;
    end_lent_scene(&s);
    assert_int_equal(lends, 0);
}

static void no_step_no_lend(void **state)
{
    (void)state;
    scene s;
    unsigned long before = lent_scene(&s, true);
    double waited;
    int rc = take(&s.h, 50, &waited); /* stuck, but with no work in hand */
    unsigned long lends = hw_priority_lends() - before;
    end_lent_scene(&s);
    assert_int_equal(rc, ETIMEDOUT);
    assert_int_equal(lends, 0);
}

/* At SCHED_FIFO 3: once the holder is lent to, give it SCHED_OTHER. */
static void *set_during_lend(void *arg)
{
    holder *h = arg;
    struct sched_param three = {.sched_priority = 3};
    sched_setscheduler(0, SCHED_FIFO, &three);
    uint64_t deadline = now_ns(CLOCK_MONOTONIC) + DEADLINE_MS * 1000000ull;
    while ((sched_getscheduler(atomic_load(&h->tid)) & ~SCHED_RESET_ON_FORK) != SCHED_FIFO) {
        if (now_ns(CLOCK_MONOTONIC) >= deadline)
            return (void *)0;
        nap_us(20);
    }
    struct sched_param zero = {0};
    hw_thread_policy_set(atomic_load(&h->tid), SCHED_OTHER, &zero);
    return (void *)1;
}

static void a_policy_set_during_a_lend_is_kept(void **state)
{
    (void)state;
    scene s;
    (void)lent_scene(&s, true);
    pthread_t setter;
    assert_int_equal(pthread_create(&setter, NULL, set_during_lend, &s.h), 0);
    hw_rt_step_open();
    double waited;
    int rc = take(&s.h, 5000, &waited);
    (void)hw_rt_step_close();
    void *saw_lend;
    pthread_join(setter, &saw_lend);
    int policy = policy_after_lend(&s.h);
    end_lent_scene(&s);
    assert_int_equal(rc, 0);
    assert_true(saw_lend != NULL);
    assert_int_equal(policy, SCHED_OTHER);
}

/* Twelve threads set their own policy at once, more than are marked as
 * changing outside the lender's lock (the rest set it under the lock):
 * each gets the policy it asked for, then its own again. */
#define SELF_SETTERS 12

static void *lower_and_raise_itself(void *arg)
{
    atomic_int *went_idle = arg;
    struct sched_param zero = {0};
    for (int round = 0; round < 50; round++) {
        if (hw_thread_policy_set(gettid(), SCHED_IDLE, &zero) != 0 ||
            (sched_getscheduler(0) & ~SCHED_RESET_ON_FORK) != SCHED_IDLE)
            return (void *)0;
        if (round == 0)
            atomic_fetch_add(went_idle, 1);
        if (hw_thread_policy_set(gettid(), SCHED_OTHER, &zero) != 0 && errno != EPERM)
            return (void *)0;
    }
    return (void *)1;
}

static void own_policies_set_at_once_all_take(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip(); /* leaving SCHED_IDLE takes CAP_SYS_NICE */
    atomic_int went_idle = 0;
    pthread_t t[SELF_SETTERS];
    for (int i = 0; i < SELF_SETTERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, lower_and_raise_itself, &went_idle), 0);
    int ok = 0;
    for (int i = 0; i < SELF_SETTERS; i++) {
        void *r;
        pthread_join(t[i], &r);
        ok += r != NULL;
    }
    assert_int_equal(atomic_load(&went_idle), SELF_SETTERS);
    assert_int_equal(ok, SELF_SETTERS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(inversion_holds_without_the_lender),
        cmocka_unit_test(a_stuck_step_is_lent_through),
        cmocka_unit_test(a_spinning_waiter_is_lent_through),
        cmocka_unit_test(a_normal_waiter_in_futex_is_lent_through),
        cmocka_unit_test(a_normal_thread_that_runs_is_not_lent_for),
        cmocka_unit_test(no_step_no_lend),
        cmocka_unit_test(a_policy_set_during_a_lend_is_kept),
        cmocka_unit_test(own_policies_set_at_once_all_take),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
