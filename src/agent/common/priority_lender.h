/*
 * priority_lender.h - priority inheritance, by hand, for the locks the
 * agent's threads share without knowing it: the allocator's, stdio's, the
 * loader's (decisions.md §64).
 *
 * The report worker and the Sentry sender run on idle time (SCHED_IDLE),
 * the watch thread, a capture's session and the naming thread at
 * SCHED_FIFO; a thread at idle time preempted while it holds the
 * allocator's lock waits for idle time a busy machine does not have, and
 * the real-time thread that wants the lock next waits with it.  The kernel
 * lends priority through PI futexes only, and these locks are not.
 *
 * A real-time thread says when it has work in hand (a step).  When a step
 * has lasted HW_LEND_AFTER_NS and its thread is asleep in futex, or
 * HW_LEND_AFTER_RUNNING_NS and it is still runnable (a sanitizer's lock is
 * waited for spinning, in sched_yield), the lender's thread gives every
 * other thread of the agent that is runnable and below real time
 * SCHED_FIFO 1 (the service threads', never above a real-time thread of
 * the agent) for HW_LEND_NS, then its own policy back; again every
 * HW_LEND_AFTER_NS while the step stays stuck.
 */
#ifndef HANGWATCH_PRIORITY_LENDER_H
#define HANGWATCH_PRIORITY_LENDER_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define HW_LEND_AFTER_NS (3ull * 1000 * 1000)
#define HW_LEND_AFTER_RUNNING_NS (10ull * 1000 * 1000)
#define HW_LEND_NS (1ull * 1000 * 1000)

/* The lender's thread, at SCHED_FIFO `priority` (above every stepping
 * thread's: a thread lent a stepping thread's priority runs until it
 * sleeps, and the lender must preempt it to end the lend).  Nothing starts
 * for a priority of 0, and the agent's right to real time missing is
 * EPERM: then steps cost nothing.  0, or an errno. */
int hw_priority_lender_start(int priority);
void hw_priority_lender_stop(void);

/* The calling thread, real-time or not, has work in hand from now (open)
 * or no more (close: whether a step was open).  Two timerfd_settime calls; nothing while the
 * lender is not running.  A thread that opened a step and ends calls
 * hw_rt_step_leave. */
void hw_rt_step_open(void);
bool hw_rt_step_close(void);
void hw_rt_step_leave(void);

/* sched_setscheduler(tid, policy, param) for a thread of the agent that
 * sets its own policy (or the watch thread the worker's): while a lend
 * holds `tid`, the policy is what it gets back at the lend's end.  0, or
 * -1 with errno. */
int hw_thread_policy_set(pid_t tid, int policy, const struct sched_param *param);

/* One thread's real-time loan: what it had, to be given back. */
typedef struct hw_rt_loan {
    pid_t tid;  /* 0: none */
    int policy; /* with SCHED_RESET_ON_FORK where it had it */
    struct sched_param param;
} hw_rt_loan;

/* Put thread `tid` of process `pid` at SCHED_FIFO `priority` if it is
 * runnable (R) and below real time (normal, batch or idle policy): true
 * when it now is, `loan` holding what it had.  Its nice is the kernel's
 * to keep across the change.  Used by the lender for the agent's own
 * threads, and by a capture for a hung thread that waits for a CPU to
 * take its stop on (snapshot.c, decisions.md §66). */
bool hw_rt_lend(pid_t pid, pid_t tid, int priority, hw_rt_loan *loan);

/* Its own policy and parameters back; nothing for a loan not made.  False
 * when they could not be put back (it exited). */
bool hw_rt_loan_end(hw_rt_loan *loan);

/* Lends made since the start (the tests' view). */
unsigned long hw_priority_lends(void);

#endif
