/*
 * options.c - the names of option values that reports and metrics print,
 * and the one value the agent's and `stack`'s options share (--js-frames)
 * (options.h).
 */
#include "options.h"

#include <string.h>

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

int hw_js_frames_mode_parse(const char *text, hw_js_frames_mode *mode)
{
    static const char *const names[] = {"auto", "metadata", "perf-map", "off"};
    static const hw_js_frames_mode modes[] = {HW_JS_FRAMES_AUTO, HW_JS_FRAMES_METADATA, HW_JS_FRAMES_PERF_MAP,
                                              HW_JS_FRAMES_OFF};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(text, names[i]) == 0) {
            *mode = modes[i];
            return 0;
        }
    return -1;
}
