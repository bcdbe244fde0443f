/*
 * gc_phase.h - which native functions are a runtime's garbage collector,
 * and which phase of it each one says: V8's (node) and CPython's cyclic
 * collector.  A hang whose stack is inside the collector is a GC pause,
 * named so on the line and in the report ("in garbage collection
 * (mark-compact) under buildRows"); the collector's own functions change
 * from look to look (marking, then sweeping) while the pause goes on, so
 * annealing and the grouping key start no deeper than its outermost frame.
 * Pure: names only.
 */
#ifndef HANGWATCH_GC_PHASE_H
#define HANGWATCH_GC_PHASE_H

#include <stdbool.h>

typedef enum hw_gc_phase {
    HW_GC_NONE = 0,
    HW_GC_COLLECTION,         /* the collector, phase not said by this function */
    HW_GC_SCAVENGE,           /* V8's young-generation copy */
    HW_GC_MINOR_MARK_COMPACT, /* V8's young-generation mark-compact */
    HW_GC_MARK_COMPACT,       /* V8's full collection: marking, evacuating */
    HW_GC_SWEEPING,           /* V8's sweeping, finished on the main thread */
    HW_GC_INCREMENTAL_MARKING,
    HW_GC_CYCLIC,             /* CPython's cycle collector (gc.collect, or allocation-triggered) */
} hw_gc_phase;

/* The phase the C or C++ function `symbol` (demangled, with or without its
 * arguments; NULL: none) is part of, HW_GC_NONE when it is no collector's. */
hw_gc_phase hw_gc_phase_of(const char *symbol);

/* "mark-compact", "scavenge", "cycle collector" ...; "garbage collection" for
 * HW_GC_COLLECTION; NULL for HW_GC_NONE. */
const char *hw_gc_phase_name(hw_gc_phase phase);

/* "v8" or "python", whose collector the phase is (NULL for HW_GC_NONE;
 * HW_GC_COLLECTION is V8's). */
const char *hw_gc_runtime(hw_gc_phase phase);

#endif
