/*
 * gc_phase.c - garbage collectors' functions by name (gc_phase.h).
 */
#include "gc_phase.h"

#include <string.h>

typedef struct gc_name {
    const char *prefix; /* a qualified name, or its start ("...Collector::") */
    bool whole;         /* the name must end there (or at its arguments) */
    hw_gc_phase phase;
} gc_name;

#define V8 "v8::internal::"

/* The most telling first: a phase's own classes, then the heap's entry
 * points, which say only that a collection runs. */
static const gc_name names[] = {
    {V8 "ScavengerCollector::", false, HW_GC_SCAVENGE},
    {V8 "Scavenger::", false, HW_GC_SCAVENGE},
    {V8 "Heap::Scavenge", true, HW_GC_SCAVENGE},
    {V8 "MinorMarkCompactCollector::", false, HW_GC_MINOR_MARK_COMPACT},
    {V8 "MinorMarkSweepCollector::", false, HW_GC_MINOR_MARK_COMPACT},
    {V8 "Heap::MinorMarkCompact", true, HW_GC_MINOR_MARK_COMPACT},
    {V8 "MarkCompactCollector::", false, HW_GC_MARK_COMPACT},
    {V8 "Heap::MarkCompact", true, HW_GC_MARK_COMPACT},
    {V8 "Sweeper::", false, HW_GC_SWEEPING},
    {V8 "Heap::EnsureSweepingCompleted", true, HW_GC_SWEEPING},
    {V8 "IncrementalMarking::", false, HW_GC_INCREMENTAL_MARKING},
    {V8 "Heap::CollectGarbage", true, HW_GC_COLLECTION},
    {V8 "Heap::PerformGarbageCollection", true, HW_GC_COLLECTION},
    {V8 "Heap::CollectAllGarbage", true, HW_GC_COLLECTION},
    {V8 "Heap::CollectAllAvailableGarbage", true, HW_GC_COLLECTION},
    {V8 "Heap::PreciseCollectAllGarbage", true, HW_GC_COLLECTION},
    {V8 "Heap::FinalizeIncrementalMarkingAtomically", true, HW_GC_COLLECTION},
    {V8 "GCTracer::", false, HW_GC_COLLECTION},
    /* CPython's gcmodule.c (3.8-3.13; 3.13's gc.c) */
    {"gc_collect_main", true, HW_GC_CYCLIC},
    {"gc_collect_with_callback", true, HW_GC_CYCLIC},
    {"gc_collect_impl", true, HW_GC_CYCLIC},
    {"gc_collect_region", true, HW_GC_CYCLIC},
    {"collect_with_callback", true, HW_GC_CYCLIC},
    {"collect_generations", true, HW_GC_CYCLIC},
    {"_PyGC_Collect", true, HW_GC_CYCLIC},
    {"PyGC_Collect", true, HW_GC_CYCLIC},
};

hw_gc_phase hw_gc_phase_of(const char *symbol)
{
    if (symbol == NULL)
        return HW_GC_NONE;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t len = strlen(names[i].prefix);
        if (strncmp(symbol, names[i].prefix, len) != 0)
            continue;
        /* "Heap::Scavenge()" is the function; "Heap::ScavengeTask" is not.
         * A compiler's clone suffix (".cold", ".isra.0") is the function. */
        char next = symbol[len];
        if (!names[i].whole || next == '\0' || next == '(' || next == '.')
            return names[i].phase;
    }
    return HW_GC_NONE;
}

const char *hw_gc_phase_name(hw_gc_phase phase)
{
    switch (phase) {
    case HW_GC_COLLECTION:
        return "garbage collection";
    case HW_GC_SCAVENGE:
        return "scavenge";
    case HW_GC_MINOR_MARK_COMPACT:
        return "minor mark-compact";
    case HW_GC_MARK_COMPACT:
        return "mark-compact";
    case HW_GC_SWEEPING:
        return "sweeping";
    case HW_GC_INCREMENTAL_MARKING:
        return "incremental marking";
    case HW_GC_CYCLIC:
        return "cycle collector";
    case HW_GC_NONE:
    default:
        return NULL;
    }
}

const char *hw_gc_runtime(hw_gc_phase phase)
{
    if (phase == HW_GC_NONE)
        return NULL;
    return phase == HW_GC_CYCLIC ? "python" : "v8";
}
