/*
 * python_frames.h - the Python functions a captured thread was running,
 * read from the CPython interpreter's own records in the process's memory
 * (as py-spy does), and placed among the thread's native frames.
 *
 * Four steps, because of what may change when:
 *  1. hw_python_find, once per process before its first capture: the
 *     interpreter's _PyRuntime and type objects, from the symbols of a
 *     module named *python* (the interpreter binary or libpython), its
 *     version, and the layout of its structures (python_find.c).
 *  2. hw_python_read_stacks, in the capture while the threads are stopped
 *     (capture.h's while_stopped): the thread states, matched to threads,
 *     each one's frame chain (code object and current instruction per
 *     frame), and the thread that holds the GIL.  Only system calls;
 *     nothing is allocated (python_frames.c).
 *  3. hw_python_name_threads, right after the resume, on the report's
 *     naming thread (or the watch thread, for an early sample's loop thread):
 *     code objects and strings, which do not change, are read (and kept
 *     for the process's next captures), so the names survive a process
 *     that dies just after its capture (python_names.c).
 *  4. hw_python_merge, in the report worker (or the sampler): each Python
 *     frame is put directly above (on the callee side of) the native
 *     _PyEval_EvalFrameDefault call that runs it.
 *
 * Everything read is the program's memory and is treated as hostile: types
 * are checked against the interpreter's own type objects, lengths and depths
 * are bounded, and a chain that loops or breaks gives a partial stack with
 * the reason in the backtrace's runtime_error.  Read: CPython 3.8 to 3.13
 * (docs/runtime-frames.md says what each version shows and what others say).
 */
#ifndef HANGWATCH_PYTHON_FRAMES_H
#define HANGWATCH_PYTHON_FRAMES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/capture/capture.h"
#include "frame.h"
#include "python_layout.h"

#define HW_PY_MAX_FRAMES 128 /* Python frames read per thread, innermost first */

/* One process's interpreter, as found: plain data, copied into requests. */
typedef struct hw_python_target {
    bool found;                     /* the process runs a Python interpreter */
    bool readable;                  /* ... whose frames are read, with `layout` */
    hw_python_layout layout;        /* its version's, or (3.13+) from its own debug offsets */
    uint64_t runtime_addr, code_type, unicode_type, bytes_type, frame_type;
    uint64_t eval_function;         /* _PyEval_EvalFrameDefault's start (0 unknown): finds the evaluation
                                     * calls of a stack whose frames are not named (early samples) */
    uint64_t version_hex;           /* PY_VERSION_HEX; major and minor only when a file name said them; 0 unknown */
    char version[16];               /* "3.12.1", "3.9" (from a file name), "" unknown */
    char why_not[192];              /* found but not read: what reports and the stderr line say */
} hw_python_target;

/* Look for a Python interpreter in process `pid` whose maps text is given.
 * Fills `out` (out->found false when there is none). */
void hw_python_find(pid_t pid, const char *maps, size_t maps_len, hw_python_target *out);

/* capture.h's while_stopped reader; ctx is a const hw_python_target *. */
void hw_python_read_stacks(void *ctx, hw_process_snapshot *snap);

/* Names of code objects, read after the resume and kept for reuse: one
 * per process, for its life, used by one thread (runtime_namers.h).  A kept
 * name is checked against the code object again before each use (one read),
 * so a code object freed and replaced at the same address is read afresh;
 * a process that is gone keeps the names already read. */
typedef struct hw_python_namer hw_python_namer;
hw_python_namer *hw_python_namer_new(const hw_python_target *py, pid_t pid);
void hw_python_namer_free(hw_python_namer *namer);
/* What the namer holds, in bytes (its table and the names and line tables
 * it keeps): the agent bounds the sum over every watched process. */
size_t hw_python_namer_bytes(const hw_python_namer *namer);
/* From now on the namer reads no line table: its frames come at their
 * function's first line (early samples, which keep only the frames' keys
 * and names: a sample costs the watch thread a few reads per frame). */
void hw_python_namer_names_only(hw_python_namer *namer);

/* Name the Python frames of a snapshot's threads (all, or only the target),
 * right after the capture, while the process most likely still runs.
 * Returns snap->thread_count entries, or NULL (no memory, no threads). */
hw_runtime_names *hw_python_name_threads(hw_python_namer *namer, const hw_process_snapshot *snap, bool target_only);

/* Put a thread's named Python frames into its native backtrace `bt`: each
 * run of frames directly above (on the callee side of) the native
 * _PyEval_EvalFrameDefault call that runs it, known by its name or, in a
 * stack whose functions are told apart but not named (the sampler's), by
 * its start (names->eval_function); frames left over go last.
 * Problems go to bt->runtime_error.  0, or -ENOMEM (bt unchanged). */
int hw_python_merge(const hw_runtime_names *names, hw_backtrace *bt);

/* A Python frame's identity in a sample (hw_frame.runtime_key, as
 * frame.h lays keys out: the code object and the instruction): tagged so
 * that it is never a native address.  hw_python_frame_from_key names it
 * again for a Point Stack.  0 when the frame cannot be encoded. */
bool hw_python_key_is_python(uint64_t key);

int hw_python_frame_from_key(hw_python_namer *namer, uint64_t key, hw_frame *out);

#endif
