/*
 * eh_frame_index.c - which function an address is in, from the binary
 * search table the linker puts in .eh_frame_hdr: one (start of code, its
 * unwind entry) pair per function, sorted by start.
 *
 * The watch thread tells early samples' functions apart without naming
 * them (hw_symbolizer_functions_only): a symbol table is as long as a
 * process's binary makes it and libdwfl searches it linearly, and a debug
 * file may need inflating; this table is searched in log time, in the
 * mapped image the unwinder reads anyway.  Only the encoding GNU ld, gold,
 * lld and mold write is read (table of 4-byte signed offsets from the
 * header); any other gives no answer.  The section's bytes are the
 * process's file: sizes are checked against the section before any read.
 */
#include "eh_frame_index.h"

#include <gelf.h>
#include <string.h>

#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_pcrel 0x10
#define DW_EH_PE_datarel 0x30
#define DW_EH_PE_omit 0xff

static int32_t read_s32(const unsigned char *p)
{
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    int32_t s;
    memcpy(&s, &v, sizeof s);
    return s;
}

static uint32_t read_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* .eh_frame_hdr's bytes and address, or false. */
static bool find_header(Elf *elf, const unsigned char **bytes, size_t *len, uint64_t *vaddr)
{
    size_t shstrndx;
    if (elf_getshdrstrndx(elf, &shstrndx) != 0)
        return false;
    for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn != NULL; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) == NULL || sh.sh_type != SHT_PROGBITS)
            continue;
        const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
        if (name == NULL || strcmp(name, ".eh_frame_hdr") != 0)
            continue;
        Elf_Data *d = elf_rawdata(scn, NULL);
        if (d == NULL || d->d_buf == NULL)
            return false;
        *bytes = d->d_buf;
        *len = d->d_size;
        *vaddr = sh.sh_addr;
        return true;
    }
    return false;
}

uint64_t hw_eh_frame_function_start(Elf *elf, uint64_t file_addr)
{
    const unsigned char *h;
    size_t len;
    uint64_t hdr_addr;
    if (elf == NULL || !find_header(elf, &h, &len, &hdr_addr) || len < 12)
        return 0;
    /* version 1; eh_frame_ptr as a 4-byte value; count as udata4; table of
     * datarel sdata4 pairs */
    uint8_t ptr_enc = h[1], count_enc = h[2], table_enc = h[3];
    if (h[0] != 1 || ptr_enc == DW_EH_PE_omit || ((ptr_enc & 0x0f) != DW_EH_PE_sdata4 && (ptr_enc & 0x0f) != DW_EH_PE_udata4) ||
        count_enc != DW_EH_PE_udata4 || table_enc != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
        return 0;
    uint64_t count = read_u32(h + 8);
    const unsigned char *table = h + 12;
    if (count == 0 || count > (len - 12) / 8)
        return 0;
    /* The last entry whose start is at or before the address. */
    uint64_t lo = 0, hi = count;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        uint64_t start = hdr_addr + (uint64_t)(int64_t)read_s32(table + 8 * mid);
        if (start <= file_addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return 0;
    return hdr_addr + (uint64_t)(int64_t)read_s32(table + 8 * (lo - 1));
}
