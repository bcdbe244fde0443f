/*
 * watch_priority.c - see watch_priority.h.  Why the watch thread needs it:
 * watch_loop.c; what it measured: docs/benchmarks.md, part 4.
 */
#include "watch_priority.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

static void take_real_time(int priority)
{
    const char *policy = getenv("HANGWATCH_WATCH_POLICY");
    if (policy != NULL && strcmp(policy, "normal") == 0)
        return;
    struct sched_param sp = {.sched_priority = priority};
    (void)sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp); /* 0: this thread */
}

void hw_take_watch_priority(void)
{
    take_real_time(HW_WATCH_PRIORITY);
}

void hw_take_service_priority(void)
{
    take_real_time(HW_SERVICE_PRIORITY);
}
