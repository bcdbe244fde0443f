/*
 * test_perf_sampler.c - early samples taken by the kernel.
 *
 * The record parser (perf_record.h) on records built by hand: a whole
 * sample, one without user registers, a lost-samples notice, other record
 * types, and every malformed shape (each truncation of a valid record, a
 * size field that disagrees, a stack copy longer than its room).
 *
 * The sampler (perf_sampler.h) for real, on a thread of this test that
 * spins, with each trigger (the task clock; the timer tick, for which the
 * test mounts tracefs when it runs as root and finds none): samples arrive
 * only once enabled, each with the thread's pc inside the spinning function
 * and a stack copy starting at its stack pointer; the event's count grows
 * while it runs; nothing arrives while disabled.  The tick's interval
 * rounding and the reading of its tracepoint id from a tracefs laid out by
 * hand, malformed ids included.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/parse/perf_record.h"
#include "agent/capture/capture.h"

/* ---- records built by hand ---------------------------------------------- */

typedef struct record {
    unsigned char bytes[4096];
    size_t len;
} record;

static void put(record *r, const void *p, size_t n)
{
    memcpy(r->bytes + r->len, p, n);
    r->len += n;
}

static void put_u64(record *r, uint64_t v)
{
    put(r, &v, sizeof v);
}

static void begin(record *r, uint32_t type)
{
    memset(r, 0, sizeof *r);
    uint32_t t = type;
    uint16_t misc = 0, size = 0;
    put(r, &t, 4);
    put(r, &misc, 2);
    put(r, &size, 2);
}

static void end(record *r)
{
    uint16_t size = (uint16_t)r->len;
    memcpy(r->bytes + 6, &size, 2);
}

/* A sample at `time` with registers 100+i and `stack_len` of `room` stack bytes. */
static void sample_record(record *r, uint64_t time, uint64_t room, uint64_t stack_len)
{
    begin(r, PERF_RECORD_SAMPLE);
    put_u64(r, time);
    put_u64(r, PERF_SAMPLE_REGS_ABI_64);
    for (uint64_t i = 0; i < HW_PERF_REGS_COUNT; i++)
        put_u64(r, 100 + i);
    put_u64(r, room);
    for (uint64_t i = 0; i < room; i++) {
        unsigned char b = (unsigned char)i;
        put(r, &b, 1);
    }
    if (room)
        put_u64(r, stack_len);
    end(r);
}

static void test_whole_sample(void **state)
{
    (void)state;
    record r;
    sample_record(&r, 123456789, 64, 40);
    hw_perf_sample s;
    assert_int_equal(hw_perf_record_size(r.bytes), r.len);
    assert_int_equal(hw_perf_record_parse(r.bytes, r.len, &s, NULL), HW_PERF_RECORD_SAMPLE);
    assert_int_equal(s.time_ns, 123456789);
    assert_int_equal(s.regs[HW_PERF_AX], 100);
    assert_int_equal(s.regs[HW_PERF_SP], 100 + HW_PERF_SP);
    assert_int_equal(s.regs[HW_PERF_IP], 100 + HW_PERF_IP);
    assert_int_equal(s.regs[HW_PERF_R15], 100 + HW_PERF_R15);
    assert_int_equal(s.stack_len, 40);
    assert_non_null(s.stack);
    assert_int_equal(s.stack[39], 39);
    assert_true(s.stack >= r.bytes && s.stack + s.stack_len <= r.bytes + r.len);
}

static void test_no_user_registers(void **state)
{
    (void)state;
    record r;
    begin(&r, PERF_RECORD_SAMPLE);
    put_u64(&r, 5);
    put_u64(&r, PERF_SAMPLE_REGS_ABI_NONE);
    put_u64(&r, 0); /* no stack */
    end(&r);
    assert_int_equal(hw_perf_record_parse(r.bytes, r.len, NULL, NULL), HW_PERF_RECORD_NO_USER);
    /* A 32-bit task's registers are not read. */
    begin(&r, PERF_RECORD_SAMPLE);
    put_u64(&r, 5);
    put_u64(&r, PERF_SAMPLE_REGS_ABI_32);
    end(&r);
    assert_int_equal(hw_perf_record_parse(r.bytes, r.len, NULL, NULL), HW_PERF_RECORD_NO_USER);
}

static void test_lost_and_other(void **state)
{
    (void)state;
    record r;
    begin(&r, PERF_RECORD_LOST);
    put_u64(&r, 1);  /* id */
    put_u64(&r, 17); /* lost */
    end(&r);
    uint64_t lost = 0;
    assert_int_equal(hw_perf_record_parse(r.bytes, r.len, NULL, &lost), HW_PERF_RECORD_LOST);
    assert_int_equal(lost, 17);
    begin(&r, PERF_RECORD_THROTTLE);
    put_u64(&r, 1);
    end(&r);
    assert_int_equal(hw_perf_record_parse(r.bytes, r.len, NULL, NULL), HW_PERF_RECORD_OTHER);
}

static void test_malformed(void **state)
{
    (void)state;
    record r;
    sample_record(&r, 1, 64, 64);
    /* Every truncation: the size field no longer matches, or a field runs out. */
    for (size_t len = 0; len < r.len; len++) {
        record t = r;
        uint16_t size = (uint16_t)len;
        memcpy(t.bytes + 6, &size, 2);
        hw_perf_record_kind k = hw_perf_record_parse(t.bytes, len, NULL, NULL);
        assert_int_equal(k, HW_PERF_RECORD_BAD);
    }
    /* The header's size disagrees with the length given. */
    assert_int_equal(hw_perf_record_parse(r.bytes, r.len - 8, NULL, NULL), HW_PERF_RECORD_BAD);
    /* The copied length is larger than the room. */
    sample_record(&r, 1, 64, 65);
    assert_int_equal(hw_perf_record_parse(r.bytes, r.len, NULL, NULL), HW_PERF_RECORD_BAD);
    /* The room is larger than the record. */
    sample_record(&r, 1, 64, 8);
    uint64_t huge = 1u << 20;
    size_t room_at = 8 + 16 + HW_PERF_REGS_COUNT * 8;
    memcpy(r.bytes + room_at, &huge, 8);
    assert_int_equal(hw_perf_record_parse(r.bytes, r.len, NULL, NULL), HW_PERF_RECORD_BAD);
    assert_int_equal(hw_perf_record_parse(NULL, 0, NULL, NULL), HW_PERF_RECORD_BAD);
}

/* ---- the sampler on a spinning thread of this test ------------------------ */

static atomic_int spinning = 1;
static atomic_int spinner_tid;

__attribute__((noinline)) static void spin_for_the_sampler(void)
{
    volatile uint64_t x = 0;
    while (atomic_load_explicit(&spinning, memory_order_relaxed))
        x = x * 2862933555777941757ull + 3037000493ull;
}

static void *spinner(void *arg)
{
    (void)arg;
    atomic_store(&spinner_tid, (int)syscall(SYS_gettid));
    spin_for_the_sampler();
    return NULL;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sample_a_spinning_thread(hw_perf_trigger trigger)
{
    pthread_t t;
    atomic_store(&spinning, 1);
    assert_int_equal(pthread_create(&t, NULL, spinner, NULL), 0);
    while (atomic_load(&spinner_tid) == 0)
        sched_yield();
    char why[160] = "";
    hw_perf_sampler *s = hw_perf_sampler_open(atomic_load(&spinner_tid), 5000000, HW_PERF_SAMPLE_STACK_BYTES, trigger,
                                              why, sizeof why);
    if (s == NULL && (errno == ENOENT || errno == ENOSYS || errno == EOPNOTSUPP)) {
        atomic_store(&spinning, 0);
        pthread_join(t, NULL);
        skip(); /* no perf events in this kernel */
    }
    assert_non_null(s);
    assert_int_equal(hw_perf_sampler_trigger(s), trigger);
    /* 256 KiB (or 64 KiB short of locked memory) of 8 KiB stack copies */
    size_t room = hw_perf_sampler_ring_samples(s);
    assert_true(room == 31 || room == 7);
    struct timespec res;
    assert_int_equal(clock_getres(CLOCK_MONOTONIC_COARSE, &res), 0);
    uint64_t tick = (uint64_t)res.tv_nsec;
    uint64_t period = hw_perf_sampler_period_ns(s);
    if (trigger == HW_PERF_TRIGGER_TICK)
        assert_int_equal(period, hw_perf_ticks_per_sample(5000000, tick) * tick);
    else
        assert_int_equal(period, 5000000);

    /* Disabled: nothing comes. */
    uint64_t until = now_ns() + 60000000;
    hw_thread_snapshot snap;
    uint64_t time_ns;
    while (now_ns() < until)
        assert_int_equal(hw_perf_sampler_next(s, &snap, &time_ns), 0);

    uint64_t enabled_at = now_ns();
    assert_int_equal(hw_perf_sampler_enable(s, true), 0);
    int got = 0;
    uint64_t deadline = now_ns() + 20ull * 1000000000ull;
    uintptr_t fn = (uintptr_t)&spin_for_the_sampler;
    while (got < 5 && now_ns() < deadline) {
        if (hw_perf_sampler_next(s, &snap, &time_ns) != 1) {
            usleep(1000);
            continue;
        }
        got++;
        assert_int_equal(snap.status, HW_THREAD_CAPTURED);
        assert_true(time_ns >= enabled_at && time_ns <= now_ns());
        /* The pc is in the spinning function (its body is far below 4 KiB). */
        assert_true(snap.regs.rip >= fn && snap.regs.rip < fn + 4096);
        assert_int_equal(snap.stack_start, snap.regs.rsp);
        assert_true(snap.stack_len > 0 && snap.stack_len <= HW_PERF_SAMPLE_STACK_BYTES);
        assert_non_null(snap.stack);
        free(snap.stack);
    }
    assert_int_equal(got, 5);
    /* The count: CPU time for the task clock, ticks for the tick. */
    uint64_t count = hw_perf_sampler_count(s);
    assert_true(count != UINT64_MAX);
    if (trigger == HW_PERF_TRIGGER_TICK)
        assert_true(count >= 5 * hw_perf_ticks_per_sample(5000000, tick));
    else
        assert_true(count >= 5 * 5000000ull);

    /* Disabled again: the count stops growing and no sample follows the drain. */
    assert_int_equal(hw_perf_sampler_enable(s, false), 0);
    while (hw_perf_sampler_next(s, &snap, &time_ns) == 1)
        free(snap.stack);
    uint64_t frozen = hw_perf_sampler_count(s);
    until = now_ns() + 60000000;
    while (now_ns() < until)
        assert_int_equal(hw_perf_sampler_next(s, &snap, &time_ns), 0);
    assert_int_equal(hw_perf_sampler_count(s), frozen);

    hw_perf_sampler_close(s);
    atomic_store(&spinning, 0);
    pthread_join(t, NULL);
    atomic_store(&spinning, 1);
    atomic_store(&spinner_tid, 0);
}

static void test_sampler_on_the_task_clock(void **state)
{
    (void)state;
    sample_a_spinning_thread(HW_PERF_TRIGGER_TASK_CLOCK);
}

/* The tick needs its tracepoint's id from tracefs: mounted here when this
 * test runs as root and finds none (a machine without systemd may have
 * none mounted). */
static void test_sampler_on_the_timer_tick(void **state)
{
    (void)state;
    if (hw_perf_tick_tracepoint_id("/sys/kernel/tracing") < 0 && geteuid() == 0)
        (void)mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL);
    if (hw_perf_tick_tracepoint_id("/sys/kernel/tracing") < 0 &&
        hw_perf_tick_tracepoint_id("/sys/kernel/debug/tracing") < 0)
        skip(); /* no tracefs to be had: the agent uses the task clock */
    sample_a_spinning_thread(HW_PERF_TRIGGER_TICK);
}

/* Nearest whole number of ticks, at least one. */
static void test_ticks_per_sample(void **state)
{
    (void)state;
    assert_int_equal(hw_perf_ticks_per_sample(5000000, 4000000), 1);   /* 1.25 */
    assert_int_equal(hw_perf_ticks_per_sample(6000000, 4000000), 2);   /* 1.5 rounds up */
    assert_int_equal(hw_perf_ticks_per_sample(50000000, 4000000), 13); /* 12.5 */
    assert_int_equal(hw_perf_ticks_per_sample(48000000, 4000000), 12);
    assert_int_equal(hw_perf_ticks_per_sample(1000000, 4000000), 1);   /* below one tick */
    assert_int_equal(hw_perf_ticks_per_sample(0, 4000000), 1);
    assert_int_equal(hw_perf_ticks_per_sample(50000000, 1000000), 50); /* HZ 1000 */
    assert_int_equal(hw_perf_ticks_per_sample(50000000, 3333333), 15); /* HZ 300 */
    assert_int_equal(hw_perf_ticks_per_sample(5000000, 0), 1);
}

/* A tracefs laid out by hand: the id file's text is checked. */
static void write_id(const char *root, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/events/irq_vectors/local_timer_entry/id", root);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_tick_tracepoint_id(void **state)
{
    (void)state;
    char root[] = "/tmp/hw-tracefs-XXXXXX";
    assert_non_null(mkdtemp(root));
    assert_int_equal(hw_perf_tick_tracepoint_id(root), -1); /* nothing there */
    char path[512];
    const char *dirs[] = {"/events", "/events/irq_vectors", "/events/irq_vectors/local_timer_entry"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s%s", root, dirs[i]);
        assert_int_equal(mkdir(path, 0700), 0);
    }
    write_id(root, "165\n");
    assert_int_equal(hw_perf_tick_tracepoint_id(root), 165);
    write_id(root, "42");
    assert_int_equal(hw_perf_tick_tracepoint_id(root), 42);
    const char *bad[] = {"", "\n", "abc\n", "0\n", "-5\n", "12x\n", "99999999999\n", "165 \n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_id(root, bad[i]);
        assert_int_equal(hw_perf_tick_tracepoint_id(root), -1);
    }
    snprintf(path, sizeof path, "%s/events/irq_vectors/local_timer_entry/id", root);
    unlink(path);
    for (size_t i = 3; i-- > 0;) {
        snprintf(path, sizeof path, "%s%s", root, dirs[i]);
        rmdir(path);
    }
    rmdir(root);
}


static void test_sampler_refuses_a_missing_thread(void **state)
{
    (void)state;
    char why[160] = "";
    hw_perf_sampler *s = hw_perf_sampler_open(0x3ffffff0, 5000000, 4096, HW_PERF_TRIGGER_ANY, why, sizeof why);
    assert_null(s);
    assert_true(errno == ESRCH);
    assert_true(strstr(why, "perf_event_open") != NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_sample),
        cmocka_unit_test(test_no_user_registers),
        cmocka_unit_test(test_lost_and_other),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_sampler_on_the_task_clock),
        cmocka_unit_test(test_sampler_on_the_timer_tick),
        cmocka_unit_test(test_ticks_per_sample),
        cmocka_unit_test(test_tick_tracepoint_id),
        cmocka_unit_test(test_sampler_refuses_a_missing_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
