/*
 * agent_options.c - the options of `hangwatch run`, `watch` and `attach`
 * (agent_options.h): one getopt_long table for the three, each option taken
 * by the group it decides about (detection, sampling, reports, what only
 * one command takes, the processes to watch), the metrics and Sentry ones
 * by metrics_sentry_options.c.  An option of another command is refused
 * with a message naming the command it belongs to.
 */
#include "agent_options.h"

#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text_escape.h"
#include "cli_usage.h"
#include "core/parse/duration.h"
#include "core/frame_gap.h"
#include "metrics_sentry_options.h"

/* What a group's function says of an option: taken, or not one of the
 * group's (any other value is the exit status to stop with). */
#define OPTION_TAKEN (-1)
#define NOT_THIS_GROUP (-2)

/* Options of issue 15 (decisions.md §32, §34): long options only, with
 * values no short option can take. */
enum {
    OPT_IGNORE_FRAME = 0x1500,
    OPT_IN_APP,
    OPT_NOT_IN_APP,
    OPT_CPU_HIGH,
    OPT_JS_FRAMES,
    OPT_ATTACH,
    OPT_ALL,
    OPT_COMM,
    OPT_EXE,
    OPT_CGROUP,
    OPT_USER,
    OPT_EXCLUDE,
    OPT_CONFIG,
};
#define MAX_IGNORE_FRAME_LEN 255

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
    {"js-frames", required_argument, NULL, OPT_JS_FRAMES},
    {"attach", required_argument, NULL, OPT_ATTACH},
    {"duration", required_argument, NULL, 'Z'}, {"observer", required_argument, NULL, 'B'},
    {"follow", no_argument, NULL, 'W'}, {"sampler", required_argument, NULL, 'H'},
    HW_METRICS_SENTRY_LONG_OPTIONS,
    {"ignore-frame", required_argument, NULL, OPT_IGNORE_FRAME},
    {"in-app", required_argument, NULL, OPT_IN_APP},
    {"not-in-app", required_argument, NULL, OPT_NOT_IN_APP},
    {"cpu-high", required_argument, NULL, OPT_CPU_HIGH},
    {"all", no_argument, NULL, OPT_ALL}, {"comm", required_argument, NULL, OPT_COMM},
    {"exe", required_argument, NULL, OPT_EXE}, {"cgroup", required_argument, NULL, OPT_CGROUP},
    {"user", required_argument, NULL, OPT_USER}, {"exclude", required_argument, NULL, OPT_EXCLUDE},
    {"config", required_argument, NULL, OPT_CONFIG},
    {NULL, 0, NULL, 0},
};

int hw_agent_option_takes_value(const char *name)
{
    for (const struct option *o = longopts; o->name != NULL; o++)
        if (strcmp(o->name, name) == 0)
            return o->has_arg == required_argument;
    return -1;
}

/* ---- values ------------------------------------------------------------------ */

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

/* ---- the option groups --------------------------------------------------------- */

/* What makes a hang, and which loops and waits are looked at. */
static int take_detection_option(int c, const char *value, hw_agent_options *opts)
{
    switch (c) {
    case 't':
        return parse_duration_option("--threshold", value, &opts->detector.threshold_ns) != 0 ? 2 : OPTION_TAKEN;
    case 'C':
        return parse_duration_option("--check-period", value, &opts->detector.check_period_ns) != 0 ? 2
                                                                                                    : OPTION_TAKEN;
    case 'm': {
        bool periodic;
        if (one_of(value, "exact", "periodic", &periodic) != 0)
            return hw_cli_usage_error("invalid --check-mode '%s': use exact or periodic", value);
        opts->detector.mode = periodic ? HW_CHECK_PERIODIC : HW_CHECK_EXACT;
        return OPTION_TAKEN;
    }
    case 'U':
        opts->stutter = true;
        return OPTION_TAKEN;
    case 'D':
        if (detector_by_name(value, &opts->detector_kind) != 0)
            return hw_cli_usage_error("invalid --detector '%s': use runloop, semaphore, ping or frame-gap", value);
        return OPTION_TAKEN;
    case 'G':
        return parse_duration_option("--frame-interval", value, &opts->frame_interval_ns) != 0 ? 2 : OPTION_TAKEN;
    case 'T':
        if (one_of(value, "main", "loops", &opts->all_loop_threads) != 0)
            return hw_cli_usage_error("invalid --threads '%s': use main or loops", value);
        return OPTION_TAKEN;
    case 'w':
        if (one_of(value, "auto", "any", &opts->every_wait_is_the_loop) != 0)
            return hw_cli_usage_error("invalid --wait-site '%s': use auto or any", value);
        return OPTION_TAKEN;
    case OPT_JS_FRAMES:
        if (hw_js_frames_mode_parse(value, &opts->js_frames) != 0)
            return hw_cli_usage_error("invalid --js-frames '%s' (auto, metadata, perf-map or off)", value);
        return OPTION_TAKEN;
    case OPT_ATTACH:
        if (strcmp(value, "auto") == 0)
            opts->attach = HW_ATTACH_AUTO;
        else if (strcmp(value, "fentry") == 0)
            opts->attach = HW_ATTACH_FENTRY;
        else if (strcmp(value, "tracepoint") == 0)
            opts->attach = HW_ATTACH_TRACEPOINT;
        else if (strcmp(value, "uprobe") == 0)
            opts->attach = HW_ATTACH_UPROBE;
        else
            return hw_cli_usage_error("invalid --attach '%s' (auto, fentry, tracepoint or uprobe)", value);
        return OPTION_TAKEN;
    case OPT_CPU_HIGH: {
        const char *why = NULL;
        if (hw_cpu_high_parse(value, &opts->cpu_high, &why) != 0) {
            fprintf(stderr, "hangwatch: invalid --cpu-high '%s': %s\nTry 'hangwatch --help'.\n", value, why);
            return 2;
        }
        return OPTION_TAKEN;
    }
    default:
        return NOT_THIS_GROUP;
    }
}

/* Early sampling: whether, how often, how many, and how the samples are taken. */
static int take_sampling_option(int c, const char *value, hw_agent_options *opts)
{
    switch (c) {
    case 'e':
        opts->early_sampling = true;
        return OPTION_TAKEN;
    case 'H':
        if (strcmp(value, "kernel") == 0)
            opts->samples_by_ptrace = false;
        else if (strcmp(value, "task-clock") == 0)
            opts->samples_by_task_clock = true;
        else if (strcmp(value, "ptrace") == 0)
            opts->samples_by_ptrace = true;
        else
            return hw_cli_usage_error("invalid --sampler '%s': use kernel, task-clock or ptrace", value);
        return OPTION_TAKEN;
    case 'i':
        return parse_duration_option("--sample-interval", value, &opts->sample_interval_ns) != 0 ? 2 : OPTION_TAKEN;
    case 'r': {
        long n;
        if (whole_number(value, 1, 10000, &n) != 0)
            return hw_cli_usage_error("invalid --ring-size '%s': a whole number from 1 to 10000", value);
        opts->ring_size = (size_t)n;
        return OPTION_TAKEN;
    }
    default:
        return NOT_THIS_GROUP;
    }
}

/* Where reports go, how many, which hangs are not written, and the line on stderr. */
int hw_take_in_app_rule(const char *value, bool in_app, hw_in_app_rule *rules, size_t *count)
{
    const char *option = in_app ? "--in-app" : "--not-in-app", *why = NULL;
    char shown[256];
    if (!hw_in_app_rule_valid(value, &why)) {
        fprintf(stderr, "hangwatch: invalid %s '%s': %s\nTry 'hangwatch --help'.\n", option,
                hw_escape_text(value, shown, sizeof shown), why);
        return 2;
    }
    if (*count == HW_MAX_IN_APP_RULES) {
        fprintf(stderr, "hangwatch: too many --in-app and --not-in-app: at most %d\nTry 'hangwatch --help'.\n",
                HW_MAX_IN_APP_RULES);
        return 2;
    }
    rules[(*count)++] = (hw_in_app_rule){.pattern = value, .in_app = in_app};
    return -1;
}

static int take_report_option(int c, const char *value, hw_agent_command_line *line)
{
    hw_agent_options *opts = &line->opts;
    switch (c) {
    case 'd':
        if (*value == '\0')
            return hw_cli_usage_error("%s--report-dir must not be empty", "");
        opts->report_dir = value;
        return OPTION_TAKEN;
    case 'q':
        opts->quiet = true;
        return OPTION_TAKEN;
    case 'L': {
        long n;
        if (whole_number(value, 0, 1000000, &n) != 0)
            return hw_cli_usage_error("invalid --daily-limit '%s': a whole number (0 = no limit)", value);
        opts->limits.daily_limit = (unsigned)n;
        return OPTION_TAKEN;
    }
    case 'S': {
        const char *why = NULL;
        if (hw_parse_size(value, &opts->limits.max_dir_bytes, &why) != 0) {
            fprintf(stderr, "hangwatch: invalid --max-dir-size '%s': %s\nTry 'hangwatch --help'.\n", value, why);
            return 2;
        }
        return OPTION_TAKEN;
    }
    case OPT_IGNORE_FRAME:
        if (*value == '\0' || strlen(value) > MAX_IGNORE_FRAME_LEN)
            return hw_cli_usage_error("invalid --ignore-frame '%s': a pattern of 1 to 255 characters", value);
        if (opts->ignore_frame_count == HW_MAX_IGNORE_FRAMES)
            return hw_cli_usage_error("%stoo many --ignore-frame: at most 64", "");
        line->ignore_frames[opts->ignore_frame_count++] = value;
        opts->ignore_frames = line->ignore_frames;
        return OPTION_TAKEN;
    case OPT_IN_APP:
    case OPT_NOT_IN_APP: {
        int rc = hw_take_in_app_rule(value, c == OPT_IN_APP, line->in_app_rules, &opts->in_app_rule_count);
        opts->in_app_rules = line->in_app_rules;
        return rc < 0 ? OPTION_TAKEN : rc;
    }
    default:
        return NOT_THIS_GROUP;
    }
}

/* Options that belong to one command (or two): refused by the others. */
static int take_command_option(hw_agent_command command, int c, const char *value, hw_agent_options *opts)
{
    switch (c) {
    case 'Q':
    case 'X':
        if (command != HW_AGENT_ATTACH)
            return hw_cli_usage_error("%s--pings-by-post and --frames-from-loop belong to hangwatch attach", "");
        if (c == 'Q')
            opts->pings_by_post = true;
        else
            opts->frames_from_loop = true;
        return OPTION_TAKEN;
    case 'F':
    case 'J':
        if (command == HW_AGENT_WATCH && c == 'F')
            return hw_cli_usage_error("%s--no-follow belongs to hangwatch run (watch starts nothing)", "");
        if (c == 'F')
            opts->no_follow = true;
        else
            opts->js_frames = HW_JS_FRAMES_OFF; /* the old spelling of --js-frames off */
        return OPTION_TAKEN;
    case 'B':
        if (command != HW_AGENT_RUN)
            return hw_cli_usage_error("%s--observer belongs to hangwatch run", "");
        if (strcmp(value, "auto") == 0)
            opts->observer = HW_OBSERVER_AUTO;
        else if (strcmp(value, "preload") == 0)
            opts->observer = HW_OBSERVER_PRELOAD;
        else if (strcmp(value, "kernel") == 0)
            opts->observer = HW_OBSERVER_KERNEL;
        else
            return hw_cli_usage_error("invalid --observer '%s': use auto, preload or kernel", value);
        return OPTION_TAKEN;
    case 'W':
        if (command != HW_AGENT_WATCH)
            return hw_cli_usage_error("%s--follow belongs to hangwatch watch (run follows by default)", "");
        opts->follow_children = true;
        return OPTION_TAKEN;
    case OPT_CONFIG:
        if (command != HW_AGENT_WATCH)
            return hw_cli_usage_error("%s--config belongs to hangwatch watch", "");
        if (*value == '\0')
            return hw_cli_usage_error("%s--config must not be empty", "");
        opts->config_path = value;
        return OPTION_TAKEN;
    case 'Z':
        if (command != HW_AGENT_WATCH)
            return hw_cli_usage_error("%s--duration belongs to hangwatch watch", "");
        return parse_duration_option("--duration", value, &opts->duration_ns) != 0 ? 2 : OPTION_TAKEN;
    case 'O':
    case 'V':
        if (command != HW_AGENT_ATTACH)
            return hw_cli_usage_error("%s--socket and --events-socket belong to hangwatch attach", "");
        if (c == 'O')
            opts->socket_name = value;
        else
            opts->events_socket = value;
        return OPTION_TAKEN;
    default:
        return NOT_THIS_GROUP;
    }
}

/* The processes: -p PID of watch (--pid too), --pid and --ready-fd of attach. */
static int take_process_option(hw_agent_command command, int c, const char *value, hw_agent_command_line *line)
{
    if (c != 'p' && c != 'P' && c != 'R')
        return NOT_THIS_GROUP;
    long n;
    if (command == HW_AGENT_WATCH && c != 'R') {
        if (whole_number(value, 1, INT32_MAX, &n) != 0)
            return hw_cli_usage_error("invalid -p '%s': a process id (a whole number above 0)", value);
        if (line->watch_pid_count == HW_MAX_WATCH_PIDS)
            return hw_cli_usage_error("%stoo many -p: at most 64 processes", "");
        line->watch_pids[line->watch_pid_count++] = (pid_t)n;
        return OPTION_TAKEN;
    }
    if (command != HW_AGENT_ATTACH || whole_number(value, c == 'P' ? 1 : 0, INT32_MAX, &n) != 0)
        return hw_cli_usage_error("invalid or misplaced option value '%s'", value);
    if (c == 'P')
        line->opts.attach_pid = (pid_t)n;
    else
        line->opts.ready_fd = (int)n;
    return OPTION_TAKEN;
}

/* One selector of watch --all of `kind` with `value` (an exclusion if
 * `exclude`): OPTION_TAKEN, or 2 after a usage error. */
static int take_selector(hw_select_kind kind, const char *value, bool exclude, hw_agent_command_line *line)
{
    static const char *const names[] = {[HW_SELECT_COMM] = "--comm", [HW_SELECT_EXE] = "--exe",
                                        [HW_SELECT_CGROUP] = "--cgroup", [HW_SELECT_USER] = "--user"};
    char shown[128], said[256];
    hw_escape_text(value, shown, sizeof shown);
    hw_process_selector s = {.kind = kind, .exclude = exclude, .pattern = value};
    const char *wrong = NULL;
    long n = 0;
    struct passwd *pw = NULL;
    if (kind == HW_SELECT_COMM && (value[0] == '\0' || strlen(value) > 15))
        wrong = "a process name of 1 to 15 characters (its comm)";
    else if ((kind == HW_SELECT_EXE || kind == HW_SELECT_CGROUP) && !hw_select_path_pattern_valid(value))
        wrong = "a path pattern starting with '/' or '*'";
    else if (kind == HW_SELECT_USER && whole_number(value, 0, INT32_MAX, &n) != 0 && (pw = getpwnam(value)) == NULL)
        wrong = "no such user (a name or a uid)";
    if (wrong != NULL) {
        snprintf(said, sizeof said, "invalid %s '%s': %s", names[kind], shown, wrong);
        return hw_cli_usage_error("%s", said);
    }
    if (kind == HW_SELECT_USER)
        s.uid = pw != NULL ? pw->pw_uid : (uid_t)n;
    if (line->opts.selector_count == HW_MAX_SELECTORS)
        return hw_cli_usage_error("%stoo many selectors: at most 64", "");
    line->selectors[line->opts.selector_count++] = s;
    line->opts.selectors = line->selectors;
    return OPTION_TAKEN;
}

/* --all and its selectors, watch's. */
static int take_machine_option(hw_agent_command command, int c, const char *value, hw_agent_command_line *line)
{
    if (c < OPT_ALL || c > OPT_EXCLUDE)
        return NOT_THIS_GROUP;
    if (command != HW_AGENT_WATCH)
        return hw_cli_usage_error("%s--all and its selectors (--comm, --exe, --cgroup, --user, --exclude) belong to "
                                  "hangwatch watch", "");
    switch (c) {
    case OPT_ALL:
        line->opts.watch_all = true;
        return OPTION_TAKEN;
    case OPT_COMM:
        return take_selector(HW_SELECT_COMM, value, false, line);
    case OPT_EXE:
        return take_selector(HW_SELECT_EXE, value, false, line);
    case OPT_CGROUP:
        return take_selector(HW_SELECT_CGROUP, value, false, line);
    case OPT_USER:
        return take_selector(HW_SELECT_USER, value, false, line);
    default: {
        hw_select_kind kind;
        const char *what;
        if (!hw_select_exclusion_parse(value, &kind, &what)) {
            char shown[128];
            return hw_cli_usage_error("invalid --exclude '%s': comm=NAME, exe=PATTERN, cgroup=PATTERN or user=USER",
                                      hw_escape_text(value, shown, sizeof shown));
        }
        return take_selector(kind, what, true, line);
    }
    }
}

/* ---- the command line ------------------------------------------------------------ */

/* One option (getopt_long's `c`) of `command`: OPTION_TAKEN, or the exit
 * status to stop with. */
static int take_option(hw_agent_command command, int c, char **argv, hw_agent_command_line *line)
{
    if (c == 'h') {
        fputs(hw_cli_usage_text, stdout);
        return 0;
    }
    if (c == ':')
        return hw_cli_usage_error("option '%s' needs a value", argv[optind - 1]);
    int rc = take_detection_option(c, optarg, &line->opts);
    if (rc == NOT_THIS_GROUP)
        rc = take_sampling_option(c, optarg, &line->opts);
    if (rc == NOT_THIS_GROUP)
        rc = take_report_option(c, optarg, line);
    if (rc == NOT_THIS_GROUP)
        rc = take_command_option(command, c, optarg, &line->opts);
    if (rc == NOT_THIS_GROUP)
        rc = take_process_option(command, c, optarg, line);
    if (rc == NOT_THIS_GROUP)
        rc = take_machine_option(command, c, optarg, line);
    if (rc != NOT_THIS_GROUP)
        return rc;
    int handled = hw_metrics_sentry_option(c, optarg, &line->opts);
    if (handled == 2)
        return 2;
    if (handled == 0)
        return hw_cli_usage_error("unknown option '%s'", argv[optind - 1]);
    return OPTION_TAKEN;
}

/* What follows from the options given: SENTRY_DSN, the intervals and ring
 * size not given.  -1, or 2 after a usage error. */
static int finish_options(hw_agent_command command, hw_agent_options *opts)
{
    if (hw_metrics_sentry_finish(opts, command != HW_AGENT_ATTACH) != 0)
        return 2;
    if (opts->sample_interval_ns == 0)
        opts->sample_interval_ns = 50000000ull;
    if (opts->frame_interval_ns == 0)
        opts->frame_interval_ns = HW_FRAME_INTERVAL_DEFAULT_NS;
    if (opts->stutter && opts->detector_kind != HW_DETECTOR_RUNLOOP)
        return hw_cli_usage_error("%s--stutter works with the runloop detector only", "");
    if (opts->selector_count > 0 && !opts->watch_all)
        return hw_cli_usage_error("%s--comm, --exe, --cgroup, --user and --exclude choose among --all's processes: "
                                  "add --all", "");
    if (opts->watch_all && opts->attach == HW_ATTACH_UPROBE)
        return hw_cli_usage_error("%s--all cannot use --attach uprobe: it puts probes in each process it watches, "
                                  "and with --all it would watch them all; use fentry (the default where the "
                                  "kernel has it) or the tracepoints", "");
    if (opts->watch_all) {
        opts->all_loop_threads = true; /* the loop threads of each, found by their waits */
        opts->follow_children = true;
    }
    if (opts->ring_size == 0) {
        uint64_t n = opts->detector.check_period_ns / opts->sample_interval_ns;
        opts->ring_size = n < 1 ? 1 : n > 10000 ? 10000 : (size_t)n;
    }
    return -1;
}

int hw_agent_options_parse(hw_agent_command command, int argc, char **argv, hw_agent_command_line *line)
{
    memset(line, 0, sizeof *line);
    hw_agent_options *opts = &line->opts;
    opts->ready_fd = -1;
    hw_detector_config_default(&opts->detector);
    opts->report_dir = "hangwatch-reports";
    opts->limits.daily_limit = 100;
    opts->limits.max_dir_bytes = 256ull << 20;

    optind = 1;
    opterr = 0;
    int c;
    /* '+': stop at the first non-option, PROG's own flags are PROG's. */
    while ((c = getopt_long(argc, argv, command == HW_AGENT_WATCH ? "+:qhp:" : "+:qh", longopts, NULL)) != -1) {
        int rc = take_option(command, c, argv, line);
        if (rc != OPTION_TAKEN)
            return rc;
    }
    line->operands = optind;
    return finish_options(command, opts);
}
