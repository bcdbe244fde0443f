/*
 * unwind.h - turning a captured thread (registers + stack copy) into a
 * symbolized backtrace, in the agent, after the thread has been resumed.
 *
 * Backed by elfutils libdwfl: DWARF CFI unwinding (.eh_frame/.debug_frame),
 * so frames through libraries built without frame pointers are right; the
 * frames are named by the capture's symbolizer (symbolizer.h).
 */
#ifndef HANGWATCH_UNWIND_H
#define HANGWATCH_UNWIND_H

#include <stddef.h>

#include "agent/capture/capture.h"
#include "frame.h"
#include "symbolizer.h"

/* Unwind one captured thread of the snapshot the symbolizer was made for
 * (any number of them, one after the other).  Frames beyond `max_frames`
 * (0: 256) are dropped and counted in out->skipped.  Returns 0 (possibly with
 * out->error set when the walk stopped early; a thread that was not captured
 * gives no frames and an error), or -EINVAL / -ENOMEM. */
int hw_unwind_thread(hw_symbolizer *sym, const hw_thread_snapshot *thread, size_t max_frames,
                     hw_backtrace *out);

#endif
