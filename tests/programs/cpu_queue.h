/*
 * cpu_queue.h - for the test programs that time their own waits: how long
 * the calling thread has waited for a CPU so far, by the kernel's count
 * (schedstat's run_delay).  A wait that overran by that much was the busy
 * machine's, not the watcher's: the tests allow it.
 */
#ifndef HANGWATCH_TEST_CPU_QUEUE_H
#define HANGWATCH_TEST_CPU_QUEUE_H

#include <stdio.h>

/* In seconds; 0 when it cannot be read. */
static inline double queued_seconds(void)
{
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    unsigned long long on_cpu = 0, run_delay = 0;
    if (f != NULL) {
        if (fscanf(f, "%llu %llu", &on_cpu, &run_delay) != 2)
            run_delay = 0;
        fclose(f);
    }
    return (double)run_delay / 1e9;
}

#endif
