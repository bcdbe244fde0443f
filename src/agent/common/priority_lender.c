/*
 * priority_lender.c - see priority_lender.h; why: decisions.md §64.
 *
 * What it measured: a scheduler trace of `hangwatch run` beside two CPU
 * hogs caught the watch thread asleep 282 ms in the allocator's futex,
 * behind the report worker (SCHED_IDLE), preempted inside the allocator
 * with its lock held; a hang that began and ended in those 282 ms was
 * never seen.
 *
 * Each step is a timerfd, armed when its thread opens a step and disarmed
 * when it closes it, in one epoll the lender's thread sleeps on: a step
 * that ends in time wakes nobody.  The lender's own work allocates nothing
 * and reads /proc into its stack (proc_read.h): it must not wait for the
 * lock it is there to free.  Its one lock is a PI mutex, held for
 * moments, never across the lend's sleep.
 */
#include "priority_lender.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "pi_mutex.h"
#include "proc_read.h"
#include "watch_priority.h"

#define MAX_STEPS 32 /* the watch thread, a session per capture at once, the naming thread */
#define MAX_LENT 64
#define MAX_CHANGING 8 /* threads setting their own policy at once */
#define STOP_TAG UINT32_MAX

typedef struct {
    pid_t tid; /* 0: a free slot */
    int timer_fd;
    atomic_uint seq;         /* odd while a step is open; written by its thread only */
    atomic_ullong opened_ns; /* when the open step began (CLOCK_MONOTONIC) */
} rt_step;


static struct {
    pthread_once_t once;
    pthread_mutex_t lock; /* PI: the slots, the lent threads, policies set */
    atomic_bool running;
    int epoll_fd, stop_fd;
    pthread_t thread;
    rt_step steps[MAX_STEPS];
    hw_rt_loan lent[MAX_LENT];
    size_t lent_count;
    atomic_int changing[MAX_CHANGING]; /* tids setting their own policy outside the lock: not lent to */
    atomic_ulong lends;
} lender = {.once = PTHREAD_ONCE_INIT, .epoll_fd = -1, .stop_fd = -1};

static _Thread_local int own_slot = -1;

static void init_lock(void)
{
    hw_pi_mutex_init(&lender.lock);
}

static pid_t gettid_now(void)
{
    return (pid_t)syscall(SYS_gettid);
}

static void arm(int fd, uint64_t ns)
{
    struct itimerspec t = {.it_value = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)}};
    (void)timerfd_settime(fd, 0, &t, NULL);
}

/* ---- the steps, on their threads ---- */

static bool enrol(void)
{
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (fd < 0)
        return false;
    pthread_mutex_lock(&lender.lock);
    int slot = -1;
    for (int i = 0; i < MAX_STEPS && slot < 0; i++)
        if (lender.steps[i].tid == 0)
            slot = i;
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)slot};
    if (slot >= 0 && epoll_ctl(lender.epoll_fd, EPOLL_CTL_ADD, fd, &ev) == 0) {
        lender.steps[slot].tid = gettid_now();
        lender.steps[slot].timer_fd = fd;
        atomic_store_explicit(&lender.steps[slot].seq, 0, memory_order_relaxed);
        own_slot = slot;
    }
    pthread_mutex_unlock(&lender.lock);
    if (own_slot < 0)
        close(fd); /* every slot taken: this thread's steps are not watched */
    return own_slot >= 0;
}

void hw_rt_step_open(void)
{
    if (!atomic_load_explicit(&lender.running, memory_order_acquire))
        return;
    if (own_slot < 0 && !enrol())
        return;
    rt_step *s = &lender.steps[own_slot];
    unsigned seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
    if (!(seq & 1)) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        atomic_store_explicit(&s->opened_ns, (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec,
                              memory_order_relaxed);
        atomic_store_explicit(&s->seq, seq + 1, memory_order_release);
    }
    arm(s->timer_fd, HW_LEND_AFTER_NS);
}

bool hw_rt_step_close(void)
{
    if (own_slot < 0)
        return false;
    rt_step *s = &lender.steps[own_slot];
    unsigned seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
    if (!(seq & 1))
        return false;
    atomic_store_explicit(&s->seq, seq + 1, memory_order_release);
    arm(s->timer_fd, 0); /* 0: disarmed */
    return true;
}

void hw_rt_step_leave(void)
{
    if (own_slot < 0)
        return;
    (void)hw_rt_step_close();
    pthread_mutex_lock(&lender.lock);
    close(lender.steps[own_slot].timer_fd); /* out of the epoll with it */
    lender.steps[own_slot].tid = 0;
    pthread_mutex_unlock(&lender.lock);
    own_slot = -1;
}

/* ---- policies ---- */

/* A free place in lender.changing for `tid`, taken; -1 when all are
 * taken.  With the lock. */
static int mark_changing(pid_t tid)
{
    for (int k = 0; k < MAX_CHANGING; k++) {
        if (atomic_load_explicit(&lender.changing[k], memory_order_relaxed) == 0) {
            atomic_store_explicit(&lender.changing[k], tid, memory_order_relaxed);
            return k;
        }
    }
    return -1;
}

static bool is_changing(pid_t tid)
{
    for (int k = 0; k < MAX_CHANGING; k++)
        if (atomic_load_explicit(&lender.changing[k], memory_order_acquire) == tid)
            return true;
    return false;
}

int hw_thread_policy_set(pid_t tid, int policy, const struct sched_param *param)
{
    pthread_once(&lender.once, init_lock);
    pthread_mutex_lock(&lender.lock);
    int rc = 0;
    size_t i = 0;
    while (i < lender.lent_count && lender.lent[i].tid != tid)
        i++;
    if (i < lender.lent_count) { /* lent: this is what it gets back */
        lender.lent[i].policy = policy;
        lender.lent[i].param = *param;
        pthread_mutex_unlock(&lender.lock);
        return 0;
    }
    /* A thread's own policy is set outside the lock: one that lowers
     * itself (to idle time) can be preempted the moment the call returns,
     * and would hold the lock there, for as long as a busy machine keeps it
     * from a CPU, from a thread that has no priority to lend it yet (the
     * watch thread taking its own).  Marked meanwhile: a lend to it would
     * end by restoring the policy it had before. */
    int mark = tid == gettid_now() ? mark_changing(tid) : -1;
    if (mark < 0)
        rc = sched_setscheduler(tid, policy, param);
    pthread_mutex_unlock(&lender.lock);
    if (mark >= 0) {
        rc = sched_setscheduler(tid, policy, param);
        atomic_store_explicit(&lender.changing[mark], 0, memory_order_release);
    }
    return rc;
}

/* ---- the lender's looks, into its stack ---- */

/* Is the thread asleep in futex (a lock, or a condition)? */
static bool in_futex(pid_t tid)
{
    return hw_task_syscall(getpid(), tid) == SYS_futex;
}

/* The thread's state letter (R: running or preempted), '?' when gone. */
static char task_state(pid_t tid)
{
    return hw_task_state(getpid(), tid);
}

bool hw_rt_lend(pid_t pid, pid_t tid, int priority, hw_rt_loan *loan)
{
    loan->tid = 0;
    if (hw_task_state(pid, tid) != 'R')
        return false;
    int policy = sched_getscheduler(tid);
    int base = policy & ~SCHED_RESET_ON_FORK;
    struct sched_param was, fifo = {.sched_priority = priority};
    if (policy < 0 || base == SCHED_FIFO || base == SCHED_RR || base == 6 /* SCHED_DEADLINE */ ||
        sched_getparam(tid, &was) != 0 || sched_setscheduler(tid, SCHED_FIFO | SCHED_RESET_ON_FORK, &fifo) != 0)
        return false;
    *loan = (hw_rt_loan){tid, policy, was};
    return true;
}

bool hw_rt_loan_end(hw_rt_loan *loan)
{
    if (loan->tid == 0)
        return true;
    bool ok = sched_setscheduler(loan->tid, loan->policy, &loan->param) == 0;
    loan->tid = 0;
    return ok;
}

/* Lend `priority` to `tid` if it is runnable and below real time; with
 * the lock. */
static void lend_to(pid_t tid, int priority)
{
    if (lender.lent_count < MAX_LENT && !is_changing(tid) &&
        hw_rt_lend(getpid(), tid, priority, &lender.lent[lender.lent_count]))
        lender.lent_count++;
}

/* The agent's threads (but the lender and the stuck one) that are
 * runnable and below real time, at the service threads' priority: above
 * whatever else the machine runs, never above a real-time thread of the
 * agent (the registration intake, the herald, the naming thread would
 * otherwise wait for the lent ones).  How many. */
static size_t lend(pid_t stuck)
{
    const int priority = HW_SERVICE_PRIORITY;
    int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return 0;
    pid_t self = gettid_now();
    alignas(8) char buf[4096];
    long n;
    pthread_mutex_lock(&lender.lock);
    while ((n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
        for (long at = 0; at < n;) {
            /* struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name */
            unsigned short reclen;
            memcpy(&reclen, buf + at + 16, sizeof reclen);
            const char *name = buf + at + 19;
            long tid = name[0] >= '1' && name[0] <= '9' ? strtol(name, NULL, 10) : 0;
            if (tid > 0 && tid != self && tid != stuck)
                lend_to((pid_t)tid, priority);
            if (reclen == 0)
                break;
            at += reclen;
        }
    }
    size_t count = lender.lent_count;
    pthread_mutex_unlock(&lender.lock);
    close(dir);
    return count;
}

static void give_back(void)
{
    pthread_mutex_lock(&lender.lock);
    for (size_t i = 0; i < lender.lent_count; i++)
        (void)hw_rt_loan_end(&lender.lent[i]);
    lender.lent_count = 0;
    pthread_mutex_unlock(&lender.lock);
}

/* Is the step's thread stuck: asleep in futex (a lock's waiter, or a
 * condition's), or, real-time, runnable for HW_LEND_AFTER_RUNNING_NS into
 * its step (a lock's waiter that spins, or work that long)? */
static bool stuck(pid_t tid, uint64_t opened_ns)
{
    char state = task_state(tid);
    if (state == 'S')
        return in_futex(tid);
    int policy = sched_getscheduler(tid) & ~SCHED_RESET_ON_FORK;
    if (state != 'R' || (policy != SCHED_FIFO && policy != SCHED_RR))
        return false; /* below real time, a waiter that spins yields its CPU */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    return now_ns - opened_ns >= HW_LEND_AFTER_RUNNING_NS;
}

/* A step's timer fired: lend if its thread is stuck, and look again
 * HW_LEND_AFTER_NS on while the same step stays open. */
static void look_at(uint32_t slot)
{
    if (slot >= MAX_STEPS)
        return;
    rt_step *s = &lender.steps[slot];
    pthread_mutex_lock(&lender.lock);
    uint64_t expirations;
    bool due = s->tid != 0 && read(s->timer_fd, &expirations, sizeof expirations) == (ssize_t)sizeof expirations;
    pid_t tid = s->tid;
    unsigned seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    uint64_t opened_ns = atomic_load_explicit(&s->opened_ns, memory_order_relaxed);
    pthread_mutex_unlock(&lender.lock);
    if (!due || !(seq & 1))
        return; /* a slot taken over, or a step closed since */
    uint64_t next = HW_LEND_AFTER_NS;
    if (stuck(tid, opened_ns)) {
        if (lend(tid) > 0) {
            atomic_fetch_add_explicit(&lender.lends, 1, memory_order_relaxed);
            struct timespec t = {0, (long)HW_LEND_NS};
            while (nanosleep(&t, &t) != 0 && errno == EINTR)
                ;
            give_back();
        } else {
            next = HW_LEND_AFTER_RUNNING_NS; /* nobody to lend to: a long step's looks, fewer */
        }
    }
    pthread_mutex_lock(&lender.lock);
    if (s->tid == tid && atomic_load_explicit(&s->seq, memory_order_acquire) == seq)
        arm(s->timer_fd, next); /* (a close just after is undone at the next look) */
    pthread_mutex_unlock(&lender.lock);
}

static void *lender_main(void *unused)
{
    (void)unused;
    struct sched_param param;
    if (sched_getparam(0, &param) == 0) /* (made at it; the flag too) */
        (void)sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &param);
    struct epoll_event ev[8];
    for (;;) {
        int n = epoll_wait(lender.epoll_fd, ev, 8, -1);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u32 == STOP_TAG)
                goto end;
            look_at(ev[i].data.u32);
        }
    }
end:
    hw_leave_real_time();
    return NULL;
}

int hw_priority_lender_start(int priority)
{
    pthread_once(&lender.once, init_lock);
    if (atomic_load(&lender.running) || priority <= 0)
        return 0;
    lender.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    lender.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = STOP_TAG};
    int e = lender.epoll_fd < 0 || lender.stop_fd < 0 ? errno
            : epoll_ctl(lender.epoll_fd, EPOLL_CTL_ADD, lender.stop_fd, &ev) != 0 ? errno
                                                                                 : 0;
    if (e == 0) {
        /* Every signal blocked, inherited: a signal is the agent's main
         * thread's (its signalfd's), and one taken here would be lost. */
        sigset_t all, saved;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &saved);
        pthread_attr_t attr;
        struct sched_param param = {.sched_priority = priority};
        e = pthread_attr_init(&attr);
        if (e == 0) {
            pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
            pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
            pthread_attr_setschedparam(&attr, &param);
            e = pthread_create(&lender.thread, &attr, lender_main, NULL); /* EPERM: no right to it */
            pthread_attr_destroy(&attr);
        }
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
    }
    if (e != 0) {
        if (lender.epoll_fd >= 0)
            close(lender.epoll_fd);
        if (lender.stop_fd >= 0)
            close(lender.stop_fd);
        lender.epoll_fd = lender.stop_fd = -1;
        return e;
    }
    atomic_store_explicit(&lender.running, true, memory_order_release);
    return 0;
}

void hw_priority_lender_stop(void)
{
    if (!atomic_exchange(&lender.running, false))
        return;
    uint64_t one = 1;
    if (write(lender.stop_fd, &one, sizeof one) == (ssize_t)sizeof one)
        pthread_join(lender.thread, NULL);
    else
        pthread_detach(lender.thread);
    give_back(); /* (the thread ends between lends, but to be sure) */
    pthread_mutex_lock(&lender.lock);
    close(lender.epoll_fd);
    close(lender.stop_fd);
    lender.epoll_fd = lender.stop_fd = -1;
    pthread_mutex_unlock(&lender.lock);
}

unsigned long hw_priority_lends(void)
{
    return atomic_load_explicit(&lender.lends, memory_order_relaxed);
}
