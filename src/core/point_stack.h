/*
 * point_stack.h - Matrix's early sampling ring and its Point Stack choice
 * (seeds/000 and seeds/004).
 *
 * While a loop thread is busy, the agent samples its stack at a fixed
 * interval into a ring of `capacity` entries (check period / interval = 20 by
 * default); a new sample overwrites the oldest.  For each sample the ring
 * keeps the 0-based run length of its top key: the previous sample's run
 * plus one when both have the same top, else 0.  The Point Stack is the
 * sample with the longest run, the newest one on a tie: the place the
 * thread kept being found in.  Then each address of the chosen stack gets a
 * repeat count, the number of times it occurs in all the stacks in the ring.
 *
 * The top key is Matrix's top address when the caller passes the top pc; the
 * agent passes the top frame's *function* instead, so that a thread spinning
 * inside one function (whose pc differs at every sample) still forms a run
 * (docs/decisions.md).
 *
 * Pure code with caller-provided storage: no allocation, no OS calls.
 */
#ifndef HANGWATCH_POINT_STACK_H
#define HANGWATCH_POINT_STACK_H

#include <stddef.h>
#include <stdint.h>

#define HW_SAMPLE_MAX_FRAMES 128

/* How a sample was taken. */
typedef enum hw_sample_source {
    HW_SAMPLE_STOPPED = 0, /* the thread was stopped (ptrace) and its stack copied */
    HW_SAMPLE_KERNEL,      /* the kernel copied it while the thread ran (perf event) */
    HW_SAMPLE_REUSED,      /* the thread had not run since the previous one: the same stack again */
    HW_SAMPLE_SOURCES
} hw_sample_source;

typedef struct hw_sample {
    uint64_t pcs[HW_SAMPLE_MAX_FRAMES]; /* innermost first */
    size_t depth;
    uint64_t top_key;
    uint64_t time_ns;
    hw_sample_source source;
} hw_sample;

typedef struct hw_sample_ring {
    hw_sample *samples; /* capacity entries */
    size_t *top_repeat; /* capacity entries: run length of the top key */
    size_t capacity;
    size_t tail;  /* next slot to write */
    size_t count; /* samples held, <= capacity */
} hw_sample_ring;

void hw_ring_init(hw_sample_ring *ring, hw_sample *samples, size_t *top_repeat, size_t capacity);
void hw_ring_clear(hw_sample_ring *ring);

/* Add a sample; frames beyond HW_SAMPLE_MAX_FRAMES are dropped.
 * hw_ring_add is hw_ring_add_from with HW_SAMPLE_STOPPED. */
void hw_ring_add(hw_sample_ring *ring, const uint64_t *pcs, size_t depth, uint64_t top_key, uint64_t time_ns);
void hw_ring_add_from(hw_sample_ring *ring, const uint64_t *pcs, size_t depth, uint64_t top_key, uint64_t time_ns,
                      hw_sample_source source);

/* How many samples in the ring came from each source. */
void hw_ring_count_sources(const hw_sample_ring *ring, size_t counts[HW_SAMPLE_SOURCES]);

/* The i-th sample counting from the oldest (0) to the newest (count-1). */
const hw_sample *hw_ring_at(const hw_sample_ring *ring, size_t i);
size_t hw_ring_repeat_at(const hw_sample_ring *ring, size_t i);

/* Index (oldest = 0) of the Point Stack, or -1 when the ring is empty. */
long hw_ring_point_stack(const hw_sample_ring *ring);

/* For each address of sample `index`, how often it occurs in all samples.
 * `counts` has room for that sample's depth. */
void hw_ring_repeat_counts(const hw_sample_ring *ring, size_t index, unsigned *counts);

#endif
