/*
 * eh_frame_index.c - which function an address is in, from the binary
 * search table the linker puts in .eh_frame_hdr: one (start of code, its
 * unwind entry) pair per function, sorted by start.
 *
 * The watch thread tells early samples' functions apart without naming
 * them (hw_symbolizer_functions_only): a symbol table is as long as a
 * process's binary makes it and libdwfl searches it linearly, and a debug
 * file may need inflating; this table is searched in log time, in the
 * mapped image the unwinder reads anyway (core/parse/eh_frame_hdr.h reads
 * the table; here, the section is found).
 */
#include "eh_frame_index.h"

#include <gelf.h>
#include <string.h>

#include "core/parse/eh_frame_hdr.h"

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
    if (elf == NULL || !find_header(elf, &h, &len, &hdr_addr))
        return 0;
    return hw_eh_frame_hdr_function_start(h, len, hdr_addr, file_addr);
}
