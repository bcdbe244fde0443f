/*
 * test_loop_state_concurrent.c - the slot's publication protocol under real
 * concurrency: one thread plays the observer, turning over as fast as it
 * can; another reads.  Every consistent reading must pair a busy stretch with
 * the start that stretch was stamped with.  Run under ThreadSanitizer too.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "core/abi/loop_state.h"

#define TURNS 200000

static hw_loop_slot g_slot;
static atomic_bool g_done;

/* The start stamped for the stretch that makes seq odd value s. */
static uint64_t start_for_seq(uint64_t odd_seq)
{
    return odd_seq * 1000 + 7;
}

static void *observer_thread(void *arg)
{
    (void)arg;
    for (uint64_t i = 0; i < TURNS; i++) {
        uint64_t seq = atomic_load_explicit(&g_slot.seq, memory_order_relaxed);
        hw_observe(&g_slot, HW_ACTIVITY_AFTER_WAITING, start_for_seq(seq + 1));
        hw_observe(&g_slot, HW_ACTIVITY_BEFORE_TIMERS, 1); /* must not restamp */
        hw_observe(&g_slot, HW_ACTIVITY_BEFORE_WAITING, 0);
    }
    atomic_store(&g_done, true);
    return NULL;
}

static void test_readings_are_consistent(void **state)
{
    (void)state;
    memset(&g_slot, 0, sizeof g_slot);
    atomic_store(&g_done, false);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, observer_thread, NULL), 0);

    unsigned long busy_readings = 0, readings = 0;
    uint64_t last_seq = 0;
    bool done;
    do {
        done = atomic_load(&g_done);
        hw_loop_reading r = {0};
        if (!hw_loop_read(&g_slot, &r, 4))
            continue;
        readings++;
        assert_true(r.seq >= last_seq); /* never goes backwards */
        last_seq = r.seq;
        if (r.busy) {
            busy_readings++;
            assert_int_equal(r.busy_start_ns, start_for_seq(r.seq));
        }
    } while (!done);
    pthread_join(t, NULL);
    hw_loop_reading final = {0};
    assert_true(hw_loop_read(&g_slot, &final, 1));
    assert_int_equal(final.seq, 2 * TURNS);
    assert_false(final.busy);
    assert_true(readings > 0);
    (void)busy_readings;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readings_are_consistent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
