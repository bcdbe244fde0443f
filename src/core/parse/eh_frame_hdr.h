/*
 * eh_frame_hdr.h - the binary search table the linker puts in
 * .eh_frame_hdr: one (start of code, its unwind entry) pair per function,
 * sorted by start.  Which function an address is in, by that table alone.
 *
 * The bytes are a watched process's file, read by the root-run agent: every
 * read is checked against the section's length, and a table that is not
 * sorted gives some function start at or before the address, never a read
 * out of bounds (fuzz_eh_frame_hdr).  Only the encoding GNU ld, gold, lld
 * and mold write is read: version 1, a 4-byte eh_frame pointer, the count
 * as udata4, the table as datarel sdata4 pairs.  Pure: no OS calls.
 */
#ifndef HANGWATCH_EH_FRAME_HDR_H
#define HANGWATCH_EH_FRAME_HDR_H

#include <stddef.h>
#include <stdint.h>

/* The start (a file address) of the last function in the table of the
 * .eh_frame_hdr section `hdr` (`len` bytes at file address `hdr_addr`) that
 * starts at or before `file_addr`; 0 when there is no table in that
 * encoding, or no function starts before. */
uint64_t hw_eh_frame_hdr_function_start(const unsigned char *hdr, size_t len, uint64_t hdr_addr, uint64_t file_addr);

#endif
