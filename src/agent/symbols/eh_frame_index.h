/*
 * eh_frame_index.h - the function an address is in, by the start of its
 * unwind entry in .eh_frame_hdr's sorted table (eh_frame_index.c).
 */
#ifndef HANGWATCH_EH_FRAME_INDEX_H
#define HANGWATCH_EH_FRAME_INDEX_H

#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>

/* The start (a file address) of the last function in `elf`'s
 * .eh_frame_hdr table that starts at or before `file_addr`; 0 when the
 * image has no such table, another encoding, or none starts before. */
uint64_t hw_eh_frame_function_start(Elf *elf, uint64_t file_addr);

#endif
