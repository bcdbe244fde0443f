/*
 * report_model.h - the hang report: built from a capture, written as JSON.
 *
 * The layout follows the KSCrash-style report that Matrix writes (see
 * docs/report-format.md and docs/report.schema.json): `report`, `crash.threads`
 * with backtraces, `binary_images`, and an APM section named `hangwatch` with
 * the detector's numbers and the collection metadata.  Building (a jansson
 * tree) is separate from writing (an atomic file in the report directory).
 */
#ifndef HANGWATCH_REPORT_MODEL_H
#define HANGWATCH_REPORT_MODEL_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/capture/capture.h"
#include "core/hang_cause.h"
#include "core/point_stack.h"
#include "core/ring_stacks.h"
#include "agent/common/report_dir.h"
#include "agent/symbols/symbols.h"

/* The distinct stacks of a ring written into a report, at most (the
 * samples of the others are counted as left out). */
#define HW_REPORT_MAX_SAMPLE_STACKS 256

/* Early sampling's representative stack (Matrix's Point Stack), and every
 * sample of the ring. */
typedef struct hw_point_stack {
    const hw_frame *frames;       /* symbolized, innermost first */
    const unsigned *repeat_counts; /* per frame: occurrences over the ring */
    size_t frame_count;
    size_t sample_count;     /* samples in the ring */
    size_t ring_capacity;
    uint64_t interval_ns;
    size_t chosen_index;     /* oldest sample = 0 */
    size_t top_repeat;       /* its 0-based run length */
    const size_t *sources;   /* HW_SAMPLE_SOURCES counts: samples by how they were taken, or NULL */
    const char *kernel_trigger;  /* the kernel sampler's trigger ("timer_tick", "task_clock"), or NULL */
    uint64_t kernel_period_ns;   /* the interval the kernel sampled at */
    const hw_ring_stacks *stacks; /* every sample, as distinct stacks; or NULL */
    const hw_frame *stack_frames; /* stacks->addr_count entries, symbolized */
} hw_point_stack;

/* A CPU-high report's section (hang_type "cpu_high"). */
typedef struct hw_cpu_stack {
    const hw_frame *frames; /* symbolized, innermost first */
    size_t frame_count;
    unsigned count;         /* samples with this stack (by function) */
} hw_cpu_stack;

typedef struct hw_cpu_thread_share {
    pid_t tid;
    const char *name;
    uint64_t tenths;              /* its share, tenths of a percent of one CPU */
    size_t sample_count;          /* samples of it in the window (0: not sampled) */
    const hw_cpu_stack *stacks;   /* its distinct sampled stacks, most frequent first */
    size_t stack_count;
} hw_cpu_thread_share;

typedef struct hw_cpu_high_info {
    uint64_t window_ns;
    unsigned threshold_percent;
    uint64_t process_tenths;      /* the process's average over the window */
    uint64_t threads_window_ns;   /* what the threads' shares are measured over */
    uint64_t sample_interval_ns;
    const hw_cpu_thread_share *threads; /* hottest first */
    size_t thread_count;
} hw_cpu_high_info;

/* What the observer took to be the hung thread's loop wait, from its slot
 * (core/abi/loop_state.h, wait_point.h). */
typedef struct hw_loop_wait_seen {
    bool known;                    /* the page says (a preloaded or kernel observer's) */
    uint32_t call, rank, learned;  /* HW_WAIT_CALL_*, HW_WAIT_RANK_*, HW_WAIT_LEARNED_* */
    uint64_t site, object;         /* its return address (0: not seen yet) and what it waits on */
    uint32_t nested_waits, moves;  /* waits taken as a callback's; times learned again */
} hw_loop_wait_seen;

typedef struct hw_hang_info {
    const char *detector;          /* "runloop" ...; "none" for a snapshot (hangwatch stack) */
    const char *check_mode;        /* "exact" | "periodic" ...; "on_demand" for a snapshot */
    const char *observer;          /* what kept the loop state (report_request.observer); NULL: not said */
    const char *hang_type;         /* "hang" | "launch_hang" | "stutter" | "snapshot" | "cpu_high" */
    pid_t hung_tid;
    uint64_t block_duration_ns;    /* busy time when the hang was detected */
    uint64_t threshold_ns;
    int64_t detected_unix_ns;      /* wall-clock time of detection */
    const char *main_thread_state; /* early-sampling collection state */
    const char *main_thread_reason;
    const char *executable;        /* the program's own image (written as hangwatch.executable); may be NULL */
    const char *js_frames_from;    /* "metadata" or "perf-map": what named JavaScript frames (NULL: none) */
    unsigned stretch_report_index; /* 0 for a stretch's first report, then 1, 2 ... (annealing) */
    const hw_point_stack *point_stack; /* early sampling's choice, or NULL */
    /* hang_type "stutter": the window's figures */
    uint64_t stutter_window_ns, stutter_busy_ns;
    unsigned stutter_stalls;
    /* hang_type "cpu_high": its section, else NULL */
    const hw_cpu_high_info *cpu_high;
    /* The hung thread waits for the GIL, held by this other thread of the
     * snapshot (0: it does not): the report names the holder, and the
     * grouping key is made of the holder's stack, where the hang is. */
    pid_t gil_holder_tid;
    /* The hung thread waits in futex for a mutex held by this other
     * thread of the snapshot (0: it does not): named as lock_holder, and
     * the grouping key is made of its stack, as for the GIL. */
    pid_t lock_holder_tid;
    /* Where the hung thread's time went (hangwatch.time), or NULL. */
    const hw_time_section *time;
    /* What was taken to be its loop's wait (hangwatch.loop_wait), or NULL;
     * its site named, or NULL. */
    const hw_loop_wait_seen *loop_wait;
    const hw_frame *loop_wait_site;
} hw_hang_info;

/*
 * The grouping key of a hung stack whose frames are classified
 * (hw_backtrace_classify): the same hang site gives the same key in every
 * run, whatever the load addresses, made from its culprit outwards
 * (docs/report-format.md).  16 hex digits into `out`.
 */
void hw_grouping_key(const hw_backtrace *bt, char out[17]);

/*
 * Build the report.  `backtraces` runs parallel to snap->threads (entries of
 * threads that were not captured are ignored).  Returns a new reference, or
 * NULL when out of memory.  `id` receives the report's UUID.
 */
json_t *hw_report_build(const hw_hang_info *info, const hw_process_snapshot *snap, const hw_backtrace *backtraces,
                        const hw_image *images, size_t image_count, char id[37]);

/*
 * Write `report` into the report directory as `file_name`, atomically
 * (hw_report_dir_write): a reader never sees a partial report.  0 or -errno
 * (-ENOSPC when the disk is full).
 */
int hw_report_write(hw_report_dir *d, const char *file_name, json_t *report);

/* How a hung stretch ended, for its reports' final update. */
typedef struct hw_hang_end {
    uint64_t final_ns, precision_ns;
    const char *end;      /* hangwatch.hang_end (a string literal) */
    int wait_status;      /* the process's, when its death ended the hang; else -1 */
    hw_time_section time; /* the stretch's time to its end (hangwatch.time.at_end); present false: not measured */
} hw_hang_end;

/*
 * Add the stretch's final duration to a report already written (once the
 * hang is over): hangwatch.final_duration_us, its precision, and how it
 * ended ("returned_to_wait", "process_exited", "killed", "exited",
 * "agent_exited" ...).  `wait_status` >= 0: the process's wait status when
 * its death ended the hang (a fatal hang), written as
 * hangwatch.process_end (hw_report_set_final).  Read back and rewritten
 * through the directory's descriptor like the original.  The time to the
 * hang's end goes in as hangwatch.time.at_end.  0 or -errno.
 */
int hw_report_add_final_duration(hw_report_dir *d, const char *file_name, const hw_hang_end *e);

/* The same on a report not yet written (its `hangwatch` object).  0, or
 * -EINVAL when the report has no such object. */
int hw_report_set_final(json_t *report, const hw_hang_end *e);

/* A report's `time` section (hangwatch.time): the figures, the verdict,
 * what the thread was blocked in (when looked at), or why there are no
 * figures.  A new reference (NULL when out of memory). */
json_t *hw_time_json(const hw_time_section *t);

/* hangwatch.container: the process's container, pod or unit, its label
 * (what the metrics carry) among them. */
json_t *hw_container_json(const hw_container *c);

/* Signal `sig`'s name ("SIGKILL"), or "SIG<n>" for one without a name
 * (a real-time signal), in `buf`; returns buf. */
const char *hw_signal_name(int sig, char *buf, size_t len);

#endif
