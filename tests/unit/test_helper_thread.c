/*
 * test_helper_thread.c - the capture helpers made ahead of time
 * (helper_thread.c), without ptrace: every session handed over runs once,
 * on another thread, with every signal blocked, at the policy of the
 * thread that started the keeper; the keeper has the next helper waiting
 * a moment later; several callers at once each get their session run
 * (fallback or not); start and stop can be repeated; after the stop no
 * session is taken; a session handed over with a hung thread's CPU runs
 * off it, and the helper after it may run anywhere again; a thread moves
 * itself off CPUs and back, and another is kept off one and back
 * (cpu_avoid.h).  Run under ThreadSanitizer too
 * (label concurrency).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/capture/capture.h"
#include "agent/common/cpu_avoid.h"

#define DEADLINE_MS 10000 /* generous: conditions are polled, not slept for */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Poll until a helper waits; false at the deadline. */
static bool wait_for_waiting_helper(void)
{
    uint64_t deadline = now_ms() + DEADLINE_MS;
    while (!hw_capture_helper_waiting()) {
        if (now_ms() >= deadline)
            return false;
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
    }
    return true;
}

typedef struct session {
    pid_t caller;
    pid_t ran_on;        /* the thread that ran it */
    int policy;          /* that thread's policy and priority */
    int priority;
    bool signals_blocked; /* SIGINT, SIGTERM and SIGCHLD blocked there */
    cpu_set_t cpus;      /* that thread's affinity while it ran */
    atomic_int runs;
} session;

static void run_session(void *arg)
{
    session *s = arg;
    s->ran_on = gettid();
    struct sched_param sp;
    s->policy = sched_getscheduler(0) & ~SCHED_RESET_ON_FORK;
    s->priority = sched_getparam(0, &sp) == 0 ? sp.sched_priority : -1;
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, NULL, &mask);
    s->signals_blocked = sigismember(&mask, SIGINT) && sigismember(&mask, SIGTERM) && sigismember(&mask, SIGCHLD);
    if (sched_getaffinity(0, sizeof s->cpus, &s->cpus) != 0)
        CPU_ZERO(&s->cpus);
    atomic_fetch_add(&s->runs, 1);
}

/* Hand `s` to a waiting helper, to run off `avoid_cpu` (-1: anywhere), and
 * wait for it; false if none was taken. */
static bool take_and_wait_off(session *s, int avoid_cpu)
{
    sem_t done;
    if (sem_init(&done, 0, 0) != 0)
        return false;
    bool taken = hw_capture_helper_take(run_session, s, &done, avoid_cpu);
    if (taken)
        while (sem_wait(&done) != 0 && errno == EINTR)
            ;
    sem_destroy(&done);
    return taken;
}

static bool take_and_wait(session *s)
{
    return take_and_wait_off(s, -1);
}

static void test_sessions_run_once_on_helpers(void **state)
{
    (void)state;
    unsigned long taken_before, created_before, taken_after, created_after;
    hw_capture_helpers_counts(&taken_before, &created_before);
    assert_int_equal(hw_capture_helpers_start(true), 0);
    assert_true(hw_capture_helper_waiting()); /* start returns once the first one waits */
    for (int i = 0; i < 100; i++) {
        assert_true(wait_for_waiting_helper());
        session s;
        memset(&s, 0, sizeof s);
        s.caller = gettid();
        assert_true(take_and_wait(&s));
        assert_int_equal(atomic_load(&s.runs), 1);
        assert_true(s.ran_on != 0 && s.ran_on != s.caller);
        assert_true(s.signals_blocked);
    }
    hw_capture_helpers_counts(&taken_after, &created_after);
    assert_int_equal(taken_after - taken_before, 100);
    assert_int_equal(created_after, created_before); /* no capture created a thread */
    hw_capture_helpers_stop();
    assert_false(hw_capture_helper_waiting());
    session s = {0};
    assert_false(take_and_wait(&s)); /* stopped: the caller makes its own */
    assert_int_equal(atomic_load(&s.runs), 0);
}

/* Started from a real-time thread, the helpers run at its policy and
 * priority (without the right to it, the thread stays normal and so do
 * they).  cmocka's checks belong to the test's thread: this one records. */
typedef struct fifo_start {
    bool fifo;        /* the starting thread got SCHED_FIFO 1 */
    bool started;     /* hw_capture_helpers_start said 0 */
    bool taken;       /* the session went to a waiting helper */
    session s;
} fifo_start;

static void *start_as_fifo(void *arg)
{
    fifo_start *f = arg;
    struct sched_param sp = {.sched_priority = 1};
    f->fifo = sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) == 0;
    f->started = hw_capture_helpers_start(true) == 0;
    f->taken = f->started && wait_for_waiting_helper() && take_and_wait(&f->s);
    hw_capture_helpers_stop();
    return NULL;
}

static void test_helpers_take_the_starters_policy(void **state)
{
    (void)state;
    fifo_start f;
    memset(&f, 0, sizeof f);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, start_as_fifo, &f), 0);
    pthread_join(t, NULL);
    assert_true(f.started);
    assert_true(f.taken);
    assert_int_equal(atomic_load(&f.s.runs), 1);
    assert_int_equal(f.s.policy, f.fifo ? SCHED_FIFO : SCHED_OTHER);
    assert_int_equal(f.s.priority, f.fifo ? 1 : 0);
}

/* Four callers at once: each session runs exactly once, on a helper when
 * one is waiting, else on the caller's own (as snapshot.c does). */
#define CALLERS 4
#define ROUNDS 50

static void *caller_main(void *arg)
{
    atomic_int *total = arg;
    for (int i = 0; i < ROUNDS; i++) {
        session s;
        memset(&s, 0, sizeof s);
        if (!take_and_wait(&s))
            run_session(&s);
        if (atomic_load(&s.runs) == 1)
            atomic_fetch_add(total, 1);
    }
    return NULL;
}

static void test_concurrent_callers(void **state)
{
    (void)state;
    unsigned long taken_before, taken_after;
    hw_capture_helpers_counts(&taken_before, NULL);
    assert_int_equal(hw_capture_helpers_start(true), 0);
    atomic_int total = 0;
    pthread_t t[CALLERS];
    for (int i = 0; i < CALLERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, caller_main, &total), 0);
    for (int i = 0; i < CALLERS; i++)
        pthread_join(t[i], NULL);
    hw_capture_helpers_stop();
    hw_capture_helpers_counts(&taken_after, NULL);
    assert_int_equal(atomic_load(&total), CALLERS * ROUNDS);
    assert_true(taken_after > taken_before); /* some went to a helper */
}

static void test_start_stop_repeated(void **state)
{
    (void)state;
    for (int i = 0; i < 20; i++) {
        assert_int_equal(hw_capture_helpers_start(true), 0);
        assert_int_equal(hw_capture_helpers_start(true), 0); /* idempotent */
        session s = {0};
        assert_true(wait_for_waiting_helper());
        assert_true(take_and_wait(&s));
        assert_int_equal(atomic_load(&s.runs), 1);
        hw_capture_helpers_stop();
        hw_capture_helpers_stop();
    }
    assert_false(hw_capture_helper_waiting());
}

/* A session handed over with a hung thread's CPU runs where the caller
 * may run, but not there; the next helper (made by the keeper while it
 * was moved too) may run on every CPU again. */
static void test_sessions_run_off_the_hung_cpu(void **state)
{
    (void)state;
    cpu_set_t own;
    assert_int_equal(sched_getaffinity(0, sizeof own, &own), 0);
    if (CPU_COUNT(&own) < 2)
        skip(); /* nowhere else to run */
    assert_int_equal(hw_capture_helpers_start(true), 0);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &own))
            continue;
        session s;
        memset(&s, 0, sizeof s);
        assert_true(wait_for_waiting_helper());
        assert_true(take_and_wait_off(&s, cpu));
        assert_int_equal(atomic_load(&s.runs), 1);
        assert_false(CPU_ISSET(cpu, &s.cpus));
        assert_int_equal(CPU_COUNT(&s.cpus), CPU_COUNT(&own) - 1);
        memset(&s, 0, sizeof s);
        assert_true(wait_for_waiting_helper());
        assert_true(take_and_wait(&s));
        assert_true(CPU_EQUAL(&s.cpus, &own));
    }
    hw_capture_helpers_stop();
}

/* hw_cpus_without: only where something is left; hw_cpu_avoid moves the
 * thread off each CPU asked for while one is left, and back at the end. */
static void test_a_thread_moves_off_cpus_and_back(void **state)
{
    (void)state;
    cpu_set_t one, out;
    CPU_ZERO(&one);
    CPU_SET(3, &one);
    assert_false(hw_cpus_without(&one, 3, &out)); /* nowhere else */
    assert_true(CPU_EQUAL(&out, &one));
    assert_false(hw_cpus_without(&one, 5, &out)); /* not one of them */
    CPU_SET(5, &one);
    assert_true(hw_cpus_without(&one, 5, &out));
    assert_int_equal(CPU_COUNT(&out), 1);
    assert_true(CPU_ISSET(3, &out));
    assert_false(hw_cpus_without(&one, -1, &out));

    cpu_set_t own, now;
    assert_int_equal(sched_getaffinity(0, sizeof own, &own), 0);
    hw_cpu_avoid(-1);
    assert_false(hw_cpu_avoiding());
    int first = -1;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &own))
            continue;
        if (first < 0)
            first = cpu;
        hw_cpu_avoid(cpu);
        assert_int_equal(sched_getaffinity(0, sizeof now, &now), 0);
        if (CPU_COUNT(&own) < 2) {
            assert_false(hw_cpu_avoiding());
            assert_true(CPU_EQUAL(&now, &own));
        } else {
            assert_true(hw_cpu_avoiding());
            assert_false(CPU_ISSET(first, &now)); /* the first stays avoided */
            assert_true(CPU_COUNT(&now) >= 1);   /* the last one is never taken away */
        }
    }
    hw_cpu_avoid_end();
    assert_false(hw_cpu_avoiding());
    assert_int_equal(sched_getaffinity(0, sizeof now, &now), 0);
    assert_true(CPU_EQUAL(&now, &own));
}

/* Another thread kept off a CPU by the one that hands it work, and back:
 * its affinity read by thread id after each step. */
static pthread_mutex_t parked_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t parked_wake = PTHREAD_COND_INITIALIZER;
static pid_t parked_tid;
static bool parked_release;

static void *parked_main(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&parked_lock);
    parked_tid = gettid();
    pthread_cond_broadcast(&parked_wake);
    while (!parked_release)
        pthread_cond_wait(&parked_wake, &parked_lock);
    pthread_mutex_unlock(&parked_lock);
    return NULL;
}

static void test_another_thread_kept_off_a_cpu(void **state)
{
    (void)state;
    cpu_set_t own, now;
    assert_int_equal(sched_getaffinity(0, sizeof own, &own), 0);
    pthread_t t;
    parked_tid = 0;
    parked_release = false;
    assert_int_equal(pthread_create(&t, NULL, parked_main, NULL), 0);
    pthread_mutex_lock(&parked_lock);
    while (parked_tid == 0)
        pthread_cond_wait(&parked_wake, &parked_lock);
    pid_t tid = parked_tid;
    pthread_mutex_unlock(&parked_lock);

    hw_cpu_placement p;
    memset(&p, 0, sizeof p);
    hw_cpu_placement_keep_off(&p, 0, 0); /* not running yet: nothing */
    assert_false(p.known);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &own))
            continue;
        hw_cpu_placement_keep_off(&p, tid, cpu);
        assert_int_equal(sched_getaffinity(tid, sizeof now, &now), 0);
        if (CPU_COUNT(&own) < 2) {
            assert_true(CPU_EQUAL(&now, &own)); /* nowhere else */
            assert_int_equal(p.off, -1);
        } else {
            assert_false(CPU_ISSET(cpu, &now));
            assert_int_equal(CPU_COUNT(&now), CPU_COUNT(&own) - 1);
            assert_int_equal(p.off, cpu);
        }
        hw_cpu_placement_keep_off(&p, tid, -1);
        assert_int_equal(sched_getaffinity(tid, sizeof now, &now), 0);
        assert_true(CPU_EQUAL(&now, &own));
        assert_int_equal(p.off, -1);
    }
    pthread_mutex_lock(&parked_lock);
    parked_release = true;
    pthread_cond_broadcast(&parked_wake);
    pthread_mutex_unlock(&parked_lock);
    pthread_join(t, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sessions_run_once_on_helpers),
        cmocka_unit_test(test_helpers_take_the_starters_policy),
        cmocka_unit_test(test_concurrent_callers),
        cmocka_unit_test(test_start_stop_repeated),
        cmocka_unit_test(test_sessions_run_off_the_hung_cpu),
        cmocka_unit_test(test_a_thread_moves_off_cpus_and_back),
        cmocka_unit_test(test_another_thread_kept_off_a_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
