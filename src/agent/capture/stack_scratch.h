/*
 * stack_scratch.h - the buffers a capture copies stacks into, faulted in
 * once and kept by the thread that captures.
 *
 * A thread's stack is copied while it is stopped, so its buffer's pages
 * must be in before the stop: a page fault inside the stop would lengthen
 * it.  Touching a fresh 512 KiB buffer (the hung thread's) and 64 KiB per
 * other thread before every capture was half of what a capture cost the
 * watch thread (perf: page faults under memset), for a copy that is a few
 * KiB once it is cut to the stack's length.  The capturing thread now keeps
 * a few buffers of each size, their pages put in once (by the kernel, in
 * one call: MAP_POPULATE); after the resume, the part of
 * the stack that was read is copied out of them to a buffer of its own
 * size, and they are free for the next capture.  Per capturing thread:
 * HW_STACK_SCRATCH_SLOTS buffers at most (one over 128 KiB, the hung
 * thread's, and the rest smaller: 1.5 MiB with the agent's sizes); a
 * capture that asks for more, or for other sizes, is given new buffers,
 * touched, as before.
 */
#ifndef HANGWATCH_CAPTURE_STACK_SCRATCH_H
#define HANGWATCH_CAPTURE_STACK_SCRATCH_H

#include <stdbool.h>
#include <stddef.h>

#define HW_STACK_SCRATCH_SLOTS 17

/* A buffer of `size` bytes whose pages are in: one the calling thread keeps
 * (*kept true), else a new one, touched now (*kept false).  NULL when out of
 * memory. */
unsigned char *hw_stack_scratch_take(size_t size, bool *kept);

/* A new buffer of `size` bytes, its pages in (not kept: the caller frees
 * it), or NULL. */
unsigned char *hw_stack_scratch_touched(size_t size);

/* The calling thread's kept buffer `buf` is free again; its first `used`
 * bytes are returned in a buffer of their own (NULL when `used` is 0 or out
 * of memory). */
unsigned char *hw_stack_scratch_give_back(unsigned char *buf, size_t used);

/* Free the calling thread's kept buffers (none may be lent out). */
void hw_stack_scratch_release_all(void);

#endif
