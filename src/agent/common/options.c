/*
 * options.c - the names of option values that reports and metrics print
 * (options.h).
 */
#include "options.h"

const char *hw_detector_kind_name(hw_detector_kind kind)
{
    switch (kind) {
    case HW_DETECTOR_SEMAPHORE:
        return "semaphore";
    case HW_DETECTOR_PING:
        return "ping";
    case HW_DETECTOR_FRAME_GAP:
        return "frame_gap";
    case HW_DETECTOR_RUNLOOP:
    default:
        return "runloop";
    }
}
