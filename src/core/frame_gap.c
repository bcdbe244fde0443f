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
    bool first = !f->seen, turned_over = f->seen && r->seq != f->seen_seq;
    f->seen = true;
    f->seen_seq = r->seq;
    if (first || !r->busy)
        return hw_frame_tick(&f->last_tick_ns, now_ns, f->threshold_ns); /* it runs now */
    if (!turned_over)
        return 0; /* stuck in the same stretch: the due tick waits */
    /* Busy in a new stretch: the loop waited in between, and a tick due then
     * ran when that wait ended, as the new stretch began.  (The stretch's
     * start comes from the program's clock, as the agent converted it: kept
     * within what this look can know, it never makes a gap shorter than it
     * was.) */
    uint64_t ran_at = r->busy_start_ns;
    if (ran_at > now_ns)
        ran_at = now_ns;
    if (ran_at < f->last_tick_ns)
        ran_at = f->last_tick_ns;
    return hw_frame_tick(&f->last_tick_ns, ran_at, f->threshold_ns);
}
