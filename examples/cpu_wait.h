/*
 * cpu_wait.h - how long the calling thread has waited for a CPU so far, by
 * the kernel's run-queue count (/proc/thread-self/schedstat).  The examples
 * print it beside how long their blocking callback took: a busy machine
 * makes a sleep end later by that much, and hangwatch does not.
 */
#ifndef HANGWATCH_EXAMPLE_CPU_WAIT_H
#define HANGWATCH_EXAMPLE_CPU_WAIT_H

#include <stdio.h>

/* Seconds runnable but not running since the thread started (0 without schedstat). */
static inline double cpu_wait_seconds(void)
{
    unsigned long long on_cpu_ns = 0, waiting_ns = 0;
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (f == NULL)
        return 0;
    if (fscanf(f, "%llu %llu", &on_cpu_ns, &waiting_ns) != 2)
        waiting_ns = 0;
    fclose(f);
    return (double)waiting_ns / 1e9;
}

#endif
