/*
 * plt_names.c - names PLT stubs by the relocations of their GOT slots.
 *
 * core/parse/plt_entry.h reads the entry's bytes (the jump's GOT slot, or
 * the number a lazy entry pushes); here the ELF's sections are found with
 * libelf and the slot's relocation (R_X86_64_JUMP_SLOT in .rela.plt,
 * R_X86_64_GLOB_DAT in .rela.dyn for .plt.got) gives the dynamic symbol.
 * All of it is the watched program's file: libelf checks the tables, and a
 * symbol index or string outside them names nothing.
 */
#include "plt_names.h"

#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse/plt_entry.h"

#define R_JUMP_SLOT 7 /* R_X86_64_JUMP_SLOT */
#define R_GLOB_DAT 6  /* R_X86_64_GLOB_DAT */

static bool is_plt_section(const char *name)
{
    return name != NULL && (strcmp(name, ".plt") == 0 || strncmp(name, ".plt.", 5) == 0);
}

/* The PLT section `file_addr` is in, or NULL. */
static Elf_Scn *plt_section_of(Elf *elf, uint64_t file_addr, GElf_Shdr *sh)
{
    size_t shstrndx;
    if (elf_getshdrstrndx(elf, &shstrndx) != 0)
        return NULL;
    for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn != NULL; scn = elf_nextscn(elf, scn)) {
        if (gelf_getshdr(scn, sh) == NULL || sh->sh_type != SHT_PROGBITS || !(sh->sh_flags & SHF_EXECINSTR))
            continue;
        if (file_addr < sh->sh_addr || file_addr - sh->sh_addr >= sh->sh_size)
            continue;
        return is_plt_section(elf_strptr(elf, shstrndx, sh->sh_name)) ? scn : NULL;
    }
    return NULL;
}

/* The name of symbol `index` of the symbol table `symtab_index`, or NULL. */
static const char *symbol_name(Elf *elf, size_t symtab_index, size_t index)
{
    Elf_Scn *scn = elf_getscn(elf, symtab_index);
    GElf_Shdr sh;
    if (scn == NULL || gelf_getshdr(scn, &sh) == NULL || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB))
        return NULL;
    Elf_Data *d = elf_getdata(scn, NULL);
    GElf_Sym sym;
    if (d == NULL || index == 0 || index > INT32_MAX || gelf_getsym(d, (int)index, &sym) == NULL)
        return NULL;
    const char *name = elf_strptr(elf, sh.sh_link, sym.st_name);
    return name != NULL && name[0] != '\0' ? name : NULL;
}

/* The symbol named by the relocation for `t`: the one of its GOT slot,
 * else the one its number picks in the PLT's own relocations (.rela.plt,
 * the section of JUMP_SLOT relocations); NULL when neither names one. */
static const char *target_name(Elf *elf, const hw_plt_target *t)
{
    const char *by_index = NULL;
    for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn != NULL; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) == NULL || sh.sh_type != SHT_RELA || sh.sh_entsize == 0)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (d == NULL)
            continue;
        size_t count = sh.sh_size / sh.sh_entsize;
        bool jump_slots = false;
        for (size_t i = 0; i < count && i <= INT32_MAX; i++) {
            GElf_Rela r;
            if (gelf_getrela(d, (int)i, &r) == NULL)
                break;
            unsigned type = (unsigned)GELF_R_TYPE(r.r_info);
            jump_slots |= type == R_JUMP_SLOT;
            if (t->has_slot && r.r_offset == t->slot && (type == R_JUMP_SLOT || type == R_GLOB_DAT))
                return symbol_name(elf, sh.sh_link, GELF_R_SYM(r.r_info));
        }
        /* a lazy entry's number counts the JUMP_SLOT relocations (.rela.plt) */
        GElf_Rela r;
        if (jump_slots && t->has_index && by_index == NULL && t->index < count && t->index <= INT32_MAX &&
            gelf_getrela(d, (int)t->index, &r) != NULL && GELF_R_TYPE(r.r_info) == R_JUMP_SLOT)
            by_index = symbol_name(elf, sh.sh_link, GELF_R_SYM(r.r_info));
    }
    return by_index;
}

bool hw_plt_stub_name(Elf *elf, uint64_t file_addr, char **name, uint64_t *entry)
{
    GElf_Shdr sh;
    Elf_Scn *scn = elf != NULL ? plt_section_of(elf, file_addr, &sh) : NULL;
    Elf_Data *d = scn != NULL ? elf_rawdata(scn, NULL) : NULL;
    if (d == NULL || d->d_buf == NULL)
        return false;
    hw_plt_target t;
    size_t entry_size = sh.sh_entsize == 8 || sh.sh_entsize == 16 ? (size_t)sh.sh_entsize : 16;
    /* gold and old ld write .plt.got's entsize as 8 with 8-byte entries */
    if (!hw_plt_entry_target(d->d_buf, d->d_size, sh.sh_addr, entry_size, file_addr, &t))
        return false;
    const char *target = target_name(elf, &t);
    *entry = t.entry;
    if (target == NULL) {
        *name = strdup(HW_PLT_UNNAMED);
        return true;
    }
    size_t len = strcspn(target, "@"); /* a version: "memcpy@GLIBC_2.14" */
    *name = malloc(len + sizeof HW_PLT_SUFFIX);
    if (*name != NULL)
        snprintf(*name, len + sizeof HW_PLT_SUFFIX, "%.*s%s", (int)len, target, HW_PLT_SUFFIX);
    return true;
}
