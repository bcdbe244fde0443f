/*
 * perf_sampler.h - early samples of a busy loop thread taken by the kernel,
 * without stopping it.
 *
 * A per-thread perf event writes the thread's user registers and a copy
 * of the top of its user stack into a ring buffer the agent maps, once per
 * sampling interval while the thread runs.  No ptrace stop, no signal, no
 * context switch to the agent.  Two triggers (docs/decisions.md §35):
 *
 *  - the timer tick: a sample in every Nth timer interrupt that finds the
 *    thread on its CPU (the tracepoint irq_vectors:local_timer_entry), so
 *    it rides on an interrupt the thread takes anyway and costs only the
 *    copy; the interval is rounded to whole ticks.  It needs the
 *    tracepoint's id from tracefs and the right to kernel-side events
 *    (root, CAP_PERFMON or perf_event_paranoid <= 1);
 *  - the task clock: an interrupt of its own every interval of the
 *    thread's CPU time, allowed for one's own threads at
 *    perf_event_paranoid 2, and used where the tick cannot be had.
 *
 * The thread pays the kernel's copy (microseconds), and the agent unwinds the copy
 * later with the same code as a capture's (unwind.h), reading what lies
 * beyond the copy live (the loop's outer frames, which do not change while
 * it is busy).  A thread that does not run produces no samples (neither
 * trigger fires for a thread off its CPU).
 *
 * The records come from the kernel, but their sizes are still checked
 * before use; the stack bytes are the target's, untrusted, and only ever
 * read through the unwinder's bounds-checked accessor.
 */
#ifndef HANGWATCH_PERF_SAMPLER_H
#define HANGWATCH_PERF_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "snapshot.h"

/* Bytes of user stack each sample copies (see docs/decisions.md). */
#define HW_PERF_SAMPLE_STACK_BYTES 8192u

typedef struct hw_perf_sampler hw_perf_sampler;

typedef enum hw_perf_trigger {
    HW_PERF_TRIGGER_ANY,        /* open: the tick where it can be had, else the task clock */
    HW_PERF_TRIGGER_TICK,       /* every Nth timer tick that finds the thread running */
    HW_PERF_TRIGGER_TASK_CLOCK, /* an interrupt of its own per interval of CPU time */
} hw_perf_trigger;

/* Sample thread `tid` about every `interval_ns` of its CPU time, by
 * `trigger`.  It starts disabled.  NULL on failure, with errno set and one
 * sentence in `why`. */
hw_perf_sampler *hw_perf_sampler_open(pid_t tid, uint64_t interval_ns, uint32_t stack_bytes, hw_perf_trigger trigger,
                                      char *why, size_t len);

/* The trigger the sampler was opened with (never _ANY), and the interval
 * it samples at: `interval_ns` rounded to whole ticks for the tick. */
hw_perf_trigger hw_perf_sampler_trigger(const hw_perf_sampler *s);
uint64_t hw_perf_sampler_period_ns(const hw_perf_sampler *s);

/* Whole samples the ring holds before the kernel drops new ones: how long
 * the agent may leave it unread. */
size_t hw_perf_sampler_ring_samples(const hw_perf_sampler *s);

/* Name of a trigger in reports: "timer_tick" or "task_clock". */
const char *hw_perf_trigger_name(hw_perf_trigger trigger);

/* The tick trigger's tracepoint id under the tracefs mounted at `tracefs`
 * (e.g. "/sys/kernel/tracing"), or -1 (not mounted, not readable, not
 * this architecture).  Exposed for the tests. */
long hw_perf_tick_tracepoint_id(const char *tracefs);

/* Ticks per sample for `interval_ns` with ticks of `tick_ns`: the nearest
 * whole number, at least 1. */
uint64_t hw_perf_ticks_per_sample(uint64_t interval_ns, uint64_t tick_ns);
void hw_perf_sampler_close(hw_perf_sampler *s);

/* Turn sampling on (a busy stretch) or off (the loop waits).  0 or -errno. */
int hw_perf_sampler_enable(hw_perf_sampler *s, bool on);

/* What the event has counted while enabled: the thread's CPU time in ns
 * (task clock) or the timer ticks that found it running (tick); UINT64_MAX
 * if it cannot be read. */
uint64_t hw_perf_sampler_count(hw_perf_sampler *s);

/* The next sample in the ring, oldest first: 1 with `out` filled as a
 * captured thread of a one-thread snapshot (its `stack` malloc'd: free it
 * with free()) and `*time_ns` its CLOCK_MONOTONIC time; 0 when the ring is
 * empty.  Records that are not samples (lost-sample notices) are skipped
 * and counted; a record that does not make sense empties the ring. */
int hw_perf_sampler_next(hw_perf_sampler *s, hw_thread_snapshot *out, uint64_t *time_ns);

/* Samples the kernel could not write because the ring was full, so far. */
uint64_t hw_perf_sampler_lost(const hw_perf_sampler *s);

#endif
