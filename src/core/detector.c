/*
 * detector.c - Matrix's hang condition and the agent's check schedule (see
 * detector.h for the rules and why there are two modes).
 */
#include "detector.h"

#include "saturating.h"

const char *hw_check_mode_name(hw_check_mode mode)
{
    return mode == HW_CHECK_PERIODIC ? "periodic" : "exact";
}

void hw_detector_config_default(hw_detector_config *cfg)
{
    cfg->threshold_ns = 2000000000ull;
    cfg->check_period_ns = 1000000000ull;
    cfg->mode = HW_CHECK_EXACT;
    cfg->clock_slack_ns = 0;
}

uint64_t hw_detector_poll_interval(const hw_detector_config *cfg)
{
    uint64_t half = cfg->threshold_ns / 2;
    uint64_t p = cfg->check_period_ns < half ? cfg->check_period_ns : half;
    return p < 1000000ull ? 1000000ull : p; /* never spin faster than 1 ms */
}

static uint64_t elapsed(uint64_t start, uint64_t now)
{
    /* The start comes from the monitored process: never trust it to be in
     * the past. */
    return now > start ? now - start : 0;
}

bool hw_is_hung(const hw_detector_config *cfg, const hw_loop_reading *r, uint64_t now_ns, uint64_t *busy_ns)
{
    uint64_t busy = r->busy ? elapsed(r->busy_start_ns, now_ns) : 0;
    if (busy_ns)
        *busy_ns = busy;
    return r->busy && busy > hw_add_sat(cfg->threshold_ns, cfg->clock_slack_ns);
}

void hw_detector_init(hw_detector *d, const hw_detector_config *cfg, uint64_t now_ns)
{
    d->cfg = *cfg;
    d->reported_seq = 0;
    d->next_check_ns = hw_add_sat(now_ns, cfg->mode == HW_CHECK_PERIODIC ? cfg->check_period_ns : 0);
    d->restart_seq = 0;
    d->restart_ns = 0;
    d->last_seq = 0;
    d->last_look_ns = 0;
    d->watched_seq = 0;
}

void hw_detector_restart_clock(hw_detector *d, uint64_t seq, uint64_t now_ns)
{
    d->restart_seq = seq;
    d->restart_ns = now_ns;
    if (d->reported_seq == seq)
        d->reported_seq = 0;
    if (d->watched_seq == seq)
        d->watched_start_ns = now_ns;
    d->last_seq = seq;
    d->last_look_ns = now_ns;
}

/* Did a stretch end between the last look and this one (`r`, at `now_ns`)
 * that may have lasted more than the threshold, plus HW_LATE_LOOK_NS?  The
 * one the last look found busy lasted from its start to somewhere between
 * the two looks; one that began and ended between them (an odd number
 * strictly between their stretch numbers) lasted at most their distance.
 * On time, neither can: a busy stretch is looked at on its threshold, a
 * waiting loop every poll interval (at most half the threshold).  After a
 * hang the last look the detector knows of is its detection (the agent
 * looks for the end on its own), so only the stretch after it counts. */
static void note_unseen_end(hw_detector *d, const hw_loop_reading *r, uint64_t now_ns, hw_check *c)
{
    if (d->cfg.mode != HW_CHECK_EXACT || d->last_look_ns == 0 || r->seq <= d->last_seq)
        return;
    uint64_t threshold = hw_add_sat(d->cfg.threshold_ns, d->cfg.clock_slack_ns);
    uint64_t limit = hw_add_sat(threshold, HW_LATE_LOOK_NS);
    bool seen_busy = d->watched_seq != 0 && d->watched_seq == d->last_seq;
    uint64_t first_whole = d->last_seq + 1 + (d->last_seq & 1u); /* the first odd number after it */
    bool whole = first_whole < r->seq && d->reported_seq != d->last_seq;
    uint64_t seen_max = seen_busy ? elapsed(d->watched_start_ns, now_ns) : 0;
    uint64_t whole_max = whole ? elapsed(d->last_look_ns, now_ns) : 0;
    if (seen_busy && seen_max > limit) {
        c->unseen_seq = d->watched_seq;
        c->unseen_min_ns = elapsed(d->watched_start_ns, d->last_look_ns);
        c->unseen_max_ns = seen_max;
    } else if (whole && whole_max > limit) {
        c->unseen_seq = first_whole;
        c->unseen_min_ns = 0;
        c->unseen_max_ns = whole_max;
    } else {
        return;
    }
    c->ended_unseen = true;
    c->unseen_late_ns = c->unseen_max_ns - threshold;
}

void hw_detector_note_turning(hw_detector *d, uint64_t seq, uint64_t now_ns)
{
    if (seq <= d->last_seq)
        return;
    d->last_seq = seq;
    d->last_look_ns = now_ns;
    d->watched_seq = 0;
}

static uint64_t next_periodic(const hw_detector *d, uint64_t now_ns)
{
    /* Keep Matrix's fixed phase; if the agent fell behind, start again. */
    uint64_t next = hw_add_sat(d->next_check_ns, d->cfg.check_period_ns);
    return next > now_ns ? next : hw_add_sat(now_ns, d->cfg.check_period_ns);
}

hw_check hw_detector_check(hw_detector *d, const hw_loop_reading *reading, uint64_t now_ns)
{
    hw_check c = {0};
    hw_loop_reading adjusted = *reading;
    const hw_loop_reading *r = &adjusted;
    c.seq = r->seq;
    note_unseen_end(d, r, now_ns, &c);

    if (r->busy && now_ns > hw_add_sat(d->next_check_ns, HW_SUSPEND_LATENESS_NS) && r->seq != d->reported_seq)
        hw_detector_restart_clock(d, r->seq, now_ns);
    if (r->busy && r->seq == d->restart_seq && adjusted.busy_start_ns < d->restart_ns)
        adjusted.busy_start_ns = d->restart_ns;

    if (d->reported_seq != 0 && r->seq != d->reported_seq) {
        c.hang_ended = true;
        c.ended_seq = d->reported_seq;
        d->reported_seq = 0;
    }

    uint64_t busy_ns = 0;
    bool hung = hw_is_hung(&d->cfg, r, now_ns, &busy_ns);
    if (r->busy) {
        c.busy_start_ns = r->busy_start_ns;
        c.busy_ns = busy_ns;
        c.launch = r->seq == 1;
    }

    if (!r->busy)
        c.verdict = HW_VERDICT_IDLE;
    else if (!hung)
        c.verdict = HW_VERDICT_BUSY;
    else if (r->seq == d->reported_seq)
        c.verdict = HW_VERDICT_STILL_HUNG;
    else {
        c.verdict = HW_VERDICT_HANG;
        d->reported_seq = r->seq;
    }

    d->last_seq = r->seq;
    d->last_look_ns = now_ns;
    if (c.verdict == HW_VERDICT_BUSY) {
        d->watched_seq = r->seq;
        d->watched_start_ns = r->busy_start_ns; /* as the clock counts it (restarted, if it was) */
    } else {
        d->watched_seq = 0;
    }

    if (d->cfg.mode == HW_CHECK_PERIODIC) {
        d->next_check_ns = next_periodic(d, now_ns);
    } else if (c.verdict == HW_VERDICT_BUSY) {
        /* Wake exactly when this stretch would cross the threshold. */
        uint64_t start = r->busy_start_ns <= now_ns ? r->busy_start_ns : now_ns;
        d->next_check_ns = hw_add_sat(hw_add_sat(start, d->cfg.threshold_ns), hw_add_sat(d->cfg.clock_slack_ns, 1));
    } else if (c.verdict == HW_VERDICT_IDLE) {
        d->next_check_ns = hw_add_sat(now_ns, hw_detector_poll_interval(&d->cfg));
    } else {
        /* Hung: look again a check period later (to see it end). */
        d->next_check_ns = hw_add_sat(now_ns, d->cfg.check_period_ns);
    }
    return c;
}
