/*
 * report_internal.h - what the report stage's files share with each other
 * (the stage's interface to the rest of the agent is report.h).
 *
 * report_worker.c runs the worker thread and its jobs; report_write.c
 * writes a report and publishes it; report_line.c makes a hang's stderr
 * lines (at detection, which report_herald.c writes, and with its report); report_samples.c symbolizes early sampling's stacks for a report;
 * report_cpu_high.c builds a CPU-high report's section and stderr line.
 */
#ifndef HANGWATCH_REPORT_INTERNAL_H
#define HANGWATCH_REPORT_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "agent/common/cpu_avoid.h"
#include "report.h"

/* Reports kept track of per hung stretch (annealing reports it again when
 * its stack moves). */
#define MAX_STRETCH_REPORTS 16

struct hang_record {
    /* written here, read by the watch thread (worker_resets) */
    _Atomic uint64_t resets;
    _Atomic uint64_t reset_captured_ns;
    /* the worker's own */
    hw_annealing anneal;
    bool launch;        /* reports are held until the launch's verdict */
    unsigned reports;   /* stretch_report_index of the next report */
    char *names[MAX_STRETCH_REPORTS];   /* reports written (file names), for the final duration */
    json_t *kept[MAX_STRETCH_REPORTS];  /* ... and their content, while the exports want it (Sentry) */
    json_t *held[MAX_STRETCH_REPORTS];  /* a launch's reports, built, not yet written */
    char *held_lines[MAX_STRETCH_REPORTS];
    char held_names[MAX_STRETCH_REPORTS][96];
    pid_t held_tids[MAX_STRETCH_REPORTS];
    uint64_t held_busy[MAX_STRETCH_REPORTS];
    /* for the line of a fatal hang: whose, and its first report */
    pid_t pid;
    char process[64]; /* escaped */
    bool seen;        /* a report of it was made (written, held, refused or ignored) */
    bool ignored;     /* its first report was ignored (--ignore-frame) */
    bool shutdown;    /* its first capture found the process exiting: no hang (exiting_in) */
    /* the detection's look as its capture settled it (settle_look): the
     * final verdict's, whose look the watch thread took before that */
    bool settled;
    hw_blocked_look settled_look;
    long settled_restarted; /* the call its restart_syscall resumed, from the first capture's stack (-1: none) */
};

typedef struct job job;
typedef struct report_herald report_herald; /* report_herald.c */
typedef struct report_naming report_naming; /* report_naming.c */

struct report_worker {
    const hw_agent_options *opts;
    size_t max_jobs; /* MAX_JOBS, or fewer by HANGWATCH_REPORT_QUEUE (for tests of a full queue) */
    hw_exports *exports;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    job *head, *tail;
    size_t jobs;
    uint64_t bytes;
    bool stopping;
    /* priority aging (worker_boost_due): its thread id, when the job under
     * way was queued (0: none), whether the watch thread raised it */
    pid_t tid;
    hw_cpu_placement placement; /* the watch thread's: the worker kept off a hung thread's CPU */
    bool raisable; /* it runs at SCHED_IDLE, and the agent may raise it from there */
    uint64_t current_queued_ns;
    bool boosted;
    /* the worker's own from here on */
    unsigned report_serial;
    uint64_t last_report_bytes;
    unsigned long dropped_by_limits;
    bool said_limits;
    unsigned long write_failures;
    int first_write_error;
    /* the summary at exit */
    unsigned long hangs, fatal_hangs, ignored_hangs;
    /* the lines at detection (NULL under --quiet, or when it could not start) */
    report_herald *herald;
    /* the captures' runtime names, read off the watch thread; a job waits
     * on `named` (under `lock`) until its request's are in */
    report_naming *naming;
    pthread_cond_t named;
};

/* ---- report_write.c ---- */

/* Write `report` now (the directory's limits permitting), say its line on
 * stderr and publish it to the exports.  With a hang record `h`, its name
 * is kept (and its content, when the exports want it complete later);
 * `complete`: no final duration will come (it has one already, or it is
 * not a hang with an end). */
void write_report(report_worker *wk, hang_record *h, json_t *report, const char *line, pid_t pid, pid_t tid,
                  int64_t detected_unix_ns, uint64_t busy_ns, bool complete);
/* The hang of `h` is over: its final duration goes into each of its
 * written reports, which are then complete. */
void write_final_durations(report_worker *wk, hang_record *h, const hw_hang_end *e);

/* ---- report_line.c ---- */

/* A frame as the stderr line names it ("handle_request (app.py:5)", a
 * symbol, "libfoo.so+0x1a2b" or an address), escaped into `buf`; returns
 * buf. */
const char *hw_report_frame_label(const hw_frame *f, char *buf, size_t len);
/* The stderr line of a hang report, up to where the report's path goes
 * (malloc'd, NULL when out of memory); `bt` is the hung thread's stack;
 * `holder` (0: none) the thread that holds what it waits for (`what`: "the
 * GIL", "a mutex"), with its stack. */
/* How a line names the process: "pid 4242", "pid 4242, 17 in its pid
 * namespace" for a process in a pid namespace of its own, and its
 * container's short id (and a Kubernetes pod's namespace/name) where it
 * runs in one: ", container 3f2a9c1b7d6e". */
const char *hw_line_pid(const hw_process_snapshot *snap, pid_t pid, char *buf, size_t len);

char *hw_hang_line(const hw_agent_options *opts, const report_request *req, const hw_backtrace *bt, pid_t holder,
                   const char *what, const hw_backtrace *holder_bt);

/* The line at detection into `out` (with its newline): what hung, for how
 * long, where its time went and the raw address its thread is at, from
 * what the capture knows before any unwinding; snprintf only, for the
 * watch thread.  False if it cannot be made. */
#define HW_DETECTION_LINE_MAX 1536
bool hw_detection_line(const hw_agent_options *opts, const report_request *req, char *out, size_t len);
/* The same line while the capture still waits for the thread to stop: its
 * state (/proc's letter, 0 if unknown; 't' once its stop came after all)
 * in place of its address, `time` read before its stop. */
bool hw_detection_line_unstopped(const hw_agent_options *opts, const report_request *req, const hw_time_section *time,
                                 char state, char *out, size_t len);

/* ---- report_herald.c ---- */

/* The thread that writes the lines at detection, at the watch thread's
 * priority; herald_say queues one (the watch thread's call: a copy into a
 * ring slot), herald_stop writes what waits, ends it and returns how many
 * lines a full ring dropped. */
report_herald *herald_start(void);
void herald_say(report_herald *h, const char *line);
unsigned long herald_stop(report_herald *h);

/* ---- report_naming.c ---- */

/* The thread that names captures' Python and JavaScript frames, at the
 * watch thread's priority, keeping the namers of every process (bounded in
 * all by `namers_max_bytes`).  naming_submit queues a request the worker
 * holds (req->names_pending set), whose names it hands back with
 * worker_names_ready; naming_forget frees a process's namer once its
 * earlier tasks are done; naming_stop does every task queued, then ends it.
 * NULL when out of memory. */
report_naming *naming_start(report_worker *wk, size_t namers_max_bytes, bool quiet);
void naming_submit(report_naming *n, report_request *req);
void naming_keep_off(report_naming *n, int cpu); /* worker_keep_off's, for this thread */
void naming_forget(report_naming *n, uint64_t serial);
void naming_stop(report_naming *n);
/* The naming thread's call: `names` (NULL: none) are req's, and the worker
 * may go on with it. */
void worker_names_ready(report_worker *wk, report_request *req, hw_runtime_names *names);

/* ---- report_request.c ---- */

/* The thread whose GIL the target waits for (its innermost native frames
 * acquire CPython's GIL, and another captured thread held it in the
 * stop), or 0; *holder_bt gets that thread's backtrace. */
pid_t hw_gil_holder_of(const report_request *req, const hw_named_capture *nc, const hw_backtrace **holder_bt);

/* The thread that holds the lock the target waits for in futex (its look
 * before the capture read the lock's owner: thread_time.h), when that
 * thread was captured, or 0; *holder_bt gets its backtrace. */
pid_t hw_lock_holder_of(const report_request *req, const hw_named_capture *nc, const hw_backtrace **holder_bt);

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
 * classify their frames (`in_app`), group them by stack and fill `p` from
 * `cpu`; hw_cpu_parts_free frees what it holds. */
void hw_cpu_parts_build(hw_symbolizer *sym, const hw_in_app_context *in_app, const cpu_high_request *cpu,
                        cpu_report_parts *p);
void hw_cpu_parts_free(cpu_report_parts *p);
/* The stderr line of a CPU-high report, up to where the report's path goes
 * (malloc'd, NULL when out of memory). */
char *hw_cpu_line(const report_request *req, const cpu_report_parts *p);

#endif
