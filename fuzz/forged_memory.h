/*
 * forged_memory.h - a process's memory made from a fuzz input, for the
 * targets that put it behind a runtime reader's peek function
 * (fuzz_python_memory.c, fuzz_js_memory.c): segments {u64 address, u32
 * length, bytes} to the input's end, and a read answered only when it lies
 * wholly within one of them.  Header-only, fuzz targets only.
 */
#ifndef HANGWATCH_FORGED_MEMORY_H
#define HANGWATCH_FORGED_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FORGED_MAX_SEGMENTS 4096u

typedef struct forged_segment {
    uint64_t addr;
    uint32_t len;
    const uint8_t *bytes;
} forged_segment;

static forged_segment forged_segments[FORGED_MAX_SEGMENTS];
static size_t forged_segment_count;

/* The segments of data[at..size). */
static inline void forged_memory_parse(const uint8_t *data, size_t size, size_t at)
{
    forged_segment_count = 0;
    while (at + 12 <= size && forged_segment_count < FORGED_MAX_SEGMENTS) {
        uint64_t addr;
        uint32_t len;
        memcpy(&addr, data + at, sizeof addr);
        memcpy(&len, data + at + 8, sizeof len);
        at += 12;
        if (len > size - at)
            len = (uint32_t)(size - at);
        forged_segments[forged_segment_count++] = (forged_segment){addr, len, data + at};
        at += len;
    }
}

/* Read `len` bytes at `addr`: false unless one segment holds them all. */
static inline bool forged_memory_read(uint64_t addr, void *buf, size_t len)
{
    if (addr == 0 || addr + len < addr)
        return false;
    for (size_t i = 0; i < forged_segment_count; i++) {
        const forged_segment *s = &forged_segments[i];
        if (addr >= s->addr && addr - s->addr <= s->len && s->len - (addr - s->addr) >= len) {
            memcpy(buf, s->bytes + (addr - s->addr), len);
            return true;
        }
    }
    return false;
}

#endif
