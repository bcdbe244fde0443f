/*
 * options.h - what the agent is asked to do: the options of `hangwatch run`,
 * `watch` and `attach`, as the command line (src/cli) fills them in.  Every
 * stage of the agent reads them and none changes them, so they live here,
 * below all the stages (docs/architecture.md).
 */
#ifndef HANGWATCH_OPTIONS_H
#define HANGWATCH_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/cpu_window.h"
#include "core/detector.h"
#include "core/in_app.h"
#include "core/report_limits.h"

/* Which detector decides what is a hang (docs/decisions.md §20-21). */
typedef enum hw_detector_kind {
    HW_DETECTOR_RUNLOOP = 0, /* Matrix's busy stretches between waits (the default) */
    HW_DETECTOR_SEMAPHORE,   /* seeds/002-003: 5 x 50 ms state sampling, ping when waiting */
    HW_DETECTOR_PING,        /* ANREye: a ping posted to the loop, checked a threshold later */
    HW_DETECTOR_FRAME_GAP,   /* CADisplayLink: a periodic loop tick that arrives late */
} hw_detector_kind;

/* The name reports use: "runloop", "semaphore", "ping", "frame_gap". */
const char *hw_detector_kind_name(hw_detector_kind kind);

/* Where the kernel observer attaches (--attach). */
typedef enum hw_attach_kind {
    HW_ATTACH_AUTO = 0,     /* fentry where the kernel has it, else the system calls' tracepoints */
    HW_ATTACH_FENTRY,       /* fentry/fexit on the wait system calls' kernel functions */
    HW_ATTACH_TRACEPOINT,   /* the system calls' tracepoints: every process of the machine pays */
    HW_ATTACH_UPROBE,       /* uprobes in the watched processes' wait functions alone */
} hw_attach_kind;

/* Which observer `hangwatch run` uses (--observer). */
typedef enum hw_observer_kind {
    HW_OBSERVER_AUTO = 0, /* the preload; the kernel observer for static programs and raw-syscall waits */
    HW_OBSERVER_PRELOAD,
    HW_OBSERVER_KERNEL,
} hw_observer_kind;

/* How JavaScript frames are named (--js-frames). */
typedef enum hw_js_frames_mode {
    HW_JS_FRAMES_AUTO = 0, /* V8's metadata; node's perf map for a node `run` starts without it */
    HW_JS_FRAMES_METADATA, /* only V8's metadata (js_frames.h); NODE_OPTIONS never touched */
    HW_JS_FRAMES_PERF_MAP, /* only node's perf map: `run` adds its flags to NODE_OPTIONS */
    HW_JS_FRAMES_OFF,      /* neither: JavaScript frames stay unnamed */
} hw_js_frames_mode;

/* "auto", "metadata", "perf-map", "off" into *mode: 0, or -1 for anything
 * else. */
int hw_js_frames_mode_parse(const char *text, hw_js_frames_mode *mode);

typedef struct hw_agent_options {
    hw_detector_config detector;
    const char *report_dir;   /* default "hangwatch-reports" */
    struct hw_report_dir *report_dir_handle; /* report_dir, opened and checked by the CLI (report_dir.h) */
    const char *preload_path; /* absolute path of libhangwatch-preload.so */
    char **argv;              /* the program and its arguments */
    bool quiet;               /* no per-hang line on stderr */
    bool early_sampling;      /* Matrix's early sampling (off by default) */
    uint64_t sample_interval_ns; /* default 50 ms */
    bool samples_by_ptrace;   /* --sampler ptrace: every early sample stops the thread */
    bool samples_by_task_clock; /* --sampler task-clock: kernel samples on an interrupt of their own, never the tick */
    size_t ring_size;         /* default check period / interval (20) */
    hw_report_limits limits;  /* daily limit and directory cap */
    bool every_wait_is_the_loop; /* --wait-site any: no nested-wait rule */
    bool no_follow;           /* watch only the started process, not its children */
    hw_js_frames_mode js_frames; /* --js-frames (js_frames.h, watch/js_maps.c) */
    hw_observer_kind observer; /* --observer */
    hw_attach_kind attach;     /* --attach: how the kernel observer attaches */
    bool all_loop_threads;    /* --threads=loops: every thread that waits in a loop */
    bool stutter;             /* --stutter: report stutter (stutter.h) */
    hw_detector_kind detector_kind; /* --detector */
    uint64_t frame_interval_ns; /* frame gap: the tick interval (default 1/60 s) */
    /* attach mode, from the C library: pings are posted by the program's own
     * post function (HW_EVENT_PING, answered in the slot) rather than taken
     * as answered at the loop's next wait; frame ticks come from the
     * program's hangwatch_loop_frame() rather than being emulated. */
    bool pings_by_post;
    bool frames_from_loop;
    /* `hangwatch attach` (started by the C library): watch this running
     * process instead of starting one, on this socket, and write our pid to
     * ready_fd once listening. */
    pid_t attach_pid;
    const char *socket_name;
    int ready_fd;
    const char *events_socket; /* attach mode: where to send hw_event_msg, or NULL */
    /* `hangwatch watch`: watch these running processes through the kernel
     * observer (kernel_observer.h) until they end, a termination signal
     * arrives, or duration_ns (0: no limit) has passed. */
    const pid_t *watch_pids;
    size_t watch_pid_count;
    uint64_t duration_ns;
    bool follow_children; /* watch --follow: also the processes they fork */
    /* watch --all: every process of the machine that waits in a loop, as
     * the selectors choose (core/process_select.h; watch/machine_scan.c) */
    bool watch_all;
    const struct hw_process_selector *selectors;
    size_t selector_count;
    /* ---- exports beyond the machine (exports/exports.h; docs/metrics.md) ---- */
    const char *metrics_listen; /* --metrics-listen ADDR:PORT: serve /metrics, or NULL */
    const char *metrics_file;   /* --metrics-file PATH: node_exporter's textfile, or NULL */
    const char *sentry_dsn;     /* --sentry-dsn or SENTRY_DSN, checked by the CLI, or NULL */
    /* ---- end of exports ---- */
    /* --ignore-frame PATTERN...: a hang whose hung stack has a function
     * matching one of these (fnmatch) is counted, said, not written
     * (docs/decisions.md §32) */
    const char *const *ignore_frames;
    size_t ignore_frame_count;
    /* --in-app PATTERN, --not-in-app PATTERN: which frames are the user's
     * own, in order, the last matching one winning (core/in_app.h) */
    const hw_in_app_rule *in_app_rules;
    size_t in_app_rule_count;
    /* --cpu-high PERCENT[/DURATION]: CPU-high reports (percent 0: off;
     * decisions.md §34) */
    hw_cpu_high_config cpu_high;
    /* watch --config FILE (docs/config.md): on SIGHUP the agent calls
     * reload_config, which reads the file again and returns the options it
     * now gives with the command line's (checked as at the start), or NULL
     * after saying what was wrong; the agent takes the thresholds, the
     * selectors and the exporters from them, copies what it keeps, and
     * hands them back to release_config. */
    const char *config_path;
    const struct hw_agent_options *(*reload_config)(void *ctx);
    void (*release_config)(void *ctx, const struct hw_agent_options *fresh);
    void *config_ctx;
} hw_agent_options;

#endif
