/* ping_detector.c - see ping_detector.h. */
#include "ping_detector.h"

#include "saturating.h"

#define DEFAULT_ANSWER_POLL_NS 10000000ull /* 10 ms, as the runloop detector's hang-end look */

void hw_ping_init(hw_ping_detector *d, uint64_t timeout_ns, uint64_t now_ns)
{
    d->timeout_ns = timeout_ns;
    d->answer_poll_ns = DEFAULT_ANSWER_POLL_NS;
    d->token = 0;
    d->posted_ns = 0;
    d->outstanding = false;
    d->missed = false;
    d->next_ns = now_ns;
}

static void post(hw_ping_detector *d, uint64_t now_ns, hw_ping_step_result *res)
{
    d->token++;
    d->posted_ns = now_ns;
    d->outstanding = true;
    d->missed = false;
    d->next_ns = hw_add_sat(now_ns, d->timeout_ns);
    res->post = true;
}

hw_ping_step_result hw_ping_step(hw_ping_detector *d, uint64_t now_ns, bool answered, bool may_post)
{
    hw_ping_step_result res = {0};
    uint64_t deadline = hw_add_sat(d->posted_ns, d->timeout_ns);
    if (d->outstanding) {
        res.waited_ns = now_ns > d->posted_ns ? now_ns - d->posted_ns : 0;
        if (answered) {
            d->outstanding = false;
            if (d->missed) {
                res.answered_late = true; /* the watcher's wait for the answer ends */
                d->missed = false;
            } else if (now_ns < deadline) {
                d->next_ns = deadline; /* answered early: the sleep still runs out */
                return res;
            }
        } else if (now_ns < deadline) {
            d->next_ns = deadline;
            return res;
        } else {
            if (!d->missed) {
                d->missed = true;
                res.missed = true;
            }
            d->next_ns = hw_add_sat(now_ns, d->answer_poll_ns);
            return res;
        }
    }
    /* Nothing outstanding: the next ping when the sleep is over, unless the
     * caller holds it back. */
    if (now_ns < d->next_ns && !res.answered_late)
        return res; /* looked at early (the caller looks on its own schedule too) */
    if (may_post)
        post(d, now_ns, &res);
    else
        d->next_ns = hw_add_sat(now_ns, d->answer_poll_ns);
    return res;
}
