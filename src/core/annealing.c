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

static bool has_key(const uint64_t *keys, size_t len, uint64_t key)
{
    for (size_t i = 0; i < len; i++)
        if (keys[i] == key)
            return true;
    return false;
}

bool hw_stacks_same(const uint64_t *reported, size_t reported_len, const uint64_t *now, size_t now_len)
{
    size_t n = reported_len < now_len ? reported_len : now_len;
    if (n == 0)
        return reported_len == now_len;
    /* Compare from the outermost frame in: the shorter must be the outer
     * part of the longer. */
    for (size_t i = 1; i <= n; i++)
        if (reported[reported_len - i] != now[now_len - i])
            return false;
    /* Deeper now: the same only if it went back into functions it was in
     * (recursion, the callback's own helper seen before), not into new
     * code, whose time the report so far does not name. */
    for (size_t i = 0; i + n < now_len; i++)
        if (!has_key(reported, reported_len, now[i]))
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
