/*
 * thread_status.c - a captured thread's status in words, as the report
 * and the agent's lines say it (snapshot.h).
 */
#include <stdio.h>

#include "snapshot.h"

const char *hw_thread_status_name(hw_thread_status status)
{
    switch (status) {
    case HW_THREAD_CAPTURED:
        return "captured";
    case HW_THREAD_EXITED:
        return "exited";
    case HW_THREAD_TIMEOUT:
        return "timeout";
    case HW_THREAD_DENIED:
        return "denied";
    }
    return "unknown";
}

const char *hw_thread_timeout_reason(const hw_thread_snapshot *t, char *buf, size_t len)
{
    /* A stop is a signal the thread takes on its way back to user space:
     * it must run to stop. */
    const char *why = t->state_at_timeout == 'R'   ? ": it was waiting for a CPU (state R)"
                      : t->state_at_timeout == 'D' ? ": it was in uninterruptible sleep (state D)"
                                                   : "";
    snprintf(buf, len, "not stopped within %u ms%s", t->timeout_ms, why);
    return buf;
}
