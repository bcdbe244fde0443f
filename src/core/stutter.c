/* stutter.c - see stutter.h. */
#include "stutter.h"

#include <string.h>

void hw_stutter_config_default(hw_stutter_config *cfg, uint64_t threshold_ns)
{
    cfg->window_ns = 5000000000ull;
    cfg->min_stall_ns = 250000000ull;
    cfg->busy_percent = 70;
    cfg->min_stalls = 2;
    cfg->threshold_ns = threshold_ns;
}

void hw_stutter_init(hw_stutter *s, const hw_stutter_config *cfg, uint64_t now_ns)
{
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->window_start_ns = now_ns;
}

static void remember_stall(hw_stutter *s, uint64_t start, uint64_t end)
{
    if (s->count == HW_STUTTER_MAX_STALLS) {
        memmove(&s->stalls[0], &s->stalls[1], (HW_STUTTER_MAX_STALLS - 1) * sizeof s->stalls[0]);
        s->count--;
    }
    s->stalls[s->count].start_ns = start;
    s->stalls[s->count].end_ns = end;
    s->count++;
}

/* The part of [start, end) inside [from, now). */
static uint64_t overlap(uint64_t start, uint64_t end, uint64_t from)
{
    if (end <= from)
        return 0;
    return end - (start > from ? start : from);
}

hw_stutter_verdict hw_stutter_observe(hw_stutter *s, const hw_loop_reading *r, uint64_t now_ns)
{
    hw_stutter_verdict v = {false, 0, 0, s->cfg.window_ns};
    /* The stretch we were timing is over: keep it if it was a stall. */
    if (s->current_seq != 0 && (!r->busy || r->seq != s->current_seq)) {
        uint64_t length = now_ns > s->current_start_ns ? now_ns - s->current_start_ns : 0;
        if (length >= s->cfg.min_stall_ns)
            remember_stall(s, s->current_start_ns, now_ns);
        s->current_seq = 0;
    }
    if (r->busy && r->seq != s->current_seq) {
        s->current_seq = r->seq;
        s->current_start_ns = r->busy_start_ns <= now_ns ? r->busy_start_ns : now_ns;
    }

    uint64_t from = now_ns > s->cfg.window_ns ? now_ns - s->cfg.window_ns : 0;
    if (from < s->window_start_ns)
        from = s->window_start_ns;
    bool over_threshold = false;
    for (unsigned i = 0; i < s->count; i++) {
        uint64_t part = overlap(s->stalls[i].start_ns, s->stalls[i].end_ns, from);
        if (part == 0)
            continue;
        v.stalls++;
        v.busy_ns += part;
        if (s->stalls[i].end_ns - s->stalls[i].start_ns > s->cfg.threshold_ns)
            over_threshold = true;
    }
    uint64_t current = s->current_seq ? now_ns - s->current_start_ns : 0;
    if (current >= s->cfg.min_stall_ns) {
        v.stalls++;
        v.busy_ns += overlap(s->current_start_ns, now_ns, from);
        if (current > s->cfg.threshold_ns)
            over_threshold = true;
    }
    /* A full window must have been observed. */
    bool full_window = now_ns - s->window_start_ns >= s->cfg.window_ns;
    if (full_window && !over_threshold && v.stalls >= s->cfg.min_stalls &&
        v.busy_ns * 100 >= (uint64_t)s->cfg.busy_percent * s->cfg.window_ns) {
        v.stutter = true;
        s->window_start_ns = now_ns; /* one report per window */
        s->count = 0;
    }
    return v;
}

void hw_stutter_restart(hw_stutter *s, uint64_t seq, uint64_t now_ns)
{
    if (s->current_seq == seq && s->current_start_ns < now_ns)
        s->current_start_ns = now_ns;
}
