/*
 * sleep_tally.h - what a hung thread slept in over its stretch, from the
 * agent's looks at it, for the `time` section's "blocked on" (decisions.md
 * §44).
 *
 * The kernel's counters say how long the thread slept in a window, not in
 * what; one look before the capture says what it is in at that moment.  A
 * thread that slept 2.2 s in clock_nanosleep and then spun is running at
 * the look, and "asleep outside any system call" was what that one look
 * made of its 2.2 s.  So the agent looks at a long stretch every 100 ms
 * (from a quarter of the threshold on, and at each capture) and counts the
 * kinds of sleep it finds: the system call and the descriptor it waits on
 * (or a sleep outside any call, state D: a page fault).  The kind found
 * most is what the thread slept in; the looks that found it running count
 * towards no kind.
 *
 * Small and bounded: HW_SLEEP_KINDS kinds per stretch (a look of a fifth
 * kind counts only in the total).  Pure code: no OS calls.
 */
#ifndef HANGWATCH_SLEEP_TALLY_H
#define HANGWATCH_SLEEP_TALLY_H

#include <stdbool.h>
#include <stdint.h>

#include "core/hang_cause.h"

#define HW_SLEEP_KINDS 4

typedef struct hw_sleep_kind {
    bool in_syscall;
    char state;        /* the first look's (S, D) */
    long syscall;      /* when in_syscall */
    int fd;            /* the descriptor it waits on, -1 none */
    int wait_fd_count; /* a poll's or select's set size, -1 unknown */
    uint64_t args[6];  /* the first look's arguments */
    unsigned looks;
} hw_sleep_kind;

typedef struct hw_sleep_tally {
    uint64_t seq;   /* the stretch counted (its loop's sequence number) */
    unsigned looks; /* every look at the stretch, asleep or not */
    unsigned kinds;
    hw_sleep_kind kind[HW_SLEEP_KINDS];
} hw_sleep_tally;

/* Count `look` at stretch `seq` (a new stretch starts the tally afresh). */
void hw_sleep_tally_add(hw_sleep_tally *t, uint64_t seq, const hw_blocked_look *look);

/* Is `look` asleep: in a system call and not running, or in state D? */
bool hw_look_asleep(const hw_blocked_look *look);

/* The kind stretch `seq` was found asleep in most (the earliest on a tie),
 * as a look with its state, call and descriptor (no description), and how
 * many looks found it; false when no look of that stretch found it asleep. */
bool hw_sleep_tally_top(const hw_sleep_tally *t, uint64_t seq, hw_blocked_look *out, unsigned *looks);

/* The same kind of sleep? */
bool hw_look_same_sleep(const hw_blocked_look *a, const hw_blocked_look *b);

#endif
