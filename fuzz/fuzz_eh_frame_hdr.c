/*
 * fuzz_eh_frame_hdr.c - hw_eh_frame_hdr_function_start, which reads the
 * .eh_frame_hdr table of a file a watched process maps (the watch thread's
 * way of telling functions apart, core/parse/eh_frame_hdr.h).
 *
 * Feeds: the first 8 input bytes as the header's file address, the next 8
 * as the address looked up, the rest as the section's bytes; then looks up
 * each entry's start, one byte before and after it, and the address given.
 *
 * Proves: no crash or read out of bounds (the section is copied to a buffer
 * of exactly its length); an answer is 0 or an entry's start at or before
 * the address; for a table sorted by start, it is the largest such start,
 * as a plain scan finds.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse/eh_frame_hdr.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

#define MAX_CHECKED_ENTRIES 256

static uint64_t entry_start(const unsigned char *table, size_t i, uint64_t hdr_addr)
{
    uint32_t bits = (uint32_t)table[8 * i] | (uint32_t)table[8 * i + 1] << 8 | (uint32_t)table[8 * i + 2] << 16 |
                    (uint32_t)table[8 * i + 3] << 24;
    int32_t offset;
    memcpy(&offset, &bits, sizeof offset);
    return hdr_addr + (uint64_t)(int64_t)offset;
}

static void check_answer(const unsigned char *hdr, size_t len, uint64_t hdr_addr, uint64_t addr, bool table_ok,
                         size_t count, bool sorted)
{
    uint64_t got = hw_eh_frame_hdr_function_start(hdr, len, hdr_addr, addr);
    if (!table_ok) {
        CHECK(got == 0);
        return;
    }
    const unsigned char *table = hdr + 12;
    bool is_entry = false;
    uint64_t best = 0;
    bool any = false;
    for (size_t i = 0; i < count; i++) {
        uint64_t s = entry_start(table, i, hdr_addr);
        is_entry |= s == got;
        if (s <= addr && (!any || s > best)) {
            best = s;
            any = true;
        }
    }
    if (got != 0) {
        CHECK(is_entry);
        CHECK(got <= addr);
    }
    if (sorted)
        CHECK(got == (any ? best : 0) || (got == 0 && best == 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 16)
        return 0;
    uint64_t hdr_addr, addr;
    memcpy(&hdr_addr, data, 8);
    memcpy(&addr, data + 8, 8);
    size_t len = size - 16;
    unsigned char *hdr = malloc(len ? len : 1); /* exactly the section: ASan sees any read past it */
    if (hdr == NULL)
        return 0;
    memcpy(hdr, data + 16, len);
    bool table_ok = len >= 12 && hdr[0] == 1 && hdr[1] != 0xff && ((hdr[1] & 0x0f) == 0x0b || (hdr[1] & 0x0f) == 0x03) &&
                    hdr[2] == 0x03 && hdr[3] == 0x3b;
    size_t count = 0;
    if (table_ok) {
        count = (size_t)hdr[8] | (size_t)hdr[9] << 8 | (size_t)hdr[10] << 16 | (size_t)hdr[11] << 24;
        table_ok = count > 0 && count <= (len - 12) / 8;
    }
    bool sorted = true;
    for (size_t i = 1; table_ok && i < count; i++)
        sorted &= entry_start(hdr + 12, i - 1, hdr_addr) <= entry_start(hdr + 12, i, hdr_addr);
    check_answer(hdr, len, hdr_addr, addr, table_ok, count, sorted);
    for (size_t i = 0; table_ok && i < count && i < MAX_CHECKED_ENTRIES; i++) {
        uint64_t s = entry_start(hdr + 12, i, hdr_addr);
        check_answer(hdr, len, hdr_addr, s, true, count, sorted);
        check_answer(hdr, len, hdr_addr, s - 1, true, count, sorted);
        check_answer(hdr, len, hdr_addr, s + 1, true, count, sorted);
    }
    free(hdr);
    return 0;
}
