/*
 * watch_priority.h - the policy of the agent's threads that must run the
 * moment they have work, whatever else the machine runs: the watch thread
 * (and the capture helpers it starts), and below it the registration
 * intake, the herald and the naming thread; and of those that must never
 * take a CPU from the program: the report worker and the Sentry sender.
 */
#ifndef HANGWATCH_WATCH_PRIORITY_H
#define HANGWATCH_WATCH_PRIORITY_H

#include <stdbool.h>
#include <sys/types.h>

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

/* The calling thread, about to end, back at the normal policy: its end
 * (the C library's freeing of its stack and thread state, a sanitizer's
 * teardown) is not real-time work.  Under ThreadSanitizer beside two CPU
 * hogs, two capture helpers ending at SCHED_FIFO 2 spun in sched_yield on
 * the sanitizer's allocator lock, which the herald, ending at SCHED_FIFO
 * 1, held: it never ran again, and the agent held both CPUs for minutes. */
void hw_leave_real_time(void);

/* HW_LENDER_PRIORITY, or 0 with HANGWATCH_WATCH_POLICY=normal (no thread
 * of the agent is then above another, and there is nothing to lend). */
int hw_lender_priority(void);

/* The nice of the threads on idle time, and of the report worker when it
 * is raised from there: a lower priority than a program's usual nice 0. */
#define HW_BACKGROUND_NICE 10

/* Thread `tid` on idle time (SCHED_IDLE), where the agent may bring it
 * back to the normal policy at nice `nice` later: that takes CAP_SYS_NICE,
 * or an RLIMIT_NICE that allows `nice` (sched(7)).  An agent with neither
 * (a user's own, `watch` given only the capabilities it needs) would leave
 * the thread on idle time for good: on a busy machine the worker got a CPU
 * for 4 ms in every 1.4 s, and the agent's exit waited tens of seconds for
 * it.  The thread is put at nice `nice` in either case, and stays there
 * on idle time.  True when it is on idle time. */
bool hw_take_idle_time(pid_t tid, int nice);

#endif
