/*
 * js_find.c - V8 in a process, once per process before its first capture
 * (js_frames.h: hw_js_find), from the postmortem metadata its binary
 * carries.
 *
 * V8 built with v8_postmortem_support (node's release builds are) exports
 * a few hundred `int` constants named v8dbg_*: frame-pointer offsets of a
 * frame's slots, frame-type markers, the offset of every field a debugger
 * reads (v8dbg_class_<Class>__<field>__<type>), instance type numbers
 * (v8dbg_type_<Class>__<TYPE>) and the tagging scheme.  They are read from
 * the file of the module the process has mapped (node, or libnode.so for a
 * node linked against it: through /proc/PID/root, so a process in another
 * mount namespace gets its own) with libelf: each name looked up in its
 * dynamic symbols' hash table (where node exports them: microseconds),
 * those symbols read whole only when that finds none, and the full table
 * last.  A symbolizer of the whole process took long enough to slow node's
 * start-up beside it, and a pass over node's 75,000 dynamic symbols 5 ms
 * of `hangwatch run -- node`'s start.  What is used is what that
 * V8 was built with, whatever its version.  Every value is then
 * checked for range before a reader may use it (js_layout.c): a value a
 * reader cannot use safely refuses the process, never misreads it.
 */
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/capture/capture.h"
#include "js_internal.h"
#include "runtime_frames.h"

/* ---- the module's file, and its values ---------------------------------- */

/* node, nodejs, node20, libnode.so.108: where node's V8 lives. */
static bool v8_module(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    return hw_is_node_executable(base) || strncmp(base, "libnode.so", 10) == 0 || strncmp(base, "libv8", 5) == 0;
}

#define MAX_NAMES 64 /* > the names hw_js_metadata_names gives (60) */
#define MAX_SYMBOLS_SCANNED (4u << 20) /* node's whole .symtab has a few 100,000 */

/* A defined symbol's 4-byte value from the file (one in .bss is 0). */
static bool symbol_value(Elf *elf, const GElf_Sym *sym, int32_t *value)
{
    if (sym->st_shndx == SHN_UNDEF || sym->st_shndx >= SHN_LORESERVE)
        return false;
    Elf_Scn *in = elf_getscn(elf, sym->st_shndx);
    GElf_Shdr ish;
    if (in == NULL || gelf_getshdr(in, &ish) == NULL)
        return false;
    if (ish.sh_type == SHT_NOBITS) {
        *value = 0;
        return true;
    }
    Elf_Data *d = elf_getdata(in, NULL);
    if (d == NULL || d->d_buf == NULL || sym->st_value < ish.sh_addr || sym->st_value - ish.sh_addr > d->d_size ||
        d->d_size - (sym->st_value - ish.sh_addr) < 4)
        return false;
    memcpy(value, (const char *)d->d_buf + (sym->st_value - ish.sh_addr), 4);
    return true;
}

/* One symbol table's v8dbg_* values among `names`: values[i] and seen[i]
 * for each found.  How many were found. */
static size_t scan_table(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, const char *const *names, size_t count,
                         int32_t *values, bool *seen)
{
    Elf_Data *data = elf_getdata(scn, NULL);
    size_t symbols = data && sh->sh_entsize ? data->d_size / sh->sh_entsize : 0, found = 0;
    if (symbols > MAX_SYMBOLS_SCANNED)
        symbols = MAX_SYMBOLS_SCANNED; /* a bound on the work any file can ask for */
    for (size_t i = 0; i < symbols && found < count; i++) {
        GElf_Sym sym;
        const char *name = gelf_getsym(data, (int)i, &sym) ? elf_strptr(elf, sh->sh_link, sym.st_name) : NULL;
        if (name == NULL || strncmp(name, "v8dbg_", 6) != 0)
            continue;
        for (size_t k = 0; k < count; k++) {
            if (seen[k] || strcmp(name + 6, names[k]) != 0)
                continue;
            if (symbol_value(elf, &sym, &values[k])) {
                seen[k] = true;
                found++;
            }
            break;
        }
    }
    return found;
}

/* The GNU hash of a symbol name (the ELF gABI extension's function). */
static uint32_t gnu_hash(const char *name)
{
    uint32_t h = 5381;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        h = h * 33 + *c;
    return h;
}

/* A file's .gnu.hash table over its dynamic symbols: a name is found in
 * a bucket and a short chain, where reading every dynamic symbol takes
 * milliseconds in node's 75,000. */
typedef struct gnu_hash_table {
    Elf *elf;
    Elf_Data *symbols;
    size_t symbol_count, strings; /* strings: the string table's section index */
    const uint32_t *buckets, *chain;
    uint32_t bucket_count, first_hashed;
    size_t chain_len;
} gnu_hash_table;

/* The table, checked for size (the file is the user's): false if none. */
static bool gnu_hash_open(Elf *elf, gnu_hash_table *t)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh, symsh;
        if (gelf_getshdr(scn, &sh) == NULL || sh.sh_type != SHT_GNU_HASH)
            continue;
        Elf_Scn *syms = elf_getscn(elf, sh.sh_link);
        Elf_Data *hd = elf_rawdata(scn, NULL);
        Elf_Data *sd = syms ? elf_getdata(syms, NULL) : NULL;
        if (hd == NULL || hd->d_buf == NULL || sd == NULL || gelf_getshdr(syms, &symsh) == NULL ||
            symsh.sh_entsize == 0 || hd->d_size < 16 || ((uintptr_t)hd->d_buf & 3) != 0)
            return false;
        size_t words = hd->d_size / 4;
        const uint32_t *w = hd->d_buf;
        size_t bloom_words = (size_t)w[2] * (gelf_getclass(elf) == ELFCLASS64 ? 2 : 1); /* in 32-bit words */
        if (w[0] == 0 || bloom_words > words - 4 || w[0] > words - 4 - bloom_words)
            return false;
        *t = (gnu_hash_table){.elf = elf, .symbols = sd, .symbol_count = sd->d_size / symsh.sh_entsize,
                              .strings = symsh.sh_link, .bucket_count = w[0], .first_hashed = w[1],
                              .buckets = w + 4 + bloom_words};
        t->chain = t->buckets + t->bucket_count;
        t->chain_len = words - 4 - bloom_words - t->bucket_count;
        return true;
    }
    return false;
}

/* `name`'s symbol into *sym: false if the table has none. */
static bool gnu_hash_find(const gnu_hash_table *t, const char *name, GElf_Sym *sym)
{
    uint32_t h = gnu_hash(name);
    size_t i = t->buckets[h % t->bucket_count];
    if (i < t->first_hashed)
        return false;
    for (; i - t->first_hashed < t->chain_len && i < t->symbol_count; i++) {
        uint32_t c = t->chain[i - t->first_hashed];
        const char *n = NULL;
        if ((c | 1) == (h | 1) && gelf_getsym(t->symbols, (int)i, sym) != NULL)
            n = elf_strptr(t->elf, t->strings, sym->st_name);
        if (n != NULL && strcmp(n, name) == 0)
            return true;
        if (c & 1)
            return false; /* the chain's last */
    }
    return false;
}

/* `names` looked up one by one through the hash table: how many found. */
static size_t look_up_names(Elf *elf, const char *const *names, size_t count, int32_t *values, bool *seen)
{
    gnu_hash_table t;
    if (!gnu_hash_open(elf, &t))
        return 0;
    size_t found = 0;
    for (size_t k = 0; k < count; k++) {
        char wanted[128];
        GElf_Sym sym;
        snprintf(wanted, sizeof wanted, "v8dbg_%s", names[k]);
        if (!seen[k] && gnu_hash_find(&t, wanted, &sym) && symbol_value(elf, &sym, &values[k])) {
            seen[k] = true;
            found++;
        }
    }
    return found;
}

/* Files read lately, by identity: a tree of node processes (or a process
 * that makes the agent look at a large file) costs one read per file. */
#define RECENT_FILES 8
typedef struct read_file {
    bool used;
    dev_t dev;
    ino_t inode;
    off_t size;
    struct timespec mtime;
    size_t found;
    int32_t values[MAX_NAMES];
    bool seen[MAX_NAMES];
} read_file;
static _Thread_local read_file recent_files[RECENT_FILES];
static _Thread_local unsigned recent_next;

static read_file *recent_read(const struct stat *st)
{
    for (size_t i = 0; i < RECENT_FILES; i++) {
        read_file *r = &recent_files[i];
        if (r->used && r->dev == st->st_dev && r->inode == st->st_ino && r->size == st->st_size &&
            r->mtime.tv_sec == st->st_mtim.tv_sec && r->mtime.tv_nsec == st->st_mtim.tv_nsec)
            return r;
    }
    return NULL;
}

static void remember_read(const struct stat *st, size_t found, const int32_t *values, const bool *seen, size_t count)
{
    read_file *r = &recent_files[recent_next++ % RECENT_FILES];
    memset(r, 0, sizeof *r);
    r->used = true;
    r->dev = st->st_dev;
    r->inode = st->st_ino;
    r->size = st->st_size;
    r->mtime = st->st_mtim;
    r->found = found;
    memcpy(r->values, values, count * sizeof *values);
    memcpy(r->seen, seen, count * sizeof *seen);
}

size_t hw_js_read_metadata(const char *path, int32_t *values, bool *seen, size_t count)
{
    const char *names[MAX_NAMES];
    size_t n = hw_js_metadata_names(names, MAX_NAMES);
    if (count > n)
        count = n;
    memset(seen, 0, count * sizeof *seen);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    bool identified = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    const read_file *known = identified && count == n ? recent_read(&st) : NULL;
    if (known != NULL) {
        close(fd);
        memcpy(values, known->values, count * sizeof *values);
        memcpy(seen, known->seen, count * sizeof *seen);
        return known->found;
    }
    size_t found = 0;
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    /* The dynamic symbols first, through their hash table (node exports
     * the metadata), then read whole, then all. */
    if (elf != NULL)
        found = look_up_names(elf, names, count, values, seen);
    for (int pass = 0; elf != NULL && pass < 2 && found == 0; pass++) {
        Elf_Scn *scn = NULL;
        while ((scn = elf_nextscn(elf, scn)) != NULL) {
            GElf_Shdr sh;
            if (gelf_getshdr(scn, &sh) != NULL && sh.sh_type == (pass == 0 ? SHT_DYNSYM : SHT_SYMTAB))
                found += scan_table(elf, scn, &sh, names, count, values, seen);
        }
    }
    if (elf != NULL)
        elf_end(elf);
    close(fd);
    if (identified && count == n)
        remember_read(&st, found, values, seen, count);
    return found;
}

bool hw_js_module_path(pid_t pid, const char *maps, size_t maps_len, char *path, size_t path_len)
{
    const char *end = maps + maps_len;
    for (const char *line = maps; maps != NULL && line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *stop = nl ? nl : end;
        const char *file = memchr(line, '/', (size_t)(stop - line));
        size_t n = file ? (size_t)(stop - file) : 0;
        char name[512];
        if (n > 0 && n < sizeof name) {
            memcpy(name, file, n);
            name[n] = '\0';
            if (v8_module(name)) {
                /* The file mapped, by a path that reaches it from here
                 * (hw_proc_mapped_file_path: a container's too). */
                unsigned long long lo = 0, hi = 0, inode = 0;
                if (sscanf(line, "%llx-%llx %*s %*s %*s %llu", &lo, &hi, &inode) == 3 &&
                    hw_proc_mapped_file_path(pid, name, lo, hi, inode, path, path_len))
                    return true;
                if (snprintf(path, path_len, "%s", name) < (int)path_len)
                    return true; /* none: its name, for the message */
            }
        }
        line = stop + 1;
    }
    return false;
}

typedef struct file_values {
    const char *names[MAX_NAMES];
    int32_t values[MAX_NAMES];
    bool seen[MAX_NAMES];
    size_t count;
} file_values;

static bool value_from_file(void *ctx, const char *name, int32_t *v)
{
    const file_values *f = ctx;
    for (size_t i = 0; i < f->count; i++)
        if (f->seen[i] && strcmp(f->names[i], name) == 0) {
            *v = f->values[i];
            return true;
        }
    return false;
}

void hw_js_find(pid_t pid, const char *maps, size_t maps_len, hw_js_target *out)
{
    memset(out, 0, sizeof *out);
    char path[600];
    if (maps == NULL || !hw_js_module_path(pid, maps, maps_len, path, sizeof path))
        return;
    const char *slash = strrchr(path, '/');
    snprintf(out->module, sizeof out->module, "%.127s", slash ? slash + 1 : path);
    file_values f;
    f.count = hw_js_metadata_names(f.names, MAX_NAMES);
    if (f.count > MAX_NAMES)
        f.count = MAX_NAMES;
    /* The first name must be there for the module to count as having it. */
    if (hw_js_read_metadata(path, f.values, f.seen, f.count) == 0 || !f.seen[0])
        return; /* no V8 with metadata; a node without it is the caller's to say */
    out->found = true;
    const char *missing = hw_js_layout_from(&out->layout, value_from_file, &f);
    if (missing != NULL) {
        int n = snprintf(out->why_not, sizeof out->why_not,
                         "JavaScript frames not read: %.50s's V8 metadata lacks or has an unusable v8dbg_%.60s",
                         out->module, missing);
        (void)n;
        return;
    }
    out->readable = true;
}

/* ---- a file, before it runs ------------------------------------------- */

/* Only whether the first name is there, through the hash table: this runs
 * before the program starts (js_maps.c), where the look-ups of all the
 * others cost node's start 0.8 ms.  A file whose hash table lacks it
 * (metadata only in the full symbol table) is read whole. */
bool hw_js_file_has_metadata(const char *path)
{
    const char *names[MAX_NAMES];
    if (hw_js_metadata_names(names, MAX_NAMES) == 0)
        return false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    int32_t value;
    bool seen = false;
    bool found = elf != NULL && look_up_names(elf, names, 1, &value, &seen) == 1;
    if (elf != NULL)
        elf_end(elf);
    close(fd);
    if (found)
        return true;
    int32_t values[MAX_NAMES];
    bool all_seen[MAX_NAMES];
    return hw_js_read_metadata(path, values, all_seen, MAX_NAMES) > 0 && all_seen[0];
}
