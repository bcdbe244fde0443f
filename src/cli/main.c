/*
 * main.c - the `hangwatch` command line.
 *
 *   hangwatch run [options] -- PROG [ARGS...]   watch PROG, write reports
 *   hangwatch show REPORT.json...               print a report for people
 *   hangwatch watch -p PID... [options]         watch running processes (kernel observer)
 *   hangwatch stack PID [--json FILE]           every thread's stack, now
 *   hangwatch stats [--json] REPORT.json|DIR... hangs grouped, by total time
 *   hangwatch export --format F -o FILE REPORT.json|DIR...  for speedscope, Perfetto
 *   hangwatch html -o FILE REPORT.json|DIR...   one self-contained HTML page
 *
 * Usage errors (an unknown flag, a malformed duration, no program) and an
 * unusable report directory print a message and exit 2 before anything is
 * started.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/common/report_dir.h"
#include "core/parse/duration.h"
#include "core/frame_gap.h"
#include "core/hw_version.h"
#include "export.h"
#include "metrics_sentry_options.h"
#include "html.h"
#include "show.h"
#include "stack.h"
#include "stats.h"
#include "upload.h"

static const char usage_text[] =
    "usage: hangwatch run [OPTIONS] -- PROG [ARGS...]\n"
    "       hangwatch watch -p PID [-p PID...] [--duration DUR] [--follow] [OPTIONS]\n"
    "       hangwatch show REPORT.json...\n"
    "       hangwatch stack PID [--json FILE]\n"
    "       hangwatch stats [--json] REPORT.json|DIR...\n"
    "       hangwatch export --format speedscope|chrome-trace -o FILE REPORT.json|DIR...\n"
    "       hangwatch upload [--sentry-dsn DSN] DIR\n"
    "       hangwatch html -o FILE REPORT.json|DIR...\n"
    "       hangwatch attach --pid PID --socket @NAME [OPTIONS]   (started by the C library)\n"
    "       hangwatch --help | --version\n"
    "\n"
    "Finds hangs of a program's main (event-loop) thread while they happen: a\n"
    "stretch of work between two waits that lasts longer than the threshold.\n"
    "The hung thread and every other thread are captured from outside the\n"
    "program (ptrace), without changing what it does, and a JSON report is\n"
    "written for each hang.\n"
    "\n"
    "run options:\n"
    "  --threshold DUR      busy time that makes a hang (default 2s)\n"
    "  --check-period DUR   how often the loop is looked at (default 1s)\n"
    "  --check-mode MODE    exact (default): detect when the threshold is\n"
    "                       crossed; periodic: Matrix's fixed check period\n"
    "  --report-dir DIR     where reports go (default ./hangwatch-reports,\n"
    "                       created with mode 0700); checked before PROG\n"
    "                       starts: a directory owned by you that nobody\n"
    "                       else can write to\n"
    "  --early-sampling     sample the busy loop thread's stack every sample\n"
    "                       interval into a ring and add Matrix's Point Stack\n"
    "                       (the most telling stack, with repeat counts) to\n"
    "                       each report (off by default, as in Matrix)\n"
    "  --sample-interval DUR  early-sampling interval (default 50ms)\n"
    "  --sampler HOW        kernel (default): while the thread runs, the kernel\n"
    "                       takes its samples (a perf event: no stop), in the\n"
    "                       timer ticks it takes anyway where tracefs is mounted\n"
    "                       and the agent may use it (the interval is then whole\n"
    "                       ticks), else on an interrupt of their own; a thread\n"
    "                       blocked off its CPU is stopped once and that stack\n"
    "                       reused while it stays blocked; Python processes and\n"
    "                       systems without perf events are stopped for each\n"
    "                       sample (said once); task-clock: kernel samples always\n"
    "                       on their own interrupt (CPUs without ticks, nohz_full);\n"
    "                       ptrace: stop the thread for every sample\n"
    "  --ring-size N        samples kept (default check period / interval = 20)\n"
    "  --wait-site MODE     auto (default): only the loop's own wait call ends a\n"
    "                       busy stretch, a wait nested in a callback is work;\n"
    "                       any: every wait call on the loop thread counts\n"
    "  --threads WHICH      main (default): watch the main thread's loop, as\n"
    "                       Matrix; loops: every thread that waits in an event\n"
    "                       loop (threads that wait on locks or condition\n"
    "                       variables for work are not loops)\n"
    "  --detector NAME      runloop (default): Matrix's busy-stretch detector.\n"
    "                       The others are the seeds' alternatives, kept for\n"
    "                       comparison (docs/comparison.md):\n"
    "                       semaphore: 5 x 50 ms state sampling (a long hang\n"
    "                       is reported every 250 ms), with a ping while the\n"
    "                       loop waits;\n"
    "                       ping: ANREye's sub-thread ping, one ping per\n"
    "                       threshold, answered when the loop next waits;\n"
    "                       frame-gap: a 60 Hz tick the loop runs when it next\n"
    "                       waits; a late tick is reported after the hang\n"
    "  --frame-interval DUR the frame-gap tick (default 16.667ms)\n"
    "  --stutter            also report stutter: a loop busy most of 5 s in\n"
    "                       stalls of 250 ms or more, none of them a hang\n"
    "                       (runloop detector only)\n"
    "  --no-follow          watch only PROG itself, not the processes it forks\n"
    "                       or executes (followed by default)\n"
    "  --observer WHICH     auto (default): the preloaded observer, and the\n"
    "                       kernel observer for a statically linked PROG or a\n"
    "                       process found waiting through raw system calls or\n"
    "                       io_uring (when it can be loaded: root, or CAP_BPF\n"
    "                       and CAP_PERFMON); preload: only the preloaded one;\n"
    "                       kernel: only the kernel observer, for PROG and\n"
    "                       the processes it forks (unless --no-follow)\n"
    "  --no-js-frames       do not add V8's perf map flags to NODE_OPTIONS\n"
    "                       (by default node writes /tmp/perf-PID.map, which\n"
    "                       names JavaScript functions in reports; hangwatch\n"
    "                       removes the maps it caused when it ends)\n"
    "  --daily-limit N      at most N reports per 24 h in the report directory\n"
    "                       (default 100, as Matrix; 0 = no limit)\n"
    "  --max-dir-size SIZE  stop writing reports when the directory would\n"
    "                       grow past SIZE (default 256M; K, M, G; 0 = no cap)\n"
    "  -q, --quiet          no line on stderr per hang\n"
    HW_METRICS_SENTRY_USAGE
    "  --ignore-frame PATTERN  a hang whose hung stack has a function matching\n"
    "                       PATTERN (shell-style: block_*, *Dialog::run; Python\n"
    "                       and JavaScript functions too) is counted and said on\n"
    "                       stderr, not written (repeatable, at most 64)\n"
    "  --cpu-high PERCENT[/DUR]  also report a process that uses more than\n"
    "                       PERCENT of one CPU on average over DUR (default\n"
    "                       60s, at least 1s; Matrix: 80%/60s): a cpu_high\n"
    "                       report with each thread's share and the sampled\n"
    "                       stacks of the hottest; again after 1, 2, 3, 5 ...\n"
    "                       windows while it stays that hot\n"
    "\n"
    "DUR is a number and a unit: ns, us, ms, s or m (500ms, 1.5s, 2s).\n"
    "The exit status is PROG's own (128+N if signal N killed it), or 2 when\n"
    "hangwatch's arguments are wrong, the report directory is unusable, the\n"
    "metrics port or file cannot be used, or PROG cannot be started.  Only\n"
    "PROG and its descendants are watched; registrations from other\n"
    "processes are refused (docs/security.md).\n"
    "\n"
    "show prints a report's hung thread, its stack and the other threads.\n"
    "\n"
    "watch watches processes that are already running, through a kernel\n"
    "observer (eBPF at the wait system calls; needs root, or CAP_BPF,\n"
    "CAP_PERFMON and CAP_SYS_PTRACE), until they exit, Ctrl-C or --duration;\n"
    "it takes run's detection and report options (not --no-follow or\n"
    "--no-js-frames) and -p PID (repeatable, at most 64).  The processes are\n"
    "left exactly as they were: nothing is loaded into them, and they are\n"
    "stopped only for the moment of a capture.  --duration DUR stops after\n"
    "DUR; --follow also watches the processes they fork from now on.  The\n"
    "exit status is 0, or 2 when a process cannot be watched.\n"
    "\n"
    "stack prints the stack of every thread of the running process PID, taken\n"
    "the same way (its sleeps and waits go on undisturbed); --json FILE also\n"
    "writes it as a report (hang_type \"snapshot\").  It needs the right to\n"
    "ptrace PID: the same user, or root / CAP_SYS_PTRACE; it exits 2 without.\n"
    "\n"
    "stats groups the hangs of reports (files, or directories searched for\n"
    "*.json) by grouping key, the same for the same hang in every run, build\n"
    "and machine, and prints each group's count, total, median and worst\n"
    "duration, first and last seen, processes and culprit frame, sorted by\n"
    "total hang time (--json: as JSON).  export writes the hangs for\n"
    "existing viewers: speedscope's file format, or Chrome's Trace Event\n"
    "JSON for Perfetto.  html writes one self-contained HTML page: the\n"
    "groups as a sortable table, each group's stack, other threads and\n"
    "flame graph of its samples, a timeline per process; it loads nothing\n"
    "and opens offline.  They name each file they cannot read and go on;\n"
    "they exit 1 only when nothing could be read (hangwatch stats --help,\n"
    "hangwatch export --help, hangwatch html --help).\n"
    "\n"
    "upload sends the Sentry events an agent left in DIR/sentry-spool when the\n"
    "server could not be reached (hangwatch upload --help).\n";

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "hangwatch: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'hangwatch --help'.\n");
    return 2;
}

/* A whole decimal number from min to max (no minus sign, no junk): 0, else -1. */
static int whole_number(const char *text, long min, long max, long *out)
{
    if (text[0] == '-')
        return -1;
    char *end = NULL;
    errno = 0;
    long n = strtol(text, &end, 10);
    if (errno || end == text || *end || n < min || n > max)
        return -1;
    *out = n;
    return 0;
}

/* The --detector names; frame_gap is accepted as the reports spell it. */
static int detector_by_name(const char *text, hw_detector_kind *out)
{
    static const struct {
        const char *name;
        hw_detector_kind kind;
    } names[] = {{"runloop", HW_DETECTOR_RUNLOOP},
                 {"semaphore", HW_DETECTOR_SEMAPHORE},
                 {"ping", HW_DETECTOR_PING},
                 {"frame-gap", HW_DETECTOR_FRAME_GAP},
                 {"frame_gap", HW_DETECTOR_FRAME_GAP}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(text, names[i].name) == 0) {
            *out = names[i].kind;
            return 0;
        }
    }
    return -1;
}

/* One of two words: *second says which.  0, or -1 for anything else. */
static int one_of(const char *text, const char *first, const char *second, bool *is_second)
{
    if (strcmp(text, first) != 0 && strcmp(text, second) != 0)
        return -1;
    *is_second = strcmp(text, second) == 0;
    return 0;
}

static int parse_duration_option(const char *name, const char *value, uint64_t *out)
{
    const char *why = NULL;
    if (hw_parse_duration(value, out, &why) != 0) {
        fprintf(stderr, "hangwatch: invalid %s '%s': %s\nTry 'hangwatch --help'.\n", name, value, why);
        return -1;
    }
    if (*out == 0) {
        fprintf(stderr, "hangwatch: invalid %s '%s': must be greater than zero\n", name, value);
        return -1;
    }
    return 0;
}

/* Coarse-stamped pages (the C library's, and the preloaded observer's where
 * the time-stamp counter is not used) carry CLOCK_MONOTONIC_COARSE, which
 * was measured to lag the precise clock by up to 1.7 ticks (6.9 ms with
 * 4 ms ticks): allow two ticks so that a reported hang is always a real one.
 * Only those pages get it (clock_source.c). */
static void set_clock_slack(hw_detector_config *cfg)
{
    struct timespec res;
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0)
        cfg->clock_slack_ns = 2 * ((uint64_t)res.tv_sec * 1000000000ull + (uint64_t)res.tv_nsec);
}

/* The observer library: $HANGWATCH_PRELOAD, else next to this executable. */
static char *find_preload(void)
{
    const char *env = getenv("HANGWATCH_PRELOAD");
    if (env && *env)
        return realpath(env, NULL);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return NULL;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return NULL;
    *slash = '\0';
    char *candidate = NULL;
    if (asprintf(&candidate, "%s/../lib/hangwatch/libhangwatch-preload.so", self) < 0)
        return NULL;
    char *resolved = realpath(candidate, NULL);
    free(candidate);
    return resolved;
}

/* Open and check the report directory before anything starts: an unusable
 * one is an error now, not a silent loss at the first hang.  0, or -1 after
 * saying why. */
static int open_report_dir(hw_agent_options *opts)
{
    char why[512];
    int rc = hw_report_dir_open(opts->report_dir, &opts->report_dir_handle, why, sizeof why);
    if (rc != 0) {
        fprintf(stderr, "hangwatch: cannot use report directory '%s': %s\n", opts->report_dir, why);
        return -1;
    }
    return 0;
}

/* The most processes one `hangwatch watch` takes (-p, repeated). */
#define MAX_WATCH_PIDS 64

/* Options of issue 15 (decisions.md §32, §34): long options only, with
 * values no short option can take. */
enum {
    OPT_IGNORE_FRAME = 0x1500,
    OPT_CPU_HIGH,
};
#define MAX_IGNORE_FRAMES 64
#define MAX_IGNORE_FRAME_LEN 255

typedef enum cli_mode { MODE_RUN, MODE_ATTACH, MODE_WATCH } cli_mode;

/* `run` starts PROG; `attach` (internal, started by the C library) watches
 * the running process --pid and takes --socket and --ready-fd; `watch`
 * watches running processes (-p PID...) through the kernel observer. */
static int cmd_watch(int argc, char **argv, cli_mode mode)
{
    bool attach = mode == MODE_ATTACH;
    pid_t watch_pids[MAX_WATCH_PIDS];
    size_t watch_pid_count = 0;
    const char *ignore_frames[MAX_IGNORE_FRAMES];
    hw_agent_options opts = {0};
    opts.ready_fd = -1;
    hw_detector_config_default(&opts.detector);
    opts.report_dir = "hangwatch-reports";
    opts.limits.daily_limit = 100;
    opts.limits.max_dir_bytes = 256ull << 20;

    static const struct option longopts[] = {
        {"threshold", required_argument, NULL, 't'}, {"check-period", required_argument, NULL, 'C'},
        {"check-mode", required_argument, NULL, 'm'}, {"report-dir", required_argument, NULL, 'd'},
        {"quiet", no_argument, NULL, 'q'},           {"help", no_argument, NULL, 'h'},
        {"early-sampling", no_argument, NULL, 'e'},  {"sample-interval", required_argument, NULL, 'i'},
        {"ring-size", required_argument, NULL, 'r'},  {"daily-limit", required_argument, NULL, 'L'},
        {"max-dir-size", required_argument, NULL, 'S'}, {"wait-site", required_argument, NULL, 'w'},
        {"no-follow", no_argument, NULL, 'F'},         {"threads", required_argument, NULL, 'T'},
        {"pid", required_argument, NULL, 'P'},         {"socket", required_argument, NULL, 'O'},
        {"ready-fd", required_argument, NULL, 'R'},     {"events-socket", required_argument, NULL, 'V'},
        {"stutter", no_argument, NULL, 'U'},            {"detector", required_argument, NULL, 'D'},
        {"frame-interval", required_argument, NULL, 'G'}, {"pings-by-post", no_argument, NULL, 'Q'},
        {"frames-from-loop", no_argument, NULL, 'X'}, {"no-js-frames", no_argument, NULL, 'J'},
        {"duration", required_argument, NULL, 'Z'}, {"observer", required_argument, NULL, 'B'},
        {"follow", no_argument, NULL, 'W'}, {"sampler", required_argument, NULL, 'H'},
        HW_METRICS_SENTRY_LONG_OPTIONS,
        {"ignore-frame", required_argument, NULL, OPT_IGNORE_FRAME},
        {"cpu-high", required_argument, NULL, OPT_CPU_HIGH},
        {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    /* '+': stop at the first non-option, PROG's own flags are PROG's. */
    while ((c = getopt_long(argc, argv, mode == MODE_WATCH ? "+:qhp:" : "+:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 't':
            if (parse_duration_option("--threshold", optarg, &opts.detector.threshold_ns) != 0)
                return 2;
            break;
        case 'C':
            if (parse_duration_option("--check-period", optarg, &opts.detector.check_period_ns) != 0)
                return 2;
            break;
        case 'm': {
            bool periodic;
            if (one_of(optarg, "exact", "periodic", &periodic) != 0)
                return usage_error("invalid --check-mode '%s': use exact or periodic", optarg);
            opts.detector.mode = periodic ? HW_CHECK_PERIODIC : HW_CHECK_EXACT;
            break;
        }
        case 'd':
            if (*optarg == '\0')
                return usage_error("%s--report-dir must not be empty", "");
            opts.report_dir = optarg;
            break;
        case 'q':
            opts.quiet = true;
            break;
        case 'e':
            opts.early_sampling = true;
            break;
        case 'H':
            if (strcmp(optarg, "kernel") == 0)
                opts.samples_by_ptrace = false;
            else if (strcmp(optarg, "task-clock") == 0)
                opts.samples_by_task_clock = true;
            else if (strcmp(optarg, "ptrace") == 0)
                opts.samples_by_ptrace = true;
            else
                return usage_error("invalid --sampler '%s': use kernel, task-clock or ptrace", optarg);
            break;
        case 'U':
            opts.stutter = true;
            break;
        case 'D':
            if (detector_by_name(optarg, &opts.detector_kind) != 0)
                return usage_error("invalid --detector '%s': use runloop, semaphore, ping or frame-gap", optarg);
            break;
        case 'G':
            if (parse_duration_option("--frame-interval", optarg, &opts.frame_interval_ns) != 0)
                return 2;
            break;
        case 'Q':
        case 'X':
            if (!attach)
                return usage_error("%s--pings-by-post and --frames-from-loop belong to hangwatch attach", "");
            if (c == 'Q')
                opts.pings_by_post = true;
            else
                opts.frames_from_loop = true;
            break;
        case 'F':
        case 'J':
            if (mode == MODE_WATCH)
                return usage_error("%s--no-follow and --no-js-frames belong to hangwatch run (watch starts nothing)",
                                   "");
            if (c == 'F')
                opts.no_follow = true;
            else
                opts.no_js_frames = true;
            break;
        case 'B':
            if (mode != MODE_RUN)
                return usage_error("%s--observer belongs to hangwatch run", "");
            if (strcmp(optarg, "auto") == 0)
                opts.observer = HW_OBSERVER_AUTO;
            else if (strcmp(optarg, "preload") == 0)
                opts.observer = HW_OBSERVER_PRELOAD;
            else if (strcmp(optarg, "kernel") == 0)
                opts.observer = HW_OBSERVER_KERNEL;
            else
                return usage_error("invalid --observer '%s': use auto, preload or kernel", optarg);
            break;
        case 'W':
            if (mode != MODE_WATCH)
                return usage_error("%s--follow belongs to hangwatch watch (run follows by default)", "");
            opts.follow_children = true;
            break;
        case 'Z':
            if (mode != MODE_WATCH)
                return usage_error("%s--duration belongs to hangwatch watch", "");
            if (parse_duration_option("--duration", optarg, &opts.duration_ns) != 0)
                return 2;
            break;
        case 'p':
        case 'P':
        case 'R': {
            if (mode == MODE_WATCH && c != 'R') {
                long n;
                if (whole_number(optarg, 1, INT32_MAX, &n) != 0)
                    return usage_error("invalid -p '%s': a process id (a whole number above 0)", optarg);
                if (watch_pid_count == MAX_WATCH_PIDS)
                    return usage_error("%stoo many -p: at most 64 processes", "");
                watch_pids[watch_pid_count++] = (pid_t)n;
                break;
            }
            long n;
            if (!attach || whole_number(optarg, c == 'P' ? 1 : 0, INT32_MAX, &n) != 0)
                return usage_error("invalid or misplaced option value '%s'", optarg);
            if (c == 'P')
                opts.attach_pid = (pid_t)n;
            else
                opts.ready_fd = (int)n;
            break;
        }
        case 'O':
        case 'V':
            if (!attach)
                return usage_error("%s--socket and --events-socket belong to hangwatch attach", "");
            if (c == 'O')
                opts.socket_name = optarg;
            else
                opts.events_socket = optarg;
            break;
        case 'T':
            if (one_of(optarg, "main", "loops", &opts.all_loop_threads) != 0)
                return usage_error("invalid --threads '%s': use main or loops", optarg);
            break;
        case 'w':
            if (one_of(optarg, "auto", "any", &opts.every_wait_is_the_loop) != 0)
                return usage_error("invalid --wait-site '%s': use auto or any", optarg);
            break;
        case 'L': {
            long n;
            if (whole_number(optarg, 0, 1000000, &n) != 0)
                return usage_error("invalid --daily-limit '%s': a whole number (0 = no limit)", optarg);
            opts.limits.daily_limit = (unsigned)n;
            break;
        }
        case 'S': {
            const char *why = NULL;
            if (hw_parse_size(optarg, &opts.limits.max_dir_bytes, &why) != 0) {
                fprintf(stderr, "hangwatch: invalid --max-dir-size '%s': %s\nTry 'hangwatch --help'.\n", optarg,
                        why);
                return 2;
            }
            break;
        }
        case 'i':
            if (parse_duration_option("--sample-interval", optarg, &opts.sample_interval_ns) != 0)
                return 2;
            break;
        case 'r': {
            long n;
            if (whole_number(optarg, 1, 10000, &n) != 0)
                return usage_error("invalid --ring-size '%s': a whole number from 1 to 10000", optarg);
            opts.ring_size = (size_t)n;
            break;
        }
        case OPT_IGNORE_FRAME:
            if (*optarg == '\0' || strlen(optarg) > MAX_IGNORE_FRAME_LEN)
                return usage_error("invalid --ignore-frame '%s': a pattern of 1 to 255 characters", optarg);
            if (opts.ignore_frame_count == MAX_IGNORE_FRAMES)
                return usage_error("%stoo many --ignore-frame: at most 64", "");
            ignore_frames[opts.ignore_frame_count++] = optarg;
            opts.ignore_frames = ignore_frames;
            break;
        case OPT_CPU_HIGH: {
            const char *why = NULL;
            if (hw_cpu_high_parse(optarg, &opts.cpu_high, &why) != 0) {
                fprintf(stderr, "hangwatch: invalid --cpu-high '%s': %s\nTry 'hangwatch --help'.\n", optarg, why);
                return 2;
            }
            break;
        }
        case 'h':
            fputs(usage_text, stdout);
            return 0;
        case ':':
            return usage_error("option '%s' needs a value", argv[optind - 1]);
        default: {
            int handled = hw_metrics_sentry_option(c, optarg, &opts);
            if (handled == 2)
                return 2;
            if (handled == 0)
                return usage_error("unknown option '%s'", argv[optind - 1]);
            break;
        }
        }
    }
    if (hw_metrics_sentry_finish(&opts, !attach) != 0)
        return 2;
    if (opts.sample_interval_ns == 0)
        opts.sample_interval_ns = 50000000ull;
    if (opts.frame_interval_ns == 0)
        opts.frame_interval_ns = HW_FRAME_INTERVAL_DEFAULT_NS;
    if (opts.stutter && opts.detector_kind != HW_DETECTOR_RUNLOOP)
        return usage_error("%s--stutter works with the runloop detector only", "");
    if (opts.ring_size == 0) {
        uint64_t n = opts.detector.check_period_ns / opts.sample_interval_ns;
        opts.ring_size = n < 1 ? 1 : n > 10000 ? 10000 : (size_t)n;
    }
    if (mode == MODE_WATCH) {
        if (watch_pid_count == 0)
            return usage_error("%swatch needs a process: hangwatch watch -p PID [-p PID...] [OPTIONS]", "");
        if (optind < argc)
            return usage_error("watch takes no program ('%s'): use hangwatch run to start one", argv[optind]);
        opts.watch_pids = watch_pids;
        opts.watch_pid_count = watch_pid_count;
        if (open_report_dir(&opts) != 0)
            return 2;
        set_clock_slack(&opts.detector);
        int code = hw_agent_run(&opts);
        hw_report_dir_close(opts.report_dir_handle);
        return code;
    }
    if (attach) {
        if (opts.attach_pid <= 0 || opts.socket_name == NULL)
            return usage_error("%sattach needs --pid and --socket (it is started by the hangwatch library)", "");
        if (optind < argc)
            return usage_error("attach takes no program ('%s')", argv[optind]);
        if (open_report_dir(&opts) != 0)
            return 2;
        set_clock_slack(&opts.detector);
        int code = hw_agent_run(&opts);
        hw_report_dir_close(opts.report_dir_handle);
        return code;
    }
    if (optind >= argc)
        return usage_error("%srun needs a program: hangwatch run [OPTIONS] -- PROG [ARGS...]", "");
    opts.argv = &argv[optind];

    char *preload = find_preload();
    if (!preload) {
        fprintf(stderr,
                "hangwatch: cannot find the observer library libhangwatch-preload.so (looked in ../lib/hangwatch "
                "next to the hangwatch executable); set HANGWATCH_PRELOAD to its path\n");
        return 2;
    }
    if (strpbrk(preload, ": ")) {
        fprintf(stderr, "hangwatch: the observer library's path '%s' contains ':' or ' ', which LD_PRELOAD cannot "
                        "carry; install hangwatch elsewhere\n",
                preload);
        free(preload);
        return 2;
    }
    opts.preload_path = preload;
    if (open_report_dir(&opts) != 0) {
        free(preload);
        return 2;
    }

    set_clock_slack(&opts.detector);

    int code = hw_agent_run(&opts);
    hw_report_dir_close(opts.report_dir_handle);
    free(preload);
    return code;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage_error("%sa command is needed: run, watch, show, stack, stats, export or html", "");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("hangwatch %s\n", HW_VERSION_STRING);
        return 0;
    }
    if (strcmp(cmd, "run") == 0)
        return cmd_watch(argc - 1, argv + 1, MODE_RUN);
    if (strcmp(cmd, "attach") == 0)
        return cmd_watch(argc - 1, argv + 1, MODE_ATTACH);
    if (strcmp(cmd, "watch") == 0)
        return cmd_watch(argc - 1, argv + 1, MODE_WATCH);
    if (strcmp(cmd, "show") == 0)
        return hw_show_main(argc - 1, argv + 1);
    if (strcmp(cmd, "stack") == 0)
        return hw_stack_main(argc - 1, argv + 1);
    if (strcmp(cmd, "stats") == 0)
        return hw_stats_main(argc - 1, argv + 1);
    if (strcmp(cmd, "export") == 0)
        return hw_export_main(argc - 1, argv + 1);
    if (strcmp(cmd, "upload") == 0)
        return hw_upload_main(argc - 1, argv + 1);
    if (strcmp(cmd, "html") == 0)
        return hw_html_main(argc - 1, argv + 1);
    return usage_error("unknown command '%s' (use run, watch, show, stack, stats, export, html or upload)", cmd);
}
