/*
 * perf_record.h - reading the kernel's sample records (PERF_RECORD_SAMPLE)
 * of the early sampler's perf event: time, user registers and a copy of the
 * top of the user stack.
 *
 * Pure code over caller-provided bytes, so it can be tested and fuzzed on
 * its own: every length is checked against the record before it is used.
 * The layout is the one perf_event_open(2) gives for sample_type
 * PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER with
 * HW_PERF_REGS_MASK as sample_regs_user (x86-64).
 */
#ifndef HANGWATCH_PERF_RECORD_H
#define HANGWATCH_PERF_RECORD_H

#include <stddef.h>
#include <stdint.h>

/* x86-64's general registers in perf's numbering: AX..SS (0-11) and
 * R8..R15 (16-23); DS..GS (12-15) are not sampled on x86-64. */
#define HW_PERF_REGS_MASK 0x00ff0fffull
#define HW_PERF_REGS_COUNT 20

/* Indexes into hw_perf_sample.regs (the mask's bits in ascending order). */
enum {
    HW_PERF_AX, HW_PERF_BX, HW_PERF_CX, HW_PERF_DX, HW_PERF_SI, HW_PERF_DI, HW_PERF_BP, HW_PERF_SP, HW_PERF_IP,
    HW_PERF_FLAGS, HW_PERF_CS, HW_PERF_SS, HW_PERF_R8, HW_PERF_R9, HW_PERF_R10, HW_PERF_R11, HW_PERF_R12,
    HW_PERF_R13, HW_PERF_R14, HW_PERF_R15
};

typedef struct hw_perf_sample {
    uint64_t time_ns;
    uint64_t regs[HW_PERF_REGS_COUNT];
    const unsigned char *stack; /* points into the record */
    size_t stack_len;           /* bytes the kernel could copy (dyn_size) */
} hw_perf_sample;

typedef enum hw_perf_record_kind {
    HW_PERF_RECORD_SAMPLE,    /* `out` filled */
    HW_PERF_RECORD_NO_USER,   /* a sample without user registers (taken in the kernel, or a kernel thread) */
    HW_PERF_RECORD_LOST,      /* the kernel lost `*lost` samples (ring full) */
    HW_PERF_RECORD_OTHER,     /* another record type: skip it */
    HW_PERF_RECORD_BAD,       /* does not make sense */
} hw_perf_record_kind;

/* The record header's size field of the record starting at `rec` (at least
 * 8 bytes), for walking the ring; 0 when it is smaller than a header. */
size_t hw_perf_record_size(const unsigned char *rec);

/* Parse one whole record of `len` bytes (its header included). */
hw_perf_record_kind hw_perf_record_parse(const unsigned char *rec, size_t len, hw_perf_sample *out, uint64_t *lost);

#endif
