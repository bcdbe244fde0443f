/*
 * plt_names.h - the name of a PLT stub: "clock_gettime@plt" for the entry
 * through which a program calls clock_gettime (plt_names.c).
 *
 * A stub has no symbol; unnamed, a thread stopped in one would be reported
 * as in "prog+0x20a0", the user's own code by its object, and taken for
 * the hang's culprit (decisions §39).
 */
#ifndef HANGWATCH_PLT_NAMES_H
#define HANGWATCH_PLT_NAMES_H

#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/in_app.h" /* HW_PLT_SUFFIX, HW_PLT_UNNAMED */


/* When `file_addr` is in one of `elf`'s PLT sections (.plt, .plt.sec,
 * .plt.got): true, *name a new string ("NAME@plt", or HW_PLT_UNNAMED when
 * no relocation names the entry's target; NULL when out of memory) and
 * *entry the entry's first byte (a file address). */
bool hw_plt_stub_name(Elf *elf, uint64_t file_addr, char **name, uint64_t *entry);

#endif
