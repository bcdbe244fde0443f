/*
 * fuzz_python_memory.c - the readers of a Python process's memory
 * (python_frames.c in the stop, python_names.c and python_threads.c after
 * it, python_debug_offsets.c for 3.13), each version's, on a forged memory:
 * every read the readers make goes through hw_py_peek, which this target
 * defines to read the input instead of a process.
 *
 * Input, little-endian (record_python_memory.c writes real ones):
 *
 *   0    u8   reader: 0-5 the generated table of 3.8 .. 3.13, 6 the 3.13
 *             layout from the debug offsets at the runtime (others: mod 7)
 *   1    u8   threads (1-8; mod 8, 0 is 8); the first is the hung one
 *   8    u64  _PyRuntime, then the code, str, bytes and frame type objects
 *   48   8 x  {u32 tid, u32 unused, u64 fs base}
 *   176  segments to the end: {u64 address, u32 length, bytes}; a read is
 *        answered when it lies wholly within one segment
 *
 * Proves: every generated table keeps the readers within the records they
 * read (hw_python_layout_fits); no crash, leak, overflow or read beyond the
 * input; every
 * thread's frames stay within the room the capture gave them; a thread's
 * Python frames merge into a native backtrace with at most its own native
 * frames and the Python ones; a forged interpreter (frames that loop,
 * thread states that point at themselves, wrong debug offsets, strings and
 * tables of any size) is read with bounded work.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "forged_memory.h"
#include "agent/symbols/python_internal.h"
#include "agent/symbols/python_layouts.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

#define HEADER_BYTES 176u
#define MAX_THREADS 8u
#define FRAMES_PER_THREAD 32u /* room per thread, smaller than the agent's so it fills */

static unsigned long peeks; /* reads asked for by one input */

bool hw_py_peek(pid_t pid, uint64_t addr, void *buf, size_t len)
{
    (void)pid;
    peeks++;
    return forged_memory_read(addr, buf, len);
}

static uint64_t u64_at(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint32_t u32_at(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* A native backtrace as the unwinder gives one: a wait, three evaluation
 * calls, main. */
static void native_backtrace(hw_backtrace *bt)
{
    static const char *const names[] = {"clock_nanosleep", "_PyEval_EvalFrameDefault", "_PyEval_EvalFrameDefault",
                                        "_PyEval_EvalFrameDefault.cold", "main"};
    size_t n = sizeof names / sizeof names[0];
    memset(bt, 0, sizeof *bt);
    bt->frames = calloc(n, sizeof *bt->frames);
    CHECK(bt->frames != NULL);
    for (size_t i = 0; i < n; i++) {
        bt->frames[i].symbol_name = strdup(names[i]);
        CHECK(bt->frames[i].symbol_name != NULL);
        bt->frames[i].instruction_addr = 0x401000 + i;
    }
    bt->count = n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEADER_BYTES)
        return 0;
    forged_memory_parse(data, size, HEADER_BYTES);
    peeks = 0;

    hw_python_target py;
    memset(&py, 0, sizeof py);
    py.found = true;
    py.runtime_addr = u64_at(data + 8);
    py.code_type = u64_at(data + 16);
    py.unicode_type = u64_at(data + 24);
    py.bytes_type = u64_at(data + 32);
    py.frame_type = u64_at(data + 40);
    unsigned reader = data[0] % 7u;
    if (reader < 6) {
        py.layout = *hw_python_layouts[reader];
        py.readable = true;
        CHECK(hw_python_layout_fits(&py.layout)); /* the generated tables keep the readers' bounds */
    } else if (!hw_python_read_debug_offsets(1, &py) || !py.readable) {
        CHECK(py.readable || py.why_not[0] != '\0' || py.version[0] == '\0');
        return 0;
    }

    size_t count = data[1] % MAX_THREADS;
    if (count == 0)
        count = MAX_THREADS;
    hw_process_snapshot snap;
    memset(&snap, 0, sizeof snap);
    snap.pid = 1;
    snap.thread_count = count;
    snap.threads = calloc(count, sizeof *snap.threads);
    CHECK(snap.threads != NULL);
    for (size_t t = 0; t < count; t++) {
        hw_thread_snapshot *th = &snap.threads[t];
        th->tid = (pid_t)u32_at(data + 48 + 16 * t);
        th->regs.fs_base = u64_at(data + 48 + 16 * t + 8);
        th->is_target = t == 0;
        th->status = HW_THREAD_CAPTURED;
        th->interp.capacity = FRAMES_PER_THREAD;
        th->interp.frames = calloc(FRAMES_PER_THREAD, sizeof *th->interp.frames);
        CHECK(th->interp.frames != NULL);
    }

    hw_python_read_stacks(&py, &snap);
    unsigned long stop_peeks = peeks;
    for (size_t t = 0; t < count; t++)
        CHECK(snap.threads[t].interp.count <= FRAMES_PER_THREAD);
    /* The stop's work is bounded: thread states, frames, the GIL. */
    CHECK(stop_peeks <= 2 * MAX_INTERPRETERS + MAX_THREAD_STATES + 4 * MAX_THREADS * FRAMES_PER_THREAD + 16);

    hw_python_namer *namer = hw_python_namer_new(&py, 1);
    CHECK(namer != NULL);
    for (int pass = 0; pass < 2; pass++) { /* the second from the namer's kept names */
        hw_runtime_names *names = hw_python_name_threads(namer, &snap, pass == 1);
        for (size_t t = 0; names != NULL && t < count; t++) {
            CHECK(names[t].count <= snap.threads[t].interp.count);
            hw_backtrace bt;
            native_backtrace(&bt);
            size_t native = bt.count;
            CHECK(hw_python_merge(&names[t], &bt) == 0);
            CHECK(bt.count <= native + names[t].count);
            for (size_t i = 0; i < bt.count; i++) {
                hw_frame again;
                if (bt.frames[i].runtime_key != 0 &&
                    hw_python_frame_from_key(namer, bt.frames[i].runtime_key, &again) == 0)
                    hw_frame_clear(&again);
            }
            hw_backtrace_free(&bt);
        }
        hw_runtime_names_free(names, count);
    }
    hw_python_namer_free(namer);

    for (size_t t = 0; t < count; t++)
        free(snap.threads[t].interp.frames);
    free(snap.threads);
    return 0;
}
