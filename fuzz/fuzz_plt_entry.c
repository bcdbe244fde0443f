/*
 * fuzz_plt_entry.c - hw_plt_entry_target, which reads a PLT entry's bytes
 * in a file a watched process maps (how a stub is named,
 * core/parse/plt_entry.h).
 *
 * Feeds: the first 8 input bytes as the section's file address, the next 8
 * as the address looked up, one byte choosing the entry size (8, 16, or
 * another), the rest as the section's bytes; then looks up the address
 * given and the first and last byte of every entry.
 *
 * Proves: no crash or read out of bounds (the section is copied to a buffer
 * of exactly its length); an answer's entry is a whole entry of the section
 * that holds the address, and a slot is the address after a 6-byte jump in
 * that entry plus a 32-bit displacement.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse/plt_entry.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

#define MAX_CHECKED_ENTRIES 256

static void check_answer(const unsigned char *sec, size_t len, uint64_t sec_addr, size_t entry_size, uint64_t addr)
{
    hw_plt_target t;
    if (!hw_plt_entry_target(sec, len, sec_addr, entry_size, addr, &t))
        return;
    size_t size = entry_size == 0 ? 16 : entry_size;
    CHECK(size == 8 || size == 16);
    CHECK(t.has_slot || t.has_index);
    CHECK(addr >= sec_addr && addr - sec_addr < len);
    CHECK(t.entry <= addr && addr - t.entry < size);
    CHECK((t.entry - sec_addr) % size == 0 && t.entry - sec_addr + size <= len);
    if (t.has_slot) {
        /* some jump in the entry reads the slot */
        bool found = false;
        for (size_t i = 0; i + 6 <= size && !found; i++) {
            const unsigned char *p = sec + (t.entry - sec_addr) + i;
            if (p[0] != 0xff || p[1] != 0x25)
                continue;
            int32_t disp;
            uint32_t bits = (uint32_t)p[2] | (uint32_t)p[3] << 8 | (uint32_t)p[4] << 16 | (uint32_t)p[5] << 24;
            memcpy(&disp, &bits, sizeof disp);
            found = t.slot == t.entry + i + 6 + (uint64_t)(int64_t)disp;
        }
        CHECK(found);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 17)
        return 0;
    uint64_t sec_addr, addr;
    memcpy(&sec_addr, data, 8);
    memcpy(&addr, data + 8, 8);
    size_t entry_size = data[16] % 3 == 0 ? 8 : data[16] % 3 == 1 ? 16 : data[16];
    size_t len = size - 17;
    unsigned char *sec = malloc(len ? len : 1); /* exactly the section: ASan sees any read past it */
    if (sec == NULL)
        return 0;
    memcpy(sec, data + 17, len);
    check_answer(sec, len, sec_addr, entry_size, addr);
    size_t step = entry_size == 8 ? 8 : 16;
    for (size_t i = 0; i < MAX_CHECKED_ENTRIES && i * step < len; i++) {
        check_answer(sec, len, sec_addr, entry_size, sec_addr + i * step);
        check_answer(sec, len, sec_addr, entry_size, sec_addr + i * step + step - 1);
    }
    free(sec);
    return 0;
}
