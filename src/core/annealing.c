/* annealing.c - see annealing.h. */
#include "annealing.h"

#include <string.h>

void hw_annealing_reset(hw_annealing *a)
{
    a->previous_periods = 1;
    a->current_periods = 1;
    a->have_saved = false;
    a->saved_len = 0;
}

bool hw_stacks_same(const uint64_t *a, size_t a_len, const uint64_t *b, size_t b_len)
{
    size_t n = a_len < b_len ? a_len : b_len;
    if (n == 0)
        return a_len == b_len;
    /* Compare from the outermost frame in: the shorter must be the outer
     * part of the longer. */
    for (size_t i = 1; i <= n; i++)
        if (a[a_len - i] != b[b_len - i])
            return false;
    return true;
}

static void save(hw_annealing *a, const uint64_t *keys, size_t len)
{
    if (len > HW_ANNEAL_MAX_FRAMES) {
        /* Keep the outermost frames: the comparison aligns on them. */
        keys = keys + (len - HW_ANNEAL_MAX_FRAMES);
        len = HW_ANNEAL_MAX_FRAMES;
    }
    if (len > 0)
        memcpy(a->saved, keys, len * sizeof *keys);
    a->saved_len = len;
    a->have_saved = true;
}

hw_anneal_decision hw_annealing_step(hw_annealing *a, const uint64_t *keys, size_t len)
{
    hw_anneal_decision d;
    size_t cmp_len = len > HW_ANNEAL_MAX_FRAMES ? HW_ANNEAL_MAX_FRAMES : len;
    const uint64_t *cmp = len > 0 ? keys + (len - cmp_len) : keys;
    bool same = a->have_saved && (len == 0 || hw_stacks_same(a->saved, a->saved_len, cmp, cmp_len));
    if (same) {
        uint64_t next = a->previous_periods + a->current_periods;
        a->previous_periods = a->current_periods;
        a->current_periods = next;
        d.report = false;
        d.wait_periods = next;
    } else {
        save(a, keys, len);
        a->previous_periods = 1;
        a->current_periods = 1;
        d.report = true;
        d.wait_periods = 1;
    }
    return d;
}
