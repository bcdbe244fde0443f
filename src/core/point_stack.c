/* point_stack.c - see point_stack.h. */
#include "point_stack.h"

#include <string.h>

void hw_ring_init(hw_sample_ring *ring, hw_sample *samples, size_t *top_repeat, size_t capacity)
{
    ring->samples = samples;
    ring->top_repeat = top_repeat;
    ring->capacity = capacity;
    hw_ring_clear(ring);
}

void hw_ring_clear(hw_sample_ring *ring)
{
    ring->tail = 0;
    ring->count = 0;
}

static size_t slot_of(const hw_sample_ring *ring, size_t i)
{
    /* oldest sits at tail - count */
    return (ring->tail + ring->capacity - ring->count + i) % ring->capacity;
}

void hw_ring_add(hw_sample_ring *ring, const uint64_t *pcs, size_t depth, uint64_t top_key, uint64_t time_ns)
{
    hw_ring_add_from(ring, pcs, depth, top_key, time_ns, HW_SAMPLE_STOPPED);
}

void hw_ring_count_sources(const hw_sample_ring *ring, size_t counts[HW_SAMPLE_SOURCES])
{
    for (int k = 0; k < HW_SAMPLE_SOURCES; k++)
        counts[k] = 0;
    for (size_t i = 0; i < ring->count; i++) {
        hw_sample_source src = hw_ring_at(ring, i)->source;
        if ((unsigned)src < HW_SAMPLE_SOURCES)
            counts[src]++;
    }
}

void hw_ring_add_from(hw_sample_ring *ring, const uint64_t *pcs, size_t depth, uint64_t top_key, uint64_t time_ns,
                      hw_sample_source source)
{
    if (ring->capacity == 0)
        return;
    if (depth > HW_SAMPLE_MAX_FRAMES)
        depth = HW_SAMPLE_MAX_FRAMES;
    size_t slot = ring->tail;
    hw_sample *s = &ring->samples[slot];
    if (depth > 0)
        memcpy(s->pcs, pcs, depth * sizeof *pcs);
    s->depth = depth;
    s->top_key = top_key;
    s->time_ns = time_ns;
    s->source = source;

    size_t repeat = 0;
    if (ring->count > 0) {
        size_t last = (slot + ring->capacity - 1) % ring->capacity;
        const hw_sample *prev = &ring->samples[last];
        if (prev->depth > 0 && depth > 0 && prev->top_key == top_key)
            repeat = ring->top_repeat[last] + 1;
    }
    ring->top_repeat[slot] = repeat;
    ring->tail = (slot + 1) % ring->capacity;
    if (ring->count < ring->capacity)
        ring->count++;
}

const hw_sample *hw_ring_at(const hw_sample_ring *ring, size_t i)
{
    return i < ring->count ? &ring->samples[slot_of(ring, i)] : NULL;
}

size_t hw_ring_repeat_at(const hw_sample_ring *ring, size_t i)
{
    return i < ring->count ? ring->top_repeat[slot_of(ring, i)] : 0;
}

long hw_ring_point_stack(const hw_sample_ring *ring)
{
    if (ring->count == 0)
        return -1;
    size_t best = ring->count - 1;
    size_t best_repeat = hw_ring_repeat_at(ring, best);
    /* From the newest back: only a strictly longer run wins, so the newest
     * of equal runs is kept. */
    for (size_t k = ring->count; k-- > 0;) {
        size_t r = hw_ring_repeat_at(ring, k);
        if (r > best_repeat) {
            best = k;
            best_repeat = r;
        }
    }
    return (long)best;
}

void hw_ring_repeat_counts(const hw_sample_ring *ring, size_t index, unsigned *counts)
{
    const hw_sample *chosen = hw_ring_at(ring, index);
    if (!chosen)
        return;
    for (size_t f = 0; f < chosen->depth; f++) {
        unsigned n = 0;
        for (size_t i = 0; i < ring->count; i++) {
            const hw_sample *s = hw_ring_at(ring, i);
            for (size_t g = 0; g < s->depth; g++)
                if (s->pcs[g] == chosen->pcs[f])
                    n++;
        }
        counts[f] = n;
    }
}
