/*
 * watch_priority.c - see watch_priority.h.  Why the watch thread needs it:
 * watch_loop.c; what it measured: docs/benchmarks.md, part 4.
 */
#include "watch_priority.h"

#include "priority_lender.h"
#include "proc_read.h"

#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static bool normal_policy_asked(void)
{
    const char *policy = getenv("HANGWATCH_WATCH_POLICY");
    return policy != NULL && strcmp(policy, "normal") == 0;
}

static void take_real_time(int priority)
{
    if (normal_policy_asked())
        return;
    struct sched_param sp = {.sched_priority = priority};
    /* Through the lender: a thread lent a priority before it took its own
     * gets its own at the lend's end, not the policy it had before. */
    (void)hw_thread_policy_set(gettid(), SCHED_FIFO | SCHED_RESET_ON_FORK, &sp);
}

void hw_take_watch_priority(void)
{
    take_real_time(HW_WATCH_PRIORITY);
}

void hw_take_service_priority(void)
{
    take_real_time(HW_SERVICE_PRIORITY);
}

void hw_leave_real_time(void)
{
    struct sched_param sp = {0};
    int policy = sched_getscheduler(0) & ~SCHED_RESET_ON_FORK; /* -1 stays neither */
    if (policy == SCHED_FIFO || policy == SCHED_RR)
        (void)hw_thread_policy_set(gettid(), SCHED_OTHER, &sp);
}

int hw_lender_priority(void)
{
    return normal_policy_asked() ? 0 : HW_LENDER_PRIORITY;
}

#define CAP_SYS_NICE_BIT 23

bool hw_take_idle_time(pid_t tid, int nice)
{
    struct rlimit limit;
    bool may_come_back = hw_has_capability(CAP_SYS_NICE_BIT) ||
                         (getrlimit(RLIMIT_NICE, &limit) == 0 && limit.rlim_cur >= (rlim_t)(20 - nice));
    /* First: a lower priority is always allowed, and the nice a thread
     * comes back from idle time at is the one the kernel checks. */
    (void)setpriority(PRIO_PROCESS, (id_t)tid, nice);
    struct sched_param sp = {0};
    return may_come_back && hw_thread_policy_set(tid, SCHED_IDLE, &sp) == 0;
}
