/*
 * semaphore_detector.h - the seeds' other RunLoop detector (seeds/002,
 * LXDAppFluecyMonitor, and seeds/003, RunloopMonitor), kept so that every
 * system the seeds describe can be run and compared (`--detector
 * semaphore`).
 *
 * There, the observer signals a semaphore at every activity and a monitor
 * thread waits on it with a 50 ms timeout.  A timeout while the last
 * activity is BEFORE_SOURCES or AFTER_WAITING counts; five in a row are a
 * lag, which is logged, and the count starts again (so a long hang is
 * reported every 250 ms); a signal, or a timeout in any other activity,
 * resets the count.
 *
 * Here the agent looks at the loop slot every interval: a changed (sequence,
 * activity) pair is the semaphore's signal.  Pure code.
 */
#ifndef HANGWATCH_SEMAPHORE_DETECTOR_H
#define HANGWATCH_SEMAPHORE_DETECTOR_H

#include <stdbool.h>
#include <stdint.h>

#include "core/abi/loop_state.h"

typedef struct hw_semaphore_detector {
    uint64_t interval_ns;   /* the semaphore wait's timeout: 50 ms */
    unsigned timeouts_needed; /* 5 */
    unsigned timeouts;
    uint64_t last_seq;
    uint32_t last_activity;
    bool seen;
} hw_semaphore_detector;

void hw_semaphore_init(hw_semaphore_detector *d);

/* One interval has passed and the loop reads `r`: is it a lag? */
bool hw_semaphore_step(hw_semaphore_detector *d, const hw_loop_reading *r);

#endif
