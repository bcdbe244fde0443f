/*
 * stop_boost.c - SCHED_FIFO 1 for a runnable thread until it stops
 * (stop_boost.h).  glibc has no sched_getattr/sched_setattr before 2.41:
 * the system calls are made directly, with the kernel's struct as its
 * first version lays it out (<linux/sched/types.h> clashes with <sched.h>).
 */
#include "stop_boost.h"

#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/common/proc_read.h"

#define SCHED_FLAG_RESET_ON_FORK 0x01

struct sched_attr { /* SCHED_ATTR_SIZE_VER1 */
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
    uint32_t sched_util_min, sched_util_max;
};
_Static_assert(sizeof(struct sched_attr) == 56, "the kernel's struct sched_attr, version 1");

static int get_attr(pid_t tid, struct sched_attr *attr)
{
    memset(attr, 0, sizeof *attr);
    return (int)syscall(SYS_sched_getattr, tid, attr, (unsigned)sizeof *attr, 0u);
}

static int set_attr(pid_t tid, struct sched_attr *attr)
{
    attr->size = (uint32_t)sizeof *attr;
    return (int)syscall(SYS_sched_setattr, tid, attr, 0u);
}

bool hw_stop_boost_begin(pid_t pid, pid_t tid, hw_stop_boost *boost)
{
    memset(boost, 0, sizeof *boost);
    struct sched_attr now;
    if (hw_task_state(pid, tid) != 'R' || get_attr(tid, &now) != 0)
        return false;
    if (now.sched_policy != SCHED_OTHER && now.sched_policy != SCHED_BATCH && now.sched_policy != SCHED_IDLE)
        return false; /* real-time or deadline: ahead of the machine's ordinary work already */
    struct sched_attr fifo = {.sched_policy = SCHED_FIFO, .sched_priority = 1};
    if (set_attr(tid, &fifo) != 0)
        return false;
    boost->tid = tid;
    boost->policy = now.sched_policy;
    /* only what sched_setscheduler could have set: utilization clamps are
     * left as they are by a call that does not name them */
    boost->flags = now.sched_flags & SCHED_FLAG_RESET_ON_FORK;
    boost->nice = now.sched_nice;
    return true;
}

bool hw_stop_boost_end(hw_stop_boost *boost)
{
    if (boost->tid == 0)
        return true;
    struct sched_attr back = {.sched_policy = boost->policy, .sched_flags = boost->flags, .sched_nice = boost->nice};
    bool ok = set_attr(boost->tid, &back) == 0;
    boost->tid = 0;
    return ok;
}
