/*
 * symbolizer.h - naming addresses of a watched process, in the agent, after
 * its threads have been resumed.
 *
 * Backed by elfutils libdwfl: symbols from .symtab/.dynsym (static
 * functions too), file:line from DWARF when present, build-ids for offline
 * symbolization.  One hw_symbolizer is made per capture from the process's
 * /proc/PID/maps text as read at capture time, so a process that exits in
 * the meantime still gets its report.  JIT code (node) is named from V8's
 * perf map (jit_map_file.h).
 *
 * symbolizer.c makes the symbolizer and looks addresses up (symbols, lines,
 * images, build-ids), symbolizer_jit.c names JIT code, unwind.c walks the
 * captured stacks with it (unwind.h); symbolizer_internal.h is what they
 * share.
 */
#ifndef HANGWATCH_SYMBOLIZER_H
#define HANGWATCH_SYMBOLIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "frame.h"

typedef struct hw_image {
    char *path;          /* as mapped, e.g. /usr/lib/x86_64-linux-gnu/libc.so.6, or "[vdso]" */
    uint64_t start, end; /* address range the image covers */
    uint64_t bias;       /* load bias (0 for a non-PIE executable) */
    char *build_id;      /* lowercase hex, NULL if the image has none */
} hw_image;

typedef struct hw_symbolizer hw_symbolizer;

/* Build a symbolizer for `pid` from its maps text.  NULL on failure, with a
 * message in *error (malloc'd) when error is not NULL.  A symbolizer is used
 * by one thread at a time (libdwfl is not thread-safe). */
hw_symbolizer *hw_symbolizer_new(pid_t pid, const char *maps, size_t maps_len, char **error);
void hw_symbolizer_free(hw_symbolizer *sym);

/* The process's user, as the capture saw it: node's perf map must belong to
 * it.  Without this the symbolizer asks /proc when it first needs the map,
 * which fails once the process is gone (a report written after it exited). */
void hw_symbolizer_set_owner(hw_symbolizer *sym, uid_t uid);

/* Symbolize one address as hw_unwind_thread would (pc - 1 for a caller's
 * return address).  Returns 0, or -1 with only the address filled in. */
int hw_symbolize_frame(hw_symbolizer *sym, uint64_t pc, bool is_activation, hw_frame *out);

/* Look up symbols by name in the modules whose path `wanted` accepts, one
 * module at a time in address order, stopping at the first module that has
 * names[0]: addrs[i] gets each name's absolute address there (0 if absent)
 * and *module (malloc'd, may be NULL) that module's path.  Returns how many
 * names were found in that module (0: names[0] is nowhere). */
size_t hw_symbolizer_find_symbols(hw_symbolizer *sym, bool (*wanted)(const char *path), const char *const *names,
                                  uint64_t *addrs, size_t count, char **module);

/* May JIT code be named from the process's perf map (/tmp/perf-PID.map)?
 * Off by default: it is asked for only for a node whose frames are not
 * read from V8's own records (js_frames.h), since the map is the process's
 * own file and any process could make reading it expensive. */
void hw_symbolizer_allow_js_map(hw_symbolizer *sym, bool allowed);

/* Name nothing, only tell functions apart: each frame's symbol_addr is
 * the start of the code its unwind table entry covers (the function, or a
 * cold part of it), found by a binary search of the module's
 * .eh_frame_hdr; no symbol table, debug file or source line is read.  For
 * the watch thread, whose work must not grow with any file a process maps
 * (early_sampler.c keys its runs by function). */
void hw_symbolizer_functions_only(hw_symbolizer *sym);

/* Why node's perf map could not be read when an address in anonymous
 * memory (JIT code) was looked up: ENOENT when there is none (node was
 * started without the flags), another errno, or 0 (read, or never needed). */
int hw_symbolizer_js_map_errno(const hw_symbolizer *sym);

/* Whether node's perf map was over the size read (HW_JIT_MAP_MAX_FILE_BYTES):
 * functions V8 added after that point have no names. */
bool hw_symbolizer_js_map_cut(const hw_symbolizer *sym);

/* The ELF images the symbolizer knows (mapped files that are not ELF are
 * left out), in address order (valid until hw_symbolizer_free). */
size_t hw_symbolizer_images(hw_symbolizer *sym, const hw_image **images);

/* What the symbolizers made on one thread share, by the identity of what
 * they read: the names of code by file (code_names.h), node's perf maps by
 * process (jit_map_file.h).  Start binds a new set to the calling thread
 * (NULL when out of memory: each symbolizer then reads for itself); stop
 * unbinds and frees it, on the same thread, once its symbolizers are gone. */
typedef struct hw_symbol_caches hw_symbol_caches;
hw_symbol_caches *hw_symbol_caches_start(void);
void hw_symbol_caches_stop(hw_symbol_caches *caches);

#endif
