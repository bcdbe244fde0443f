/*
 * frame.h - what the symbols stage hands out: a stack frame as people and
 * reports read it (a native frame symbolized from the ELF images, or a
 * runtime's frame: a Python or JavaScript function named from the
 * runtime's own records), a thread's backtrace of them, and the identity
 * of a frame's function, which stacks are compared by.
 */
#ifndef HANGWATCH_FRAME_H
#define HANGWATCH_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/gc_phase.h"
#include "core/in_app.h"

/* What ran a frame: native code, or an interpreter's or JIT's function
 * (python_frames.h, jit_map.h), named from the runtime's own records. */
typedef enum hw_frame_language {
    HW_LANG_NATIVE = 0,
    HW_LANG_PYTHON,
    HW_LANG_JAVASCRIPT,
} hw_frame_language;

/* "native", "python", "javascript": the report's frame.language. */
const char *hw_frame_language_name(hw_frame_language language);

typedef struct hw_frame {
    uint64_t instruction_addr; /* pc as unwound (a return address for callers); for a Python
                                  frame, the address of its current bytecode instruction */
    bool is_activation;        /* the innermost frame (or a signal frame) */
    char *symbol_name;         /* as in the symbol table, without "@VERSION" (C++ names are
                                  not demangled), NULL if unknown */
    uint64_t symbol_addr;      /* absolute address of the symbol, 0 if unknown */
    char *object_path;         /* path of the ELF image, NULL if unknown */
    uint64_t object_addr;      /* load address of that image */
    uint64_t object_offset;    /* looked-up address in the image's own numbering: (pc, or
                                  pc - 1 for a caller frame) - bias, as addr2line wants it */
    char *source_file;         /* NULL without debug info */
    int source_line;           /* 0 without debug info */
    bool line_is_function_start; /* a JavaScript frame whose current position V8 keeps nowhere
                                    hangwatch reads (optimised code): source_line is its function's first */
    hw_frame_language language;
    uint64_t runtime_key;      /* a runtime frame's identity for samples (below), else 0 */
    /* whose code it is (core/in_app.h), once hw_frame_classify has run */
    hw_frame_origin origin;
    bool in_app;
} hw_frame;

typedef struct hw_backtrace {
    hw_frame *frames;
    size_t count;
    size_t skipped;    /* frames omitted from a stack cut short (counted up to a limit) ... */
    size_t skipped_at; /* ... between frames[skipped_at - 1] and frames[skipped_at] (innermost and outermost) */
    char *error;    /* why the unwind stopped early, NULL if it ended normally */
    char *runtime_error; /* why an interpreter's frames are missing or partial, else NULL */
    char *runtime_thread_name; /* the thread's name in its runtime (Python threading's), else NULL */
    size_t runtime_lines_cut;  /* its runtime frames shown at their function's first line: their line
                                  tables would have passed what one capture reads of a process */
} hw_backtrace;

/* One thread's runtime frames (Python's or JavaScript's) with their names,
 * innermost first, parallel to its hw_interp_stack: a frame not worth
 * showing (a Python frame set up but not started) is an entry with no
 * symbol_name, kept because it still ends its run. */
typedef struct hw_runtime_names {
    hw_frame *frames;
    bool *is_entry;      /* Python: the outermost frame of one native evaluation call */
    unsigned count;
    const char *problem; /* static text: why the frames are partial, else NULL */
    char *thread_name;   /* the name the runtime gave the thread (Python threading's), else NULL */
    hw_frame_language runtime; /* whose frames: HW_LANG_PYTHON or HW_LANG_JAVASCRIPT */
    uint64_t eval_function;    /* Python: the evaluation function's start, 0 unknown (hw_python_merge) */
    unsigned lines_cut;        /* frames at their function's first line, or with no line, for want of budget
                                  (python_internal.h, js_internal.h) */
} hw_runtime_names;

/* Free `count` threads' names (NULL is fine). */
void hw_runtime_names_free(hw_runtime_names *names, size_t count);

/* The user's rules of whose code is whose (--in-app, --not-in-app), and
 * the program's executable, which classifying a frame needs. */
typedef struct hw_in_app_context {
    const hw_in_app_rule *rules;
    size_t rule_count;
    const char *executable; /* NULL: unknown */
} hw_in_app_context;

/* Set a frame's origin and in_app (core/in_app.h); `ctx` may be NULL (no
 * rules, no executable). */
void hw_frame_classify(hw_frame *f, const hw_in_app_context *ctx);

/* The same for every frame of a backtrace (NULL is fine). */
void hw_backtrace_classify(hw_backtrace *bt, const hw_in_app_context *ctx);

/* Has the backtrace (NULL is fine) a Python or JavaScript frame? */
bool hw_backtrace_has_runtime_frames(const hw_backtrace *bt);

/* The culprit of `count` classified frames, innermost first
 * (hw_culprit_index): SIZE_MAX when there is none. */
size_t hw_frames_culprit(const hw_frame *frames, size_t count);

/* A stack stopped inside a runtime's garbage collector (core/gc_phase.h). */
typedef struct hw_gc_stop {
    hw_gc_phase phase;    /* the innermost phase its frames say; HW_GC_NONE: not in a collector */
    size_t outermost;     /* the index of the collector's outermost frame */
    const char *function; /* that frame's name (the frame's own string) */
} hw_gc_stop;

/* Is the stack (innermost first) inside a garbage collector: its native
 * frames from the innermost, up to its first Python or JavaScript frame (a
 * collector that runs the program's code, a finalizer, is that code's
 * time), hold a collector's?  The phase is the innermost one that names
 * its phase (mark-compact under Heap::CollectGarbage), else "garbage
 * collection".  False (out->phase HW_GC_NONE) when not. */
bool hw_frames_gc(const hw_frame *frames, size_t count, hw_gc_stop *out);

/* Where a stack's site starts for the grouping key and annealing: its
 * culprit (hw_frames_culprit), but never inside a garbage collector, whose
 * functions change while one pause goes on: the collector's outermost
 * frame when the culprit is inside it or there is none.  SIZE_MAX when
 * neither. */
size_t hw_frames_site_start(const hw_frame *frames, size_t count);

/* Free a frame's strings and zero it. */
void hw_frame_clear(hw_frame *f);

/* Free a backtrace's frames and texts and zero it (NULL is fine). */
void hw_backtrace_free(hw_backtrace *bt);

/*
 * A runtime frame's identity in a sample (hw_frame.runtime_key), where
 * samples keep addresses: HW_RUNTIME_KEY_TAG is set, so that it is never a
 * native address (user space ends far below), the low
 * HW_RUNTIME_KEY_POSITION_BITS say where in its function the frame was, and
 * the bits between name the function (python_frames.c makes them).
 */
#define HW_RUNTIME_KEY_TAG (1ull << 63)
#define HW_RUNTIME_KEY_POSITION_BITS 19

/* A frame's function, for comparing stacks (annealing, the Point Stack's
 * runs): a runtime frame's function (its key without the position), a
 * named native frame's symbol, else its address. */
uint64_t hw_frame_function_key(const hw_frame *f);

#endif
