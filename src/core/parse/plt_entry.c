/*
 * plt_entry.c - see plt_entry.h.
 */
#include "plt_entry.h"

#include <string.h>

static uint32_t read_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int64_t read_s32(const unsigned char *p)
{
    uint32_t bits = read_u32(p);
    int32_t value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

bool hw_plt_entry_target(const unsigned char *section, size_t len, uint64_t section_addr, size_t entry_size,
                         uint64_t file_addr, hw_plt_target *out)
{
    if (entry_size == 0)
        entry_size = 16;
    if (section == NULL || (entry_size != 8 && entry_size != 16) || file_addr < section_addr ||
        file_addr - section_addr >= len)
        return false;
    size_t at = (size_t)(file_addr - section_addr) / entry_size * entry_size;
    if (len - at < entry_size)
        return false; /* a partial entry at the section's end */
    const unsigned char *e = section + at;
    *out = (hw_plt_target){.entry = section_addr + at};
    size_t i = 0;
    if (entry_size - i >= 4 && e[0] == 0xf3 && e[1] == 0x0f && e[2] == 0x1e && e[3] == 0xfa)
        i += 4; /* endbr64 */
    /* The instructions of the entry, in order: a jump through a slot or a
     * push of the number; the rest (the jump to PLT0) says nothing more. */
    while (i < entry_size) {
        size_t left = entry_size - i;
        if (e[i] == 0xf2 && left >= 7 && e[i + 1] == 0xff && e[i + 2] == 0x25) {
            i += 1; /* bnd: the jump follows */
            continue;
        }
        if (e[i] == 0xff && left >= 6 && e[i + 1] == 0x25) {
            uint64_t next = out->entry + i + 6; /* rip-relative to the next instruction */
            out->slot = next + (uint64_t)read_s32(e + i + 2);
            out->has_slot = true;
            i += 6;
            continue;
        }
        if (e[i] == 0x68 && left >= 5) {
            out->index = read_u32(e + i + 1);
            out->has_index = true;
            i += 5;
            continue;
        }
        if (e[i] == 0xff && left >= 6 && e[i + 1] == 0x35) {
            i += 6; /* PLT0's push of GOT+8 */
            continue;
        }
        break;
    }
    return out->has_slot || out->has_index;
}
