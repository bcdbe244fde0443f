/*
 * loop_state.h - the loop-state slot shared between a monitored thread and
 * the hangwatch agent, and the observer's state machine that writes it.
 *
 * A loop thread alternates between waiting (blocked in its wait call) and
 * working.  The observer runs on that thread at every transition and must be
 * nearly free, so it does only a handful of plain stores into its slot: no
 * locks, no allocation, no system calls.  The agent, in another process,
 * reads the slot through a shared mapping and treats everything in it as
 * untrusted.
 *
 * Matrix's busy rule is kept exactly (see docs/decisions.md):
 *   AFTER_WAITING, BEFORE_TIMERS, BEFORE_SOURCES mark the thread busy and
 *     stamp the start time only if it was not busy already;
 *   BEFORE_WAITING and EXIT clear the mark;
 *   ENTRY changes nothing.
 *
 * Publication protocol (single writer, seqlock style):
 *   `seq` is odd while the thread is busy and even while it waits; every
 *   busy<->waiting transition adds one.  The busy start is written *before*
 *   the odd value of `seq` is published and never changes while `seq` stays
 *   odd, so a reader that sees the same odd `seq` before and after reading
 *   `busy_start_ns` holds a consistent (stretch, start) pair.  `seq / 2` also
 *   counts the loop's completed busy stretches (its iterations).
 *
 * This file is pure: the caller supplies the time, in the clock its page
 * says (shared_page.h): the preloaded observer the time-stamp counter where
 * the agent found it usable, else CLOCK_MONOTONIC_COARSE; the C library the
 * coarse clock; the kernel observer CLOCK_MONOTONIC.  The agent converts
 * every start to CLOCK_MONOTONIC, and allows for the coarse clock's
 * resolution (docs/decisions.md §2).
 */
#ifndef HANGWATCH_LOOP_STATE_H
#define HANGWATCH_LOOP_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The six RunLoop activities, with the values iOS gives them. */
typedef enum hw_activity {
    HW_ACTIVITY_ENTRY = 1u << 0,
    HW_ACTIVITY_BEFORE_TIMERS = 1u << 1,
    HW_ACTIVITY_BEFORE_SOURCES = 1u << 2,
    HW_ACTIVITY_BEFORE_WAITING = 1u << 5,
    HW_ACTIVITY_AFTER_WAITING = 1u << 6,
    HW_ACTIVITY_EXIT = 1u << 7,
} hw_activity;

/* One loop thread's slot.  64-byte aligned so two slots never share a line. */
typedef struct hw_loop_slot {
    _Atomic uint64_t seq;           /* odd = busy; +1 per transition */
    _Atomic uint64_t busy_start_ns; /* when the busy stretch began, in the page's clock */
    _Atomic uint32_t activity;      /* last activity seen (hw_activity) */
    _Atomic int32_t tid;            /* kernel thread id, 0 = slot unused */
    union {
        /* Written only by the C library, for the comparison detectors
         * (ping_detector.h, frame_gap.h). */
        struct {
            _Atomic uint64_t ping_answered;     /* the newest ping whose posted task ran */
            _Atomic uint64_t frames;            /* frame ticks seen (hangwatch_loop_frame) */
            _Atomic uint64_t late_frames;       /* of which came a threshold or more late */
            _Atomic uint64_t late_frame_gap_ns; /* the newest late tick's gap */
        };
        /* Written only by the observers that learn the loop's wait
         * (wait_point.h: the preloaded one and the kernel's), on pages that
         * carry HW_PAGE_FLAG_LOOP_WAITS: what they took to be the loop's
         * wait, for the report, and how many waits they took as nested. */
        struct {
            _Atomic uint64_t loop_wait_site;   /* its return address; 0 = not seen yet */
            _Atomic uint64_t loop_wait_object; /* the epoll descriptor, or the set's address (wait_point.h) */
            _Atomic uint32_t loop_wait_info;   /* hw_loop_wait_info(): call, rank, how decided */
            _Atomic uint32_t nested_waits;     /* waits taken as a callback's (wraps) */
            _Atomic uint32_t loop_wait_moves;  /* times the loop's wait was learned again (wraps) */
            uint32_t loop_wait_pad_;
        };
    };
    /* Written only by the C library: HW_LOOP_PAUSED while the program said
     * its loop is in an expected long operation (hangwatch_loop_pause);
     * the library also ends the busy stretch then and starts a new one at
     * the resume, so the runloop detector needs nothing more.  Read through
     * hw_loop_paused(): the program's word, any other value is not a pause. */
    _Atomic uint32_t paused;
    uint8_t pad_[4];
} __attribute__((aligned(64))) hw_loop_slot;

#define HW_LOOP_PAUSED 1u

/* loop_wait_info: the wait function (HW_WAIT_CALL_*), its rank
 * (HW_WAIT_RANK_*) and how it was decided (HW_WAIT_LEARNED_*), a byte each;
 * 0 = nothing learned yet. */
static inline uint32_t hw_loop_wait_info(uint32_t call, uint32_t rank, uint32_t learned)
{
    return (call & 0xffu) | (rank & 0xffu) << 8 | (learned & 0xffu) << 16;
}

_Static_assert(sizeof(hw_loop_slot) == 64, "one cache line per slot");

static inline bool hw_activity_is_valid(uint32_t a)
{
    switch (a) {
    case HW_ACTIVITY_ENTRY:
    case HW_ACTIVITY_BEFORE_TIMERS:
    case HW_ACTIVITY_BEFORE_SOURCES:
    case HW_ACTIVITY_BEFORE_WAITING:
    case HW_ACTIVITY_AFTER_WAITING:
    case HW_ACTIVITY_EXIT:
        return true;
    default:
        return false;
    }
}

/*
 * The observer: record `activity` happening at `now_ns` on the slot's own
 * thread.  Only that thread may call it.  Relaxed loads of our own stores and
 * release stores of `seq` compile to plain moves on x86-64 and AArch64 (stlr).
 */
static inline void hw_observe(hw_loop_slot *slot, hw_activity activity, uint64_t now_ns)
{
    uint64_t seq = atomic_load_explicit(&slot->seq, memory_order_relaxed);
    bool busy = (seq & 1u) != 0;

    switch (activity) {
    case HW_ACTIVITY_AFTER_WAITING:
    case HW_ACTIVITY_BEFORE_TIMERS:
    case HW_ACTIVITY_BEFORE_SOURCES:
        if (!busy) {
            atomic_store_explicit(&slot->busy_start_ns, now_ns, memory_order_relaxed);
            atomic_store_explicit(&slot->seq, seq + 1, memory_order_release);
        }
        break;
    case HW_ACTIVITY_BEFORE_WAITING:
    case HW_ACTIVITY_EXIT:
        if (busy)
            atomic_store_explicit(&slot->seq, seq + 1, memory_order_release);
        break;
    case HW_ACTIVITY_ENTRY:
    default:
        break;
    }
    atomic_store_explicit(&slot->activity, (uint32_t)activity, memory_order_relaxed);
}

/* Is the loop paused (hangwatch_loop_pause)?  Only the exact value the
 * library stores counts: the page is the program's, never trusted. */
static inline bool hw_loop_paused(const hw_loop_slot *slot)
{
    return atomic_load_explicit(&slot->paused, memory_order_acquire) == HW_LOOP_PAUSED;
}

/* What a reader got from a slot in one consistent read. */
typedef struct hw_loop_reading {
    uint64_t seq;
    uint64_t busy_start_ns; /* meaningful only when busy */
    uint32_t activity;
    bool busy;
} hw_loop_reading;

/*
 * Read a slot consistently.  Returns false if the writer kept changing it
 * during `max_tries` attempts (a loop turning over millions of times a
 * second); the caller then simply looks again later.
 */
static inline bool hw_loop_read(const hw_loop_slot *slot, hw_loop_reading *out, int max_tries)
{
    for (int i = 0; i < max_tries; i++) {
        uint64_t s1 = atomic_load_explicit(&slot->seq, memory_order_acquire);
        uint64_t start = atomic_load_explicit(&slot->busy_start_ns, memory_order_relaxed);
        uint32_t act = atomic_load_explicit(&slot->activity, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        uint64_t s2 = atomic_load_explicit(&slot->seq, memory_order_relaxed);
        if (s1 == s2) {
            out->seq = s1;
            out->busy = (s1 & 1u) != 0;
            out->busy_start_ns = start;
            out->activity = act;
            return true;
        }
    }
    return false;
}

#endif
