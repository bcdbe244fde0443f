/*
 * watch.h - the agent's parts and the state they share.
 *
 * The agent (`hangwatch run` / `hangwatch attach`) is one process with two
 * threads:
 *
 *   the watch thread (agent.c's loop) does everything that must happen now:
 *     launch.c          start the program with the observer preloaded;
 *     registry.c        accept loop pages, only from the watched tree;
 *     loop_checks.c     look at each loop on its detector's schedule;
 *     hang_lifecycle.c  a hang's start (the capture: the program is stopped
 *                       for well under a millisecond), its annealing
 *                       re-checks and its end;
 *     cpu_high.c        --cpu-high: a process's CPU use, its hottest
 *                       threads' kernel samples, CPU-high reports;
 *   the report worker (report_worker.c, with report_samples.c and
 *     report_cpu_high.c: report_worker.h), at SCHED_IDLE, does everything
 *     that may happen later: unwinding, symbolizing, writing reports, adding
 *     final durations.  Any runnable thread of the watched program preempts
 *     it (docs/benchmarks.md measures what is left), and many hangs at once
 *     are all captured promptly however slow writing is.
 *
 *   and, with the exports (agent_exports.c, docs/metrics.md), threads that
 *     never touch detection: libmicrohttpd's for /metrics and a textfile
 *     writer (metrics_server.c), and the Sentry sender (sentry_sender.c).
 *
 * Reading order for a newcomer: agent.c, launch.c, registry.c,
 * loop_checks.c, hang_lifecycle.c, report_worker.c, then cpu_high.c.
 */
#ifndef HANGWATCH_WATCH_H
#define HANGWATCH_WATCH_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "core/annealing.h"
#include "core/detector.h"
#include "core/frame_gap.h"
#include "core/ping_detector.h"
#include "core/point_stack.h"
#include "core/ring_stacks.h"
#include "core/semaphore_detector.h"
#include "core/abi/shared_page.h"
#include "core/stutter.h"
#include "core/tsc_clock.h"
#include "agent/agent.h"
#include "agent/common/clock.h"
#include "agent/capture/capture.h"
#include "kernel_observer.h"
#include "agent/symbols/symbols.h"

#define MAX_WATCHED 1024
#define MAX_FRAMES 256
#define REGISTRATION_GRACE_NS 1000000000ull
#define MAX_STRETCH_REPORTS 16
#define HANG_END_POLL_NS 10000000ull  /* while hung, look for its end every 10 ms */
#define PYTHON_LOOK_AGAIN_NS 10000000000ull /* no Python interpreter found: look again after 10 s */
#define STUTTER_LOOK_NS 50000000ull   /* with --stutter, look at a loop every 50 ms */
#define STOPPED_LOOK_NS 50000000ull   /* a stopped or traced process: look at its state every 50 ms */

/* Early sampling of one process's loop thread: a ring per busy stretch. */
typedef struct sampler {
    hw_sample_ring ring;
    hw_sample *samples;
    size_t *top_repeat;
    uint64_t seq;            /* the stretch the ring holds, 0 = none */
    uint64_t next_sample_ns;
    uint64_t stretch_start_ns;
    hw_symbolizer *sym;      /* the watch thread's own, kept for the stretch */
    /* kernel samples (perf_sampler.h), when the loop thread can have them;
     * kept raw (registers and stack copy, per ring slot) and unwound only
     * when a report or an annealing check needs them */
    struct hw_perf_sampler *perf;
    hw_thread_snapshot *raw; /* ring capacity entries; stack == NULL: nothing pending */
    size_t raw_pending;
    bool perf_on;            /* enabled for the current busy stretch */
    bool perf_refused;       /* cannot be had: every sample stops the thread */
    pid_t perf_tid;          /* the thread it samples */
    bool perf_is_main;
    /* the stack taken while the thread was blocked, reused while it stays so */
    char parked_line[160];   /* its /proc/PID/task/TID/syscall line then */
    uint64_t parked_pcs[HW_SAMPLE_MAX_FRAMES];
    size_t parked_depth;
    uint64_t parked_top;
} sampler;

/* CPU-high reports (cpu_high.c): a watched process's CPU readings and the
 * samplers of its hottest threads. */
typedef struct cpu_watch cpu_watch;
typedef struct cpu_high_request cpu_high_request; /* below */
#define CPU_HOT_THREADS 3     /* threads sampled */
#define CPU_RING_SAMPLES 128  /* raw samples kept per sampled thread */
#define CPU_REPORT_THREADS 32 /* threads listed in a report, hottest first */

/* The report worker's record of one hang (report_worker.c). */
typedef struct hang_record hang_record;

/* One loop thread of a watched process: its slot, detector and hang state. */
typedef struct loop_watch {
    unsigned slot;              /* index in the process's page */
    pid_t tid;                  /* the thread, checked against /proc */
    hw_detector detector;
    uint64_t next_wake_ns;
    /* the stretch currently hung */
    bool hung;
    uint64_t hung_seq, hung_start_ns;
    uint64_t last_seen_hung_ns; /* the last look that found it still hung */
    uint64_t next_capture_ns;   /* next annealing check */
    uint64_t wait_previous, wait_current; /* Fibonacci waits, in periods, while the stack stays */
    hang_record *hang;          /* the worker's record of it */
    uint64_t resets_seen;       /* the worker's "the stack moved" decisions taken over */
    /* stops (SIGSTOP, a debugger): decisions.md §33 */
    bool held;                  /* the last look found the process stopped */
    uint64_t next_stop_look_ns; /* while hung: the next look at its state */
    uint64_t last_seen_running_ns; /* while hung: the last look that found it not stopped */
    sampler *sampler; /* NULL unless early sampling is on */
    bool warned_unseen_wait;
    unsigned launch_waits_seen; /* looks in a row that found the launch in a wait call */
    hw_stutter stutter; /* with --stutter */
    hw_semaphore_detector semaphore; /* with --detector semaphore */
    uint64_t semaphore_next_ns;      /* its next look (every 50 ms) */
    hw_stutter_verdict last_stutter;
    /* --detector ping (and the semaphore detector's ping while waiting) */
    hw_ping_detector ping;
    uint64_t ping_seq;  /* emulated answer: the loop's sequence at the post */
    bool ping_busy;     /* ... and whether it was busy then */
    /* --detector frame-gap */
    hw_frame_gap frames;       /* the emulated display link */
    uint64_t late_frames_seen; /* the library's late-tick count at the last look */
    uint64_t watch_start_ns;
    bool warned_no_frames;
    /* ---- metrics of the hang in progress (agent_exports.c) ---- */
    char metrics_process[16];    /* its process's name when it began */
    bool metrics_launch;         /* a launch: counted only once kept */
    uint64_t metrics_counted_ns; /* hung time counted up to here (monotonic) */
} loop_watch;

typedef struct watched_process {
    pid_t pid;
    int pidfd;                  /* the process itself: readable once it has exited */
    const hw_shared_page *page; /* read-only view of the process's page */
    char executable[256];       /* /proc/PID/exe at registration */
    hw_python_target python;    /* its Python interpreter, if it runs one */
    hw_python_namer *python_namer; /* names of its Python code, kept (watch thread only) */
    uint64_t python_next_look_ns; /* when to look for one (again), 0 = at the first capture */
    bool python_looked;
    uint32_t clock;             /* its page's HW_PAGE_CLOCK_*, read once when the page came */
    uint64_t born_ns;           /* CLOCK_MONOTONIC before the process began (0: unknown): no stretch starts earlier */
    bool wants_kernel;          /* seen waiting through raw system calls: move it to the kernel observer */
    bool kernel_refused;        /* that was tried and could not be done */
    uint64_t next_wake_ns;      /* earliest of its loops' */
    loop_watch *loops[HW_PAGE_SLOTS];
    char metrics_name[16];      /* its comm at registration, the metrics' process label ("" = not counted) */
    int end_status;             /* its wait status once a capture reaped it, else -1 (fatal hangs) */
    cpu_watch *cpu;             /* --cpu-high, created at its first look */
} watched_process;

typedef struct report_worker report_worker;

/* The clock busy starts are stamped with (clock_source.c). */
typedef struct clock_source {
    bool tsc_usable;         /* observers stamp with the time-stamp counter */
    hw_tsc_calibration tsc;  /* ... and this turns their stamps into CLOCK_MONOTONIC */
    char why[160];           /* why not, when not */
    bool said_jump;
} clock_source;

typedef struct agent {
    const hw_agent_options *opts;
    int signal_fd;
    int registration_fd;
    char socket_name[64];
    sigset_t original_mask;
    struct sigaction original_sigpipe;
    pid_t child;
    bool child_done;
    int child_status;
    uint64_t started_ns;
    bool warned_unregistered;
    bool ever_registered;       /* some process of the tree has registered */
    pid_t tree_root;            /* processes descending from it may register */
    watched_process watched[MAX_WATCHED];
    size_t watched_count;
    int target_pidfd; /* attach mode: the watched program */
    int events_fd;    /* attach mode with callbacks: a datagram socket */
    struct sockaddr_un events_addr;
    socklen_t events_addr_len;
    bool done;        /* attach mode: stop now */
    bool pings_by_post; /* opts->pings_by_post, and the events socket to ask with */
    report_worker *worker;
    hw_kernel_observer *kobs; /* the kernel observer, when some process is watched through it */
    clock_source clock;
    bool watch_mode;          /* `hangwatch watch`: running processes, no program of ours */
    /* refused registrations (registry.c) */
    unsigned long refused;
    bool said_refused;
    bool senders_have_pidfds;         /* SO_PASSPIDFD is on: every sender comes with its pidfd */
    /* node processes whose perf maps hangwatch caused (js_maps.c) */
    bool js_maps_ours;
    struct node_process {
        pid_t pid;
        uid_t uid;
    } *nodes;
    size_t node_count, node_cap;
    /* captures the worker had no room for */
    unsigned long queue_dropped;
    bool said_queue_dropped;
    bool said_no_perf_sampling; /* early samples fell back to ptrace: said once */
    /* ---- exports beyond the machine (agent_exports.c) ---- */
    struct hw_metrics *metrics;           /* NULL without --metrics-listen / --metrics-file */
    struct hw_metrics_exporter *exporter; /* the /metrics server and the textfile writer */
    struct hw_sentry_sender *sentry;      /* NULL without a Sentry DSN */
    bool said_no_cpu_samples;   /* CPU-high reports without samples: said once */
} agent;

/* launch.c */
int launch_open_signal_fd(agent *a);
int launch_program(agent *a);
int launch_exit_code(int status);

/* registry.c */
int registry_open_socket(agent *a);
void registry_install_fault_guard(void);
void registry_guard_page(const void *page);   /* a mapped page the guard covers */
void registry_unguard_page(const void *page);
void registry_drain(agent *a);
watched_process *registry_find(agent *a, pid_t pid);
void registry_forget(agent *a, watched_process *w);
/* Watch `pid` through a page of the kernel observer (`pidfd` is its own,
 * the watched process's afterwards).  False when the table is full. */
bool registry_add_kernel_watch(agent *a, pid_t pid, int pidfd, const hw_shared_page *page);
/* Watch `w` through the kernel observer from now on, instead of its
 * preloaded observer's page, which missed its waits (raw system calls,
 * io_uring); says what happened. */
void registry_switch_to_kernel(agent *a, watched_process *w);
/* The kernel observer told of new processes of followed ones: watch them
 * (from their start, as launches). */
void registry_watch_new_children(agent *a);
bool registry_take_fault_news(void); /* did a page fault since the last call? */
bool registry_page_faulted(const watched_process *w);

/* clock_source.c: decide the observers' clock before the program starts;
 * pair the counter with CLOCK_MONOTONIC at every wake-up; which page
 * clocks this agent reads; a slot's reading with its busy start in
 * CLOCK_MONOTONIC (the latest time the stamp can stand for); the
 * detector's slack for a process's page. */
void clock_source_init(agent *a);
void clock_source_refresh(agent *a);
bool clock_source_accepts(const agent *a, uint32_t clock);
bool clock_source_read(const agent *a, const watched_process *w, unsigned slot, hw_loop_reading *r);
uint64_t clock_source_slack(const agent *a, const watched_process *w);

/* cpu_high.c: a tick of --cpu-high for `w` if one is due; returns when the
 * next is (UINT64_MAX when --cpu-high is off).  cpu_high_free when the
 * process is no longer watched. */
uint64_t cpu_high_check(agent *a, watched_process *w, uint64_t now);
void cpu_high_free(watched_process *w);
void cpu_high_request_free(cpu_high_request *cpu);

/* loop_checks.c */
void check_process(agent *a, watched_process *w, uint64_t now);
size_t sampler_newest_keys(sampler *s, uint64_t *keys, size_t max);
void free_loops(agent *a, watched_process *w);

/* hang_lifecycle.c */
void hang_begin(agent *a, watched_process *w, loop_watch *l, hw_check c);
void hang_found(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t start_ns,
                uint64_t busy_ns);
void hang_look_again(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now);
void hang_finish(agent *a, loop_watch *l, uint64_t now, const char *end, bool keep_launch);
void report_without_hang(agent *a, watched_process *w, loop_watch *l, const hw_check *c);
/* Capture every thread of `w` (thread `tid` as the report's first) for a
 * CPU-high report and hand it to the worker with `cpu` (taken over). */
void report_cpu_high(agent *a, watched_process *w, pid_t tid, cpu_high_request *cpu);
/* Close the hangs of a process that is gone or no longer watched.  `end`
 * is why ("process_exited", "exec", "agent_exited"); `wait_status` is the
 * process's wait status when it died and it is known, else -1: a hang the
 * death ended is then a fatal hang, "killed" or "exited" (decisions.md §31). */
void finish_process(agent *a, watched_process *w, uint64_t now, const char *end, int wait_status);
void capture_thread(agent *a, watched_process *w, pid_t tid, hw_process_snapshot *snap);
void look_for_python(watched_process *w);
bool is_launch(const watched_process *w, const loop_watch *l, uint64_t seq);
void send_event(agent *a, uint32_t kind, pid_t tid, uint64_t busy_ns, uint64_t final_ns, const char *path);
void send_ping(agent *a, const loop_watch *l);
int open_events_socket(agent *a, const char *name);

/* agent_exports.c: Prometheus metrics and Sentry events.  Started before
 * the program (0, or -errno after saying why: the agent then exits 2),
 * stopped after the report worker has written its last report. */
int exports_start(agent *a);
void exports_stop(agent *a);
/* The watch thread's part in the metrics of a hang: it began (a launch is
 * counted only once kept), it is still on at `now`, it ended. */
void exports_hang_begin(agent *a, const watched_process *w, loop_watch *l, const hw_check *c, uint64_t now);
void exports_hang_still_on(agent *a, loop_watch *l, uint64_t now);
void exports_hang_end(agent *a, loop_watch *l, uint64_t now, uint64_t final_ns, bool keep_launch);
/* The report worker's: report `file_name` is complete (its final duration
 * in, if it will ever have one): its Sentry event goes into the spool. */
void exports_report_complete(agent *a, const char *file_name);

/* report_worker.c */

/* A CPU-high report's figures (cpu_high.c), moved to the worker with its
 * request (report_cpu_high.c makes the report's section of them). */
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

struct cpu_high_request {
    unsigned percent;            /* the threshold */
    uint64_t window_ns, cpu_ns;  /* the window measured and the CPU used in it */
    uint64_t tenths;             /* the process's average, tenths of a percent of one CPU */
    uint64_t threads_window_ns;  /* what the threads' figures cover (up to the window) */
    uint64_t sample_interval_ns;
    size_t thread_count;
    cpu_high_thread threads[CPU_REPORT_THREADS];
    size_t sampled_count;
    cpu_high_sampled sampled[CPU_HOT_THREADS];
};

/* What the watch thread hands the worker for one capture. */
typedef struct report_request {
    hw_process_snapshot snap;     /* moved in: the worker frees it */
    hw_python_target python;      /* the process's interpreter */
    hw_python_names *py_names;    /* each captured thread's Python frames, named right after the
                                     capture (snap.thread_count entries), or NULL */
    hw_check check;
    pid_t pid, tid;
    char executable[256];
    int64_t detected_unix_ns;
    uint64_t captured_ns;         /* monotonic time of the capture */
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
    /* a re-check with early sampling: the newest sample's function keys
     * decide the annealing, not the captured stack */
    size_t key_count; /* 0: unwind the captured hung thread */
    uint64_t keys[HW_ANNEAL_MAX_FRAMES];
    /* stutter reports */
    hw_stutter_verdict stutter;
    /* CPU-high reports: owned by the request (NULL for every other) */
    cpu_high_request *cpu;
} report_request;

void sampler_fill_request(sampler *s, watched_process *w, uint64_t seq, report_request *req);
/* js_maps.c: NODE_OPTIONS with V8's perf map flags added (malloc'd; *ours
 * tells whether the flags are hangwatch's), a watched process that may be
 * node, and removing the maps hangwatch caused once their processes are gone. */
char *js_node_options(const char *existing, bool *ours);
void js_maps_note_process(agent *a, pid_t pid, const char *executable);
void js_maps_remove(agent *a);

/* Free what a request holds (its snapshot, its named frames). */
void report_request_release(report_request *req);
/* The process's namer of Python code (created on first use), or NULL. */
hw_python_namer *python_namer(watched_process *w);

report_worker *worker_start(agent *a);
/* Drain every job, end the thread, say the totals (reports dropped or not
 * written) if `say_totals`, and free it. */
void worker_stop(report_worker *wk, bool say_totals);
/* A new hang's record (the first report of a hung stretch comes with it). */
hang_record *worker_new_hang(bool launch);
/* Hand over a report, a re-check (`recheck`: decide by annealing first) or
 * a one-off report (hang NULL).  The request's snapshot is the worker's
 * afterwards.  False when the queue is full (the capture is dropped and
 * counted). */
bool worker_submit_report(report_worker *wk, hang_record *hang, report_request *req, bool recheck);
/* The hang is over: final durations; a launch's held reports are written
 * (`keep_launch`) or dropped.  `wait_status`: the process's, when its death
 * ended the hang (end "killed" or "exited"), else -1.  The record is the
 * worker's afterwards. */
void worker_submit_finish(report_worker *wk, hang_record *hang, uint64_t final_ns, uint64_t precision_ns,
                          const char *end, bool keep_launch, int wait_status);
/* How many re-checks the worker found with a moved stack (and reported),
 * and when the newest of them was captured. */
uint64_t worker_resets(hang_record *hang, uint64_t *captured_ns);

#endif
