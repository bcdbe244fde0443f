/* test_gc_phase.c - garbage collectors' functions by name (core/gc_phase.c):
 * V8's phases and entry points as node 20's symbols spell them, CPython's
 * cycle collector, and names that only look alike. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/gc_phase.h"

static void test_v8_phases(void **state)
{
    (void)state;
    assert_int_equal(hw_gc_phase_of("v8::internal::MarkCompactCollector::CollectGarbage()"), HW_GC_MARK_COMPACT);
    assert_int_equal(hw_gc_phase_of("v8::internal::ScavengerCollector::CollectGarbage()"), HW_GC_SCAVENGE);
    assert_int_equal(hw_gc_phase_of("v8::internal::Heap::Scavenge()"), HW_GC_SCAVENGE);
    assert_int_equal(hw_gc_phase_of("v8::internal::Sweeper::RawSweep(v8::internal::Page*, "
                                    "v8::internal::FreeSpaceTreatmentMode, v8::internal::Sweeper::SweepingMode)"),
                     HW_GC_SWEEPING);
    assert_int_equal(hw_gc_phase_of("v8::internal::Heap::EnsureSweepingCompleted(v8::internal::Heap::"
                                    "SweepingForcedFinalizationMode)"),
                     HW_GC_SWEEPING);
    assert_int_equal(hw_gc_phase_of("v8::internal::MinorMarkCompactCollector::MarkLiveObjects()"),
                     HW_GC_MINOR_MARK_COMPACT);
    assert_int_equal(hw_gc_phase_of("v8::internal::IncrementalMarking::Step(double)"), HW_GC_INCREMENTAL_MARKING);
    assert_int_equal(hw_gc_phase_of("v8::internal::Heap::CollectGarbage(v8::internal::AllocationSpace, "
                                    "v8::internal::GarbageCollectionReason, v8::GCCallbackFlags)"),
                     HW_GC_COLLECTION);
    assert_int_equal(hw_gc_phase_of("v8::internal::Heap::PerformGarbageCollection.cold"), HW_GC_COLLECTION);
    assert_string_equal(hw_gc_phase_name(HW_GC_MARK_COMPACT), "mark-compact");
    assert_string_equal(hw_gc_phase_name(HW_GC_COLLECTION), "garbage collection");
    assert_string_equal(hw_gc_runtime(HW_GC_SCAVENGE), "v8");
}

static void test_cpython(void **state)
{
    (void)state;
    assert_int_equal(hw_gc_phase_of("gc_collect_main"), HW_GC_CYCLIC);
    assert_int_equal(hw_gc_phase_of("gc_collect_main.constprop.0"), HW_GC_CYCLIC);
    assert_int_equal(hw_gc_phase_of("_PyGC_Collect"), HW_GC_CYCLIC);
    assert_string_equal(hw_gc_runtime(HW_GC_CYCLIC), "python");
    assert_string_equal(hw_gc_phase_name(HW_GC_CYCLIC), "cycle collector");
}

static void test_not_a_collector(void **state)
{
    (void)state;
    assert_int_equal(hw_gc_phase_of(NULL), HW_GC_NONE);
    assert_int_equal(hw_gc_phase_of(""), HW_GC_NONE);
    assert_int_equal(hw_gc_phase_of("main"), HW_GC_NONE);
    /* a task that starts one later, a name that only begins alike */
    assert_int_equal(hw_gc_phase_of("v8::internal::Heap::ScavengeTask::RunInternal()"), HW_GC_NONE);
    assert_int_equal(hw_gc_phase_of("v8::internal::Heap::CollectGarbageShared()"), HW_GC_NONE);
    assert_int_equal(hw_gc_phase_of("gc_collect_mainly"), HW_GC_NONE);
    assert_int_equal(hw_gc_phase_of("v8::internal::Runtime_DateCurrentTime(int, unsigned long*, "
                                    "v8::internal::Isolate*)"),
                     HW_GC_NONE);
    assert_null(hw_gc_phase_name(HW_GC_NONE));
    assert_null(hw_gc_runtime(HW_GC_NONE));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v8_phases),
        cmocka_unit_test(test_cpython),
        cmocka_unit_test(test_not_a_collector),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
