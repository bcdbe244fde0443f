/*
 * fuzz_js_memory.c - the readers of a node process's memory (js_walk.c in
 * the stop, js_names.c after it) on a forged memory and forged stacks:
 * every read of the process goes through hw_js_peek, which this target
 * defines to read the input instead.
 *
 * Input, little-endian (tools/record_js_memory.c writes real ones):
 *
 *   0    u32  V: metadata values that follow (hw_js_metadata_names' order)
 *   4    u32  T: threads (1-4; mod 4, 0 is 4); the first is the hung one
 *   8    V x i32 the values
 *        T x {u64 rip, u64 rbp, u64 stack start, u32 length, bytes}: each
 *        thread's registers and the copy of its stack
 *        segments to the end: {u64 address, u32 length, bytes}; a read is
 *        answered when it lies wholly within one segment
 *
 * Proves: a layout is used only when hw_js_layout_from accepts its values;
 * no crash, leak, overflow or read beyond the input, whatever the stacks
 * and the heap hold (frame chains that loop or leave the copy, maps that
 * point anywhere, strings of every representation nested and cyclic,
 * scope infos, line ends and source position tables of any size); every
 * thread's frames stay within the room the capture gave them; the stop's
 * reads are bounded; the names merge into a native backtrace with no more
 * than its frames and the JavaScript ones; every sample key names again or
 * fails cleanly.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "forged_memory.h"
#include "agent/symbols/js_internal.h"

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            __builtin_trap();                                                                                          \
    } while (0)

#define MAX_VALUES 64u
#define MAX_THREADS 4u
#define FRAMES_PER_THREAD 32u /* room per thread, smaller than the agent's so it fills */
#define WALK_LIMIT 4096u      /* js_walk.c's */

static unsigned long peeks; /* reads asked for by one input */

bool hw_js_peek(pid_t pid, uint64_t addr, void *buf, size_t len)
{
    (void)pid;
    peeks++;
    return forged_memory_read(addr, buf, len);
}

typedef struct value_table {
    const int32_t *values;
    size_t count;
} value_table;

static bool value_of(void *ctx, const char *name, int32_t *v)
{
    const value_table *t = ctx;
    const char *names[MAX_VALUES];
    size_t n = hw_js_metadata_names(names, MAX_VALUES);
    for (size_t i = 0; i < n && i < t->count; i++)
        if (strcmp(names[i], name) == 0) {
            memcpy(v, &t->values[i], sizeof *v);
            return true;
        }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint32_t value_count, thread_count;
    memcpy(&value_count, data, 4);
    memcpy(&thread_count, data + 4, 4);
    value_count %= MAX_VALUES + 1;
    thread_count %= MAX_THREADS;
    if (thread_count == 0)
        thread_count = MAX_THREADS;
    size_t at = 8;
    if (size - at < (size_t)value_count * 4)
        return 0;
    int32_t values[MAX_VALUES];
    memcpy(values, data + at, (size_t)value_count * 4);
    at += (size_t)value_count * 4;

    static hw_js_reader reader;
    memset(&reader, 0, sizeof reader);
    value_table table = {values, value_count};
    if (hw_js_layout_from(&reader.target.layout, value_of, &table) != NULL)
        return 0;
    reader.target.found = reader.target.readable = true;

    hw_process_snapshot snap;
    memset(&snap, 0, sizeof snap);
    snap.pid = 1;
    snap.threads = calloc(thread_count, sizeof *snap.threads);
    CHECK(snap.threads != NULL);
    for (uint32_t t = 0; t < thread_count && size - at >= 28; t++) {
        hw_thread_snapshot *th = &snap.threads[snap.thread_count++];
        uint32_t len;
        memcpy(&th->regs.rip, data + at, 8);
        memcpy(&th->regs.rbp, data + at + 8, 8);
        memcpy(&th->stack_start, data + at + 16, 8);
        memcpy(&len, data + at + 24, 4);
        at += 28;
        if (len > size - at)
            len = (uint32_t)(size - at);
        th->stack = malloc(len ? len : 1);
        CHECK(th->stack != NULL);
        memcpy(th->stack, data + at, len);
        th->stack_len = len;
        at += len;
        th->tid = (pid_t)(t + 1);
        th->is_target = t == 0;
        th->status = HW_THREAD_CAPTURED;
        th->interp.capacity = FRAMES_PER_THREAD;
        th->interp.frames = calloc(FRAMES_PER_THREAD, sizeof *th->interp.frames);
        CHECK(th->interp.frames != NULL);
    }
    forged_memory_parse(data, size, at);
    peeks = 0;

    hw_js_read_stacks(&reader, &snap);
    for (size_t t = 0; t < snap.thread_count; t++)
        CHECK(snap.threads[t].interp.count <= FRAMES_PER_THREAD);
    /* The stop's work is bounded: a few reads per frame link followed. */
    CHECK(peeks <= (unsigned long)snap.thread_count * WALK_LIMIT * 40);

    hw_js_namer *namer = hw_js_namer_new(&reader.target, 1);
    CHECK(namer != NULL);
    for (int pass = 0; pass < 2; pass++) { /* the second from the namer's kept names */
        hw_runtime_names *names = hw_js_name_threads(namer, &snap, pass == 1);
        for (size_t t = 0; names != NULL && t < snap.thread_count; t++) {
            CHECK(names[t].count <= snap.threads[t].interp.count);
            /* A native walk that met some of the frames (every other one),
             * and a frame of its own. */
            hw_backtrace bt = {0};
            bt.frames = calloc(names[t].count + 1, sizeof *bt.frames);
            CHECK(bt.frames != NULL);
            for (unsigned i = 0; i < names[t].count; i += 2)
                bt.frames[bt.count++].instruction_addr = names[t].frames[i].instruction_addr;
            bt.frames[bt.count].symbol_name = strdup("uv_run");
            CHECK(bt.frames[bt.count].symbol_name != NULL);
            bt.count++;
            size_t native = bt.count;
            CHECK(hw_js_merge(&names[t], &bt) == 0);
            CHECK(bt.count <= native + names[t].count);
            for (size_t i = 0; i < bt.count; i++) {
                hw_frame again;
                if (bt.frames[i].runtime_key != 0 && hw_js_frame_from_key(namer, bt.frames[i].runtime_key, &again) == 0)
                    hw_frame_clear(&again);
            }
            hw_backtrace_free(&bt);
        }
        hw_runtime_names_free(names, snap.thread_count);
    }
    hw_js_namer_free(namer);

    for (size_t t = 0; t < snap.thread_count; t++) {
        free(snap.threads[t].interp.frames);
        free(snap.threads[t].stack);
    }
    free(snap.threads);
    return 0;
}
