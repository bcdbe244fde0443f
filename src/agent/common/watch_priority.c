/*
 * watch_priority.c - see watch_priority.h.  Why the watch thread needs it:
 * watch_loop.c; what it measured: docs/benchmarks.md, part 4.
 */
#include "watch_priority.h"

#include "priority_lender.h"

#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
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

int hw_lender_priority(void)
{
    return normal_policy_asked() ? 0 : HW_LENDER_PRIORITY;
}
