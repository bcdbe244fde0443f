/*
 * metrics.h - the agent's counters for Prometheus (docs/metrics.md).
 *
 * The watch thread, the report worker and the Sentry sender count what
 * happens (hangs, their final durations, the time loops spend hung,
 * reports written and dropped, watched processes, events sent); the
 * metrics server (metrics_server.c) and the textfile writer render the
 * counts in Prometheus's text exposition format 0.0.4.
 *
 * Every count is kept in fixed arrays under one mutex held for a few
 * hundred nanoseconds (priority inheritance: the watch thread may run at
 * SCHED_FIFO, the worker at SCHED_IDLE); rendering copies the arrays and
 * formats the copy with the lock released, so a scrape never holds up
 * detection.  Labels are bounded: a process name (its comm, as reports
 * give it) and its container or unit where it has one (the first
 * HW_METRICS_MAX_PROCESSES distinct pairs, later ones counted as
 * "(other)"), the detector (one per agent) and the hang type.  Never a pid
 * or a report id.
 *
 * Every function accepts a NULL registry and then does nothing: an agent
 * without --metrics-listen or --metrics-file has none.
 */
#ifndef HANGWATCH_METRICS_H
#define HANGWATCH_METRICS_H

#include "core/hang_cause.h"
#include <stddef.h>
#include <stdint.h>

#define HW_METRICS_MAX_PROCESSES 256
#define HW_METRICS_OTHER "(other)"
/* A process's key, as the callers give it: its name, and where it runs in
 * a container or a systemd unit, this separator and that one's label
 * (core/parse/container_id.h): the series then carry container="LABEL". */
#define HW_METRICS_CONTAINER_SEPARATOR '\x1f'

/* That key, of a process named `process` in the container or unit
 * labelled `container` (NULL or "": none), into out[len]; returns out. */
const char *hw_metrics_key(const char *process, const char *container, char *out, size_t len);

typedef enum hw_metrics_hang_type {
    HW_METRICS_HANG = 0,
    HW_METRICS_LAUNCH_HANG,
    HW_METRICS_STUTTER,
    HW_METRICS_CPU_HIGH, /* --cpu-high: reports only, never a hang */
    HW_METRICS_HANG_TYPES
} hw_metrics_hang_type;

typedef enum hw_metrics_drop_reason {
    HW_METRICS_DROP_DAILY_LIMIT = 0, /* --daily-limit */
    HW_METRICS_DROP_SIZE_CAP,        /* --max-dir-size */
    HW_METRICS_DROP_WRITE_ERROR,     /* the disk refused (full, read-only) */
    HW_METRICS_DROP_QUEUE_FULL,      /* the report worker was behind */
    HW_METRICS_DROP_OUT_OF_MEMORY,
    HW_METRICS_DROP_IGNORED,         /* --ignore-frame matched the hung stack */
    HW_METRICS_DROP_HANG_TAIL,       /* a follow-up whose hang ended within 100 ms of its capture */
    HW_METRICS_DROP_SHUTDOWN,        /* the process was exiting, its loop over: no hang of the loop */
    HW_METRICS_DROP_REASONS
} hw_metrics_drop_reason;

/* Why a watched loop's hangs cannot be told (hangwatch_loops_unseen_total). */
typedef enum hw_metrics_unseen_reason {
    HW_METRICS_UNSEEN_NO_LOOP_WAIT = 0, /* its thread made no wait an event loop makes */
    HW_METRICS_UNSEEN_WAIT_UNCLEAR,     /* its loop's wait kept moving: not told from nested ones */
    HW_METRICS_UNSEEN_REASONS
} hw_metrics_unseen_reason;

typedef enum hw_metrics_sentry_drop {
    HW_METRICS_SENTRY_SPOOL_FULL = 0, /* the spool's bound was reached */
    HW_METRICS_SENTRY_REJECTED,       /* the server refused it for good (4xx) */
    HW_METRICS_SENTRY_UNREADABLE,     /* the report could not be read back or made an event */
    HW_METRICS_SENTRY_DROPS
} hw_metrics_sentry_drop;

/* The hang duration histogram's upper bounds (and +Inf): 0.1 s to 10 min. */
#define HW_METRICS_BUCKETS 14
extern const uint64_t hw_metrics_bucket_ns[HW_METRICS_BUCKETS];

/* hangwatch_hangs_total's causes: hw_cause's values, unknown to mixed. */
#define HW_METRICS_CAUSES (HW_CAUSE_MIXED + 1)

typedef struct hw_metrics hw_metrics;

/* A registry for an agent running `detector` ("runloop", ...). */
hw_metrics *hw_metrics_new(const char *detector);
void hw_metrics_free(hw_metrics *m);

/* A process of this name started (+1) or stopped (-1) being watched. */
void hw_metrics_watched(hw_metrics *m, const char *process, int delta);
/* A hang was detected (a launch hang: once it is kept), with the verdict
 * of where its time went (hangwatch.time.cause: the `cause` label). */
void hw_metrics_hang_detected(hw_metrics *m, const char *process, hw_metrics_hang_type type, hw_cause cause,
                              bool partial);
/* A loop of this process is hung from now on (+1) or no more (-1). */
void hw_metrics_loops_hung(hw_metrics *m, const char *process, int delta);
/* Time a loop of this process spent hung, counted as it passes. */
void hw_metrics_hung_time(hw_metrics *m, const char *process, uint64_t ns);
/* A hang is over: its final duration goes into the histogram. */
void hw_metrics_hang_ended(hw_metrics *m, const char *process, hw_metrics_hang_type type, uint64_t final_ns);
void hw_metrics_report_written(hw_metrics *m, const char *process, hw_metrics_hang_type type);
void hw_metrics_report_dropped(hw_metrics *m, const char *process, hw_metrics_drop_reason reason);
void hw_metrics_refused(hw_metrics *m);
/* A watched loop of `process` whose hangs cannot be told, and why. */
void hw_metrics_loop_unseen(hw_metrics *m, const char *process, hw_metrics_unseen_reason reason);
/* A busy stretch of `process` over before the agent's late look at its
 * threshold (hangwatch_stretches_unseen_total): it may have been a hang. */
void hw_metrics_stretch_unseen(hw_metrics *m, const char *process);
/* Sentry (sentry_sender.c): an event delivered, one given up, and the
 * envelopes waiting in the spool now. */
void hw_metrics_sentry_sent(hw_metrics *m);
void hw_metrics_sentry_dropped(hw_metrics *m, hw_metrics_sentry_drop reason);
void hw_metrics_sentry_spooled(hw_metrics *m, uint64_t waiting);
/* Count a change, for writers that wait for one (hw_metrics_wait_change). */
uint64_t hw_metrics_version(hw_metrics *m);

/* The hang type a report names ("hang", "launch_hang", "stutter"). */
hw_metrics_hang_type hw_metrics_hang_type_of(const char *name);

/* The exposition text (malloc'd, NUL-terminated, *len its length), or
 * NULL when out of memory. */
char *hw_metrics_render(hw_metrics *m, size_t *len);

#endif
