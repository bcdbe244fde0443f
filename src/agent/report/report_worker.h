/*
 * report_worker.h - what the report worker's files share with each other
 * (the worker's interface to the watch thread is in agent_internal.h).
 *
 * report_worker.c runs the worker thread and builds and writes each
 * report; it hands two parts of a report to files of their own:
 * report_samples.c symbolizes early sampling's stacks for it, and
 * report_cpu_high.c builds a CPU-high report's section and stderr line.
 */
#ifndef HANGWATCH_REPORT_WORKER_H
#define HANGWATCH_REPORT_WORKER_H

#include <stddef.h>

#include "agent/watch/watch.h"
#include "report_model.h"

/* report_worker.c: a frame as the stderr line names it ("handle_request
 * (app.py:5)", a symbol, "libfoo.so+0x1a2b" or an address), escaped into
 * `buf`; returns buf. */
const char *hw_report_frame_label(const hw_frame *f, char *buf, size_t len);

/* ---- report_samples.c ---- */

/* Early sampling's Point Stack and the ring's stacks of one request,
 * symbolized for its report. */
typedef struct hw_report_samples {
    hw_point_stack ps;                      /* frame_count 0: none (no samples or no symbolizer) */
    hw_frame ps_frames[HW_SAMPLE_MAX_FRAMES];
    hw_frame *ring_frames;                  /* ring_frame_count entries, or NULL */
    size_t ring_frame_count;
} hw_report_samples;

/* Symbolize the request's Point Stack (and every sample's addresses, for a
 * flame graph) with this capture's symbolizer `sym` (may be NULL: then
 * there is nothing).  `out` must not move until hw_report_samples_free. */
void hw_report_samples_build(hw_symbolizer *sym, const report_request *req, uint64_t interval_ns,
                             hw_report_samples *out);
void hw_report_samples_free(hw_report_samples *s);

/* ---- report_cpu_high.c ---- */

#define CPU_STACKS_SHOWN 8     /* distinct stacks per sampled thread in a report */
#define CPU_STACK_KEY_FRAMES 32

/* One distinct sampled stack (by function, innermost 32 frames). */
typedef struct cpu_stack_group {
    hw_backtrace bt; /* the first sample's, symbolized */
    uint64_t keys[CPU_STACK_KEY_FRAMES];
    size_t key_count;
    unsigned count;
} cpu_stack_group;

/* A CPU-high report's section, built from its request. */
typedef struct cpu_report_parts {
    hw_cpu_high_info info;
    hw_cpu_thread_share shares[CPU_REPORT_THREADS];
    hw_cpu_stack stacks[CPU_HOT_THREADS][CPU_STACKS_SHOWN];
    cpu_stack_group *groups[CPU_HOT_THREADS];
    size_t group_count[CPU_HOT_THREADS];
} cpu_report_parts;

/* Unwind the sampled threads' samples with `sym` (may be NULL: no stacks),
 * group them by stack and fill `p` from `cpu`; hw_cpu_parts_free frees
 * what it holds. */
void hw_cpu_parts_build(hw_symbolizer *sym, const cpu_high_request *cpu, cpu_report_parts *p);
void hw_cpu_parts_free(cpu_report_parts *p);
/* The stderr line of a CPU-high report, up to where the report's path goes
 * (malloc'd, NULL when out of memory). */
char *hw_cpu_line(const report_request *req, const cpu_report_parts *p);

#endif
