/*
 * perf_sampler.h - early samples of a busy loop thread taken by the kernel,
 * without stopping it.
 *
 * A per-thread perf event on the task clock fires once per sampling
 * interval of the thread's own CPU time and writes its user registers and
 * a copy of the top of its user stack into a ring buffer the agent maps.
 * No ptrace stop, no signal, no context switch to the agent: the thread
 * pays the kernel's copy (microseconds), and the agent unwinds the copy
 * later with the same code as a capture's (unwind.h), reading what lies
 * beyond the copy live (the loop's outer frames, which do not change while
 * it is busy).  A thread that does not run produces no samples: the caller
 * tells that from the event's CPU time (hw_perf_sampler_cpu_ns).
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

#include "capture.h"

/* Bytes of user stack each sample copies (see docs/decisions.md). */
#define HW_PERF_SAMPLE_STACK_BYTES 8192u

typedef struct hw_perf_sampler hw_perf_sampler;

/* Sample thread `tid` every `interval_ns` of its CPU time.  It starts
 * disabled.  NULL on failure, with errno set and one sentence in `why`. */
hw_perf_sampler *hw_perf_sampler_open(pid_t tid, uint64_t interval_ns, uint32_t stack_bytes, char *why,
                                      size_t len);
void hw_perf_sampler_close(hw_perf_sampler *s);

/* Turn sampling on (a busy stretch) or off (the loop waits).  0 or -errno. */
int hw_perf_sampler_enable(hw_perf_sampler *s, bool on);

/* CPU time the thread has had while the event was enabled, in ns (the
 * task clock's count), or UINT64_MAX if it cannot be read. */
uint64_t hw_perf_sampler_cpu_ns(hw_perf_sampler *s);

/* The next sample in the ring, oldest first: 1 with `out` filled as a
 * captured thread of a one-thread snapshot (its `stack` malloc'd: free it
 * with free()) and `*time_ns` its CLOCK_MONOTONIC time; 0 when the ring is
 * empty.  Records that are not samples (lost-sample notices) are skipped
 * and counted; a record that does not make sense empties the ring. */
int hw_perf_sampler_next(hw_perf_sampler *s, hw_thread_snapshot *out, uint64_t *time_ns);

/* Samples the kernel could not write because the ring was full, so far. */
uint64_t hw_perf_sampler_lost(const hw_perf_sampler *s);

#endif
