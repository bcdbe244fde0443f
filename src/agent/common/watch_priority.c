/*
 * watch_priority.c - see watch_priority.h.  Why the watch thread needs it:
 * watch_loop.c; what it measured: docs/benchmarks.md, part 4.
 */
#include "watch_priority.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

void hw_take_watch_priority(void)
{
    const char *policy = getenv("HANGWATCH_WATCH_POLICY");
    if (policy != NULL && strcmp(policy, "normal") == 0)
        return;
    struct sched_param sp = {.sched_priority = 1};
    (void)sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp); /* 0: this thread */
}
