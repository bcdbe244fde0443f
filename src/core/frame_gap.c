/* frame_gap.c - see frame_gap.h. */
#include "frame_gap.h"

void hw_frame_gap_init(hw_frame_gap *f, uint64_t threshold_ns)
{
    f->threshold_ns = threshold_ns;
    f->last_tick_ns = 0;
    f->seen_seq = 0;
    f->seen = false;
}

uint64_t hw_frame_gap_look(hw_frame_gap *f, const hw_loop_reading *r, uint64_t now_ns)
{
    bool runs = !f->seen || !r->busy || r->seq != f->seen_seq;
    f->seen = true;
    f->seen_seq = r->seq;
    if (!runs)
        return 0; /* the loop is stuck in the same stretch: the tick waits */
    return hw_frame_tick(&f->last_tick_ns, now_ns, f->threshold_ns);
}
