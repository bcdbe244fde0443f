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
 * mount namespace gets its own), one pass over its dynamic symbols (where
 * node exports them; the full table only when they are not there) with
 * libelf: a few milliseconds, where a symbolizer of the whole process took
 * long enough to slow node's start-up beside it.  What is used is what that
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

/* One symbol table's v8dbg_* values among `names`: values[i] and seen[i]
 * for each found (a value in .bss is 0).  How many were found. */
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
        if (name == NULL || strncmp(name, "v8dbg_", 6) != 0 || sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE)
            continue;
        for (size_t k = 0; k < count; k++) {
            if (seen[k] || strcmp(name + 6, names[k]) != 0)
                continue;
            Elf_Scn *in = elf_getscn(elf, sym.st_shndx);
            GElf_Shdr ish;
            Elf_Data *d = in ? elf_getdata(in, NULL) : NULL;
            if (in == NULL || gelf_getshdr(in, &ish) == NULL)
                break;
            if (ish.sh_type == SHT_NOBITS) {
                values[k] = 0;
            } else if (d != NULL && d->d_buf != NULL && sym.st_value >= ish.sh_addr &&
                       sym.st_value - ish.sh_addr <= d->d_size && d->d_size - (sym.st_value - ish.sh_addr) >= 4) {
                memcpy(&values[k], (const char *)d->d_buf + (sym.st_value - ish.sh_addr), 4);
            } else {
                break;
            }
            seen[k] = true;
            found++;
            break;
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
    /* The dynamic symbols first (node exports the metadata), then all. */
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

bool hw_js_file_has_metadata(const char *path)
{
    int32_t values[MAX_NAMES];
    bool seen[MAX_NAMES];
    return hw_js_read_metadata(path, values, seen, MAX_NAMES) > 0 && seen[0];
}
