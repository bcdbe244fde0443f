/*
 * symbols.h - the symbols stage's interface: a captured thread's stack as
 * people read it.
 *
 *   frame.h           frames and backtraces, and a frame's function identity;
 *   symbolizer.h      names of a process's addresses (libdwfl: symbols,
 *                     lines, images and build-ids; JIT code from V8's perf
 *                     map);
 *   unwind.h          a captured thread's stack walked (DWARF CFI);
 *   python_frames.h   CPython's frames, read in the capture's stop and named
 *                     after it;
 *   js_frames.h       V8's JavaScript frames, the same way, from the
 *                     postmortem metadata node carries;
 *   runtime_frames.h  the native and runtime frames of a thread together,
 *                     with why a runtime's frames are missing when they are;
 *   runtime_namers.h  the namers of every watched process's Python or
 *                     JavaScript code, kept by one thread, bounded in all;
 *   jit_map_file.h    V8's perf map of a node process (the flags that make
 *                     node write one), kept per process;
 *   code_names.h      names of code kept by file identity, shared by the
 *                     symbolizers of one thread (hw_symbol_caches_start);
 *   eh_frame_index.h  a function's start from .eh_frame_hdr, for the watch
 *                     thread's symbolizer, which names nothing.
 *
 * Everything read here comes from the watched process (its memory, its
 * files) and is bounded and checked before use.  The other stages include
 * this header, never the parts.
 */
#ifndef HANGWATCH_SYMBOLS_H
#define HANGWATCH_SYMBOLS_H

#include "frame.h"
#include "jit_map_file.h"
#include "js_frames.h"
#include "python_frames.h"
#include "runtime_frames.h"
#include "runtime_namers.h"
#include "symbolizer.h"
#include "unwind.h"

#endif
