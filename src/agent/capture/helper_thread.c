/*
 * helper_thread.c - capture helpers at the caller's policy, and the one
 * kept waiting so that a capture never creates a thread (helper_thread.h
 * says why: the loader's lock, held by a starved SCHED_IDLE thread).
 *
 * The keeper thread sleeps until no helper waits, makes one, and sleeps
 * again.  The waiting helper sleeps on a condition variable until a
 * capture hands it a session, runs it, posts the caller's semaphore and
 * ends.  Both run at the captures' thread's policy and priority, with
 * every signal blocked (a signal is the program's or the agent's main
 * thread's, never theirs).  If the keeper is slow to make the next one (it
 * waits for the lock itself), a capture that finds no helper waiting
 * creates its own, as it did before there was a keeper.
 */
#include "helper_thread.h"
#include "stack_scratch.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/common/cpu_avoid.h"
#include "agent/common/watch_priority.h"

#define STOP_WAIT_NS (1000ull * 1000 * 1000)  /* a keeper waiting for the loader must not hold the agent's exit */
#define START_WAIT_NS (1000ull * 1000 * 1000) /* for the first helper */
#define RETRY_NS (100ull * 1000 * 1000)       /* after a helper could not be created */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;   /* the waiting helper: a session, or the stop */
    pthread_cond_t need;   /* the keeper: no helper waits, or the stop */
    pthread_cond_t change; /* start and stop: a helper waits, or a thread ended */
    bool started;          /* between start and stop */
    bool waiting;          /* a helper waits for a session */
    bool made;             /* one is made and has not begun to wait yet */
    unsigned alive;        /* the keeper and its helpers that have not ended */
    void (*run)(void *);   /* the session handed over, until the helper takes it */
    void *arg;
    sem_t *done;
    int policy; /* the captures' thread's, for every helper */
    struct sched_param param;
    cpu_set_t affinity;
    pid_t keeper_tid;  /* 0 until it runs */
    pid_t waiting_tid; /* the waiting helper's, while `waiting` */
    pid_t run_for;     /* the helper `run` is handed to */
    bool keeper_placed; /* its affinity is not `affinity` (hw_capture_helper_take moved it) */
} keeper = {.lock = PTHREAD_MUTEX_INITIALIZER,
            .wake = PTHREAD_COND_INITIALIZER,
            .need = PTHREAD_COND_INITIALIZER,
            .change = PTHREAD_COND_INITIALIZER};

static atomic_ulong taken_count, created_count;

/* A thread at `policy` (SCHED_FIFO or SCHED_RR: explicitly, else the
 * default attributes), detached or joinable, on `affinity` if given. */
static int create_at(pthread_t *thread, int policy, const struct sched_param *param, const cpu_set_t *affinity,
                     bool detached, void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0)
        return pthread_create(thread, NULL, fn, arg);
    if (detached)
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (affinity != NULL)
        pthread_attr_setaffinity_np(&attr, sizeof *affinity, affinity);
    bool real_time = policy == SCHED_FIFO || policy == SCHED_RR;
    if (real_time) {
        pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(&attr, policy);
        pthread_attr_setschedparam(&attr, param);
    }
    int e = pthread_create(thread, &attr, fn, arg);
    if (e == EPERM && real_time) { /* no right to it after all */
        pthread_attr_setinheritsched(&attr, PTHREAD_INHERIT_SCHED);
        e = pthread_create(thread, &attr, fn, arg);
    }
    pthread_attr_destroy(&attr);
    return e;
}

/* The calling thread's policy (without SCHED_RESET_ON_FORK) and priority;
 * SCHED_OTHER when they cannot be read. */
static int own_policy(struct sched_param *param)
{
    int policy = sched_getscheduler(0);
    if (policy < 0 || sched_getparam(0, param) != 0) {
        param->sched_priority = 0;
        return SCHED_OTHER;
    }
    return policy & ~SCHED_RESET_ON_FORK;
}

int hw_helper_thread_create(pthread_t *thread, void *(*fn)(void *), void *arg)
{
    struct sched_param param;
    int policy = own_policy(&param);
    atomic_fetch_add_explicit(&created_count, 1, memory_order_relaxed);
    return create_at(thread, policy, &param, NULL, false, fn, arg);
}

/* Called with the lock held: one thread of the keeper's has ended. */
static void ended_locked(void)
{
    keeper.alive--;
    pthread_cond_broadcast(&keeper.change);
}

static void *waiting_helper_main(void *unused)
{
    (void)unused;
    pid_t self = (pid_t)syscall(SYS_gettid);
    pthread_mutex_lock(&keeper.lock);
    /* Waiting from here, its thread id known: hw_capture_helper_take
     * places it by that id and hands the session to it alone (the one
     * made after it can begin to wait before it wakes). */
    keeper.made = false;
    if (keeper.started) {
        keeper.waiting_tid = self;
        keeper.waiting = true;
    }
    pthread_cond_broadcast(&keeper.change);
    while (!(keeper.run != NULL && keeper.run_for == self) && keeper.started)
        pthread_cond_wait(&keeper.wake, &keeper.lock);
    bool mine = keeper.run != NULL && keeper.run_for == self;
    void (*run)(void *) = mine ? keeper.run : NULL;
    void *arg = keeper.arg;
    sem_t *done = keeper.done;
    if (mine)
        keeper.run = NULL;
    pthread_mutex_unlock(&keeper.lock);
    if (run != NULL) {
        run(arg);
        sem_post(done); /* the session is over: its caller goes on */
    }
    pthread_mutex_lock(&keeper.lock);
    ended_locked();
    pthread_mutex_unlock(&keeper.lock);
    hw_leave_real_time();
    return NULL;
}

/* Absolute CLOCK_REALTIME (the condition variables' clock) `ns` from now. */
static struct timespec after_ns(unsigned long long ns)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    unsigned long long sum = (unsigned long long)t.tv_nsec + ns;
    t.tv_sec += (time_t)(sum / 1000000000ull);
    t.tv_nsec = (long)(sum % 1000000000ull);
    return t;
}

static void *keeper_main(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&keeper.lock);
    keeper.keeper_tid = (pid_t)syscall(SYS_gettid);
    int policy = keeper.policy;
    struct sched_param param = keeper.param;
    cpu_set_t affinity = keeper.affinity;
    while (keeper.started) {
        if (keeper.waiting || keeper.made) {
            pthread_cond_wait(&keeper.need, &keeper.lock);
            continue;
        }
        keeper.alive++; /* counted before it runs: the stop waits for it */
        keeper.made = true;
        /* Moved off a hung thread's CPU by the capture that took the last
         * helper: the next one starts there too (its first instructions
         * would preempt that thread), and is put back on every CPU when
         * it is handed its session; then the keeper goes back. */
        bool placed = keeper.keeper_placed;
        keeper.keeper_placed = false;
        cpu_set_t now = affinity;
        if (placed && sched_getaffinity(0, sizeof now, &now) != 0)
            now = affinity;
        pthread_mutex_unlock(&keeper.lock);
        pthread_t thread;
        int e = create_at(&thread, policy, &param, &now, true, waiting_helper_main, NULL);
        if (placed)
            (void)sched_setaffinity(0, sizeof affinity, &affinity);
        pthread_mutex_lock(&keeper.lock);
        if (e != 0) { /* (made: it says it waits itself) */
            keeper.made = false;
            ended_locked();
            struct timespec retry = after_ns(RETRY_NS);
            while (keeper.started && pthread_cond_timedwait(&keeper.need, &keeper.lock, &retry) != ETIMEDOUT)
                ;
        }
    }
    ended_locked();
    pthread_mutex_unlock(&keeper.lock);
    hw_leave_real_time();
    return NULL;
}

int hw_capture_helpers_start(bool wait_for_first)
{
    pthread_mutex_lock(&keeper.lock);
    if (keeper.started) {
        pthread_mutex_unlock(&keeper.lock);
        return 0;
    }
    keeper.policy = own_policy(&keeper.param);
    if (sched_getaffinity(0, sizeof keeper.affinity, &keeper.affinity) != 0) {
        CPU_ZERO(&keeper.affinity);
        for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
            CPU_SET(cpu, &keeper.affinity);
    }
    keeper.started = true;
    keeper.alive++;
    keeper.keeper_tid = 0; /* the new keeper's, once it runs */
    pthread_mutex_unlock(&keeper.lock);
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved); /* inherited by the keeper, and by its helpers from it */
    pthread_t thread;
    int e = create_at(&thread, keeper.policy, &keeper.param, NULL, true, keeper_main, NULL);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    pthread_mutex_lock(&keeper.lock);
    if (e != 0) {
        keeper.started = false;
        ended_locked();
    }
    struct timespec deadline = after_ns(START_WAIT_NS);
    while (e == 0 && wait_for_first && !keeper.waiting &&
           pthread_cond_timedwait(&keeper.change, &keeper.lock, &deadline) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&keeper.lock);
    return e;
}

void hw_capture_helpers_stop(void)
{
    hw_stack_scratch_release_all(); /* the calling thread's: its captures are over */
    struct timespec deadline = after_ns(STOP_WAIT_NS);
    pthread_mutex_lock(&keeper.lock);
    keeper.started = false;
    pthread_cond_broadcast(&keeper.wake);
    pthread_cond_broadcast(&keeper.need);
    while (keeper.alive > 0)
        if (pthread_cond_timedwait(&keeper.change, &keeper.lock, &deadline) == ETIMEDOUT)
            break;
    keeper.waiting = keeper.made = false;
    if (keeper.alive == 0)
        keeper.keeper_tid = 0; /* ended: its id may be another thread's, of any process, by now */
    pthread_mutex_unlock(&keeper.lock);
}

bool hw_capture_helper_take(void (*run)(void *arg), void *arg, sem_t *done, int avoid_cpu)
{
    pthread_mutex_lock(&keeper.lock);
    bool ready = keeper.started && keeper.waiting && keeper.run == NULL;
    if (ready) {
        /* Placed before they wake: a wake-up on the hung thread's CPU
         * preempts it there at once (cpu_avoid.h).  The helper always
         * (off that CPU, or back on every CPU if it was made off one);
         * the keeper when there is a CPU to avoid. */
        cpu_set_t elsewhere;
        (void)hw_cpu_place(keeper.waiting_tid, &keeper.affinity, avoid_cpu);
        if (hw_cpus_without(&keeper.affinity, avoid_cpu, &elsewhere) && keeper.keeper_tid > 0 &&
            hw_cpu_place(keeper.keeper_tid, &keeper.affinity, avoid_cpu))
            keeper.keeper_placed = true;
        keeper.run = run;
        keeper.run_for = keeper.waiting_tid;
        keeper.arg = arg;
        keeper.done = done;
        keeper.waiting = false;
        pthread_cond_broadcast(&keeper.wake); /* the one it is for may not be alone in waiting */
        pthread_cond_signal(&keeper.need); /* the next one, now */
    }
    pthread_mutex_unlock(&keeper.lock);
    if (ready)
        atomic_fetch_add_explicit(&taken_count, 1, memory_order_relaxed);
    return ready;
}

bool hw_capture_helper_waiting(void)
{
    pthread_mutex_lock(&keeper.lock);
    bool waiting = keeper.started && keeper.waiting;
    pthread_mutex_unlock(&keeper.lock);
    return waiting;
}

void hw_capture_helpers_counts(unsigned long *taken, unsigned long *created)
{
    if (taken != NULL)
        *taken = atomic_load_explicit(&taken_count, memory_order_relaxed);
    if (created != NULL)
        *created = atomic_load_explicit(&created_count, memory_order_relaxed);
}
