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
 * (any number of them, one after the other): its innermost `max_frames`
 * frames (0: 256); frames beyond are counted in out->skipped, as far as
 * 1024 frames are walked.  For samples, which must be quick.  Returns 0
 * (possibly with out->error set when the walk stopped early; a thread that
 * was not captured gives no frames and an error), or -EINVAL / -ENOMEM. */
int hw_unwind_thread(hw_symbolizer *sym, const hw_thread_snapshot *thread, size_t max_frames,
                     hw_backtrace *out);

/* The same for a report: the whole stack is walked (up to a million frames
 * or three seconds past the kept ones), and one deeper than `max_frames` keeps
 * its innermost frames and its 32 outermost, the number left out between
 * them in out->skipped, before out->frames[out->skipped_at]. */
int hw_unwind_thread_whole(hw_symbolizer *sym, const hw_thread_snapshot *thread, size_t max_frames,
                           hw_backtrace *out);

#endif
