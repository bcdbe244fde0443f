/*
 * wait_probes.c - the places of wait_probes.h: each executable file the
 * process maps, read with libelf (its dynamic symbols, then its full
 * symbol table), each wait function decoded with Capstone.
 *
 * The files are the watched process's, and may be anything: sizes come
 * from the file and are checked against it; a symbol outside every
 * loadable segment, or longer than HW_WAIT_PROBE_MAX_CODE, is skipped.
 */
#include "wait_probes.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/capture/capture.h"
#include "agent/common/optional_libs.h"
#include "core/abi/wait_point.h"

static const char *const wait_functions[] = {"epoll_wait", "epoll_pwait", "epoll_pwait2", "poll",
                                             "ppoll",      "select",      "pselect"};
#define WAIT_FUNCTIONS (sizeof wait_functions / sizeof wait_functions[0])
/* Which call each is, for the rule that tells the loop's wait (wait_point.h). */
static const uint32_t wait_calls[WAIT_FUNCTIONS] = {HW_WAIT_CALL_EPOLL_WAIT, HW_WAIT_CALL_EPOLL_PWAIT,
                                                    HW_WAIT_CALL_EPOLL_PWAIT2, HW_WAIT_CALL_POLL,
                                                    HW_WAIT_CALL_PPOLL, HW_WAIT_CALL_SELECT,
                                                    HW_WAIT_CALL_PSELECT};

static uint32_t wait_call_of(const char *function)
{
    for (size_t i = 0; i < WAIT_FUNCTIONS; i++)
        if (strcmp(function, wait_functions[i]) == 0)
            return wait_calls[i];
    return HW_WAIT_CALL_UNKNOWN;
}

/* The file offset of virtual address `addr` (size `size`) in a loadable
 * segment of `elf`, or false. */
static bool file_offset_of(Elf *elf, uint64_t addr, uint64_t size, uint64_t *offset)
{
    size_t n = 0;
    if (elf_getphdrnum(elf, &n) != 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) == NULL || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
            continue;
        if (addr >= ph.p_vaddr && addr - ph.p_vaddr <= ph.p_filesz && ph.p_filesz - (addr - ph.p_vaddr) >= size) {
            *offset = ph.p_offset + (addr - ph.p_vaddr);
            return true;
        }
    }
    return false;
}

typedef struct found_function {
    uint64_t addr, size;
    const char *name;
} found_function;

/* The wait functions `elf` defines in symbol table `scn` (by address: an
 * alias, poll and __poll, is one function). */
static size_t find_functions(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, found_function *out, size_t have)
{
    Elf_Data *data = elf_getdata(scn, NULL);
    size_t symbols = data != NULL && sh->sh_entsize ? data->d_size / sh->sh_entsize : 0;
    if (symbols > (4u << 20))
        symbols = 4u << 20; /* a bound on the work any file can ask for */
    for (size_t i = 0; i < symbols && have < WAIT_FUNCTIONS; i++) {
        GElf_Sym sym;
        if (gelf_getsym(data, (int)i, &sym) == NULL || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
            sym.st_shndx == SHN_UNDEF || sym.st_size == 0)
            continue;
        const char *name = elf_strptr(elf, sh->sh_link, sym.st_name);
        if (name == NULL)
            continue;
        size_t len = strcspn(name, "@");
        for (size_t k = 0; k < WAIT_FUNCTIONS; k++) {
            if (strlen(wait_functions[k]) != len || strncmp(name, wait_functions[k], len) != 0)
                continue;
            bool known = false;
            for (size_t j = 0; j < have; j++)
                known |= out[j].addr == sym.st_value;
            if (!known)
                out[have++] = (found_function){.addr = sym.st_value, .size = sym.st_size, .name = wait_functions[k]};
            break;
        }
    }
    return have;
}

static bool add_probe(hw_wait_probe *out, size_t max, size_t *count, const char *path, uint64_t offset, bool entry,
                      const char *function)
{
    if (*count >= max)
        return false;
    hw_wait_probe *p = &out[(*count)++];
    memset(p, 0, sizeof *p);
    snprintf(p->path, sizeof p->path, "%s", path);
    p->offset = offset;
    p->entry = entry;
    snprintf(p->function, sizeof p->function, "%s", function);
    p->call = wait_call_of(function);
    return true;
}

int hw_wait_probes_in_file(const char *path, hw_wait_probe *out, size_t max, size_t *count)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    size_t file_len = 0;
    const unsigned char *file = elf != NULL ? (const unsigned char *)elf_rawfile(elf, &file_len) : NULL;
    found_function fns[WAIT_FUNCTIONS];
    size_t n = 0;
    for (int pass = 0; file != NULL && pass < 2 && n == 0; pass++) {
        Elf_Scn *scn = NULL;
        while ((scn = elf_nextscn(elf, scn)) != NULL) {
            GElf_Shdr sh;
            if (gelf_getshdr(scn, &sh) != NULL && sh.sh_type == (pass == 0 ? SHT_DYNSYM : SHT_SYMTAB))
                n = find_functions(elf, scn, &sh, fns, n);
        }
    }
    csh cs;
    const hw_capstone_api *capstone = hw_capstone_api_load(NULL, 0); /* the caller said why not */
    bool decoder = n > 0 && capstone && capstone->open(CS_ARCH_X86, CS_MODE_64, &cs) == CS_ERR_OK;
    size_t added = 0;
    for (size_t i = 0; decoder && i < n; i++) {
        uint64_t offset;
        if (fns[i].size > HW_WAIT_PROBE_MAX_CODE || !file_offset_of(elf, fns[i].addr, fns[i].size, &offset) ||
            offset > file_len || file_len - offset < fns[i].size)
            continue;
        /* Decode from the entry; the whole function must decode. */
        cs_insn *insn = NULL;
        size_t got = capstone->disasm(cs, file + offset, (size_t)fns[i].size, fns[i].addr, 0, &insn);
        uint64_t decoded = 0;
        for (size_t k = 0; k < got; k++)
            decoded += insn[k].size;
        size_t before = *count;
        if (got > 0 && decoded == fns[i].size && add_probe(out, max, count, path, offset, true, fns[i].name)) {
            for (size_t k = 0; k < got; k++) {
                if (insn[k].id != X86_INS_SYSCALL)
                    continue;
                uint64_t after = offset + (insn[k].address - fns[i].addr) + insn[k].size;
                if (!add_probe(out, max, count, path, after, false, fns[i].name))
                    break;
            }
            /* A wait function without a system call of its own (it calls
             * another): its entry alone is no use. */
            bool has_exit = false;
            for (size_t k = before; k < *count; k++)
                has_exit |= !out[k].entry;
            if (!has_exit)
                *count = before;
        }
        added += *count - before;
        capstone->free(insn, got);
    }
    if (decoder)
        capstone->close(&cs);
    if (elf != NULL)
        elf_end(elf);
    close(fd);
    return (int)added;
}

int hw_wait_probes_find(pid_t pid, hw_wait_probe *out, size_t max, char *why, size_t why_len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    size_t len = 0;
    char *maps = hw_proc_read_whole(path, &len);
    if (maps == NULL) {
        snprintf(why, why_len, "cannot read %s: %s", path, strerror(errno ? errno : ESRCH));
        return -ESRCH;
    }
    if (!hw_capstone_api_load(why, why_len)) {
        free(maps);
        return -ENOENT;
    }
    size_t count = 0;
    uint64_t *seen_inodes = calloc(HW_WAIT_PROBE_MAX_FILES, sizeof *seen_inodes);
    size_t seen = 0;
    bool too_many = false;
    for (char *line = maps, *next; seen_inodes != NULL && line != NULL && *line != '\0'; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        unsigned long long lo, hi, map_offset, inode;
        char perms[8];
        int path_at = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %*s %llu %n", &lo, &hi, perms, &map_offset, &inode, &path_at) < 5 ||
            path_at == 0 ||
            line[path_at] != '/' || strchr(perms, 'x') == NULL || inode == 0)
            continue;
        bool known = false;
        for (size_t i = 0; i < seen && !known; i++)
            known = seen_inodes[i] == inode;
        too_many |= !known && seen == HW_WAIT_PROBE_MAX_FILES;
        if (known || too_many)
            continue;
        seen_inodes[seen++] = inode;
        /* The file the process has, by a path the kernel resolves for us. */
        char file[320];
        if (!hw_proc_mapped_file_path(pid, line + path_at, lo, hi, inode, file, sizeof file))
            continue;
        size_t before = count;
        hw_wait_probes_in_file(file, out, max, &count);
        for (size_t i = before; i < count; i++)
            if (out[i].offset >= map_offset && out[i].offset - map_offset < hi - lo)
                out[i].address = lo + (out[i].offset - map_offset);
    }
    free(maps);
    free(seen_inodes);
    if (count == 0) {
        if (too_many)
            snprintf(why, why_len,
                     "no wait function (%s, ...) with a system call of its own in the first %d executable files pid "
                     "%d maps (it maps more; the rest were not looked at)",
                     wait_functions[0], HW_WAIT_PROBE_MAX_FILES, (int)pid);
        else
            snprintf(why, why_len, "no wait function (%s, ...) with a system call of its own in the files pid %d maps",
                     wait_functions[0], (int)pid);
        return -ENOENT;
    }
    return (int)count;
}
