/*
 * ring_stacks.h - every sample of an early-sampling ring (point_stack.h)
 * as distinct stacks with a count each, for the report: the Point Stack is
 * one sample; these are all of them, from which `hangwatch html` draws a
 * flame graph (docs/decisions.md §28).
 *
 * Samples with the same addresses, frame for frame, are one stack.  The
 * addresses themselves are kept once each, with whether they were a
 * sample's innermost frame: an innermost address is where the thread was,
 * an outer one a return address, and the two are symbolized differently.
 * Stacks refer to addresses by index, so a report names each function once
 * however many samples pass through it.
 */
#ifndef HANGWATCH_RING_STACKS_H
#define HANGWATCH_RING_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "point_stack.h"

typedef struct hw_ring_addr {
    uint64_t pc;
    bool innermost;
} hw_ring_addr;

typedef struct hw_ring_stack {
    size_t count;       /* samples with exactly this stack */
    size_t depth;       /* frames, innermost first, at frames[first .. first + depth) */
    size_t first;
    bool point_stack;   /* the Point Stack (the chosen sample) is one of them */
} hw_ring_stack;

typedef struct hw_ring_stacks {
    hw_ring_addr *addrs;    /* distinct, sorted by (pc, innermost) */
    size_t addr_count;
    hw_ring_stack *stacks;  /* the most frequent first (ties: the older first) */
    size_t stack_count;
    uint32_t *frames;       /* indexes into addrs */
    size_t frame_count;
    size_t left_out;        /* samples of the stacks beyond max_stacks, not kept */
} hw_ring_stacks;

/*
 * The samples of `ring` as at most `max_stacks` distinct stacks (the most
 * frequent; the samples of the others are counted in left_out).
 * `point_index` is the Point Stack's index in the ring (oldest = 0), or
 * -1.  Samples without a frame are left out (counted).  0, or -1 when out
 * of memory (then `out` holds nothing).  An empty ring gives no stack.
 */
int hw_ring_stacks_of(const hw_sample_ring *ring, long point_index, size_t max_stacks, hw_ring_stacks *out);
void hw_ring_stacks_free(hw_ring_stacks *s);

/* The index in s->addrs of (pc, innermost), or -1. */
long hw_ring_stacks_find(const hw_ring_stacks *s, uint64_t pc, bool innermost);

#endif
