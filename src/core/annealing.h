/*
 * annealing.h - Matrix's annealing back-off: while a loop stays hung, report
 * a stack only when it differs from the one last reported, and look again
 * after 1, 2, 3, 5, 8, 13 ... check periods while it stays the same
 * (next = previous + current); a different stack is reported and resets the
 * wait to one period; a return to idle resets everything.
 *
 * "The same stack" (docs/decisions.md, "Annealing"): stacks are compared as
 * chains of *functions* (a frame's symbol start, or its pc when it has no
 * symbol), from the outermost frame in, and the new chain is the same as
 * the one last reported when one is a suffix of the other and the new one's
 * deeper part, if any, runs only functions the reported chain holds: the
 * thread is still inside the same calls and has only come back up, or gone
 * deeper into code it was already in (recursion).  Matrix compares raw
 * addresses, so a thread spinning in one function (whose pc moves at every
 * capture) would be reported at every check; with this rule one spin is one
 * report, while a thread that moves from A() to a sibling B(), or on from
 * A() into a new callee C(), is a new report.
 *
 * The report worker passes each stack's keys from its culprit outwards
 * (decisions.md §39), so what runs under the user's frame never counts.
 *
 * Pure code, no OS calls; unit-tested with the seed's A/B/C table.
 */
#ifndef HANGWATCH_ANNEALING_H
#define HANGWATCH_ANNEALING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HW_ANNEAL_MAX_FRAMES 256

typedef struct hw_annealing {
    uint64_t previous_periods; /* Fibonacci state, in check periods */
    uint64_t current_periods;
    bool have_saved;
    size_t saved_len;
    uint64_t saved[HW_ANNEAL_MAX_FRAMES]; /* function keys, innermost first */
} hw_annealing;

typedef struct hw_anneal_decision {
    bool report;          /* write a report for this stack */
    uint64_t wait_periods; /* check periods until the next look */
} hw_anneal_decision;

/* Forget everything (a new busy stretch, or the loop went idle). */
void hw_annealing_reset(hw_annealing *a);

/* One check of a hung thread whose stack has `len` function keys (innermost
 * first).  An empty stack (the capture failed) never counts as a change. */
hw_anneal_decision hw_annealing_step(hw_annealing *a, const uint64_t *keys, size_t len);

/* The comparison rule above: is `now` the same as `reported`? */
bool hw_stacks_same(const uint64_t *reported, size_t reported_len, const uint64_t *now, size_t now_len);

#endif
