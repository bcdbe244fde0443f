/*
 * symbolizer_internal.h - what symbolizer.c, unwind.c and symbolizer_jit.c
 * share behind unwind.h: the symbolizer's state (one libdwfl session made
 * from a capture's maps) and the calls between the three files.
 *
 * symbolizer.c makes the session and looks addresses up; unwind.c attaches
 * the captured threads to it and walks their stacks, naming each frame
 * through hw_symbolizer_fill_frame; symbolizer_jit.c names the addresses
 * that lie in anonymous memory (JIT code) from node's perf map.
 */
#ifndef HANGWATCH_SYMBOLIZER_INTERNAL_H
#define HANGWATCH_SYMBOLIZER_INTERNAL_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "jit_map_file.h"
#include "unwind.h"

/* What one looked-up address resolved to (the symbolizer's cache). */
typedef struct resolved {
    bool used;
    uint64_t key; /* the looked-up address */
    char *symbol_name;
    uint64_t symbol_addr;
    char *object_path;
    uint64_t object_addr;
    uint64_t object_offset;
    char *source_file;
    int source_line;
    hw_frame_language language;
} resolved;

struct hw_symbolizer {
    Dwfl *dwfl;
    pid_t pid;
    bool attached;
    char *attach_error;
    const hw_thread_snapshot *current; /* the thread hw_unwind_thread is walking */
    bool read_failed;                  /* a memory_read failed since the last frame */
    uint64_t read_fail_addr;
    /* The live stack beyond the copy, read a window at a time (a deep
     * recursion's outer frames; unwind.c) */
    unsigned char *window;
    uint64_t window_start;
    size_t window_len;
    pid_t window_tid;
    resolved *cache;
    size_t cache_cap, cache_used;
    hw_image *images;
    size_t image_count;
    bool images_listed;
    unsigned char *vdso; /* copy of our own vDSO image, backs the [vdso] module */
    size_t vdso_len;
    /* Address ranges backed by a file or the vDSO, sorted.  libdwfl makes one
     * module from the lowest to the highest mapping of a file, so code in
     * anonymous memory between them (a JIT's) would be blamed on that file;
     * such addresses are reported without an object instead. */
    struct {
        uint64_t start, end;
        uint64_t offset;     /* of `start` in the file */
        uint64_t dev, inode; /* the file's, as the kernel mapped it (code_names.h) */
    } * backed;
    size_t backed_count;
    /* node's perf map, read at the first address in anonymous memory */
    bool functions_only; /* hw_symbolizer_functions_only */
    bool js_map_tried;
    bool js_map_allowed; /* hw_symbolizer_allow_js_map: off unless the process is a node named by its map */
    bool owner_known; /* owner_uid set by hw_symbolizer_set_owner */
    uid_t owner_uid;
    const hw_jit_map *js_map;   /* js_map_owned, or held from js_map_cache */
    hw_jit_map *js_map_owned;   /* read by this symbolizer (no cache bound) */
    hw_jit_map_cache *js_map_cache;
    bool js_map_cut;            /* over the cap: named from its first part only */
    int js_map_errno; /* why it could not be read, 0 if it was */
};

/* Give back the perf map (symbolizer_jit.c). */
void hw_symbolizer_release_js_map(hw_symbolizer *sym);

/* A hash of an address, for the lookup cache and the walk's (pc, sp) set. */
static inline size_t hw_hash_addr(uint64_t a)
{
    a ^= a >> 33;
    a *= 0xff51afd7ed558ccdull;
    a ^= a >> 33;
    return (size_t)a;
}

/* A copy of `s` (NULL for NULL, or when out of memory). */
static inline char *hw_dup_or_null(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

/* symbolizer.c: fill `f` for `pc` from the cached lookup (at pc - 1 for a
 * caller's return address: `activation` false).  False when out of memory. */
bool hw_symbolizer_fill_frame(hw_symbolizer *sym, hw_frame *f, uint64_t pc, bool activation);

/* unwind.c: attach the symbolizer's session to the captured threads of
 * `pid` (sym->attached; else sym->attach_error says why it cannot unwind). */
void hw_unwind_attach(hw_symbolizer *sym, pid_t pid);

/* symbolizer_jit.c: name `addr`, in anonymous memory, into `e` from node's
 * perf map (read at the first such address), or leave it without a name. */
void hw_symbolizer_lookup_jit(hw_symbolizer *sym, uint64_t addr, resolved *e);

#endif
