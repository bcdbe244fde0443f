/*
 * pi_mutex.h - a mutex the watch thread shares with a thread of lower
 * priority (the report worker at SCHED_IDLE, the link reaper, a metrics
 * scrape): with priority inheritance, so that a holder preempted by the
 * machine's other work runs at the waiter's priority until it lets go,
 * and the watch thread, at SCHED_FIFO, is never kept waiting behind it.
 */
#ifndef HANGWATCH_PI_MUTEX_H
#define HANGWATCH_PI_MUTEX_H

#include <pthread.h>

/* pthread_mutex_init with PTHREAD_PRIO_INHERIT: 0, or an errno. */
int hw_pi_mutex_init(pthread_mutex_t *m);

#endif
