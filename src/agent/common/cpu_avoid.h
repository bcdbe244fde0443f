/*
 * cpu_avoid.h - keeping the agent's threads off the CPU a hung thread runs
 * on while they work on its capture and report.
 *
 * A hung thread that spins keeps one CPU.  The agent's threads that must
 * run at once (the watch thread, the capture's helper and the keeper that
 * makes the next one, the naming thread: real-time priority) preempt it
 * when the scheduler wakes them there, and the report worker, at
 * SCHED_IDLE, still gets a slice of it at each wake-up on a kernel whose
 * scheduler is EEVDF (its lag is reset while it sleeps).  Everything they
 * did there, before the stop and after it, was the program's lost time:
 * a capture's stop of 0.2 ms cost the spinning thread 1-2 ms, and each
 * report a few more (docs/decisions.md §63).  So, where the thread may run
 * elsewhere, it does, for as long as it works for that hang.
 */
#ifndef HANGWATCH_CPU_AVOID_H
#define HANGWATCH_CPU_AVOID_H

#include <sched.h>
#include <stdbool.h>
#include <sys/types.h>

/* `from` without `cpu` into `out`: true when `cpu` was in it and others
 * are left (there is somewhere else to run), else false and `out` is
 * `from`. */
bool hw_cpus_without(const cpu_set_t *from, int cpu, cpu_set_t *out);

/* Keep the calling thread off `cpu` (-1 or out of range: nothing) as well
 * as the CPUs avoided since its last hw_cpu_avoid_end, where its own set
 * (its affinity at its first call) leaves another CPU; else it stays
 * where it may run.  A system call only when its set changes. */
void hw_cpu_avoid(int cpu);

/* The calling thread back on its own set, if hw_cpu_avoid changed it. */
void hw_cpu_avoid_end(void);

/* Whether the calling thread avoids a CPU now (hw_cpu_avoid moved it). */
bool hw_cpu_avoiding(void);

/* Thread `tid` (another of the agent's, waiting to be handed work) on
 * `own` without `cpu`, or on `own` when `cpu` is -1 or the only one:
 * false when the kernel refused.  Placed before it is woken, it wakes
 * elsewhere: a real-time thread woken on a CPU that runs a normal one
 * stays there and preempts it. */
bool hw_cpu_place(pid_t tid, const cpu_set_t *own, int cpu);

/* Another of the agent's threads kept off the hung threads' CPUs by the
 * one thread that hands it work, before each hand-over.  Zeroed: nothing
 * known yet. */
typedef struct hw_cpu_placement {
    bool known;    /* `own` read */
    cpu_set_t own; /* its affinity when first placed */
    int off;       /* the CPU it is kept off now, -1 none */
} hw_cpu_placement;

/* Keep thread `tid` (0: not running yet, nothing done) off `cpu` (-1:
 * back on its own set), where it may run elsewhere; a system call only
 * when that changes. */
void hw_cpu_placement_keep_off(hw_cpu_placement *p, pid_t tid, int cpu);

#endif
