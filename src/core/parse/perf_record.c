/*
 * perf_record.c - reading the early sampler's PERF_RECORD_SAMPLE records
 * (perf_record.h).  Every field is read with memcpy at a checked offset:
 * a record shorter than its fields say is HW_PERF_RECORD_BAD, never a read
 * past its end.
 */
#include "perf_record.h"

#include <linux/perf_event.h>
#include <string.h>

#define HEADER_BYTES 8u

static int take_u64(const unsigned char *rec, size_t len, size_t *at, uint64_t *v)
{
    if (*at > len || len - *at < sizeof *v)
        return -1;
    memcpy(v, rec + *at, sizeof *v);
    *at += sizeof *v;
    return 0;
}

size_t hw_perf_record_size(const unsigned char *rec)
{
    uint16_t size;
    memcpy(&size, rec + 6, sizeof size);
    return size >= HEADER_BYTES ? size : 0;
}

hw_perf_record_kind hw_perf_record_parse(const unsigned char *rec, size_t len, hw_perf_sample *out, uint64_t *lost)
{
    if (rec == NULL || len < HEADER_BYTES || hw_perf_record_size(rec) != len)
        return HW_PERF_RECORD_BAD;
    uint32_t type;
    memcpy(&type, rec, sizeof type);
    size_t at = HEADER_BYTES;
    if (type == PERF_RECORD_LOST) {
        uint64_t id, count;
        if (take_u64(rec, len, &at, &id) != 0 || take_u64(rec, len, &at, &count) != 0)
            return HW_PERF_RECORD_BAD;
        if (lost)
            *lost = count;
        return HW_PERF_RECORD_LOST;
    }
    if (type != PERF_RECORD_SAMPLE)
        return HW_PERF_RECORD_OTHER;

    hw_perf_sample s = {0};
    uint64_t abi, size;
    if (take_u64(rec, len, &at, &s.time_ns) != 0 || take_u64(rec, len, &at, &abi) != 0)
        return HW_PERF_RECORD_BAD;
    if (abi == PERF_SAMPLE_REGS_ABI_NONE) {
        /* No registers; the stack part is still there (size 0). */
        if (take_u64(rec, len, &at, &size) != 0)
            return HW_PERF_RECORD_BAD;
        return HW_PERF_RECORD_NO_USER;
    }
    if (abi != PERF_SAMPLE_REGS_ABI_64)
        return HW_PERF_RECORD_NO_USER; /* a 32-bit task: not unwound */
    for (size_t i = 0; i < HW_PERF_REGS_COUNT; i++)
        if (take_u64(rec, len, &at, &s.regs[i]) != 0)
            return HW_PERF_RECORD_BAD;
    if (take_u64(rec, len, &at, &size) != 0)
        return HW_PERF_RECORD_BAD;
    if (size > len - at)
        return HW_PERF_RECORD_BAD;
    const unsigned char *data = rec + at;
    at += (size_t)size;
    if (size != 0) {
        uint64_t dyn_size;
        if (take_u64(rec, len, &at, &dyn_size) != 0 || dyn_size > size)
            return HW_PERF_RECORD_BAD;
        s.stack = data;
        s.stack_len = (size_t)dyn_size;
    }
    if (out)
        *out = s;
    return HW_PERF_RECORD_SAMPLE;
}
