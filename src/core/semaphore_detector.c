/* semaphore_detector.c - see semaphore_detector.h. */
#include "semaphore_detector.h"

void hw_semaphore_init(hw_semaphore_detector *d)
{
    d->interval_ns = 50000000ull;
    d->timeouts_needed = 5;
    d->timeouts = 0;
    d->last_seq = 0;
    d->last_activity = 0;
    d->seen = false;
}

bool hw_semaphore_step(hw_semaphore_detector *d, const hw_loop_reading *r)
{
    bool signalled = !d->seen || r->seq != d->last_seq || r->activity != d->last_activity;
    d->seen = true;
    d->last_seq = r->seq;
    d->last_activity = r->activity;
    if (signalled) {
        d->timeouts = 0; /* the semaphore was signalled: no timeout */
        return false;
    }
    if (r->activity == HW_ACTIVITY_BEFORE_SOURCES || r->activity == HW_ACTIVITY_AFTER_WAITING) {
        if (++d->timeouts < d->timeouts_needed)
            return false;
        d->timeouts = 0; /* logged: count again */
        return true;
    }
    d->timeouts = 0;
    return false;
}
