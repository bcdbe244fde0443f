/*
 * unwind.h - turning a captured thread (registers + stack copy) into a
 * symbolized backtrace, in the agent, after the thread has been resumed.
 *
 * Backed by elfutils libdwfl: DWARF CFI unwinding (.eh_frame/.debug_frame),
 * so frames through libraries built without frame pointers are right, and
 * symbols from .symtab/.dynsym (static functions too), file:line from DWARF
 * when present, build-ids for offline symbolization.  One hw_symbolizer is
 * made per capture from the process's /proc/PID/maps text as read at capture
 * time, so a process that exits in the meantime still gets its report.
 *
 * symbolizer.c makes the symbolizer and looks addresses up (symbols, lines,
 * images, build-ids), symbolizer_jit.c names JIT code from node's perf map,
 * unwind.c walks the captured stacks; symbolizer_internal.h is what they
 * share.
 */
#ifndef HANGWATCH_UNWIND_H
#define HANGWATCH_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/capture/snapshot.h"

/* What ran a frame: native code, or an interpreter's or JIT's function
 * (python_frames.h, jit_map.h), named from the runtime's own records. */
typedef enum hw_frame_language {
    HW_LANG_NATIVE = 0,
    HW_LANG_PYTHON,
    HW_LANG_JAVASCRIPT,
} hw_frame_language;

/* "native", "python", "javascript": the report's frame.language. */
const char *hw_frame_language_name(hw_frame_language language);

typedef struct hw_frame {
    uint64_t instruction_addr; /* pc as unwound (a return address for callers); for a Python
                                  frame, the address of its current bytecode instruction */
    bool is_activation;        /* the innermost frame (or a signal frame) */
    char *symbol_name;         /* as in the symbol table, without "@VERSION" (C++ names are
                                  not demangled), NULL if unknown */
    uint64_t symbol_addr;      /* absolute address of the symbol, 0 if unknown */
    char *object_path;         /* path of the ELF image, NULL if unknown */
    uint64_t object_addr;      /* load address of that image */
    uint64_t object_offset;    /* looked-up address in the image's own numbering: (pc, or
                                  pc - 1 for a caller frame) - bias, as addr2line wants it */
    char *source_file;         /* NULL without debug info */
    int source_line;           /* 0 without debug info */
    hw_frame_language language;
    uint64_t runtime_key;      /* a runtime frame's identity for samples (python_frames.h), else 0 */
} hw_frame;

typedef struct hw_backtrace {
    hw_frame *frames;
    size_t count;
    size_t skipped; /* frames walked beyond max_frames and dropped (counted up to a limit) */
    char *error;    /* why the unwind stopped early, NULL if it ended normally */
    char *runtime_error; /* why an interpreter's frames are missing or partial, else NULL */
} hw_backtrace;

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

/* Unwind one captured thread of the snapshot the symbolizer was made for
 * (any number of them, one after the other).  Frames beyond `max_frames`
 * (0: 256) are dropped and counted in out->skipped.  Returns 0 (possibly with
 * out->error set when the walk stopped early; a thread that was not captured
 * gives no frames and an error), or -EINVAL / -ENOMEM. */
int hw_unwind_thread(hw_symbolizer *sym, const hw_thread_snapshot *thread, size_t max_frames,
                     hw_backtrace *out);
void hw_backtrace_free(hw_backtrace *bt);

/* Symbolize one address as hw_unwind_thread would (pc - 1 for a caller's
 * return address).  Returns 0, or -1 with only the address filled in. */
int hw_symbolize_frame(hw_symbolizer *sym, uint64_t pc, bool is_activation, hw_frame *out);

/* Free a frame's strings and zero it. */
void hw_frame_clear(hw_frame *f);

/* Look up symbols by name in the modules whose path `wanted` accepts, one
 * module at a time in address order, stopping at the first module that has
 * names[0]: addrs[i] gets each name's absolute address there (0 if absent)
 * and *module (malloc'd, may be NULL) that module's path.  Returns how many
 * names were found in that module (0: names[0] is nowhere). */
size_t hw_symbolizer_find_symbols(hw_symbolizer *sym, bool (*wanted)(const char *path), const char *const *names,
                                  uint64_t *addrs, size_t count, char **module);

/* Why node's perf map could not be read when an address in anonymous
 * memory (JIT code) was looked up: ENOENT when there is none (node was
 * started without the flags), another errno, or 0 (read, or never needed). */
int hw_symbolizer_js_map_errno(const hw_symbolizer *sym);

/* The ELF images the symbolizer knows (mapped files that are not ELF are
 * left out), in address order (valid until hw_symbolizer_free). */
size_t hw_symbolizer_images(hw_symbolizer *sym, const hw_image **images);

#endif
