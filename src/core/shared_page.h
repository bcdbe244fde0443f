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
#define HW_PAGE_FLAG_LAUNCHING 1u /* slot 0 is busy since process start-up */

typedef struct hw_shared_page {
    uint64_t magic;
    uint32_t version;
    uint32_t page_size;  /* sizeof the whole mapping */
    int32_t pid;         /* process that created the page */
    uint32_t slot_count; /* HW_PAGE_SLOTS */
    _Atomic uint32_t flags;
    uint32_t reserved_[5];
    uint8_t pad_[16];
    hw_loop_slot slots[HW_PAGE_SLOTS];
} hw_shared_page;

_Static_assert(sizeof(hw_shared_page) == HW_PAGE_SIZE, "the page is one page");

/* The header a page must carry before the agent reads anything else in it:
 * this layout, made by the process that sent it. */
static inline bool hw_page_header_is_valid(const hw_shared_page *page, int32_t sender)
{
    return page->magic == HW_PAGE_MAGIC && page->version == HW_PAGE_VERSION && page->page_size == HW_PAGE_SIZE &&
           page->slot_count == HW_PAGE_SLOTS && page->pid == sender;
}

#endif
