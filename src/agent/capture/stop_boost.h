/*
 * stop_boost.h - a hung thread that waits for a CPU gets one to stop on.
 *
 * A capture asks the thread to stop (PTRACE_INTERRUPT); it stops the next
 * time it runs.  On a busy machine a runnable thread may wait hundreds of
 * milliseconds for a CPU, and the capture then gave up on it and tried
 * again later, by which time the hang could be over and the stack the
 * next one's (decisions.md §66).  A thread that has not stopped within
 * HW_STOP_BOOST_AFTER_NS and is runnable is put at SCHED_FIFO 1 until its
 * stop is seen, and its own scheduling attributes are put back while it is
 * stopped, before it runs again.
 *
 * It never runs its own code boosted: the pending interrupt stops it on
 * its way back to user space.  What can run boosted is the kernel's work
 * of a system call in progress, until the stop or the capture's deadline
 * (the kernel's real-time throttling bounds it too).  A thread already at
 * a real-time or deadline policy is left alone, and so is one the agent
 * may not change (no CAP_SYS_NICE, or a cgroup without real-time time).
 */
#ifndef HANGWATCH_STOP_BOOST_H
#define HANGWATCH_STOP_BOOST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define HW_STOP_BOOST_AFTER_NS (10ull * 1000 * 1000)

typedef struct hw_stop_boost {
    pid_t tid;        /* boosted, or 0 */
    uint32_t policy;  /* what it had: the policy, its flags and nice */
    uint64_t flags;
    int32_t nice;
} hw_stop_boost;

/* Boost `tid` of process `pid` if it is runnable and at a normal, batch or
 * idle policy: true when it now is. */
bool hw_stop_boost_begin(pid_t pid, pid_t tid, hw_stop_boost *boost);

/* Its own attributes back (nothing when it was not boosted); false when
 * they could not be put back (it exited: nothing left to restore). */
bool hw_stop_boost_end(hw_stop_boost *boost);

#endif
