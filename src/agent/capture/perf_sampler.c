/*
 * perf_sampler.c - early samples through a per-thread perf event
 * (perf_sampler.h): perf_event_open on the timer tick's tracepoint or on
 * the task clock, a ring buffer of
 * HW_PERF_RING_PAGES data pages mapped read-write (the agent moves the tail),
 * records copied out of the ring (they may wrap) and parsed by
 * perf_record.c.
 *
 * The event never wakes the agent (nobody polls its descriptor): the agent
 * reads the ring on its own schedule, so a sample costs the thread only the
 * kernel's copy.
 */
#include "perf_sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/parse/perf_record.h"

/* 256 KiB: 31 samples of an 8 KiB stack copy, so that the agent can read
 * the ring only every 60-100 ms while the thread runs; 64 KiB (7 samples)
 * where locked memory is short (a non-root agent past
 * perf_event_mlock_kb). */
#define HW_PERF_RING_PAGES 64u
#define HW_PERF_RING_PAGES_SHORT 16u
#define MAX_RECORD 65536u      /* a record's size field is 16 bits */

struct hw_perf_sampler {
    int fd;
    hw_perf_trigger trigger;
    uint64_t period_ns;
    void *map;
    size_t map_len;
    size_t page_size;
    size_t ring_pages;
    uint32_t stack_bytes; /* copied per sample */
    uint64_t lost;
    unsigned char record[MAX_RECORD];
};

/* Where tracefs is usually mounted, newest first. */
static const char *const tracefs_paths[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};

long hw_perf_tick_tracepoint_id(const char *tracefs)
{
#if defined(__x86_64__)
    char path[256];
    snprintf(path, sizeof path, "%s/events/irq_vectors/local_timer_entry/id", tracefs);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char text[32];
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    char *end;
    errno = 0;
    long id = strtol(text, &end, 10);
    if (errno != 0 || end == text || (*end != '\n' && *end != '\0') || id <= 0 || id > 0x7fffffff)
        return -1;
    return id;
#else
    (void)tracefs;
    return -1; /* the tracepoint is x86's local APIC timer */
#endif
}

uint64_t hw_perf_ticks_per_sample(uint64_t interval_ns, uint64_t tick_ns)
{
    if (tick_ns == 0)
        return 1;
    uint64_t ticks = interval_ns / tick_ns + (interval_ns % tick_ns >= tick_ns - tick_ns / 2 ? 1 : 0);
    return ticks > 0 ? ticks : 1;
}

/* The kernel's tick: the resolution of its coarse clocks is one jiffy. */
static uint64_t tick_ns(void)
{
    struct timespec res;
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0 || res.tv_sec != 0 || res.tv_nsec <= 0)
        return 4000000; /* HZ 250, Debian's */
    return (uint64_t)res.tv_nsec;
}

static int open_event(struct perf_event_attr *attr, pid_t tid)
{
    return (int)syscall(SYS_perf_event_open, attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

hw_perf_sampler *hw_perf_sampler_open(pid_t tid, uint64_t interval_ns, uint32_t stack_bytes, hw_perf_trigger trigger,
                                      char *why, size_t len)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.sample_type = PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    attr.sample_regs_user = HW_PERF_REGS_MASK;
    attr.sample_stack_user = stack_bytes & ~7u;
    attr.disabled = 1;
    attr.exclude_hv = 1;
    attr.use_clockid = 1;
    attr.clockid = CLOCK_MONOTONIC;
    attr.watermark = 1;
    long page = sysconf(_SC_PAGESIZE);
    size_t page_size = page > 0 ? (size_t)page : 4096;
    /* Never reached before the ring is full (the kernel caps it at the
     * ring's size): a wake-up would cost the thread an interrupt. */
    attr.wakeup_watermark = (uint32_t)(HW_PERF_RING_PAGES * page_size - 1);

    int fd = -1;
    uint64_t period_ns = interval_ns > 0 ? interval_ns : 1;
    hw_perf_trigger used = HW_PERF_TRIGGER_TASK_CLOCK;
    if (trigger != HW_PERF_TRIGGER_TASK_CLOCK) {
        long id = -1;
        for (size_t i = 0; id < 0 && i < sizeof tracefs_paths / sizeof tracefs_paths[0]; i++)
            id = hw_perf_tick_tracepoint_id(tracefs_paths[i]);
        if (id > 0) {
            /* A tracepoint fires in the kernel: kernel-side events, but no
             * kernel data is sampled (no PERF_SAMPLE_RAW, no callchain). */
            uint64_t tick = tick_ns();
            uint64_t ticks = hw_perf_ticks_per_sample(interval_ns, tick);
            attr.type = PERF_TYPE_TRACEPOINT;
            attr.config = (uint64_t)id;
            attr.sample_period = ticks;
            attr.exclude_kernel = 0;
            fd = open_event(&attr, tid);
            if (fd >= 0) {
                used = HW_PERF_TRIGGER_TICK;
                period_ns = ticks * tick;
            } else if (errno == ESRCH || trigger == HW_PERF_TRIGGER_TICK) {
                int e = errno;
                snprintf(why, len, "perf_event_open (timer tick): %s", strerror(e));
                errno = e;
                return NULL;
            }
        } else if (trigger == HW_PERF_TRIGGER_TICK) {
            snprintf(why, len, "the timer tick's tracepoint is not readable (tracefs not mounted?)");
            errno = ENOENT;
            return NULL;
        }
    }
    if (fd < 0) {
        attr.type = PERF_TYPE_SOFTWARE;
        attr.config = PERF_COUNT_SW_TASK_CLOCK;
        attr.sample_period = period_ns;
        attr.exclude_kernel = 1; /* user stacks only; also what perf_event_paranoid 2 allows */
        fd = open_event(&attr, tid);
    }
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
    s->trigger = used;
    s->period_ns = period_ns;
    s->stack_bytes = (uint32_t)attr.sample_stack_user;
    s->page_size = page_size;
    s->ring_pages = HW_PERF_RING_PAGES;
    s->map_len = (1 + s->ring_pages) * page_size;
    s->map = mmap(NULL, s->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (s->map == MAP_FAILED && (errno == EPERM || errno == ENOMEM)) {
        s->ring_pages = HW_PERF_RING_PAGES_SHORT;
        s->map_len = (1 + s->ring_pages) * page_size;
        s->map = mmap(NULL, s->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
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

hw_perf_trigger hw_perf_sampler_trigger(const hw_perf_sampler *s)
{
    return s->trigger;
}

uint64_t hw_perf_sampler_period_ns(const hw_perf_sampler *s)
{
    return s->period_ns;
}

size_t hw_perf_sampler_ring_samples(const hw_perf_sampler *s)
{
    /* a sample record: header, time, ABI, registers, stack size, stack, its
     * dynamic size */
    size_t record = 8 + 8 + 8 + HW_PERF_REGS_COUNT * 8 + 8 + (size_t)s->stack_bytes + 8;
    return s->ring_pages * s->page_size / record;
}

const char *hw_perf_trigger_name(hw_perf_trigger trigger)
{
    return trigger == HW_PERF_TRIGGER_TICK ? "timer_tick" : "task_clock";
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

uint64_t hw_perf_sampler_count(hw_perf_sampler *s)
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
    size_t size = s->ring_pages * s->page_size;
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
