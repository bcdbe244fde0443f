/*
 * plt_entry.h - where an x86-64 PLT entry leads: the GOT slot its indirect
 * jump reads, or, for a lazy-binding entry that only pushes its number and
 * jumps to the resolver, that number.
 *
 * A thread stopped in a PLT stub has, as its innermost frame, a few bytes
 * of linker-made glue in the program's own file, with no symbol: the report
 * would name it "prog+0x20a0" and take it for the user's code.  Its GOT
 * slot (or number) names the function it calls through its relocation, as
 * debuggers and profilers name it ("clock_gettime@plt").
 *
 * The bytes are a watched process's file, read by the root-run agent:
 * every read is checked against the section's length (fuzz_plt_entry).
 * The entry layouts of GNU ld, gold, lld and mold are read: .plt
 * ("jmp *slot(%rip); push N; jmp PLT0", or with IBT "endbr64; push N;
 * bnd jmp PLT0"), .plt.sec and .plt.got ("[endbr64;] [bnd] jmp
 * *slot(%rip)").  Pure: no OS calls.
 */
#ifndef HANGWATCH_PLT_ENTRY_H
#define HANGWATCH_PLT_ENTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hw_plt_target {
    uint64_t entry;   /* the entry's first byte (a file address) */
    bool has_slot;    /* the entry jumps through the GOT slot at `slot` */
    uint64_t slot;    /* a file address */
    bool has_index;   /* the entry pushes its relocation's number */
    uint32_t index;
} hw_plt_target;

/*
 * What the entry of `file_addr` leads to, in a PLT section of `len` bytes
 * at file address `section_addr` whose entries are `entry_size` bytes
 * (8 or 16; 0 reads as 16).  False when the address is outside the section
 * or its entry is neither layout above (PLT0, the resolver's entry, pushes
 * and jumps through slots that name no function: it has both, and callers
 * find no relocation for them).
 */
bool hw_plt_entry_target(const unsigned char *section, size_t len, uint64_t section_addr, size_t entry_size,
                         uint64_t file_addr, hw_plt_target *out);

#endif
