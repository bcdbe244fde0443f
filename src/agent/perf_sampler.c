/*
 * perf_sampler.c - early samples through a per-thread perf event
 * (perf_sampler.h): perf_event_open on the task clock, a ring buffer of
 * HW_PERF_RING_PAGES data pages mapped read-write (the agent moves the tail),
 * records copied out of the ring (they may wrap) and parsed by
 * perf_record.c.
 *
 * The event never wakes the agent (a watermark as large as the ring): the
 * agent reads the ring on its own sampling schedule, so a sample costs the
 * thread only the kernel's copy.
 */
#include "perf_sampler.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../core/perf_record.h"

#define HW_PERF_RING_PAGES 16u /* 64 KiB: several samples of an 8 KiB stack copy */
#define MAX_RECORD 65536u      /* a record's size field is 16 bits */

struct hw_perf_sampler {
    int fd;
    void *map;
    size_t map_len;
    size_t page_size;
    uint64_t lost;
    unsigned char record[MAX_RECORD];
};

hw_perf_sampler *hw_perf_sampler_open(pid_t tid, uint64_t interval_ns, uint32_t stack_bytes, char *why,
                                      size_t len)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.sample_period = interval_ns > 0 ? interval_ns : 1;
    attr.sample_type = PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    attr.sample_regs_user = HW_PERF_REGS_MASK;
    attr.sample_stack_user = stack_bytes & ~7u;
    attr.disabled = 1;
    attr.exclude_kernel = 1; /* user stacks only; also what perf_event_paranoid 2 allows */
    attr.exclude_hv = 1;
    attr.use_clockid = 1;
    attr.clockid = CLOCK_MONOTONIC;
    attr.watermark = 1;
    long page = sysconf(_SC_PAGESIZE);
    size_t page_size = page > 0 ? (size_t)page : 4096;
    attr.wakeup_watermark = (uint32_t)(HW_PERF_RING_PAGES * page_size - 1);

    int fd = (int)syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(why, len, "perf_event_open: %s", e == EACCES || e == EPERM
                                                      ? "not permitted (root, CAP_PERFMON, or perf_event_paranoid <= 2)"
                                                      : strerror(e));
        errno = e;
        return NULL;
    }
    hw_perf_sampler *s = calloc(1, sizeof *s);
    if (s == NULL) {
        close(fd);
        snprintf(why, len, "out of memory");
        errno = ENOMEM;
        return NULL;
    }
    s->fd = fd;
    s->page_size = page_size;
    s->map_len = (1 + HW_PERF_RING_PAGES) * page_size;
    s->map = mmap(NULL, s->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (s->map == MAP_FAILED) {
        int e = errno;
        snprintf(why, len, "mapping the perf ring: %s", strerror(e));
        close(fd);
        free(s);
        errno = e;
        return NULL;
    }
    return s;
}

void hw_perf_sampler_close(hw_perf_sampler *s)
{
    if (s == NULL)
        return;
    munmap(s->map, s->map_len);
    close(s->fd);
    free(s);
}

int hw_perf_sampler_enable(hw_perf_sampler *s, bool on)
{
    if (ioctl(s->fd, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0) != 0)
        return -errno;
    return 0;
}

uint64_t hw_perf_sampler_cpu_ns(hw_perf_sampler *s)
{
    uint64_t count;
    if (read(s->fd, &count, sizeof count) != (ssize_t)sizeof count)
        return UINT64_MAX;
    return count;
}

uint64_t hw_perf_sampler_lost(const hw_perf_sampler *s)
{
    return s->lost;
}

/* Copy `n` bytes at ring offset `from` (wrapping) into `to`. */
static void ring_copy(const unsigned char *data, size_t size, uint64_t from, unsigned char *to, size_t n)
{
    size_t at = (size_t)(from & (size - 1));
    size_t first = n < size - at ? n : size - at;
    memcpy(to, data + at, first);
    memcpy(to + first, data, n - first);
}

int hw_perf_sampler_next(hw_perf_sampler *s, hw_thread_snapshot *out, uint64_t *time_ns)
{
    struct perf_event_mmap_page *meta = s->map;
    const unsigned char *data = (const unsigned char *)s->map + s->page_size;
    size_t size = HW_PERF_RING_PAGES * s->page_size;
    for (;;) {
        uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
        uint64_t tail = meta->data_tail;
        if (head == tail)
            return 0;
        if (head - tail < 8 || head - tail > size) {
            __atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE); /* makes no sense: drop it all */
            return 0;
        }
        unsigned char header[8];
        ring_copy(data, size, tail, header, sizeof header);
        size_t rec_len = hw_perf_record_size(header);
        if (rec_len == 0 || rec_len > head - tail || rec_len > sizeof s->record) {
            __atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
            return 0;
        }
        ring_copy(data, size, tail, s->record, rec_len);
        __atomic_store_n(&meta->data_tail, tail + rec_len, __ATOMIC_RELEASE);

        hw_perf_sample ps;
        uint64_t lost = 0;
        switch (hw_perf_record_parse(s->record, rec_len, &ps, &lost)) {
        case HW_PERF_RECORD_SAMPLE:
            break;
        case HW_PERF_RECORD_LOST:
            s->lost += lost;
            continue;
        case HW_PERF_RECORD_BAD:
            __atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
            return 0;
        default:
            continue;
        }
        memset(out, 0, sizeof *out);
        out->status = HW_THREAD_CAPTURED;
        out->regs.rax = ps.regs[HW_PERF_AX];
        out->regs.rbx = ps.regs[HW_PERF_BX];
        out->regs.rcx = ps.regs[HW_PERF_CX];
        out->regs.rdx = ps.regs[HW_PERF_DX];
        out->regs.rsi = ps.regs[HW_PERF_SI];
        out->regs.rdi = ps.regs[HW_PERF_DI];
        out->regs.rbp = ps.regs[HW_PERF_BP];
        out->regs.rsp = ps.regs[HW_PERF_SP];
        out->regs.rip = ps.regs[HW_PERF_IP];
        out->regs.eflags = ps.regs[HW_PERF_FLAGS];
        out->regs.cs = ps.regs[HW_PERF_CS];
        out->regs.ss = ps.regs[HW_PERF_SS];
        out->regs.r8 = ps.regs[HW_PERF_R8];
        out->regs.r9 = ps.regs[HW_PERF_R9];
        out->regs.r10 = ps.regs[HW_PERF_R10];
        out->regs.r11 = ps.regs[HW_PERF_R11];
        out->regs.r12 = ps.regs[HW_PERF_R12];
        out->regs.r13 = ps.regs[HW_PERF_R13];
        out->regs.r14 = ps.regs[HW_PERF_R14];
        out->regs.r15 = ps.regs[HW_PERF_R15];
        out->stack_start = ps.regs[HW_PERF_SP];
        if (ps.stack_len > 0 && (out->stack = malloc(ps.stack_len)) != NULL) {
            memcpy(out->stack, ps.stack, ps.stack_len);
            out->stack_len = ps.stack_len;
        }
        *time_ns = ps.time_ns;
        return 1;
    }
}
