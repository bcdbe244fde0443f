/*
 * symbolizer.c - the symbolizer of a capture (unwind.h): a libdwfl session
 * made from the process's maps text as read at capture time, and what it
 * says of addresses: symbols, source lines, the images and their build-ids,
 * symbols looked up by name.
 *
 * The modules come from the maps text read at capture time
 * (dwfl_linux_proc_maps_report on an fmemopen'd copy), so nothing depends on
 * the process still being alive.  That report leaves out the vDSO, where a
 * thread spinning on clock_gettime() is often caught; it is added by hand
 * with an ELF image copied from the agent's own vDSO (same kernel, same
 * image) when the sizes agree, so its CFI and symbols are there too.
 *
 * Frames: callers are looked up at pc - 1 (the call, not the instruction
 * after it).  Symbol names lose a "@VERSION" suffix.  Lines come from
 * dwfl_module_getsrc, or from a walk over the compile units for modules
 * without .debug_aranges (clang's default), which libdw 0.188 cannot index.
 * Lookups are cached per address because dwfl_module_addrinfo and the line
 * tables are searched afresh each time.  Addresses in anonymous memory are
 * JIT code, named by symbolizer_jit.c; the walk over a captured thread's
 * stack is unwind.c's (symbolizer_internal.h).
 */
#include "symbolizer_internal.h"

#include "code_names.h"
#include "eh_frame_index.h"
#include "plt_names.h"

#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <libiberty/demangle.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <fcntl.h>
#include <sys/auxv.h>
#include <unistd.h>

#define VDSO_NAME "[vdso]"
#define DELETED_SUFFIX " (deleted)"

/* Remember which ranges of the maps text are file-backed (or the vDSO). */
static void note_backed_ranges(hw_symbolizer *sym, const char *maps, size_t maps_len)
{
    size_t cap = 0;
    const char *p = maps, *end = maps + maps_len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char line[512];
        if (len >= sizeof line)
            len = sizeof line - 1;
        memcpy(line, p, len);
        line[len] = '\0';
        p = nl ? nl + 1 : end;
        unsigned long long lo, hi, offset, inode;
        unsigned major, minor;
        int path_at = 0;
        if (sscanf(line, "%llx-%llx %*s %llx %x:%x %llu %n", &lo, &hi, &offset, &major, &minor, &inode, &path_at) <
                6 ||
            path_at == 0)
            continue;
        const char *path = line + path_at;
        bool backed = path[0] == '/' || strncmp(path, VDSO_NAME, strlen(VDSO_NAME)) == 0;
        if (!backed)
            continue;
        if (sym->backed_count == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            void *n = realloc(sym->backed, ncap * sizeof *sym->backed);
            if (n == NULL)
                return;
            sym->backed = n;
            cap = ncap;
        }
        sym->backed[sym->backed_count].start = lo;
        sym->backed[sym->backed_count].end = hi;
        sym->backed[sym->backed_count].offset = offset;
        sym->backed[sym->backed_count].dev = ((uint64_t)major << 32) | minor;
        sym->backed[sym->backed_count].inode = inode;
        sym->backed_count++;
    }
}

/* The backed range holding `addr`, or -1. */
static long backed_range_of(const hw_symbolizer *sym, uint64_t addr)
{
    size_t lo = 0, hi = sym->backed_count; /* maps are in address order */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (addr < sym->backed[mid].start)
            hi = mid;
        else if (addr >= sym->backed[mid].end)
            lo = mid + 1;
        else
            return (long)mid;
    }
    return -1;
}

static bool address_is_backed(const hw_symbolizer *sym, uint64_t addr)
{
    if (sym->backed == NULL)
        return true; /* no information: trust libdwfl */
    return backed_range_of(sym, addr) >= 0;
}

/* ---- the libdwfl session ----------------------------------------------- */

static char *debuginfo_path = NULL; /* default: .debug dirs and /usr/lib/debug */

static bool is_deleted_file(const char *name)
{
    size_t n = strlen(name), k = strlen(DELETED_SUFFIX);
    return name[0] == '/' && n > k && strcmp(name + n - k, DELETED_SUFFIX) == 0;
}

/* A file mapped and since deleted or replaced (a binary or library
 * upgraded while it runs), or at a path of another mount namespace (a
 * container's): opened through the kernel's handle on the mapping,
 * /proc/PID/map_files/START-END (root may), checked to be the inode the
 * maps line names; -1 if it cannot be.  Without it libdwfl rebuilds
 * the image from the process's memory, which has no symbol table: every
 * frame of the program would be "prog (deleted)+0x1998". */
static int open_mapped_file(const hw_symbolizer *sym, uint64_t base, char **file_name)
{
    long r = sym->backed != NULL ? backed_range_of(sym, base) : -1;
    if (r < 0 || sym->backed[r].start != base)
        return -1;
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)sym->pid, sym->backed[r].start,
             sym->backed[r].end);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -1;
    struct stat st;
    char *copy = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_ino != sym->backed[r].inode ||
        (copy = strdup(path)) == NULL) {
        close(fd);
        return -1;
    }
    *file_name = copy;
    return fd;
}

/* Whether `path`, as the agent sees it, is the file the maps line at
 * `base` names (same device and inode).  Not for a process in another mount
 * namespace (a container: the path is its, or another file here), nor for a
 * file replaced since it was mapped. */
static bool path_is_mapped_file(const hw_symbolizer *sym, const char *path, uint64_t base)
{
    long r = sym->backed != NULL ? backed_range_of(sym, base) : -1;
    struct stat st;
    if (r < 0 || stat(path, &st) != 0)
        return false;
    uint64_t dev = ((uint64_t)major(st.st_dev) << 32) | minor(st.st_dev);
    return dev == sym->backed[r].dev && st.st_ino == sym->backed[r].inode;
}

static int find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base, char **file_name,
                    Elf **elfp)
{
    hw_symbolizer *sym = *userdata;
    if (strcmp(name, VDSO_NAME) == 0) {
        if (sym != NULL && sym->vdso != NULL)
            *elfp = elf_memory((char *)sym->vdso, sym->vdso_len);
        return -1; /* no file descriptor; *elfp is the image (or NULL) */
    }
    if (sym != NULL && name[0] == '/' && (is_deleted_file(name) || !path_is_mapped_file(sym, name, base))) {
        int fd = open_mapped_file(sym, base, file_name);
        if (fd >= 0)
            return fd;
    }
    return dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name, elfp);
}

/* Files' modules get the symbolizer as their userdata, for find_elf (the
 * vDSO's gets it in report_vdso). */
static int mark_files_cb(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start, void *arg)
{
    (void)mod;
    (void)start;
    if (name != NULL && name[0] == '/')
        *userdata = arg;
    return DWARF_CB_OK;
}

static const Dwfl_Callbacks session_callbacks = {
    .find_elf = find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = NULL,
    .debuginfo_path = &debuginfo_path,
};

/* ---- building the symbolizer ------------------------------------------- */

/* C++ (Itanium ABI) names, demangled with libiberty as binutils does;
 * anything else is returned as it is.  Takes ownership of `name`. */
static char *demangle(char *name)
{
    if (strncmp(name, "_Z", 2) != 0)
        return name;
    char *readable = cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
    if (readable == NULL)
        return name;
    free(name);
    return readable;
}

static void set_error(char **error, const char *what, const char *detail)
{
    if (error == NULL)
        return;
    free(*error);
    *error = NULL;
    if (asprintf(error, "%s: %s", what, detail != NULL ? detail : "unknown error") < 0)
        *error = NULL;
}

/* Copy the agent's own vDSO image if it is as large as the target's
 * [vdso] mapping (same kernel: same image). */
static void copy_own_vdso(hw_symbolizer *sym, uint64_t mapping_len)
{
    unsigned long base = getauxval(AT_SYSINFO_EHDR);
    if (base == 0)
        return;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64)
        return;
    /* The image ends with its section headers. */
    uint64_t len = eh->e_shoff + (uint64_t)eh->e_shnum * eh->e_shentsize;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    if (len == 0 || (len + page - 1) / page * page != mapping_len)
        return;
    sym->vdso = malloc(len);
    if (sym->vdso == NULL)
        return;
    memcpy(sym->vdso, eh, len);
    sym->vdso_len = len;
}

/* Report the [vdso] line of the maps text as a module. */
static void report_vdso(hw_symbolizer *sym, const char *maps, size_t maps_len)
{
    const char *p = maps, *end = maps + maps_len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
        if (len > 6 && len < 512 && memcmp(p + len - 6, VDSO_NAME, 6) == 0) {
            char line[512];
            memcpy(line, p, len);
            line[len] = '\0';
            uint64_t lo, hi;
            if (sscanf(line, "%" SCNx64 "-%" SCNx64, &lo, &hi) != 2 || hi <= lo)
                return;
            copy_own_vdso(sym, hi - lo);
            if (sym->vdso == NULL)
                return;
            Dwfl_Module *mod = dwfl_report_module(sym->dwfl, VDSO_NAME, lo, hi);
            void **userdata = NULL;
            if (mod != NULL && dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL) != NULL &&
                userdata != NULL)
                *userdata = sym; /* find_elf finds the copy through it */
            return;
        }
        p += len + 1;
    }
}

hw_symbolizer *hw_symbolizer_new(pid_t pid, const char *maps, size_t maps_len, char **error)
{
    if (error != NULL)
        *error = NULL;
    if (maps == NULL || maps_len == 0) {
        set_error(error, "no maps", "the process had no mappings (exited?)");
        return NULL;
    }
    hw_symbolizer *sym = calloc(1, sizeof *sym);
    if (sym == NULL) {
        set_error(error, "out of memory", NULL);
        return NULL;
    }
    sym->pid = pid;
    sym->dwfl = dwfl_begin(&session_callbacks);
    if (sym->dwfl == NULL) {
        set_error(error, "dwfl_begin", dwfl_errmsg(-1));
        free(sym);
        return NULL;
    }
    dwfl_report_begin(sym->dwfl);
    FILE *f = fmemopen((void *)maps, maps_len, "r");
    if (f == NULL) {
        set_error(error, "fmemopen", strerror(errno));
        hw_symbolizer_free(sym);
        return NULL;
    }
    int r = dwfl_linux_proc_maps_report(sym->dwfl, f);
    fclose(f);
    if (r != 0) {
        set_error(error, "reading the maps", r > 0 ? strerror(r) : dwfl_errmsg(-1));
        hw_symbolizer_free(sym);
        return NULL;
    }
    report_vdso(sym, maps, maps_len);
    note_backed_ranges(sym, maps, maps_len);
    if (dwfl_report_end(sym->dwfl, NULL, NULL) != 0) {
        set_error(error, "dwfl_report_end", dwfl_errmsg(-1));
        hw_symbolizer_free(sym);
        return NULL;
    }
    (void)dwfl_getmodules(sym->dwfl, mark_files_cb, sym, 0);
    /* Without an attached state we can still symbolize the pc: keep going. */
    hw_unwind_attach(sym, pid);
    (void)dwfl_errno(); /* start the walks with no stale error */
    return sym;
}

void hw_symbolizer_set_owner(hw_symbolizer *sym, uid_t uid)
{
    if (sym != NULL) {
        sym->owner_uid = uid;
        sym->owner_known = true;
    }
}

static void free_resolved(resolved *e)
{
    free(e->symbol_name);
    free(e->object_path);
    free(e->source_file);
}

void hw_symbolizer_free(hw_symbolizer *sym)
{
    if (sym == NULL)
        return;
    if (sym->dwfl != NULL)
        dwfl_end(sym->dwfl); /* ends the vDSO Elf; its bytes are ours */
    for (size_t i = 0; i < sym->cache_cap; i++)
        if (sym->cache[i].used)
            free_resolved(&sym->cache[i]);
    free(sym->cache);
    for (size_t i = 0; i < sym->image_count; i++) {
        free(sym->images[i].path);
        free(sym->images[i].build_id);
    }
    free(sym->images);
    free(sym->vdso);
    free(sym->attach_error);
    free(sym->backed);
    hw_symbolizer_release_js_map(sym);
    free(sym->window);
    free(sym);
}

/* ---- address lookups, cached ------------------------------------------- */

static bool cache_grow(hw_symbolizer *sym)
{
    size_t ncap = sym->cache_cap ? sym->cache_cap * 2 : 256;
    resolved *n = calloc(ncap, sizeof *n);
    if (n == NULL)
        return false;
    for (size_t i = 0; i < sym->cache_cap; i++) {
        if (!sym->cache[i].used)
            continue;
        size_t j = hw_hash_addr(sym->cache[i].key) & (ncap - 1);
        while (n[j].used)
            j = (j + 1) & (ncap - 1);
        n[j] = sym->cache[i];
    }
    free(sym->cache);
    sym->cache = n;
    sym->cache_cap = ncap;
    return true;
}

/* libdw 0.188 finds a compile unit by address only through .debug_aranges,
 * which clang does not emit unless -gdwarf-aranges: when a module has none,
 * look through its units for the one that covers the address. */
static void line_without_aranges(Dwfl_Module *mod, uint64_t addr, resolved *e)
{
    Dwarf_Addr bias = 0;
    Dwarf *dw = dwfl_module_getdwarf(mod, &bias);
    if (dw == NULL)
        return;
    Dwarf_Aranges *aranges;
    size_t naranges = 0;
    if (dwarf_getaranges(dw, &aranges, &naranges) == 0 && naranges > 0)
        return; /* indexed: the address just has no line */
    Dwarf_CU *cu = NULL;
    Dwarf_Die cudie;
    uint8_t unit_type;
    while (dwarf_get_units(dw, cu, &cu, NULL, &unit_type, &cudie, NULL) == 0) {
        if (unit_type != DW_UT_compile && unit_type != DW_UT_partial && unit_type != DW_UT_skeleton)
            continue;
        if (dwarf_haspc(&cudie, addr - bias) != 1)
            continue;
        Dwarf_Line *line = dwarf_getsrc_die(&cudie, addr - bias);
        int lineno = 0;
        const char *file = line != NULL ? dwarf_linesrc(line, NULL, NULL) : NULL;
        if (file != NULL && dwarf_lineno(line, &lineno) == 0) {
            e->source_file = strdup(file);
            e->source_line = lineno;
        }
        return;
    }
}

/* The start of the function `addr` is in, by its unwind entry
 * (eh_frame_index.h); 0 if unknown. */
static uint64_t function_start(Dwfl_Module *mod, uint64_t addr)
{
    Dwarf_Addr bias = 0;
    Elf *elf = dwfl_module_getelf(mod, &bias);
    uint64_t start = elf != NULL ? hw_eh_frame_function_start(elf, addr - bias) : 0;
    return start != 0 ? start + bias : 0;
}

void hw_symbolizer_functions_only(hw_symbolizer *sym)
{
    if (sym != NULL)
        sym->functions_only = true;
}

/* The number of `mod`'s file in the thread's shared names (code_names.h),
 * 0 when it has none: no build-id, or the maps text does not say which
 * file was mapped there. */
static uint32_t shared_file_number(const hw_symbolizer *sym, hw_code_names *shared, Dwfl_Module *mod,
                                   const char *path, uint64_t start)
{
    long r = sym->backed != NULL && path != NULL ? backed_range_of(sym, start) : -1;
    const unsigned char *bits = NULL;
    GElf_Addr vaddr;
    int len = r >= 0 ? dwfl_module_build_id(mod, &bits, &vaddr) : 0;
    if (len <= 0 || bits == NULL)
        return 0;
    hw_code_file file = {.dev = sym->backed[r].dev,
                         .inode = sym->backed[r].inode,
                         .path = path,
                         .build_id = bits,
                         .build_id_len = (size_t)len};
    return hw_code_names_file(shared, &file);
}

/*
 * Where the code at `addr` sits in its image as the loader mapped it.  A
 * program may map part of its own file a second time, elsewhere: node's
 * V8 maps its embedded builtins again next to its code range (short
 * calls), so one file has two executable mappings, and libdwfl's one
 * module for the file spans both with the first one's bias.  An address in
 * such a copy is named as the same file offset in the image: the address
 * the ELF's load segments give that offset (with the module's bias), when
 * a mapping of the same file is there.  Else `addr` itself.
 */
static uint64_t address_in_image(const hw_symbolizer *sym, Elf *elf, Dwarf_Addr bias, uint64_t addr)
{
    long r = sym->backed != NULL ? backed_range_of(sym, addr) : -1;
    size_t count = 0;
    if (r < 0 || elf == NULL || elf_getphdrnum(elf, &count) != 0)
        return addr;
    uint64_t file_offset = addr - sym->backed[r].start + sym->backed[r].offset;
    for (size_t i = 0; i < count; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) == NULL || ph.p_type != PT_LOAD || file_offset < ph.p_offset ||
            file_offset - ph.p_offset >= ph.p_filesz)
            continue;
        uint64_t loaded = bias + ph.p_vaddr + (file_offset - ph.p_offset);
        if (loaded == addr)
            return addr;
        long q = backed_range_of(sym, loaded);
        bool same_file = q >= 0 && sym->backed[q].dev == sym->backed[r].dev && sym->backed[q].inode == sym->backed[r].inode;
        return same_file ? loaded : addr;
    }
    return addr;
}

static void lookup(hw_symbolizer *sym, uint64_t real_addr, resolved *e)
{
    if (!address_is_backed(sym, real_addr)) {
        hw_symbolizer_lookup_jit(sym, real_addr, e);
        return;
    }
    Dwfl_Module *mod = dwfl_addrmodule(sym->dwfl, real_addr);
    if (mod == NULL)
        return;
    Dwarf_Addr start = 0, end = 0;
    const char *name = dwfl_module_info(mod, NULL, &start, &end, NULL, NULL, NULL, NULL);
    e->object_path = hw_dup_or_null(name);
    e->object_addr = start;
    Dwarf_Addr bias = 0;
    Elf *elf = dwfl_module_getelf(mod, &bias);
    bool have_elf = elf != NULL;
    /* from here on `addr` is the image's address, and symbol_addr is put
     * back into the copy's addresses at the end */
    uint64_t addr = have_elf ? address_in_image(sym, elf, bias, real_addr) : real_addr;
    uint64_t moved = real_addr - addr;
    e->object_offset = have_elf ? addr - bias : addr - start;
    if (sym->functions_only) {
        if (have_elf && (e->symbol_addr = function_start(mod, addr)) != 0)
            e->symbol_addr += moved;
        return;
    }
    /* Known from another process's lookup in the same file? */
    hw_code_names *shared = hw_code_names_bound();
    uint32_t file_no = shared != NULL && have_elf ? shared_file_number(sym, shared, mod, name, start) : 0;
    hw_code_name known;
    if (file_no != 0 && hw_code_names_find(shared, file_no, addr - bias, &known)) {
        e->symbol_name = hw_dup_or_null(known.symbol_name);
        e->symbol_addr = known.symbol_name != NULL ? real_addr - known.symbol_offset : 0;
        e->source_file = hw_dup_or_null(known.source_file);
        e->source_line = known.source_line;
        return;
    }
    GElf_Off offset = 0;
    GElf_Sym elf_sym;
    const char *symbol = dwfl_module_addrinfo(mod, addr, &offset, &elf_sym, NULL, NULL, NULL);
    uint64_t stub_entry = 0;
    char *stub = NULL;
    if ((symbol == NULL || elf_sym.st_size == 0) && have_elf && hw_plt_stub_name(elf, addr - bias, &stub, &stub_entry)) {
        /* a PLT stub: no symbol of its own, or a sizeless one before it */
        symbol = NULL;
        e->symbol_name = stub;
        e->symbol_addr = stub != NULL ? real_addr - (addr - bias - stub_entry) : 0;
    } else if (symbol != NULL) {
        /* .symtab of glibc's debug files spells versions into the names
         * ("clock_nanosleep@GLIBC_2.2.5"); report the plain name. */
        char *plain = strndup(symbol, strcspn(symbol, "@"));
        e->symbol_name = plain ? demangle(plain) : NULL;
        e->symbol_addr = real_addr - offset;
    }
    Dwfl_Line *line = dwfl_module_getsrc(mod, addr);
    if (line != NULL) {
        int lineno = 0;
        const char *file = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);
        if (file != NULL) {
            e->source_file = strdup(file);
            e->source_line = lineno;
        }
    } else {
        line_without_aranges(mod, addr, e);
    }
    if (file_no != 0 && (e->symbol_name != NULL || symbol == NULL) && (e->source_file != NULL || line == NULL)) {
        hw_code_name found = {.symbol_name = e->symbol_name,
                              .symbol_offset = e->symbol_name != NULL ? real_addr - e->symbol_addr : 0,
                              .source_file = e->source_file,
                              .source_line = e->source_line};
        hw_code_names_add(shared, file_no, addr - bias, &found);
    }
}

/* The cached lookup of `addr` (NULL only when out of memory).  The pointer
 * is valid until the next call. */
static const resolved *resolve(hw_symbolizer *sym, uint64_t addr)
{
    if (sym->cache_cap != 0) {
        size_t mask = sym->cache_cap - 1;
        for (size_t j = hw_hash_addr(addr) & mask; sym->cache[j].used; j = (j + 1) & mask)
            if (sym->cache[j].key == addr)
                return &sym->cache[j];
    }
    if ((sym->cache_used + 1) * 10 > sym->cache_cap * 7 && !cache_grow(sym))
        return NULL;
    size_t mask = sym->cache_cap - 1;
    size_t j = hw_hash_addr(addr) & mask;
    while (sym->cache[j].used)
        j = (j + 1) & mask;
    resolved *e = &sym->cache[j];
    memset(e, 0, sizeof *e);
    lookup(sym, addr, e);
    e->key = addr;
    e->used = true;
    sym->cache_used++;
    (void)dwfl_errno(); /* a failed lookup must not look like an unwind error */
    return e;
}

/* ---- frames ------------------------------------------------------------ */

bool hw_symbolizer_fill_frame(hw_symbolizer *sym, hw_frame *f, uint64_t pc, bool activation)
{
    memset(f, 0, sizeof *f);
    f->instruction_addr = pc;
    f->is_activation = activation;
    const resolved *e = resolve(sym, activation || pc == 0 ? pc : pc - 1);
    if (e == NULL)
        return false;
    f->symbol_addr = e->symbol_addr;
    f->object_addr = e->object_addr;
    f->object_offset = e->object_offset;
    f->source_line = e->source_line;
    f->language = e->language;
    f->symbol_name = hw_dup_or_null(e->symbol_name);
    f->object_path = hw_dup_or_null(e->object_path);
    f->source_file = hw_dup_or_null(e->source_file);
    return (e->symbol_name == NULL || f->symbol_name != NULL) && (e->object_path == NULL || f->object_path != NULL) &&
           (e->source_file == NULL || f->source_file != NULL);
}

int hw_symbolize_frame(hw_symbolizer *sym, uint64_t pc, bool is_activation, hw_frame *out)
{
    if (!hw_symbolizer_fill_frame(sym, out, pc, is_activation)) {
        hw_frame_clear(out);
        out->instruction_addr = pc;
        out->is_activation = is_activation;
        return -1;
    }
    return 0;
}

/* ---- images ------------------------------------------------------------ */

typedef struct image_list {
    hw_symbolizer *sym;
    size_t cap;
    bool nomem;
} image_list;

static int image_cb(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start, void *arg)
{
    (void)userdata;
    (void)start;
    image_list *l = arg;
    hw_symbolizer *sym = l->sym;
    Dwarf_Addr bias = 0;
    if (dwfl_module_getelf(mod, &bias) == NULL)
        return DWARF_CB_OK; /* a mapped file that is not an ELF image (locale archive, fonts...) */
    if (sym->image_count == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 32;
        hw_image *v = realloc(sym->images, ncap * sizeof *v);
        if (v == NULL) {
            l->nomem = true;
            return DWARF_CB_ABORT;
        }
        sym->images = v;
        l->cap = ncap;
    }
    hw_image *img = &sym->images[sym->image_count];
    memset(img, 0, sizeof *img);
    Dwarf_Addr lo = 0, hi = 0;
    dwfl_module_info(mod, NULL, &lo, &hi, NULL, NULL, NULL, NULL);
    img->path = hw_dup_or_null(name);
    img->start = lo;
    img->end = hi;
    img->bias = bias;
    const unsigned char *bits = NULL;
    GElf_Addr vaddr;
    int len = dwfl_module_build_id(mod, &bits, &vaddr);
    if (len > 0 && bits != NULL) {
        img->build_id = malloc((size_t)len * 2 + 1);
        if (img->build_id != NULL) {
            static const char hex[] = "0123456789abcdef";
            for (int i = 0; i < len; i++) {
                img->build_id[2 * i] = hex[bits[i] >> 4];
                img->build_id[2 * i + 1] = hex[bits[i] & 15];
            }
            img->build_id[2 * len] = '\0';
        }
    }
    sym->image_count++;
    if ((name != NULL && img->path == NULL) || (len > 0 && img->build_id == NULL)) {
        l->nomem = true;
        return DWARF_CB_ABORT;
    }
    return DWARF_CB_OK;
}

static int cmp_image(const void *a, const void *b)
{
    const hw_image *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

size_t hw_symbolizer_images(hw_symbolizer *sym, const hw_image **images)
{
    if (images != NULL)
        *images = NULL;
    if (sym == NULL)
        return 0;
    if (!sym->images_listed) {
        image_list l = {.sym = sym};
        (void)dwfl_getmodules(sym->dwfl, image_cb, &l, 0);
        (void)dwfl_errno();
        if (sym->image_count > 1)
            qsort(sym->images, sym->image_count, sizeof *sym->images, cmp_image);
        sym->images_listed = true; /* partial after running out of memory, still sorted */
    }
    if (images != NULL)
        *images = sym->images;
    return sym->image_count;
}

/* ---- symbols by name --------------------------------------------------- */

typedef struct symbol_search {
    const hw_symbolizer *sym;
    bool (*wanted)(const char *path);
    const char *const *names;
    uint64_t names_key; /* the names, for the thread's shared cache */
    uint64_t *addrs;
    size_t count, found;
    char *module;
} symbol_search;

/* names[i]'s addresses in `mod`, from its symbol table; how many found. */
static size_t scan_symbols(Dwfl_Module *mod, const symbol_search *s)
{
    int n = dwfl_module_getsymtab(mod);
    size_t found = 0;
    for (int i = 1; i < n && found < s->count; i++) {
        GElf_Sym gsym;
        GElf_Addr addr;
        const char *sname = dwfl_module_getsym_info(mod, i, &gsym, &addr, NULL, NULL, NULL);
        if (sname == NULL || gsym.st_shndx == SHN_UNDEF)
            continue;
        for (size_t k = 0; k < s->count; k++)
            if (s->addrs[k] == 0 && strcmp(sname, s->names[k]) == 0) {
                s->addrs[k] = addr;
                found++;
            }
    }
    return found;
}

static int search_module_cb(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start, void *arg)
{
    (void)userdata;
    symbol_search *s = arg;
    if (name == NULL || !s->wanted(name))
        return DWARF_CB_OK;
    for (size_t i = 0; i < s->count; i++)
        s->addrs[i] = 0;
    /* The same file in another process: its symbols' file addresses are
     * known (code_names.h), only this load's bias differs. */
    hw_code_names *shared = hw_code_names_bound();
    Dwarf_Addr bias = 0;
    uint32_t file_no = 0;
    if (shared != NULL && s->count <= HW_CODE_NAMES_MAX_LOOKUP && dwfl_module_getelf(mod, &bias) != NULL)
        file_no = shared_file_number(s->sym, shared, mod, name, start);
    uint64_t kept[HW_CODE_NAMES_MAX_LOOKUP];
    size_t found = 0;
    if (file_no != 0 && hw_code_names_find_symbols(shared, file_no, s->names_key, kept, s->count)) {
        for (size_t i = 0; i < s->count; i++)
            if (kept[i] != 0) {
                s->addrs[i] = kept[i] + bias;
                found++;
            }
    } else {
        found = scan_symbols(mod, s);
        if (file_no != 0) {
            for (size_t i = 0; i < s->count; i++)
                kept[i] = s->addrs[i] != 0 ? s->addrs[i] - bias : 0;
            hw_code_names_add_symbols(shared, file_no, s->names_key, kept, s->count);
        }
    }
    if (s->addrs[0] == 0)
        return DWARF_CB_OK;
    s->found = found;
    s->module = hw_dup_or_null(name);
    return DWARF_CB_ABORT;
}

size_t hw_symbolizer_find_symbols(hw_symbolizer *sym, bool (*wanted)(const char *path), const char *const *names,
                                  uint64_t *addrs, size_t count, char **module)
{
    if (module != NULL)
        *module = NULL;
    for (size_t i = 0; i < count; i++)
        addrs[i] = 0;
    if (sym == NULL || wanted == NULL || count == 0)
        return 0;
    uint64_t names_key = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < count; i++)
        for (const unsigned char *c = (const unsigned char *)names[i];; c++) {
            names_key = (names_key ^ *c) * 0x100000001b3ull; /* FNV-1a, the NULs between names included */
            if (*c == '\0')
                break;
        }
    symbol_search s = {.sym = sym, .wanted = wanted, .names = names, .names_key = names_key, .addrs = addrs,
                       .count = count};
    (void)dwfl_getmodules(sym->dwfl, search_module_cb, &s, 0);
    (void)dwfl_errno();
    if (s.found == 0)
        for (size_t i = 0; i < count; i++)
            addrs[i] = 0;
    if (module != NULL)
        *module = s.module;
    else
        free(s.module);
    return s.found;
}

/* ---- what the symbolizers of a thread share ---------------------------- */

struct hw_symbol_caches {
    hw_code_names *names;
    hw_jit_map_cache *js_maps;
};

hw_symbol_caches *hw_symbol_caches_start(void)
{
    hw_symbol_caches *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->names = hw_code_names_new();
    c->js_maps = hw_jit_map_cache_new(0);
    hw_code_names_bind(c->names);
    hw_jit_map_cache_bind(c->js_maps);
    return c;
}

void hw_symbol_caches_stop(hw_symbol_caches *c)
{
    if (c == NULL)
        return;
    hw_code_names_free(c->names); /* each unbinds itself */
    hw_jit_map_cache_free(c->js_maps);
    free(c);
}
