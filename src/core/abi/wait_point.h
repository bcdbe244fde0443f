/*
 * wait_point.h - telling the loop's own wait call from a wait made inside a
 * callback (a synchronous network call polling one socket, a nested epoll).
 *
 * Only the loop's own wait point ends a busy stretch (DESIGN §1); a wait
 * nested in a callback is work.  The rule, "the shallowest repeated wait":
 *
 *   - A wait call is identified by its call site (return address) and the
 *     stack pointer it was called with.  The loop calls its wait from the
 *     same place at the same depth every turn, so the loop's identity is the
 *     first identity seen a second time; the depth of that call is the loop
 *     level.
 *   - A later wait called *deeper* than the loop level (a lower stack
 *     pointer: the loop called a callback, which waited) is nested: work.
 *   - A wait at the loop level or shallower is the loop's.  A shallower
 *     identity that repeats raises the loop level to it, so a nested wait
 *     that happened to repeat first cannot lock the level too deep.
 *   - Until some identity repeats, every wait counts as the loop's (the
 *     start-up behaviour is unchanged).
 *
 * A program that repeatedly waits in a *shallower* place before its real
 * loop starts deeper would teach the wrong level; HANGWATCH_WAIT_SITE=any
 * (`hangwatch run --wait-site any`) turns the rule off and makes every wait
 * the loop's (docs/decisions.md).
 *
 * Pure and tiny: it runs on the loop thread at every wait (two compares on
 * the fast path); state is per thread, owned by that thread.
 */
#ifndef HANGWATCH_WAIT_POINT_H
#define HANGWATCH_WAIT_POINT_H

#include <stdbool.h>
#include <stdint.h>

#define HW_WAIT_POINT_CANDIDATES 4

typedef struct hw_wait_point {
    uintptr_t loop_sp; /* 0 = not learned yet */
    uintptr_t loop_site;
    struct {
        uintptr_t site, sp;
    } seen[HW_WAIT_POINT_CANDIDATES];
    unsigned next;
} hw_wait_point;

/* Is a wait from `site` with stack pointer `sp` the loop's own wait? */
static inline bool hw_wait_point_is_loop(hw_wait_point *wp, uintptr_t site, uintptr_t sp)
{
    if (sp == wp->loop_sp && site == wp->loop_site)
        return true; /* the fast path: the loop's own call */
    if (sp < wp->loop_sp)
        return false; /* deeper than the loop: nested in a callback */
    for (unsigned i = 0; i < HW_WAIT_POINT_CANDIDATES; i++) {
        if (wp->seen[i].site == site && wp->seen[i].sp == sp) {
            wp->loop_sp = sp; /* repeated, and not deeper: the loop level */
            wp->loop_site = site;
            return true;
        }
    }
    wp->seen[wp->next % HW_WAIT_POINT_CANDIDATES].site = site;
    wp->seen[wp->next % HW_WAIT_POINT_CANDIDATES].sp = sp;
    wp->next++;
    return true;
}

#endif
