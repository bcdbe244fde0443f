/*
 * report.h - the report stage's interface: what a capture hands over
 * (report_request), the worker that turns captures into reports off the
 * detection path, and the making of a report from a capture, which the
 * worker and `hangwatch stack` share.
 *
 *   report_request.c  requests, and a capture unwound and named for its
 *                     report (hw_named_capture, hw_report_of_capture);
 *   report_worker.c   the worker thread (SCHED_IDLE), its queue and jobs:
 *                     a report, an annealing re-check, a hang's end;
 *   report_write.c    writing one report (the directory's limits, the
 *                     file), its stderr line, and publishing it to the
 *                     exports;
 *   report_line.c     the stderr line of a hang;
 *   report_samples.c  early sampling's stacks in a report;
 *   report_cpu_high.c a CPU-high report's section and line;
 *   report_model.c    the JSON report itself (report_model.h).
 *
 * The stage reads the options and publishes through the exports handle; it
 * knows nothing of the watch thread's state.  The watch thread learns what
 * the worker decided only by asking (worker_resets).
 */
#ifndef HANGWATCH_REPORT_H
#define HANGWATCH_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/capture/capture.h"
#include "agent/common/options.h"
#include "agent/common/watch_priority.h"
#include "agent/exports/exports.h"
#include "agent/symbols/symbols.h"
#include "core/annealing.h"
#include "core/detector.h"
#include "core/hang_cause.h"
#include "core/point_stack.h"
#include "core/ring_stacks.h"
#include "core/stutter.h"
#include "report_model.h"

/* Frames unwound per thread for a report. */
#define HW_REPORT_MAX_FRAMES 256

/* ---- what a capture hands over ---- */

/* A CPU-high report's figures (the watch thread's cpu_high.c measures and
 * samples; report_cpu_high.c makes the report's section of them). */
#define CPU_HOT_THREADS 3     /* threads sampled */
#define CPU_REPORT_THREADS 32 /* threads listed in a report, hottest first */

typedef struct cpu_high_thread {
    pid_t tid;
    char name[16];
    uint64_t cpu_ns; /* CPU used over the threads' window */
} cpu_high_thread;

typedef struct cpu_high_sampled {
    pid_t tid;
    size_t sample_count;
    hw_thread_snapshot *samples; /* raw kernel samples of the window, unwound by the worker */
} cpu_high_sampled;

typedef struct cpu_high_request {
    unsigned percent;            /* the threshold */
    uint64_t window_ns, cpu_ns;  /* the window measured and the CPU used in it */
    uint64_t tenths;             /* the process's average, tenths of a percent of one CPU */
    uint64_t threads_window_ns;  /* what the threads' figures cover (up to the window) */
    uint64_t sample_interval_ns;
    size_t thread_count;
    cpu_high_thread threads[CPU_REPORT_THREADS];
    size_t sampled_count;
    cpu_high_sampled sampled[CPU_HOT_THREADS];
} cpu_high_request;

/* Free a CPU-high request and the samples it holds (NULL is fine). */
void cpu_high_request_free(cpu_high_request *cpu);

/* What the watch thread hands the worker for one capture. */
typedef struct report_request {
    hw_process_snapshot snap;     /* moved in: the worker frees it */
    hw_python_target python;      /* the process's interpreter */
    hw_js_target js;              /* the process's V8 (node) */
    hw_runtime_names *runtime_names; /* each captured thread's Python or JavaScript frames, named
                                     right after the capture (snap.thread_count entries), or NULL */
    uint64_t process_serial;      /* the watched process's, never given twice: whose namer names them */
    bool names_pending;           /* the worker's: its names are being read (report_naming.c) */
    bool peer_looked;             /* the naming thread looked for the other end of its wait */
    hw_check check;
    pid_t pid, tid;
    const char *observer;         /* what kept the loop state: "preload", "library", "kernel_tracepoint",
                                     "kernel_uprobe" */
    char executable[256];
    const hw_in_app_rule *in_app_rules; /* the user's (the options'), which outlive every request */
    size_t in_app_rule_count;
    uint64_t threshold_ns;        /* the threshold the hang crossed (watch --config may change it) */
    int64_t detected_unix_ns;
    uint64_t captured_ns;         /* monotonic time of the capture (taken right before it) */
    uint64_t resumed_ns;          /* ... and once its threads ran again: a follow-up's tail
                                     window counts from here, however long the stop took */
    /* early sampling: the Point Stack chosen from the ring, as addresses */
    const char *main_thread_state, *main_thread_reason;
    size_t ps_depth;
    uint64_t ps_pcs[HW_SAMPLE_MAX_FRAMES];
    unsigned ps_counts[HW_SAMPLE_MAX_FRAMES];
    hw_frame *ps_named;           /* ps_depth entries: the Point Stack's Python frames named, or NULL */
    size_t ps_sample_count, ps_ring_capacity, ps_chosen_index, ps_top_repeat;
    size_t ps_sources[HW_SAMPLE_SOURCES]; /* samples in the ring by how they were taken */
    const char *ps_kernel_trigger; /* the kernel sampler's trigger (a static name), or NULL */
    uint64_t ps_kernel_period_ns;  /* and the interval it samples at */
    /* every sample of the ring, as distinct stacks of distinct addresses */
    hw_ring_stacks ring;
    hw_frame *ring_named;         /* ring.addr_count entries: their Python frames named, or NULL */
    /* stutter reports */
    hw_stutter_verdict stutter;
    /* CPU-high reports: owned by the request (NULL for every other) */
    cpu_high_request *cpu;
    /* where the hung thread's time went (hang_time.c); present false when
     * not measured */
    hw_time_section time;
    /* what its observer took to be the hung thread's loop wait */
    hw_loop_wait_seen loop_wait;
    /* its line at detection was said while the capture still waited for
     * the thread to stop (worker_announce_unstopped): not again after it */
    bool announced;
    /* the CPU the hung thread last ran on, when known (its capture's
     * look): the naming thread and the worker work elsewhere (cpu_avoid.h) */
    bool hung_cpu_known;
    int hung_cpu;
} report_request;

/* What classifying the request's frames needs (its rules, its
 * executable); valid while `req` is. */
hw_in_app_context hw_request_in_app(const report_request *req);

/* Free what a request holds (its snapshot, its named frames). */
void report_request_release(report_request *req);

/* ---- a capture named, and its report ---- */

/* A capture unwound and named: each thread's native and runtime frames
 * together (symbols.h), and the symbolizer that named them, whose images
 * go into the report. */
typedef struct hw_named_capture {
    hw_symbolizer *sym; /* NULL when the capture's memory map could not be used */
    char *sym_error;    /* why not (malloc'd), or NULL */
    hw_backtrace *bts;  /* one per thread of the snapshot; empty where not named; NULL when out of memory */
    size_t target;      /* the target thread's index, SIZE_MAX when it has none */
} hw_named_capture;

/* Make the symbolizer of `req`'s capture and name its target thread (the
 * others too unless `target_only`; hw_name_capture_rest names them
 * later).  A captured thread that cannot be named gets the reason as its
 * backtrace's error. */
void hw_name_capture(const report_request *req, bool target_only, hw_named_capture *nc);
void hw_name_capture_rest(const report_request *req, hw_named_capture *nc);
/* The target thread's backtrace, or NULL. */
const hw_backtrace *hw_named_target(const hw_named_capture *nc);
void hw_named_capture_free(hw_named_capture *nc, size_t thread_count);

/* The JSON report of a named capture, about what `info` says (NULL when
 * out of memory); `id` gets its id. */
json_t *hw_report_of_capture(const report_request *req, const hw_named_capture *nc, const hw_hang_info *info,
                             char id[37]);

/* ---- the worker ---- */

typedef struct report_worker report_worker;

/* The worker's record of one hang (report_worker.c). */
typedef struct hang_record hang_record;

/* Start the worker: it reads `opts` and publishes through `ex` (both must
 * outlive it); the names it keeps of watched processes' Python and
 * JavaScript code, to name their captures, stay within `namers_max_bytes`
 * in all (report_naming.c).  NULL when out of memory. */
report_worker *worker_start(const hw_agent_options *opts, hw_exports *ex, size_t namers_max_bytes);
/* The watched process of serial `serial` is gone: the names kept of its
 * code are freed once its captures already handed over are named. */
void worker_forget_process(report_worker *wk, uint64_t serial);
/* Drain every job, end the thread, say the totals (reports dropped or not
 * written) if `say_totals`, and free it. */
void worker_stop(report_worker *wk, bool say_totals);
/* A new hang's record (the first report of a hung stretch comes with it). */
hang_record *worker_new_hang(bool launch);
/* A hang's first capture, said at once on stderr from what it knows
 * before any unwinding (report_herald.c): the watch thread's call, before
 * worker_submit_report hands the request over.  Not for a launch, a
 * stutter, a capture that found the process gone, or with --ignore-frame
 * or --quiet. */
void worker_announce(report_worker *wk, const report_request *req);
/* The same line while the capture still waits for the hung thread to stop
 * (a thread waiting for a CPU on a busy machine, or asleep
 * uninterruptibly): said now, from what was known before the stop (the
 * request's check, pid, tid and process name, and `time`, read now) with
 * the thread's state `state` (/proc's letter) in place of its address.
 * True if said: req->announced is then set, and worker_announce says
 * nothing more.  The capture's session thread calls it (capture.h's
 * overdue), the watch thread waiting for it. */
bool worker_announce_unstopped(report_worker *wk, report_request *req, const hw_time_section *time, char state);
/* Hand over a report, a re-check (`recheck`: decide by annealing first) or
 * a one-off report (hang NULL).  The request's snapshot is the worker's
 * afterwards, and its Python or JavaScript frames are named off the watch
 * thread (report_naming.c).  False when the queue is full (the capture is
 * dropped and counted). */
bool worker_submit_report(report_worker *wk, hang_record *hang, report_request *req, bool recheck);

/* The worker and the naming thread off CPU `cpu` (a hung thread's, or one
 * a capture is about to stop; -1: back on every CPU), where they may run
 * elsewhere (cpu_avoid.h).  The naming thread reads at a real-time
 * priority for up to tens of milliseconds: on the CPU of a thread a
 * capture must stop, that thread could not take its stop until it was
 * done.  Called by the watch thread only. */
void worker_keep_off(report_worker *wk, int cpu);
/* A hang's first report that found the queue full: it is still announced on
 * stderr (in order with the other lines, saying that its report was
 * dropped and why) and counted as a hang at its end.  The request's
 * snapshot is released, but for its small thread table, kept for the line.
 * Never refused. */
void worker_submit_dropped(report_worker *wk, hang_record *hang, report_request *req);
/* The hang is over: final durations; a launch's held reports are written
 * (`keep_launch`) or dropped.  `wait_status`: the process's, when its death
 * ended the hang (end "killed" or "exited"), else -1.  The record is the
 * worker's afterwards. */
void worker_submit_finish(report_worker *wk, hang_record *hang, const hw_hang_end *end, bool keep_launch);
/* The worker runs on idle time (SCHED_IDLE); on a machine that has none,
 * the watch thread raises it to the normal policy at nice
 * WORKER_BOOST_NICE once a job has waited WORKER_BOOST_AFTER_NS, and it
 * goes back to idle time when its queue is empty: a busy machine delays a
 * report by about that and a little of the CPU, never for good.  An agent
 * that may not raise a thread's priority (no CAP_SYS_NICE, RLIMIT_NICE 0)
 * keeps its worker at nice WORKER_BOOST_NICE throughout instead.  When the
 * oldest job (queued or under way) turns late (UINT64_MAX: none), and the
 * raise, done when it is due by `now`. */
#define WORKER_BOOST_AFTER_NS 250000000ull
#define WORKER_BOOST_NICE HW_BACKGROUND_NICE
uint64_t worker_boost_due(report_worker *wk);
void worker_boost_if_late(report_worker *wk, uint64_t now);
/* How many re-checks the worker found with a moved stack (and reported),
 * and when the newest of them was captured. */
uint64_t worker_resets(hang_record *hang, uint64_t *captured_ns);

#endif
