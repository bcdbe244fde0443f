/*
 * stack_scratch.c - stack-copy buffers touched once and reused by the
 * capturing thread (stack_scratch.h says why).
 *
 * Thread-local: the watch thread (and `hangwatch stack`) capture one
 * process at a time, and a buffer is taken and given back by the same
 * thread, so no lock is needed.  The slots are few and searched in order.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "stack_scratch.h"

typedef struct scratch_slot {
    unsigned char *buf;
    size_t size;
    bool lent;
    bool mapped; /* from mmap (munmap it), else from malloc */
} scratch_slot;

static __thread scratch_slot slots[HW_STACK_SCRATCH_SLOTS];

unsigned char *hw_stack_scratch_touched(size_t size)
{
    unsigned char *buf = malloc(size);
    if (buf != NULL)
        memset(buf, 0, size); /* fault the pages in now, not while a thread waits */
    return buf;
}

/* The hung thread's buffer (the one size over this) has slot 0 to itself,
 * so that other threads' buffers never leave it without one. */
#define LARGE_STACK_BYTES (128u << 10)

/* A buffer to keep, its pages put in by the kernel in one go
 * (MAP_POPULATE): 1.5 MiB of them took 2 ms when faulted in one page at a
 * time on a machine with page-table isolation, 0.25 ms so, and the first
 * capture of the agent's life made the watch thread pay it (a second
 * process's hang was captured that much late).  Else malloc'ed and
 * touched.  NULL when out of memory. */
static unsigned char *kept_buffer(size_t size, bool *mapped)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    *mapped = p != MAP_FAILED;
    return *mapped ? p : hw_stack_scratch_touched(size);
}

unsigned char *hw_stack_scratch_take(size_t size, bool *kept)
{
    *kept = false;
    scratch_slot *empty = NULL;
    size_t first = size > LARGE_STACK_BYTES ? 0 : 1, end = size > LARGE_STACK_BYTES ? 1 : HW_STACK_SCRATCH_SLOTS;
    for (size_t i = first; i < end; i++) {
        scratch_slot *s = &slots[i];
        if (s->buf != NULL && !s->lent && s->size == size) {
            s->lent = true;
            *kept = true;
            return s->buf;
        }
        if (s->buf == NULL && empty == NULL)
            empty = s;
    }
    if (empty == NULL)
        return hw_stack_scratch_touched(size);
    bool mapped = false;
    unsigned char *buf = kept_buffer(size, &mapped);
    if (buf != NULL) {
        *empty = (scratch_slot){.buf = buf, .size = size, .lent = true, .mapped = mapped};
        *kept = true;
    }
    return buf;
}

unsigned char *hw_stack_scratch_give_back(unsigned char *buf, size_t used)
{
    for (size_t i = 0; i < HW_STACK_SCRATCH_SLOTS; i++) {
        scratch_slot *s = &slots[i];
        if (s->buf != buf || !s->lent)
            continue;
        s->lent = false;
        unsigned char *copy = used > 0 && used <= s->size ? malloc(used) : NULL;
        if (copy != NULL)
            memcpy(copy, buf, used);
        return copy;
    }
    return NULL; /* not one of ours: nothing is lent */
}

void hw_stack_scratch_release_all(void)
{
    for (size_t i = 0; i < HW_STACK_SCRATCH_SLOTS; i++) {
        if (slots[i].mapped)
            munmap(slots[i].buf, slots[i].size);
        else
            free(slots[i].buf);
        slots[i] = (scratch_slot){0};
    }
}
