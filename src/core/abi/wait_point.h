/*
 * wait_point.h - telling the loop's own wait call from a wait made inside a
 * callback (a synchronous network call polling one socket, `time.sleep`
 * done as select, node's spawnSync running a second loop).
 *
 * Only the loop's own wait ends a busy stretch (DESIGN §1); a wait nested
 * in a callback is work.  The rule decides from what the call itself says
 * for certain, before any guess (docs/decisions.md §15):
 *
 *   - what it waits on, its *object*: the epoll instance (epoll_wait's
 *     descriptor), or the poll or select set (the address of its array:
 *     a loop passes the same array every turn, a callback's socket wait
 *     one of its own on its stack); read from the call's arguments alone,
 *     never from the program's memory (a bad pointer must still give the
 *     program its EFAULT, not a crash);
 *   - its *rank*: a sleep (no descriptor at all: `select(0, NULL, ...)` as
 *     Python 3.8-3.10's time.sleep makes it), one descriptor (poll on one:
 *     a socket's own wait for its timeout, as every Python socket with a
 *     timeout makes it), or many (an epoll instance, a poll set of several,
 *     any select set, a wait for signals);
 *   - its call site (return address) and its depth (stack pointer).
 *
 * A call's identity is (site, object).  The loop's wait is learned per
 * thread:
 *
 *   1. Until one is learned, a wait is the loop's if nothing of a higher
 *      rank was seen before it on this thread (the loop waits on its epoll
 *      instance before its first callback polls a socket); the first
 *      identity of the highest rank to repeat is the loop's ("repeated").
 *      A lower rank that repeats with nothing of that rank in between,
 *      twice no deeper than the best seen or MOVE_AFTER times deeper, is
 *      the loop's too ("moved": the best was a start-up one-off).  A sleep
 *      is never learned.
 *   2. Learned, the same identity is the loop's, from any depth: a nested
 *      main loop on the same context (GLib's modal dialog) dispatches the
 *      program's events, so its waits are the loop's.  A sleep is the
 *      loop's only from the loop's own call site (an empty set there).
 *   3. Another identity is nested (work), unless the loop has moved:
 *      - it is of a higher rank and repeats (the loop proper after start-up
 *        waits on one socket);
 *      - it is of the same rank, not deeper, and repeats with no wait of
 *        the loop's in between (a second asyncio.run(), a reconnect that
 *        made a new epoll instance);
 *      - it is of the same or a higher rank and repeats MOVE_AFTER times
 *        with no wait of the loop's in between, at any depth (the learned
 *        loop is gone: a start-up loop that was closed);
 *      - at once, when only its set or the frames under the loop's call
 *        changed: the loop's site and stack position, of any rank but a
 *        sleep's (a poll array reallocated as descriptors come and go, or
 *        down to one), or the loop's site and rank,
 *        shallower with its set on the stack at the same distance above
 *        the stack pointer as the loop's (an interpreter that specialized
 *        its call into select.select; a callback's own call runs under the
 *        loop's, deeper).
 *      Otherwise a wait of a lower rank than the loop's never moves it: a
 *      callback's socket polls, however many, are work.
 *   4. The agent may prime the rule from what the kernel shows of a thread
 *      blocked in its wait when watching starts (its system call and
 *      arguments): that object is the loop's ("primed"); the site is
 *      filled in at the first return to it.
 *
 * Pure and tiny: it runs on the loop thread at every wait that missed the
 * observer's fast path, and in the kernel observer (src/bpf/: bounded
 * loops, no pointers).  State is per thread, owned by that thread.
 */
#ifndef HANGWATCH_WAIT_POINT_H
#define HANGWATCH_WAIT_POINT_H

#include <stdbool.h>
#if defined(__bpf__)
/* The kernel observer's build has the kernel's types, not the C library's. */
#include <linux/types.h>
typedef __u64 uint64_t;
typedef __s64 int64_t;
typedef __u32 uint32_t;
#else
#include <stdint.h>
#endif

#define HW_WAIT_POINT_CANDIDATES 4
#define HW_WAIT_POINT_MOVE_AFTER 16
/* How far above the stack pointer a wait's set may lie and still be taken
 * for one in its caller's frames (rule 3's frame shift). */
#define HW_WAIT_POINT_STACK_SPAN ((uint64_t)1 << 20)

/* A wait call's rank: how much of an event loop's wait it can be. */
enum {
    HW_WAIT_RANK_SLEEP = 0, /* no descriptor: a sleep */
    HW_WAIT_RANK_ONE = 1,   /* one descriptor */
    HW_WAIT_RANK_MANY = 2,  /* an epoll instance, several descriptors, signals */
};

/* The object of a wait for signals (sigsuspend): no descriptor or set. */
#define HW_WAIT_OBJECT_SIGNALS (~(uint64_t)0)

/* Which wait function a call was (for the report: what was taken to be
 * the loop's wait); not part of its identity. */
enum {
    HW_WAIT_CALL_UNKNOWN = 0,
    HW_WAIT_CALL_EPOLL_WAIT,
    HW_WAIT_CALL_EPOLL_PWAIT,
    HW_WAIT_CALL_EPOLL_PWAIT2,
    HW_WAIT_CALL_POLL,
    HW_WAIT_CALL_PPOLL,
    HW_WAIT_CALL_SELECT,
    HW_WAIT_CALL_PSELECT,
    HW_WAIT_CALL_SIGSUSPEND,
    HW_WAIT_CALL_IO_URING,
    HW_WAIT_CALL_COUNT
};

/* How the loop's wait was decided. */
enum {
    HW_WAIT_LEARNED_NOT_YET = 0,
    HW_WAIT_LEARNED_REPEATED = 1, /* the first of the highest rank to repeat */
    HW_WAIT_LEARNED_PRIMED = 2,   /* the wait the thread was in when watching began */
    HW_WAIT_LEARNED_MOVED = 3,    /* another wait took the loop's place (rule 3) */
    HW_WAIT_LEARNED_COUNT
};

/* One wait call, as its caller describes it. */
typedef struct hw_wait_call {
    uint64_t site, sp;
    uint64_t turn;  /* the loop slot's seq at the call: it changes at every wait of the loop's */
    uint64_t object; /* the epoll descriptor, the set's address; 0 for a sleep */
    uint32_t rank;  /* HW_WAIT_RANK_* */
    uint32_t call;  /* HW_WAIT_CALL_* */
} hw_wait_call;

typedef struct hw_wait_point {
    /* The loop's wait; `learned` is HW_WAIT_LEARNED_*.  loop_site 0 with
     * `learned` set: primed, the site not seen yet.  While nothing is
     * learned: the first wait of the highest rank seen, for the report. */
    uint64_t loop_site, loop_sp, loop_object;
    uint32_t loop_rank, loop_call, learned;
    uint32_t top_rank; /* the highest rank seen, while nothing is learned */
    uint32_t next;
    uint32_t pad_;
    struct {
        uint64_t site, sp;
        uint64_t turn; /* the call's turn when it was last seen */
        uint64_t object;
        uint32_t rank, call;
        uint32_t repeats; /* times seen (with no loop wait in between, once one is learned) */
        uint32_t pad_;
    } seen[HW_WAIT_POINT_CANDIDATES];
} hw_wait_point;

/* The rank of a poll of `nfds` descriptors, and of a select whose three
 * sets are those pointers (NULL: no set). */
static inline uint32_t hw_wait_rank_of_poll(uint64_t nfds)
{
    return nfds == 0 ? HW_WAIT_RANK_SLEEP : nfds == 1 ? HW_WAIT_RANK_ONE : HW_WAIT_RANK_MANY;
}

static inline uint64_t hw_wait_select_object(int64_t nfds, uint64_t readfds, uint64_t writefds, uint64_t exceptfds)
{
    if (nfds <= 0)
        return 0;
    return readfds ? readfds : writefds ? writefds : exceptfds;
}

static inline uint32_t hw_wait_rank_of_select(uint64_t object)
{
    return object == 0 ? HW_WAIT_RANK_SLEEP : HW_WAIT_RANK_MANY;
}

/* The wait call `c` is now the loop's, decided `how`. */
static inline void hw_wait_point_learn(hw_wait_point *wp, const hw_wait_call *c, uint32_t how)
{
    wp->loop_site = c->site;
    wp->loop_sp = c->sp;
    wp->loop_object = c->object;
    wp->loop_rank = c->rank;
    wp->loop_call = c->call;
    wp->learned = how;
    for (unsigned i = 0; i < HW_WAIT_POINT_CANDIDATES; i++)
        wp->seen[i].repeats = 0;
}

/* Prime the rule with the wait a thread is blocked in (rule 4). */
static inline void hw_wait_point_prime(hw_wait_point *wp, uint64_t object, uint32_t rank, uint32_t call)
{
    hw_wait_call c = {.site = 0, .sp = 0, .turn = 0, .object = object, .rank = rank, .call = call};
    hw_wait_point_learn(wp, &c, HW_WAIT_LEARNED_PRIMED);
}

/* Note `c` among the candidates: how many times it has now been seen (in
 * a row, with no wait taken for the loop's in between, when
 * `consecutive`). */
static inline uint32_t hw_wait_point_note(hw_wait_point *wp, const hw_wait_call *c, bool consecutive)
{
    for (unsigned i = 0; i < HW_WAIT_POINT_CANDIDATES; i++) {
        if (wp->seen[i].site == c->site && wp->seen[i].object == c->object && wp->seen[i].repeats != 0) {
            if (consecutive && wp->seen[i].turn != c->turn)
                wp->seen[i].repeats = 0; /* the loop waited in between: start again */
            wp->seen[i].repeats++;
            wp->seen[i].turn = c->turn;
            wp->seen[i].sp = c->sp;
            return wp->seen[i].repeats;
        }
    }
    unsigned k = wp->next % HW_WAIT_POINT_CANDIDATES;
    wp->next++;
    if (k < HW_WAIT_POINT_CANDIDATES) { /* always; the kernel's verifier wants to see it */
        wp->seen[k].site = c->site;
        wp->seen[k].sp = c->sp;
        wp->seen[k].object = c->object;
        wp->seen[k].rank = c->rank;
        wp->seen[k].call = c->call;
        wp->seen[k].turn = c->turn;
        wp->seen[k].repeats = 1;
    }
    return 1;
}

/* Is `c` the loop's own wait with its set or the frames under it changed:
 * from the loop's site, and either from the same stack position, of any
 * rank but a sleep's (a set reallocated or resized: Python's select.poll
 * and GLib grow their poll arrays as descriptors come and go, and a poll
 * loop may come down to one descriptor; a callback's wait through the same
 * call runs deeper) or shallower, of its rank, waiting on a set
 * that lies on the stack at the loop's set's distance above the stack
 * pointer (rule 3's frame shift)?  An interpreter that specializes its call
 * path (CPython 3.11+ calling select.select straight from its bytecode once
 * the call has run a few times) moves the whole frame, and the set with
 * it. */
static inline bool hw_wait_point_frame_shifted(const hw_wait_point *wp, const hw_wait_call *c)
{
    if (c->site != wp->loop_site || c->sp < wp->loop_sp)
        return false;
    if (c->sp == wp->loop_sp)
        return true; /* the same frames: the set was moved or resized, to one descriptor too (a poll
                        array grown by realloc, a poll loop whose last child is all it waits for) */
    if (c->rank != wp->loop_rank)
        return false;
    if (c->object <= c->sp || c->object - c->sp >= HW_WAIT_POINT_STACK_SPAN || wp->loop_object <= wp->loop_sp)
        return false;
    return c->object - c->sp == wp->loop_object - wp->loop_sp;
}

/* Is the wait call `c` the loop's own wait?  May learn or move the loop's
 * wait (the caller compares wp->learned / loop_site before and after to
 * publish a change). */
static inline bool hw_wait_point_is_loop(hw_wait_point *wp, const hw_wait_call *c)
{
    if (wp->learned == HW_WAIT_LEARNED_NOT_YET) {
        if (c->rank < wp->top_rank) {
            /* Below what the thread has shown: a callback's wait, unless it
             * repeats with nothing of that rank in between, twice no deeper
             * than that, or MOVE_AFTER times deeper (a start-up select
             * once, then a poll loop on one descriptor). */
            if (c->rank == HW_WAIT_RANK_SLEEP)
                return false;
            uint32_t repeats = hw_wait_point_note(wp, c, true);
            if (repeats < (c->sp >= wp->loop_sp ? 2u : HW_WAIT_POINT_MOVE_AFTER))
                return false;
            wp->top_rank = c->rank;
            hw_wait_point_learn(wp, c, HW_WAIT_LEARNED_MOVED);
            return true;
        }
        if (c->rank > wp->top_rank || wp->loop_call == HW_WAIT_CALL_UNKNOWN) {
            wp->top_rank = c->rank;
            for (unsigned i = 0; i < HW_WAIT_POINT_CANDIDATES; i++)
                wp->seen[i].repeats = 0; /* lower ranks can no longer be learned */
            /* The best seen so far, said (not learned: loop_* are looked
             * at only once `learned` is set). */
            wp->loop_site = c->site;
            wp->loop_sp = c->sp;
            wp->loop_object = c->object;
            wp->loop_rank = c->rank;
            wp->loop_call = c->call;
        }
        if (c->rank == HW_WAIT_RANK_SLEEP)
            return true; /* nothing better seen yet; never learned */
        if (hw_wait_point_note(wp, c, false) >= 2)
            hw_wait_point_learn(wp, c, HW_WAIT_LEARNED_REPEATED);
        return true;
    }
    if (c->object == wp->loop_object && c->rank != HW_WAIT_RANK_SLEEP &&
        (c->site == wp->loop_site || wp->loop_site == 0)) {
        wp->loop_site = c->site; /* a primed wait gets its site */
        wp->loop_sp = c->sp;
        return true;
    }
    if (c->rank == HW_WAIT_RANK_SLEEP) {
        if (c->site != wp->loop_site)
            return false; /* time.sleep in a callback */
        return true; /* the loop's own call, with nothing to wait on this turn */
    }
    if (hw_wait_point_frame_shifted(wp, c)) {
        hw_wait_point_learn(wp, c, HW_WAIT_LEARNED_MOVED);
        return true;
    }
    if (c->rank < wp->loop_rank)
        return false;
    uint32_t repeats = hw_wait_point_note(wp, c, true);
    bool moved = (c->rank > wp->loop_rank && repeats >= 2) ||
                 (c->rank == wp->loop_rank && c->sp >= wp->loop_sp && repeats >= 2) ||
                 repeats >= HW_WAIT_POINT_MOVE_AFTER;
    if (!moved)
        return false;
    hw_wait_point_learn(wp, c, HW_WAIT_LEARNED_MOVED);
    return true;
}

#endif
