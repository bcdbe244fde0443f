/*
 * eh_frame_hdr.c - see eh_frame_hdr.h.
 */
#include "eh_frame_hdr.h"

#include <string.h>

#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_datarel 0x30
#define DW_EH_PE_omit 0xff

#define HEADER_BYTES 12 /* version, three encodings, eh_frame_ptr, fde_count */

static uint32_t read_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Entry i's start: the header's address plus a signed 32-bit offset. */
static uint64_t start_of(const unsigned char *table, uint64_t i, uint64_t hdr_addr)
{
    int32_t offset;
    uint32_t bits = read_u32(table + 8 * i);
    memcpy(&offset, &bits, sizeof offset);
    return hdr_addr + (uint64_t)(int64_t)offset;
}

uint64_t hw_eh_frame_hdr_function_start(const unsigned char *h, size_t len, uint64_t hdr_addr, uint64_t file_addr)
{
    if (h == NULL || len < HEADER_BYTES)
        return 0;
    uint8_t ptr_enc = h[1], count_enc = h[2], table_enc = h[3];
    if (h[0] != 1 || ptr_enc == DW_EH_PE_omit ||
        ((ptr_enc & 0x0f) != DW_EH_PE_sdata4 && (ptr_enc & 0x0f) != DW_EH_PE_udata4) ||
        count_enc != DW_EH_PE_udata4 || table_enc != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
        return 0;
    uint64_t count = read_u32(h + 8);
    const unsigned char *table = h + HEADER_BYTES;
    if (count == 0 || count > (len - HEADER_BYTES) / 8)
        return 0;
    /* The last entry whose start is at or before the address: every step
     * right is over an entry that starts at or before it, so even an
     * unsorted table gives such an entry. */
    uint64_t lo = 0, hi = count;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (start_of(table, mid, hdr_addr) <= file_addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? 0 : start_of(table, lo - 1, hdr_addr);
}
