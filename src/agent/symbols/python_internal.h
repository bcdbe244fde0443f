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
#define MAX_STRUCT_READ 512u /* the most bytes read at once from a thread state or frame */

/* Read `len` bytes of process `pid` at `addr`: false when any of it cannot
 * be read (or addr is 0). */
bool hw_py_peek(pid_t pid, uint64_t addr, void *buf, size_t len);

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

#endif
