/*
 * cpu_avoid.c - see cpu_avoid.h.  Each thread's own set and what it avoids
 * now are its own (thread-local): no lock, no allocation.
 */
#include "cpu_avoid.h"

#include <string.h>

static _Thread_local struct {
    bool known;       /* `own` read */
    bool moved;       /* its affinity is `own` minus `avoided` */
    cpu_set_t own;    /* its affinity at its first hw_cpu_avoid */
    cpu_set_t avoided;
} self;

bool hw_cpus_without(const cpu_set_t *from, int cpu, cpu_set_t *out)
{
    *out = *from;
    if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, from))
        return false;
    CPU_CLR(cpu, out);
    if (CPU_COUNT(out) > 0)
        return true;
    *out = *from;
    return false;
}

void hw_cpu_avoid(int cpu)
{
    if (cpu < 0 || cpu >= CPU_SETSIZE)
        return;
    if (!self.known) {
        if (sched_getaffinity(0, sizeof self.own, &self.own) != 0)
            return;
        self.known = true;
        CPU_ZERO(&self.avoided);
    }
    if (CPU_ISSET(cpu, &self.avoided) || !CPU_ISSET(cpu, &self.own))
        return;
    cpu_set_t avoided = self.avoided, left;
    CPU_SET(cpu, &avoided);
    CPU_XOR(&left, &self.own, &avoided); /* own without avoided: avoided is a subset of it */
    if (CPU_COUNT(&left) == 0)
        return; /* nowhere else: stays where it may run */
    if (sched_setaffinity(0, sizeof left, &left) != 0)
        return;
    self.avoided = avoided;
    self.moved = true;
}

void hw_cpu_avoid_end(void)
{
    if (!self.moved)
        return;
    self.moved = false;
    CPU_ZERO(&self.avoided);
    (void)sched_setaffinity(0, sizeof self.own, &self.own);
}

bool hw_cpu_avoiding(void)
{
    return self.moved;
}

bool hw_cpu_place(pid_t tid, const cpu_set_t *own, int cpu)
{
    cpu_set_t where;
    hw_cpus_without(own, cpu, &where);
    return sched_setaffinity(tid, sizeof where, &where) == 0;
}

void hw_cpu_placement_keep_off(hw_cpu_placement *p, pid_t tid, int cpu)
{
    if (tid <= 0)
        return;
    if (!p->known) {
        if (sched_getaffinity(tid, sizeof p->own, &p->own) != 0)
            return;
        p->known = true;
        p->off = -1;
    }
    cpu_set_t elsewhere;
    if (!hw_cpus_without(&p->own, cpu, &elsewhere))
        cpu = -1; /* nowhere else (or no CPU given): its own set */
    if (cpu != p->off && hw_cpu_place(tid, &p->own, cpu))
        p->off = cpu;
}
