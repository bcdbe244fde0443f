/*
 * watch.h - the watch stage: the agent's watch thread, its state, and what
 * its parts share.  Nothing outside this folder includes it (the command
 * line reaches the agent through agent/agent.h).
 *
 * The agent (`hangwatch run`, `watch` and `attach`) is one process whose
 * watch thread does everything that must happen now, while the program
 * runs on:
 *
 *   watch_loop.c      hw_agent_run, and the loop: one ppoll() until
 *                     something can have happened;
 *   launch.c          start the program with the observer preloaded;
 *   admission.c       the registration socket: admit loop pages, only from
 *                     the watched tree (admission_intake.c reads the
 *                     socket on a thread of its own; page_guard.c keeps a
 *                     page that faults from taking the agent down);
 *   kernel_watch.c    processes watched through the kernel observer
 *                     (watch -p, static programs, raw-syscall loops, their
 *                     new children); kernel_observer.c loads it;
 *   watched_table.c   the table of watched processes: adding one, finding
 *                     it, and tearing down everything it holds;
 *   loop_checks.c     look at each loop on its detector's schedule;
 *   hang_lifecycle.c  a hang's start (the capture), its annealing re-checks
 *                     and its end;
 *   early_sampler.c   --early-sampling: a ring of the busy loop's stacks;
 *   captures.c        capturing a watched process and handing the capture
 *                     to the report worker;
 *   cpu_high.c        --cpu-high: a process's CPU use, its hottest
 *                     threads' kernel samples, CPU-high reports;
 *   clock_source.c    the clock the observers stamp with;
 *   js_maps.c         node's perf maps, asked for and cleaned up;
 *   config_reload.c   watch --config's file read again on SIGHUP.
 *
 * It hands captures to the report stage (agent/report/report.h), whose
 * worker thread does everything that may happen later, and tells the
 * exports (agent/exports/exports.h) of hangs as they begin, go on and end.
 * docs/architecture.md draws the stages.
 *
 * Reading order for a newcomer: watch_loop.c, launch.c, admission.c,
 * watched_table.c, loop_checks.c, hang_lifecycle.c, captures.c, then
 * early_sampler.c and cpu_high.c.
 */
#ifndef HANGWATCH_WATCH_H
#define HANGWATCH_WATCH_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "agent/agent.h"
#include "agent/capture/capture.h"
#include "agent/common/clock.h"
#include "agent/exports/exports.h"
#include "agent/report/report.h"
#include "agent/symbols/symbols.h"
#include "core/abi/registration.h"
#include "core/abi/shared_page.h"
#include "core/detector.h"
#include "core/frame_gap.h"
#include "core/ping_detector.h"
#include "core/semaphore_detector.h"
#include "core/sleep_tally.h"
#include "core/stutter.h"
#include "core/tsc_clock.h"
#include "kernel_observer.h"

#define MAX_WATCHED 1024
/* What the namers of Python and JavaScript code keep, all watched processes
 * together (each is also bounded on its own: python_internal.h,
 * js_internal.h); past it, other processes' are dropped (runtime_namers.h).
 * The reports' are the naming thread's (report_naming.c); early samples
 * name the loop thread's frames on the watch thread with namers of their
 * own, which read names but no line tables or sources, bounded apart. */
#define HW_NAMERS_MAX_BYTES (256u << 20)
#define HW_SAMPLE_NAMERS_MAX_BYTES (64u << 20)
#define REGISTRATION_GRACE_NS 1000000000ull
#define HANG_END_POLL_NS 10000000ull  /* while hung, look for its end every 10 ms */
/* A re-check's report is sent only once the hang has gone on this long
 * after its capture: one that ended sooner caught the hang's tail
 * (decisions.md §39). */
#define HANG_TAIL_NS 100000000ull
#define PYTHON_LOOK_AGAIN_NS 10000000000ull /* no Python interpreter found: look again after 10 s */
/* What the watch thread reads of a process's memory map (to find its
 * interpreter, for early samples' function keys, in a capture for the line
 * at detection): about 1,300 mappings, where node and Python have about
 * 100.  A process can have 65,530, 6 MiB of text that took 40-50 ms to
 * read; its first 128 KiB take 0.7 ms (its first MiB took 6-9 ms: an
 * honest hang beside it was captured 6.4 ms late).  A report gets the
 * rest from the naming thread (report_naming.c). */
#define HW_WATCH_MAPS_MAX (128u << 10)
/* A hang's line at detection waits this long for its thread to stop (its
 * raw address is in the line); then it is said without: a loop thread
 * that waits for a CPU on a busy machine took 600 ms to stop (the stop
 * itself: p99 0.33 ms beside two CPU hogs, docs/benchmarks.md). */
#define CAPTURE_OVERDUE_MS 5u
#define STUTTER_LOOK_NS 50000000ull   /* with --stutter, look at a loop every 50 ms */
#define STOPPED_LOOK_NS 50000000ull   /* a stopped or traced process: look at its state every 50 ms */

/* Early sampling of one loop thread (early_sampler.c). */
typedef struct early_sampler early_sampler;

/* CPU-high reports (cpu_high.c): a watched process's CPU readings and the
 * samplers of its hottest threads. */
typedef struct cpu_watch cpu_watch;

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
    report_request *followup;   /* a re-check's capture, held until HANG_TAIL_NS after it */
    hw_hang_metrics metrics;    /* what the metrics keep of it (exports.h) */
    /* stops (SIGSTOP, a debugger): decisions.md §33 */
    bool held;                  /* the last look found the process stopped */
    uint64_t next_stop_look_ns; /* while hung: the next look at its state */
    uint64_t last_seen_running_ns; /* while hung: the last look that found it not stopped */
    early_sampler *sampler;     /* NULL unless early sampling is on */
    bool warned_unseen_wait;
    bool said_unseen;           /* its hangs cannot be told: said (loop_checks.c) */
    unsigned unseen_ends;       /* stretches over before a late look at their threshold (loop_checks.c) */
    bool thread_gone;           /* its thread ended (not the main one): dropped at the next look */
    unsigned launch_waits_seen; /* looks in a row that found the launch in a wait call */
    unsigned launch_looks;      /* looks at the launch so far (they are spread: loop_checks.c) */
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
    /* the `time` section (hang_time.c): a reading of the thread's counters
     * taken in the wait with sequence time_base_seq (it stands for the
     * next stretch's start) or during stretch time_base_seq */
    struct watched_process *process;
    hw_thread_counters time_base;
    uint64_t time_base_seq;
    bool time_base_stopped; /* time_base was read at a look that found the process stopped */
    /* a reading at the first look that found stretch first_busy_seq under way,
     * when time_base is from the wait before it: how long the thread waited
     * for a CPU after its wake-up, before the stretch (hw_wait_before_stretch) */
    hw_thread_counters first_busy;
    uint64_t first_busy_seq;
    hw_blocked_look hang_look; /* what it was blocked in at its hang's detection (for the final verdict) */
    uint64_t agent_stopped_ns; /* how long hangwatch's captures have held this thread stopped, in all */
    uint64_t agent_stops;      /* and how many times */
    /* of which in the loop's stretch stretch_stops_seq (its sequence
     * number right after those captures), for a window from that
     * stretch's start */
    uint64_t stretch_stopped_ns, stretch_stops, stretch_stops_seq;
    /* the kernel observer's counters at the start of stretch
     * kernel_start_seq, kept for its final update (the kernel's own record
     * goes with the stretch) */
    hw_thread_counters kernel_start;
    uint64_t kernel_start_seq;
    /* what its long stretch sleeps in, from looks every 100 ms (hang_time.c) */
    hw_sleep_tally sleeps;
    uint64_t next_sleep_look_ns;
} loop_watch;

typedef struct watched_process {
    pid_t pid;
    uint64_t serial;            /* never given twice (a pid is): whose names are kept (runtime_namers.h) */
    int pidfd;                  /* the process itself: readable once it has exited */
    const hw_shared_page *page; /* read-only view of the process's page */
    char executable[256];       /* /proc/PID/exe at registration */
    hw_python_target python;    /* its Python interpreter, if it runs one */
    uint64_t python_next_look_ns; /* when to look for one (again), 0 = at the first capture */
    bool python_looked;
    hw_js_reader js;            /* its V8 (node), read from V8's metadata, and the reader's state */
    bool js_looked;
    uint32_t clock;             /* its page's HW_PAGE_CLOCK_*, read once when the page came */
    uint64_t born_ns;           /* CLOCK_MONOTONIC before the process began (0: unknown): no stretch starts earlier */
    bool wants_kernel;          /* seen waiting through raw system calls: move it to the kernel observer */
    bool kernel_refused;        /* that was tried and could not be done */
    uint64_t next_wake_ns;      /* earliest of its loops' */
    loop_watch *loops[HW_PAGE_SLOTS];
    char metrics_name[96];      /* the metrics' key: its comm at registration and its container's label
                                   (hw_metrics_key; "" = not counted) */
    int end_status;             /* its wait status once a capture reaped it, else -1 (fatal hangs) */
    cpu_watch *cpu;             /* --cpu-high, created at its first look */
    hw_cgroup_cpu cgroup;       /* its CPU cgroup (hang_time.c), found at its first reading */
    bool cgroup_looked;
    uint64_t cgroup_membership; /* a hash of /proc/PID/cgroup when it was found: a change finds it again */
    unsigned cgroup_generation; /* how many times it moved; each reading carries it */
    int cgroup_error;           /* 0 when found, else -errno */
} watched_process;

/* The table of watched processes (watched_table.c).  A process keeps its
 * place, and its address, from admission to teardown: a slot is NULL when
 * free, and no slot from `end` on is used, so a walk is
 *   for (size_t i = 0; i < a->table.end; i++) if (a->table.slots[i]) ...
 * and may remove the process it is at. */
typedef struct watched_table {
    watched_process *slots[MAX_WATCHED];
    size_t count, end;
} watched_table;

/* The clock busy starts are stamped with (clock_source.c). */
typedef struct clock_source {
    bool tsc_usable;         /* observers stamp with the time-stamp counter */
    hw_tsc_calibration tsc;  /* ... and this turns their stamps into CLOCK_MONOTONIC */
    uint64_t rate_due_ns;    /* until it has a rate: when to pair again for one */
    char why[160];           /* why not, when not */
    bool said_jump;
} clock_source;

typedef struct machine_scan machine_scan;
typedef struct admission_intake admission_intake;

/* The hangs begun in one pass over the processes, captured together at
 * its end (hang_lifecycle.c). */
#define HANG_BATCH_MAX 16
typedef struct hang_batch {
    bool open;
    size_t count;
    struct begun_hang *items[HANG_BATCH_MAX];
} hang_batch;

typedef struct agent {
    const hw_agent_options *opts; /* &live: what the watch thread goes by */
    const hw_agent_options *base; /* the options it started with: the report worker's and the exports' */
    hw_agent_options live;        /* base, with what watch --config's reloads changed (config_reload.c) */
    struct hw_process_selector *own_selectors; /* live's selectors once a reload gave them, the agent's copy */
    bool reload_asked;            /* SIGHUP with --config: read the file again */
    int signal_fd;
    int registration_fd;
    admission_intake *intake; /* reads registration_fd (admission_intake.c) */
    char socket_name[64];
    sigset_t original_mask;
    struct sigaction original_sigpipe;
    struct rlimit original_nofile; /* the program gets this back (watch_loop.c raises ours) */
    bool nofile_raised;
    pid_t child;
    bool child_done;
    int child_status;
    uint64_t started_ns;
    bool warned_unregistered;
    unsigned long unseen_ends;  /* every loop's unseen_ends: said with the totals at the end */
    bool ever_registered;       /* some process of the tree has registered */
    pid_t tree_root;            /* processes descending from it may register */
    watched_table table;
    int target_pidfd; /* attach mode: the watched program */
    int pidfds_epoll; /* every watched process's pidfd (its pid the data): one descriptor in the poll set */
    bool done;        /* attach mode: stop now */
    bool pings_by_post; /* opts->pings_by_post, and the events socket to ask with */
    report_worker *worker;
    hw_exports *exports;
    hw_kernel_observer *kobs; /* the kernel observer, when some process is watched through it */
    clock_source clock;
    bool watch_mode;          /* `hangwatch watch`: running processes, no program of ours */
    machine_scan *scan;       /* `watch --all`: the machine's processes (machine_scan.c) */
    uint64_t watchdog_interval_ns, watchdog_next_ns; /* systemd's watchdog (service_notify.c), 0: none */
    /* refused registrations (admission.c) */
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
    size_t namers_max_bytes;    /* HW_NAMERS_MAX_BYTES, or less by HANGWATCH_NAMERS_MAX_MIB (for tests) */
    hw_runtime_namers *sample_namers; /* early samples' (watch thread only), within HW_SAMPLE_NAMERS_MAX_BYTES */
    uint64_t next_serial;       /* the next watched process's serial */
    bool said_no_perf_sampling; /* early samples fell back to ptrace: said once */
    bool said_tracepoint_cost; /* the kernel observer's tracepoints tax every process: said once */
    bool said_runtime_stops;    /* early samples of a Python or node process stop it: said once */
    bool said_no_cpu_samples;   /* CPU-high reports without samples: said once */
    hang_batch begun;           /* hangs found in this pass over the processes */
} agent;

/* launch.c */
int launch_open_signal_fd(agent *a);
int launch_program(agent *a);
int launch_exit_code(int status);

/* admission.c: the registration socket, and what passed its checks. */
typedef struct admitted {
    pid_t pid;
    uid_t uid;
    int pidfd;                  /* the sender's own (close-on-exec) */
    const hw_shared_page *page; /* mapped read-only, its header checked */
} admitted;
#define MAX_ADMITTED_PER_WAKE 64
/* The registration socket, and its intake (below) started on it. */
int admission_open_socket(agent *a);
/* Take the registrations the intake holds (at most MAX_ADMITTED_PER_WAKE,
 * so a flood cannot starve detection): those that pass every check go
 * into `out`, the others are refused (counted, said once).  Returns how
 * many were admitted. */
size_t admission_drain(agent *a, admitted *out);
/* Stop the intake and close the socket (agent_stop). */
void admission_close(agent *a);

/* admission_intake.c: the socket read by a thread of its own into a
 * bounded queue, so that a registering process waits for the read, never
 * for the checks of those before it. */
typedef struct admission_received {
    hw_registration_parsed m; /* a malformed one's descriptors are closed already */
    bool well_formed;
} admission_received;
admission_intake *admission_intake_start(int socket_fd);
/* Readable while registrations wait (the watch thread polls it). */
int admission_intake_fd(const admission_intake *in);
/* Up to `max` of them, oldest first: their descriptors are the caller's. */
size_t admission_intake_take(admission_intake *in, admission_received *out, size_t max);
/* The thread ended, what it still held closed. */
void admission_intake_stop(admission_intake *in);
/* Refuse `m` after all: the agent watches as many processes as it can. */
void admission_refuse_full(agent *a, const admitted *m);

/* page_guard.c: a page that faults (SIGBUS: its memfd shrank) is replaced
 * by a zero page and marked, instead of killing the agent. */
void page_guard_install(void);
void page_guard_add(const void *page);
void page_guard_remove(const void *page);
bool page_guard_take_news(void); /* did a page fault since the last call? */
bool page_guard_faulted(const void *page);

/* watched_table.c */
/* Watch process `pid` through `page` (its pidfd and page are the table's
 * afterwards; a page of the preloaded observer or the library is guarded).
 * NULL when the table is full (nothing taken over). */
watched_process *table_add(agent *a, pid_t pid, int pidfd, const hw_shared_page *page);
watched_process *table_find(agent *a, pid_t pid);
/* Process `pid`'s name (its comm, "?" when it cannot be read), escaped
 * for a line on stderr: the program's word.  Returns `out`. */
#define PROCESS_NAME_TEXT 72
const char *process_name_text(pid_t pid, char out[PROCESS_NAME_TEXT]);
/* Stop watching `w` and free everything it holds (its hangs are closed
 * first: finish_process). */
void table_remove(agent *a, watched_process *w);
/* `w` is watched through `page` of the kernel observer from now on (its
 * loops start afresh; its hangs are closed first). */
void table_switch_page(agent *a, watched_process *w, const hw_shared_page *page);

/* kernel_watch.c: processes watched through the kernel observer. */
/* `hangwatch watch -p PID...`: 0, or -errno after saying why. */
/* Load the kernel observer the way --attach says (a->kobs); 0, or -errno
 * with the reason in `why`.  Under the tracepoints chosen by default, it
 * says once on stderr what every other process pays and what to use
 * instead. */
int kernel_observer_open(agent *a, char *why, size_t len);

int kernel_watch_pids(agent *a);
/* `hangwatch watch --all`: the exec news on, the first scan of the
 * machine (machine_scan.c), and the -p PIDs given beside; 0, or -errno
 * after saying why. */
int kernel_watch_machine(agent *a);
/* The program, about to exec, from its first instruction (a launch). */
void kernel_watch_launched(agent *a, pid_t pid, const char *program);
/* The kernel observer told of new processes of followed ones: watch them
 * (from their start, as launches). */
void kernel_watch_new_children(agent *a);
/* `w` waits without going through glibc's wrappers: watch it through the
 * kernel observer from now on, or say why its hangs cannot be seen. */
void kernel_watch_switch(agent *a, watched_process *w);
/* `watch --all` found `pid` (`pidfd` its own) waiting: watch it and its
 * loop threads and forks, its main thread a loop only once it waits (the
 * table's entry, or NULL with why). */
watched_process *kernel_watch_found(agent *a, pid_t pid, int pidfd, char *why, size_t len);

/* service_notify.c: as a systemd service (Type=notify), READY once
 * watching, the watchdog fed from the watch thread, RELOADING and READY
 * around a reload, STOPPING at the end;
 * nothing when not started by systemd. */
void service_notify_ready(agent *a);
uint64_t service_watchdog_due(const agent *a);
void service_watchdog_tick(agent *a, uint64_t now);
void service_notify_stopping(void);
/* watch --config read again: RELOADING before, READY after. */
void service_notify_reloading(bool done);

/* config_reload.c: watch --config's file read again (SIGHUP): the
 * thresholds, selectors and exporters it gives taken, each change said;
 * a bad file keeps the options in use. */
void config_reload(agent *a);
void config_reload_free(agent *a);

/* machine_scan.c: `watch --all`'s processes of the machine.  A scan of
 * /proc once a second (machine_scan_due says when next) watches the
 * chosen ones that wait; machine_scan_exec takes news of an exec. */
machine_scan *machine_scan_new(void);
void machine_scan_free(machine_scan *m);
uint64_t machine_scan_due(const machine_scan *m);
void machine_scan_tick(agent *a, machine_scan *m, uint64_t now);
void machine_scan_exec(agent *a, machine_scan *m, pid_t pid, uint64_t now);
/* The selectors changed: every process is held to them again (the
 * watched ones the selectors no longer choose stop being watched). */
void machine_scan_reselect(agent *a, machine_scan *m);

/* clock_source.c: decide the observers' clock before the program starts;
 * pair the counter with CLOCK_MONOTONIC at every wake-up (and when the
 * first rate can be measured: clock_source_due, UINT64_MAX when never); which page
 * clocks this agent reads; a slot's reading with its busy start in
 * CLOCK_MONOTONIC (the latest time the stamp can stand for); the
 * detector's slack for a process's page. */
void clock_source_init(agent *a);
/* The same, the kernel's clocksource read from `clocksource_path` (the
 * tests': a file that says "tsc", or none). */
void clock_source_init_with(agent *a, const char *clocksource_path);
void clock_source_refresh(agent *a);
uint64_t clock_source_due(const agent *a);
bool clock_source_accepts(const agent *a, uint32_t clock);
bool clock_source_read(const agent *a, const watched_process *w, unsigned slot, hw_loop_reading *r);
uint64_t clock_source_slack(const agent *a, const watched_process *w);

/* loop_checks.c */
/* Look at the loops of `w` that are due; sets w->next_wake_ns. */
void check_process(agent *a, watched_process *w, uint64_t now);
/* Free every loop of `w` (their hangs are closed first). */
void free_loops(watched_process *w);

/* hang_lifecycle.c */
void hang_begin(agent *a, watched_process *w, loop_watch *l, hw_check c);
/* Between hang_batch_open and hang_batch_run (a pass over the processes),
 * hang_begin keeps the hangs it finds, one per process, and
 * hang_batch_run captures them together; hang_batch_holds says whether
 * `w` has one kept. */
void hang_batch_open(agent *a);
bool hang_batch_holds(const agent *a, const watched_process *w);
void hang_batch_run(agent *a);
void hang_found(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t start_ns,
                uint64_t busy_ns);
void hang_look_again(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now);
void hang_finish(agent *a, loop_watch *l, uint64_t now, const char *end, bool keep_launch);
/* Free a follow-up still held by `l` (a loop that goes away). */
void hang_release_followup(loop_watch *l);
void report_without_hang(agent *a, watched_process *w, loop_watch *l, const hw_check *c);
/* Close the hangs of a process that is gone or no longer watched.  `end`
 * is why ("process_exited", "exec", "agent_exited"); `wait_status` is the
 * process's wait status when it died and it is known, else -1: a hang the
 * death ended is then a fatal hang, "killed" or "exited" (decisions.md §31). */
void finish_process(agent *a, watched_process *w, uint64_t now, const char *end, int wait_status);
/* `run`'s program ended with `status` (a wait status, -1: not learned);
 * the first one kept is run's exit (watch_loop.c). */
void keep_child_status(agent *a, int status);
bool is_launch(const watched_process *w, const loop_watch *l, uint64_t seq);

/* hang_time.c */
/* A look at loop `l` found reading `r` at `now`: keep a reading of its
 * counters for the stretch (at most one per wait and per stretch, and one
 * per 50 ms).  Returns when to look again (UINT64_MAX: no need): 50 ms on
 * while the loop turns, so that a stretch's window starts no later than
 * that after it, unless the kernel observer keeps its start. */
uint64_t hang_time_note_look(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now);
/* A look at loop `l` found reading `r` at `now`: a stretch that has lasted
 * a quarter of the threshold is looked at every 100 ms for what it sleeps
 * in (core/sleep_tally.h).  Returns when to look again (UINT64_MAX: no
 * need). */
uint64_t hang_time_note_sleep(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now);
/* A reading of thread `tid` of `w` (with its process's CPU cgroup) now. */
void hang_time_thread_reading(watched_process *w, pid_t tid, hw_thread_counters *out);
/* A CPU-high report's time section: thread `tid` from reading `from`
 * (window_from "cpu_window"; NULL or invalid: `missing` says why) to now,
 * the report's capture having held it stopped `capture_stop_ns`. */
void hang_time_cpu_section(watched_process *w, pid_t tid, const hw_thread_counters *from, uint64_t capture_stop_ns,
                           hw_time_section *out);
/* A look found loop `l`'s process stopped in stretch `seq` (its clock starts
 * again now): read its counters, which stand for the restart. */
void hang_time_note_stop(watched_process *w, loop_watch *l, uint64_t seq);
/* Loop `l`'s thread's counters now (a window's end taken ahead). */
void hang_time_reading(watched_process *w, loop_watch *l, hw_thread_counters *out);
/* The `time` section of stretch `seq` (started at `stretch_start_ns`) up
 * to `end` (hang_time_reading's; NULL: read now); with what the thread was
 * blocked in when `look` (taken before the capture; its descriptor is
 * described here), or NULL. */
void hang_time_section(agent *a, watched_process *w, loop_watch *l, uint64_t seq, uint64_t stretch_start_ns,
                       hw_blocked_look *look, const hw_thread_counters *end, hw_time_section *out);
/* The same section, changing nothing the hang's own section counts from:
 * what the line at detection says while the capture still waits for the
 * thread to stop. */
void hang_time_preview(agent *a, watched_process *w, loop_watch *l, uint64_t seq, uint64_t stretch_start_ns,
                       const hw_blocked_look *look, const hw_thread_counters *end, hw_time_section *out);

/* early_sampler.c */
early_sampler *early_sampler_new(size_t capacity);
void early_sampler_free(early_sampler *s);
/* Sample loop `l` if a sample of its busy stretch is due; returns when to
 * look again (soon while the loop waits: the next stretch's first sample). */
uint64_t early_sampler_tick(agent *a, watched_process *w, loop_watch *l, const hw_loop_reading *r, uint64_t now);
/* Early sampling's Point Stack of stretch `seq`, as addresses, and every
 * sample of the ring, for a report (s may be NULL: "not requested"). */
void early_sampler_fill_request(early_sampler *s, uint64_t seq, report_request *req);

/* captures.c */
/* The process's Python interpreter, looked for (again) when due, and its
 * V8 (once); one whose frames are not read is said once. */
void look_for_runtimes(agent *a, watched_process *w);
/* An early sample's Python or JavaScript frames of `snap` named (runtime
 * names, one per thread) with the samples' namers (a->sample_namers: names
 * and keys, no lines), or NULL when it runs neither or they were not read. */
hw_runtime_names *name_sample_frames(agent *a, watched_process *w, const hw_process_snapshot *snap);
/* Stop only thread `tid` of `w` (a sample); its memory map is not read. */
void capture_thread(agent *a, watched_process *w, pid_t tid, hw_process_snapshot *snap);
/* Capture every thread of `w` into `req`, thread `tid` the report's
 * first, its Python or JavaScript frames read in the stop (their names
 * are read off this thread once it is handed over); `now` is the capture's
 * time (monotonic, taken right before it).  `req->check` is kept.
 * `overdue(ctx)` (NULL: none) is called if the thread has not stopped
 * CAPTURE_OVERDUE_MS into the stop (snapshot.h's overdue). */
void capture_for_request(agent *a, watched_process *w, pid_t tid, uint64_t now, report_request *req,
                         void (*overdue)(void *ctx), void *ctx);
/* capture_for_request in two halves (snapshot.h's hw_capture_start and
 * hw_capture_finish): several processes' captures under way at once,
 * finished in the reverse order of their starts. */
typedef struct request_capture {
    hw_capture_options copt; /* the retry's too */
    hw_capture_flight *flight;
    int result; /* hw_capture_start's */
    int avoid_cpu; /* the caller's, before the start: the hung thread's CPU, -1 unknown (cpu_avoid.h) */
} request_capture;
void capture_request_start(agent *a, watched_process *w, pid_t tid, uint64_t now, report_request *req,
                           void (*overdue)(void *ctx), void *ctx, request_capture *rc);
void capture_request_finish(agent *a, watched_process *w, report_request *req, request_capture *rc);
/* Hand `req`, a capture of `w`, to the report worker (hang NULL: a
 * one-off report); a full queue drops the capture, counted and said once.
 * `req` is emptied either way. */
void submit_request(agent *a, watched_process *w, hang_record *hang, report_request *req, bool recheck);

/* cpu_high.c: a tick of --cpu-high for `w` if one is due; returns when the
 * next is (UINT64_MAX when --cpu-high is off).  cpu_high_free when the
 * process is no longer watched. */
uint64_t cpu_high_check(agent *a, watched_process *w, uint64_t now);
void cpu_high_free(watched_process *w);

/* launch.c: the file execvp would run for `name` (malloc'd), or NULL. */
char *resolve_program(const char *name);

/* js_maps.c: whether `run` asks node for perf maps (--js-frames perf-map,
 * or auto and the node it will start has no V8 metadata), NODE_OPTIONS
 * with V8's perf map flags added (malloc'd; *ours tells whether the flags
 * are hangwatch's), a watched process that may be node, and removing the
 * maps hangwatch caused once their processes are gone. */
bool js_wants_perf_map(const agent *a);
char *js_node_options(const char *existing, bool *ours);
void js_maps_note_process(agent *a, pid_t pid, const char *executable);
void js_maps_remove(agent *a);

#endif
