/*
 * watch_priority.h - the policy of the agent's threads that must run the
 * moment they have work, whatever else the machine runs: the watch thread,
 * the registration intake, the herald and the naming thread.
 */
#ifndef HANGWATCH_WATCH_PRIORITY_H
#define HANGWATCH_WATCH_PRIORITY_H

/* The calling thread at the lowest real-time priority (SCHED_FIFO 1,
 * SCHED_RESET_ON_FORK: nothing it starts inherits it), where the agent may
 * have it (root, CAP_SYS_NICE, an RLIMIT_RTPRIO); without the right, or with
 * HANGWATCH_WATCH_POLICY=normal, the normal policy is kept silently. */
void hw_take_watch_priority(void);

#endif
