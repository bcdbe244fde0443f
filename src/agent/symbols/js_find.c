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
 * the process's memory at the symbols' addresses (the module as mapped:
 * node, or libnode.so for a node linked against it), so what is used is
 * what that V8 was built with, whatever its version.  Every value is then
 * checked for range before a reader may use it (js_layout.c): a value a
 * reader cannot use safely refuses the process, never misreads it.
 */
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "js_internal.h"
#include "runtime_frames.h"
#include "symbolizer.h"

/* ---- the module, and its values from the process ------------------------ */

/* node, nodejs, node20, libnode.so.108: where node's V8 lives. */
static bool v8_module(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    return hw_is_node_executable(base) || strncmp(base, "libnode.so", 10) == 0 || strncmp(base, "libv8", 5) == 0;
}

#define MAX_NAMES 64 /* > the names hw_js_metadata_names gives (60) */

typedef struct found_values {
    pid_t pid;
    const char *names[MAX_NAMES];
    uint64_t addrs[MAX_NAMES];
    size_t count;
} found_values;

static bool value_from_process(void *ctx, const char *name, int32_t *v)
{
    const found_values *f = ctx;
    for (size_t i = 0; i < f->count; i++)
        if (strcmp(f->names[i] + 6, name) == 0)
            return f->addrs[i] != 0 && hw_js_peek(f->pid, f->addrs[i], v, sizeof *v);
    return false;
}

void hw_js_find(pid_t pid, const char *maps, size_t maps_len, hw_js_target *out)
{
    memset(out, 0, sizeof *out);
    if (maps == NULL)
        return;
    char full_names[MAX_NAMES][112];
    found_values f = {.pid = pid};
    /* names[0] must be in the module for it to be taken: the first field. */
    const char *bare[MAX_NAMES];
    f.count = hw_js_metadata_names(bare, MAX_NAMES);
    if (f.count > MAX_NAMES)
        f.count = MAX_NAMES;
    for (size_t i = 0; i < f.count; i++) {
        snprintf(full_names[i], sizeof full_names[0], "v8dbg_%s", bare[i]);
        f.names[i] = full_names[i];
    }
    hw_symbolizer *sym = hw_symbolizer_new(pid, maps, maps_len, NULL);
    char *module = NULL;
    size_t found = sym ? hw_symbolizer_find_symbols(sym, v8_module, f.names, f.addrs, f.count, &module) : 0;
    hw_symbolizer_free(sym);
    if (module != NULL) {
        const char *slash = strrchr(module, '/');
        snprintf(out->module, sizeof out->module, "%s", slash ? slash + 1 : module);
        free(module);
    }
    if (found == 0)
        return; /* no V8 with metadata; a node without it is the caller's to say */
    out->found = true;
    const char *missing = hw_js_layout_from(&out->layout, value_from_process, &f);
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
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool found = false;
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    /* The dynamic symbols first (node exports the metadata), then all. */
    for (int pass = 0; elf != NULL && pass < 2 && !found; pass++) {
        Elf_Scn *scn = NULL;
        while (!found && (scn = elf_nextscn(elf, scn)) != NULL) {
            GElf_Shdr sh;
            if (gelf_getshdr(scn, &sh) == NULL || sh.sh_type != (pass == 0 ? SHT_DYNSYM : SHT_SYMTAB) ||
                sh.sh_entsize == 0)
                continue;
            Elf_Data *data = elf_getdata(scn, NULL);
            size_t count = data ? data->d_size / sh.sh_entsize : 0;
            for (size_t i = 0; i < count && !found; i++) {
                GElf_Sym s;
                const char *name = gelf_getsym(data, (int)i, &s) ? elf_strptr(elf, sh.sh_link, s.st_name) : NULL;
                found = name != NULL && strcmp(name, "v8dbg_off_fp_function") == 0;
            }
        }
    }
    if (elf != NULL)
        elf_end(elf);
    close(fd);
    return found;
}
