/*
 * fuzz_page.c - the agent's logic on a shared page written by a hostile
 * program.
 *
 * Feeds: the input is, in this order (missing bytes read as zero)
 *   33 bytes   the settings: threshold, check period, clock slack, mode
 *              bits, the sender's pid, the agent's clock at the start (any
 *              values the command line accepts, and a CLOCK_MONOTONIC
 *              reading); see LLVMFuzzerTestOneInput
 *   2 bytes    n, the length of the script
 *   n bytes    the script, up to MAX_STEPS steps (below)
 *   the rest   the page's first bytes, copied into a page-aligned
 *              hw_shared_page (zero-filled after them)
 * The page comes last so that short inputs still carry a script.  Steps:
 *   advance the agent's clock, let the program store any value into any
 *   field of a slot, let the observer record an activity (hw_observe), or
 *   look: hw_page_header_is_valid, then for every slot hw_loop_read and,
 *   for the slots the agent watches (slot 0, and every slot that names a
 *   thread), the reading fed to every detector the agent has
 *   (hw_detector_check, hw_stutter_observe, hw_semaphore_step, hw_ping_step,
 *   hw_frame_gap_look, the pause word through hw_loop_paused), one detector
 *   state per loop, afresh when the slot's
 *   thread changes, as in the agent.
 * The agent's clock never goes back and stays below 2^63 (it is
 * CLOCK_MONOTONIC); everything in the page is arbitrary, including start
 * times in the future or near UINT64_MAX.
 *
 * Proves: no out-of-bounds access, no UBSan report, and every verdict is
 * sane: a busy time is exactly now minus a start not after now (never a
 * wrapped difference), a hang is over the threshold and a busy verdict is
 * not, a stretch is reported once, the next look is always in the future
 * (the agent never spins), a ping times out only after its timeout, a frame
 * gap is 0 or at least the threshold and never longer than the clock has run,
 * a stutter verdict really meets its rule.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/detector.h"
#include "core/frame_gap.h"
#include "core/abi/loop_state.h"
#include "core/ping_detector.h"
#include "core/semaphore_detector.h"
#include "core/abi/shared_page.h"
#include "core/stutter.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

#define MAX_STEPS 512

typedef struct cursor {
    const uint8_t *p;
    size_t left;
} cursor;

/* The next n (<= 8) input bytes as a little-endian number; 0 once used up. */
static uint64_t take(cursor *c, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n && c->left > 0; i++, c->left--)
        v |= (uint64_t)*c->p++ << (8 * i);
    return v;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* What the agent keeps per loop, and what the fuzzer remembers about it. */
typedef struct loop {
    hw_detector det;
    hw_stutter stutter;
    hw_semaphore_detector sem;
    hw_ping_detector ping;
    hw_frame_gap frames;
    bool watched;           /* the agent watches this slot's thread... */
    int32_t tid;            /* ... this one */
    uint64_t reported_seq;  /* the stretch the detector reported as hung */
    uint64_t looks;         /* looks at this loop since it was started */
    uint64_t last_lag_look; /* the look of the semaphore's last lag, 0 = none */
    bool ping_missed;       /* the current ping was reported missed */
} loop;

typedef struct world {
    hw_detector_config cfg;
    hw_stutter_config scfg;
    bool pings_by_post, waiting_only;
    uint64_t now;
    loop loops[HW_PAGE_SLOTS];
} world;

static void check_detector(world *w, loop *l, const hw_loop_reading *r)
{
    uint64_t now = w->now;
    hw_check c = hw_detector_check(&l->det, r, now);
    uint64_t limit = sat_add(w->cfg.threshold_ns, w->cfg.clock_slack_ns);

    CHECK(c.seq == r->seq);
    CHECK((c.verdict == HW_VERDICT_IDLE) == !r->busy);
    CHECK(c.launch == (r->busy && r->seq == 1));
    if (r->busy) {
        CHECK(c.busy_ns == (now > c.busy_start_ns ? now - c.busy_start_ns : 0));
        /* The clock restarts only forwards, never past now. */
        CHECK(c.busy_start_ns >= r->busy_start_ns || c.busy_start_ns <= now);
    } else {
        CHECK(c.busy_ns == 0);
    }
    if (c.verdict == HW_VERDICT_HANG || c.verdict == HW_VERDICT_STILL_HUNG)
        CHECK(c.busy_ns > limit);
    if (c.verdict == HW_VERDICT_BUSY)
        CHECK(c.busy_ns <= limit);

    if (c.hang_ended) {
        CHECK(l->reported_seq != 0 && c.ended_seq == l->reported_seq && c.seq != c.ended_seq);
        l->reported_seq = 0;
    }
    if (c.verdict == HW_VERDICT_HANG) {
        CHECK(l->reported_seq == 0); /* each stretch is reported once */
        l->reported_seq = c.seq;
    }
    if (c.verdict == HW_VERDICT_STILL_HUNG)
        CHECK(l->reported_seq == c.seq);
    CHECK(l->det.next_check_ns > now); /* the next look is in the future */
}

static void check_stutter(world *w, loop *l, const hw_loop_reading *r)
{
    hw_stutter_verdict v = hw_stutter_observe(&l->stutter, r, w->now);
    CHECK(v.window_ns == w->scfg.window_ns);
    CHECK(l->stutter.count <= HW_STUTTER_MAX_STALLS);
    CHECK(v.stalls <= HW_STUTTER_MAX_STALLS + 1);
    /* Each stall counts only its part inside the window. */
    CHECK(v.busy_ns <= (uint64_t)v.stalls * w->scfg.window_ns);
    if (v.stutter) {
        CHECK(v.stalls >= w->scfg.min_stalls);
        CHECK(v.busy_ns * 100 >= (uint64_t)w->scfg.busy_percent * w->scfg.window_ns);
        CHECK(l->stutter.window_start_ns == w->now && l->stutter.count == 0);
    }
}

static void check_semaphore(loop *l, const hw_loop_reading *r)
{
    if (hw_semaphore_step(&l->sem, r)) {
        CHECK(r->activity == HW_ACTIVITY_BEFORE_SOURCES || r->activity == HW_ACTIVITY_AFTER_WAITING);
        /* Five silent intervals make a lag; then the count starts again. */
        CHECK(l->looks > l->sem.timeouts_needed); /* the first look is a signal */
        CHECK(l->last_lag_look == 0 || l->looks - l->last_lag_look >= l->sem.timeouts_needed);
        l->last_lag_look = l->looks;
    }
    CHECK(l->sem.timeouts < l->sem.timeouts_needed);
}

static void check_ping(world *w, loop *l, const hw_loop_slot *slot, const hw_loop_reading *r)
{
    uint64_t now = w->now;
    bool answered = w->pings_by_post ? atomic_load(&slot->ping_answered) >= l->ping.token : !r->busy;
    bool may_post = !w->waiting_only || (!r->busy && r->activity == HW_ACTIVITY_BEFORE_WAITING);
    /* The pause word, as the agent reads it: only HW_LOOP_PAUSED pauses. */
    bool paused = hw_loop_paused(slot);
    CHECK(paused == (atomic_load(&slot->paused) == HW_LOOP_PAUSED));
    answered = answered || paused;
    may_post = may_post && !paused;
    uint64_t token = l->ping.token;
    bool outstanding = l->ping.outstanding;
    uint64_t posted = l->ping.posted_ns;

    hw_ping_step_result res = hw_ping_step(&l->ping, now, answered, may_post);
    CHECK(l->ping.token == token + (res.post ? 1 : 0));
    if (outstanding)
        CHECK(res.waited_ns == (now > posted ? now - posted : 0));
    if (res.missed) {
        CHECK(outstanding && !l->ping_missed);
        CHECK(res.waited_ns >= l->ping.timeout_ns); /* never before its timeout */
        l->ping_missed = true;
    }
    if (res.answered_late) {
        CHECK(l->ping_missed);
        l->ping_missed = false;
    }
    if (res.post) {
        CHECK(may_post && l->ping.posted_ns == now && l->ping.outstanding);
        l->ping_missed = false;
    }
    CHECK(l->ping.next_ns > now);
}

static void check_frames(world *w, loop *l, const hw_loop_reading *r)
{
    uint64_t before = l->frames.last_tick_ns;
    uint64_t gap = hw_frame_gap_look(&l->frames, r, w->now);
    CHECK(gap == 0 || gap >= l->frames.threshold_ns);
    CHECK(gap <= w->now);
    CHECK(l->frames.last_tick_ns <= w->now);
    CHECK(l->frames.last_tick_ns >= before);
}

/* A loop the agent starts watching now, with fresh detectors. */
static void start_loop(world *w, loop *l, int32_t tid)
{
    memset(l, 0, sizeof *l);
    l->watched = true;
    l->tid = tid;
    hw_detector_init(&l->det, &w->cfg, w->now);
    hw_stutter_init(&l->stutter, &w->scfg, w->now);
    hw_semaphore_init(&l->sem);
    hw_ping_init(&l->ping, w->cfg.threshold_ns, w->now);
    hw_frame_gap_init(&l->frames, w->cfg.threshold_ns);
}

static void look(world *w, const hw_shared_page *page, int32_t sender)
{
    (void)hw_page_header_is_valid(page, sender);
    for (unsigned i = 0; i < HW_PAGE_SLOTS; i++) {
        hw_loop_reading r;
        CHECK(hw_loop_read(&page->slots[i], &r, 8)); /* nobody writes concurrently here */
        CHECK(r.busy == ((r.seq & 1) != 0));
        /* As the agent: slot 0 always, another slot while it names a
         * thread; a slot whose thread changed starts afresh. */
        int32_t tid = atomic_load(&page->slots[i].tid);
        loop *l = &w->loops[i];
        if (i != 0 && tid <= 0) {
            l->watched = false;
            continue;
        }
        if (!l->watched || l->tid != tid)
            start_loop(w, l, tid);
        l->looks++;
        check_detector(w, l, &r);
        check_stutter(w, l, &r);
        check_semaphore(l, &r);
        check_ping(w, l, &page->slots[i], &r);
        check_frames(w, l, &r);
    }
}

static const hw_activity activities[] = {
    HW_ACTIVITY_ENTRY,          HW_ACTIVITY_BEFORE_TIMERS, HW_ACTIVITY_BEFORE_SOURCES,
    HW_ACTIVITY_BEFORE_WAITING, HW_ACTIVITY_AFTER_WAITING, HW_ACTIVITY_EXIT,
};

/* The program stores `v` into field `field` of `slot`. */
static void store(hw_loop_slot *slot, unsigned field, uint64_t v)
{
    switch (field % 9) {
    case 0: atomic_store(&slot->seq, v); break;
    case 1: atomic_store(&slot->busy_start_ns, v); break;
    case 2: atomic_store(&slot->activity, (uint32_t)v); break;
    case 3: atomic_store(&slot->tid, (int32_t)(uint32_t)v); break;
    case 4: atomic_store(&slot->ping_answered, v); break;
    case 5: atomic_store(&slot->frames, v); break;
    case 6: atomic_store(&slot->late_frames, v); break;
    case 7: atomic_store(&slot->late_frame_gap_ns, v); break;
    default: atomic_store(&slot->paused, (uint32_t)v); break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
    hw_shared_page *page = aligned_alloc(HW_PAGE_SIZE, sizeof *page);
    world *w = calloc(1, sizeof *w);
    CHECK(page != NULL && w != NULL);
    cursor c = {in, size};

    /* Settings: what the command line accepts (any duration above zero). */
    hw_detector_config_default(&w->cfg);
    uint64_t v;
    if ((v = take(&c, 8)) != 0)
        w->cfg.threshold_ns = v;
    if ((v = take(&c, 8)) != 0)
        w->cfg.check_period_ns = v;
    w->cfg.clock_slack_ns = take(&c, 4);
    uint64_t mode = take(&c, 1);
    w->cfg.mode = (mode & 1) ? HW_CHECK_PERIODIC : HW_CHECK_EXACT;
    w->pings_by_post = (mode & 2) != 0;
    w->waiting_only = (mode & 4) != 0;
    int32_t sender = (int32_t)(uint32_t)take(&c, 4);
    w->now = take(&c, 8) >> 2; /* a monotonic clock: far below 2^63 */

    size_t script_len = (size_t)take(&c, 2);
    if (script_len > c.left)
        script_len = c.left;
    cursor script = {c.p, script_len};
    size_t page_len = c.left - script_len;
    memset(page, 0, sizeof *page);
    memcpy(page, c.p + script_len, page_len < sizeof *page ? page_len : sizeof *page);
    hw_stutter_config_default(&w->scfg, w->cfg.threshold_ns);

    look(w, page, sender);
    for (int step = 0; step < MAX_STEPS && script.left > 0; step++) {
        uint8_t op = (uint8_t)take(&script, 1);
        switch (op & 3) {
        case 0: /* time passes: up to 2^47 ns (39 hours) a step */
            w->now += take(&script, 4) << ((op >> 2) & 15);
            break;
        case 1: { /* the program writes anything anywhere in a slot */
            unsigned slot = (unsigned)take(&script, 1) % HW_PAGE_SLOTS;
            unsigned field = (unsigned)take(&script, 1);
            store(&page->slots[slot], field, take(&script, 8));
            break;
        }
        case 2: { /* the observer records an activity now */
            unsigned slot = (unsigned)take(&script, 1) % HW_PAGE_SLOTS;
            hw_observe(&page->slots[slot], activities[(op >> 2) % 6], w->now);
            break;
        }
        default:
            look(w, page, sender);
            break;
        }
    }
    look(w, page, sender);

    free(w);
    free(page);
    return 0;
}
