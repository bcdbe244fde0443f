/*
 * python_internal.h - what the files that read CPython share among
 * themselves (python_frames.h is their interface to the rest):
 *
 *   python_find.c    the interpreter of a process: where its runtime is,
 *                    its version, and the layout its structures have (a
 *                    generated table, or from 3.13 on the process's own
 *                    debug offsets);
 *   python_frames.c  the thread states and frame chains, read while the
 *                    threads are stopped, and who holds the GIL;
 *   python_names.c   code objects named after the resume, and the Python
 *                    frames put among the native ones.
 *
 * Every read is of another process's memory, through process_vm_readv,
 * which fails cleanly on an address that is not mapped: a bad pointer costs
 * one failed system call.  Everything read is bounded by the limits below.
 */
#ifndef HANGWATCH_PYTHON_INTERNAL_H
#define HANGWATCH_PYTHON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "python_frames.h"

#define MAX_INTERPRETERS 16
#define MAX_THREAD_STATES 4096
#define MAX_NAME_CHARS 1024
#define MAX_LINETABLE_BYTES (256u * 1024)
/* Per watched process (docs/security.md): what its namer keeps of code
 * objects (names, files, line tables) at most, and the line-table bytes
 * one capture's naming reads from it at most; a frame whose table would
 * pass that shows its function's first line, and its thread says so. */
#define MAX_CACHED_CODE_BYTES (16u * 1024 * 1024)
#define MAX_LINETABLE_READ_PER_NAMING (4u * 1024 * 1024)
#define MAX_STRUCT_READ 512u /* the most bytes read at once from a thread state or frame */

/* What every "frames not read" sentence ends with. */
#define HW_PY_SUPPORTED "hangwatch reads CPython 3.8 to 3.13"

/* Read `len` bytes of process `pid` at `addr`: false when any of it cannot
 * be read (or addr is 0).  Every read of the program's memory goes through
 * here (python_peek.c; the fuzz target puts a forged memory behind it). */
bool hw_py_peek(pid_t pid, uint64_t addr, void *buf, size_t len);

/* Found but not read: out->why_not = fmt with the version and `reason`
 * (python_debug_offsets.c, which says it most). */
void hw_python_not_read(hw_python_target *out, const char *fmt, const char *reason);

/* Does every field the readers take out of a record they read whole lie
 * within that record (a frame, a str's or a bytes object's header), and
 * every such record fit MAX_STRUCT_READ?  A layout from a process's own
 * debug offsets must, before it is used (python_debug_offsets.c). */
bool hw_python_layout_fits(const hw_python_layout *L);

/* _PyRuntime at out->runtime_addr begins with _Py_DebugOffsets (3.13+):
 * take the layout from it (python_debug_offsets.c).  False when it does not
 * (before 3.13); true with out->readable, or out->why_not, set when it
 * does. */
bool hw_python_read_debug_offsets(pid_t pid, hw_python_target *out);

static inline uint64_t hw_py_u64(const unsigned char *buf, uint32_t off)
{
    uint64_t v;
    memcpy(&v, buf + off, sizeof v);
    return v;
}

static inline uint32_t hw_py_u32(const unsigned char *buf, uint32_t off)
{
    uint32_t v;
    memcpy(&v, buf + off, sizeof v);
    return v;
}

/* Does the layout have this field? */
static inline bool hw_py_has(uint32_t field)
{
    return field != HW_PY_NONE;
}

/* ---- the namer (python_names.c), which python_threads.c shares ---------- */

typedef struct code_info {
    uint64_t addr; /* 0: free slot */
    bool valid;    /* a code object was read there */
    uint64_t qualname_ptr, filename_ptr, linetable_ptr; /* to tell it is still the same */
    char *name, *file;
    int first_line;
    uint32_t first_traceable;
    uint8_t *linetable;
    size_t linetable_len;
    bool linetable_cut; /* not read: the naming's budget was spent (read again when there is room) */
    size_t bytes;       /* what it holds (name, file, line table) */
} code_info;

struct hw_python_namer {
    hw_python_target py;
    pid_t pid;
    code_info *slots;
    size_t cap, used;
    size_t cached_bytes;   /* the slots' bytes, at most MAX_CACHED_CODE_BYTES */
    size_t read_left;      /* line-table bytes this naming may still read */
    size_t read_per_naming; /* ... of MAX_LINETABLE_READ_PER_NAMING, or 0 (hw_python_namer_names_only) */
    unsigned lines_cut;    /* frames of this naming shown at their first line for want of budget */
    code_info scratch; /* when the table is full */
    uint64_t name_key; /* the interned str "_name", once found (python_threads.c) */
};

/* A str object as UTF-8 (malloc'd), or NULL when `addr` is not a compact
 * str the interpreter made (names and file names always are). */
char *hw_python_read_str(const hw_python_namer *n, uint64_t addr);

/* The qualified name (or before 3.11 the name) and file of the code object
 * at `code`, valid until the namer's next use: false when it is not one. */
bool hw_python_code_names(hw_python_namer *n, uint64_t code, const char **name, const char **file);

/* The name threading gave the thread whose Python frames are `st` (malloc'd),
 * or NULL when it has none that can be read. */
char *hw_python_thread_name(hw_python_namer *n, const hw_interp_stack *st);

#endif
