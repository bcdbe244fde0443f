/*
 * runtime_frames.h - one captured thread's stack as people want to read
 * it: the native frames (unwind.h) with the interpreter's frames among them
 * (python_frames.h; JavaScript frames come named from the symbolizer), and,
 * on the hung (or main) thread, a sentence saying why a runtime's frames are
 * missing when they are.  Used by the report worker and `hangwatch stack`.
 */
#ifndef HANGWATCH_RUNTIME_FRAMES_H
#define HANGWATCH_RUNTIME_FRAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "js_frames.h"
#include "python_frames.h"
#include "unwind.h"

/* Unwind `t` into `bt` (at most max_frames native frames) and merge
 * `names` (its Python or JavaScript frames, NULL if none were read).  For
 * the target thread, say in bt->runtime_error why frames are missing: `py`
 * found an interpreter whose version is not read, `js` a V8 whose metadata
 * is not usable, or `executable` is node and its JIT frames have no names.
 * `py` and `js` may be NULL. */
void hw_unwind_with_runtime(hw_symbolizer *sym, const hw_thread_snapshot *t, size_t max_frames,
                            const hw_runtime_names *names, const hw_python_target *py, const hw_js_target *js,
                            const char *executable, hw_backtrace *bt);

/* Put a thread's named runtime frames into its native backtrace, the way
 * their runtime's are put (hw_python_merge, hw_js_merge). */
int hw_runtime_merge(const hw_runtime_names *names, hw_backtrace *bt);

/* node, nodejs, node20, node-v20...: the names node's binary goes by. */
bool hw_is_node_executable(const char *executable);

#endif
