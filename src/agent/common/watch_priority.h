/*
 * watch_priority.h - the policy of the agent's threads that must run the
 * moment they have work, whatever else the machine runs: the watch thread
 * (and the capture helpers it starts), and below it the registration
 * intake, the herald and the naming thread.
 */
#ifndef HANGWATCH_WATCH_PRIORITY_H
#define HANGWATCH_WATCH_PRIORITY_H

/* The real-time priorities (SCHED_FIFO) taken.  The watch thread's is the
 * higher: the naming thread can read a process's memory for tens of
 * milliseconds, and on the same CPU at the same priority the watch thread
 * waited for it (a second process's hang was captured 50-80 ms late). */
#define HW_WATCH_PRIORITY 2
#define HW_SERVICE_PRIORITY 1
/* The priority lender's, above them all (priority_lender.h). */
#define HW_LENDER_PRIORITY 3

/* The calling thread at SCHED_FIFO HW_WATCH_PRIORITY (SCHED_RESET_ON_FORK:
 * nothing it starts inherits it), where the agent may have it (root,
 * CAP_SYS_NICE, an RLIMIT_RTPRIO); without the right, or with
 * HANGWATCH_WATCH_POLICY=normal, the normal policy is kept silently. */
void hw_take_watch_priority(void);

/* The same at HW_SERVICE_PRIORITY: the threads that serve the watch
 * thread and must not hold it back. */
void hw_take_service_priority(void);

/* HW_LENDER_PRIORITY, or 0 with HANGWATCH_WATCH_POLICY=normal (no thread
 * of the agent is then above another, and there is nothing to lend). */
int hw_lender_priority(void);

#endif
