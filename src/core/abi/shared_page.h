/*
 * shared_page.h - layout of the memory a monitored process shares with the
 * hangwatch agent.
 *
 * Each monitored process creates one anonymous memory file (memfd) holding a
 * header and an array of loop slots, maps it, and hands the descriptor to the
 * agent over a Unix socket once, at start-up (see registration.h).  From then
 * on the two sides talk only through plain loads and stores on this page.
 *
 * The agent validates the header before it trusts anything here: the page is
 * written by the program it watches.
 */
#ifndef HANGWATCH_SHARED_PAGE_H
#define HANGWATCH_SHARED_PAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "loop_state.h"

#define HW_PAGE_MAGIC 0x68616e6777746368ull /* "hangwtch" */
#define HW_PAGE_VERSION 1u
#define HW_PAGE_SLOTS 63u /* slot 0 is the main thread */
#define HW_PAGE_SIZE 4096u

/* Bits of hw_shared_page.flags. */
#define HW_PAGE_FLAG_LAUNCHING 1u  /* slot 0 is busy since process start-up */
#define HW_PAGE_FLAG_LOOP_WAITS 2u /* slots say what was taken to be the loop's wait (loop_state.h) */

/*
 * What the slots' busy_start_ns count in (hw_shared_page.clock), the same
 * for every slot of a page.  The agent reads it once, when the page is
 * handed over, and converts every start to CLOCK_MONOTONIC nanoseconds
 * (docs/decisions.md §2).  A page of a version-1 observer that predates the
 * field has 0 there: the coarse clock, which is what it stamped with.
 */
#define HW_PAGE_CLOCK_COARSE 0u    /* CLOCK_MONOTONIC_COARSE, ns: up to a tick or two early */
#define HW_PAGE_CLOCK_MONOTONIC 1u /* CLOCK_MONOTONIC, ns (the kernel observer's pages) */
#define HW_PAGE_CLOCK_TSC 2u       /* raw time-stamp counter ticks (x86 rdtsc) */

typedef struct hw_shared_page {
    uint64_t magic;
    uint32_t version;
    uint32_t page_size;  /* sizeof the whole mapping */
    int32_t pid;         /* process that created the page */
    uint32_t slot_count; /* HW_PAGE_SLOTS */
    _Atomic uint32_t flags;
    uint32_t kernel_next_slot; /* the kernel observer's own pages only (wait_observer.h) */
    uint32_t clock;            /* HW_PAGE_CLOCK_* */
    uint32_t reserved_[3];
    uint8_t pad_[16];
    hw_loop_slot slots[HW_PAGE_SLOTS];
} hw_shared_page;

_Static_assert(sizeof(hw_shared_page) == HW_PAGE_SIZE, "the page is one page");

/* The header a page must carry before the agent reads anything else in it:
 * this layout, made by the process that sent it.  (Its clock is checked
 * apart: which clocks an agent can read depends on the agent.) */
static inline bool hw_page_header_is_valid(const hw_shared_page *page, int32_t sender)
{
    return page->magic == HW_PAGE_MAGIC && page->version == HW_PAGE_VERSION && page->page_size == HW_PAGE_SIZE &&
           page->slot_count == HW_PAGE_SLOTS && page->pid == sender;
}

#endif
