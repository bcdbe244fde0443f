/*
 * stack.c - `hangwatch stack PID [--json FILE]`: the stack of every thread
 * of a running process, on demand (the seeds' BSBacktraceLogger: "a
 * backtrace of any thread, on demand"), for a process hangwatch did not
 * start.
 *
 * It is one capture as a hang report takes it (capture.h: every thread
 * stopped together with ptrace for well under a millisecond, a sleep or a
 * wait it was in restarted by the kernel with its remaining time, so the
 * process does not notice), named and made a report of hang_type
 * "snapshot" by the report stage's own functions, the ones the report
 * worker uses (report.h: hw_name_capture, hw_report_of_capture; Python
 * frames read in the stop, JavaScript frames named from node's perf map
 * when it writes one), and printed through `show` with every thread's
 * whole stack.  --json FILE also writes that report.
 *
 * Exit status: 0 with the stacks printed; 2 for a usage error, a pid that
 * is no process, or no right to ptrace it (said in one sentence with how to
 * get the right); 1 when no thread could be captured otherwise (the process
 * ended meanwhile, its threads would not stop) or --json FILE could not be
 * written.
 */
#include "stack.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/capture/capture.h"
#include "agent/common/clock.h"
#include "agent/report/report.h"
#include "agent/symbols/symbols.h"
#include "agent_options.h"
#include "core/text_escape.h"
#include "json_file.h"
#include "show.h"

static const char stack_help[] =
    "usage: hangwatch stack PID [--json FILE] [--in-app PATTERN] [--not-in-app PATTERN]\n"
    "                       [--js-frames HOW]\n"
    "\n"
    "Prints the stack of every thread of the running process PID, innermost\n"
    "frame first, with Python and JavaScript frames where they can be named.\n"
    "The threads are stopped together with ptrace for well under a\n"
    "millisecond; sleeps and waits they are in go on undisturbed.\n"
    "\n"
    "  --json FILE   also write the stacks as a JSON report (hang_type\n"
    "                \"snapshot\", docs/report-format.md) to FILE, mode 0600\n"
    "  --in-app PATTERN, --not-in-app PATTERN  which code is the program's\n"
    "                own, as for run (its culprit is marked): a path prefix\n"
    "                or a glob, the last matching rule winning (repeatable)\n"
    "  --js-frames HOW  node's JavaScript functions: auto or metadata\n"
    "                (default) reads them from V8's own records with the\n"
    "                metadata node carries; perf-map or off does not, and\n"
    "                names them from the perf map node was started to write,\n"
    "                if any (so does auto for a node without the metadata)\n"
    "\n"
    "It needs the right to ptrace PID: the same user (and, with Yama's\n"
    "ptrace_scope 1, a parent of it) or root / CAP_SYS_PTRACE.\n";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("hangwatch: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\nTry 'hangwatch --help'.\n", stderr);
    va_end(ap);
    return 2;
}

/* An argument, escaped for the terminal (it may hold any bytes). */
static const char *shown(const char *arg, char *buf, size_t len)
{
    return hw_escape_text(arg, buf, len);
}

/* A pid: a whole decimal number from 1, no sign, no junk.  0 or -1. */
static int parse_pid(const char *text, pid_t *out)
{
    if (!isdigit((unsigned char)text[0]))
        return -1;
    char *end = NULL;
    errno = 0;
    long n = strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || n < 1 || n > INT32_MAX)
        return -1;
    *out = (pid_t)n;
    return 0;
}

/* Are the process's real, effective and saved uids all `uid` (what ptrace
 * asks of an unprivileged tracer)?  Unknown counts as no. */
static bool same_user(pid_t pid, uid_t uid)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (hw_proc_read_small(path, buf, sizeof buf) <= 0)
        return false;
    const char *line = strstr(buf, "\nUid:");
    unsigned long r, e, s;
    return line != NULL && sscanf(line + 5, "%lu %lu %lu", &r, &e, &s) == 3 && r == uid && e == uid && s == uid;
}

/* Yama's kernel.yama.ptrace_scope, or -1 when there is no Yama. */
static int yama_scope(void)
{
    char buf[16];
    if (hw_proc_read_small("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof buf) <= 0)
        return -1;
    return atoi(buf);
}

#define GET_THE_RIGHT                                                                                          \
    "run hangwatch as root (sudo), give it CAP_SYS_PTRACE (setcap cap_sys_ptrace+ep on the hangwatch binary), " \
    "or in a container add the capability (docker run --cap-add SYS_PTRACE)"

/* Every thread refused with EPERM: say which ptrace right is missing and
 * how to get it, in one sentence. */
static void say_no_ptrace_right(pid_t pid, const hw_process_snapshot *snap)
{
    char tracer[96];
    int scope = yama_scope();
    if (hw_capture_denied_reason(snap, tracer, sizeof tracer) != NULL)
        fprintf(stderr,
                "hangwatch: cannot take the stacks of pid %d: it is %s, which holds the one ptrace attachment a "
                "thread can have; detach that tracer first\n",
                (int)pid, tracer);
    else if (scope >= 3)
        fprintf(stderr,
                "hangwatch: cannot take the stacks of pid %d: ptrace attaching is disabled on this system "
                "(kernel.yama.ptrace_scope = %d) until it reboots\n",
                (int)pid, scope);
    else if (scope == 2)
        fprintf(stderr,
                "hangwatch: cannot take the stacks of pid %d: with kernel.yama.ptrace_scope = 2 only a process with "
                "CAP_SYS_PTRACE may ptrace another; " GET_THE_RIGHT "\n",
                (int)pid);
    else if (!same_user(pid, getuid()))
        fprintf(stderr,
                "hangwatch: cannot take the stacks of pid %d: it runs as another user (you are uid %d), and "
                "ptracing another user's process needs CAP_SYS_PTRACE; " GET_THE_RIGHT "\n",
                (int)pid, (int)getuid());
    else if (scope == 1)
        fprintf(stderr,
                "hangwatch: cannot take the stacks of pid %d: kernel.yama.ptrace_scope = 1 lets a process ptrace "
                "only its own descendants, so hangwatch needs CAP_SYS_PTRACE for it; " GET_THE_RIGHT
                " (or set the sysctl to 0)\n",
                (int)pid);
    else
        fprintf(stderr,
                "hangwatch: cannot take the stacks of pid %d: ptrace refused (the process may have changed its "
                "privileges, or hangwatch's capabilities are limited), so hangwatch needs CAP_SYS_PTRACE for it; "
                GET_THE_RIGHT "\n",
                (int)pid);
}

/* Name, build, print and write one capture, through the same functions the
 * report worker uses (report.h).  The exit status. */
static int report_capture(const report_request *req, const char *json_path)
{
    const hw_process_snapshot *snap = &req->snap;
    size_t captured = 0;
    for (size_t i = 0; i < snap->thread_count; i++)
        captured += snap->threads[i].status == HW_THREAD_CAPTURED;
    hw_named_capture nc;
    hw_name_capture(req, false, &nc);
    if (nc.bts == NULL) {
        fprintf(stderr, "hangwatch: out of memory\n");
        hw_named_capture_free(&nc, snap->thread_count);
        return 1;
    }
    /* No detector measured anything: a snapshot's numbers are zero and its
     * "hung" thread is the main thread (docs/report-format.md). */
    hw_hang_info info = {
        .detector = "none",
        .check_mode = "on_demand",
        .hang_type = "snapshot",
        .hung_tid = req->pid,
        .block_duration_ns = 0,
        .threshold_ns = 0,
        .detected_unix_ns = req->detected_unix_ns,
        .main_thread_state = "not_requested",
        .main_thread_reason = "disabled",
        .executable = req->executable[0] ? req->executable : NULL,
    };
    char id[37];
    json_t *report = hw_report_of_capture(req, &nc, &info, id);
    int rc = 0;
    if (report == NULL) {
        fprintf(stderr, "hangwatch: out of memory\n");
        rc = 1;
    } else {
        if (hw_show_json(NULL, report, HW_SHOW_EVERY_STACK, stdout) != 0)
            rc = 1;
        fflush(stdout);
        if (captured == 0) {
            fprintf(stderr, "hangwatch: no thread of pid %d could be captured (see above)\n", (int)req->pid);
            rc = 1;
        }
        if (json_path != NULL) {
            int w = hw_json_file_write(json_path, "the report", report, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
            if (w != 0 && w != -ELOOP) {
                char name[512];
                fprintf(stderr, "hangwatch: cannot write the report to '%s': %s\n",
                        shown(json_path, name, sizeof name), strerror(-w));
            }
            if (w != 0)
                rc = 1;
        }
    }
    json_decref(report);
    hw_named_capture_free(&nc, snap->thread_count);
    return rc;
}

static bool all_denied_eperm(const hw_process_snapshot *snap)
{
    if (snap->thread_count == 0)
        return false;
    for (size_t i = 0; i < snap->thread_count; i++)
        if (snap->threads[i].status != HW_THREAD_DENIED || snap->threads[i].error != EPERM)
            return false;
    return true;
}

/* Capture every thread of `pid` and report it, its frames classified by
 * `rules` (core/in_app.h).  The exit status. */
static int take_stacks(pid_t pid, const char *json_path, const hw_in_app_rule *rules, size_t rule_count,
                       bool read_js)
{
    /* Symbolizing never reaches for the network (debuginfod), as in the
     * agent (docs/security.md). */
    unsetenv("DEBUGINFOD_URLS");
    report_request *req = calloc(1, sizeof *req);
    if (req == NULL) {
        fprintf(stderr, "hangwatch: out of memory\n");
        return 1;
    }
    req->pid = req->tid = pid;
    req->in_app_rules = rules;
    req->in_app_rule_count = rule_count;
    /* Python: the interpreter is looked for in the maps before the stop, so
     * its frames are read in the same stop as the registers. */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    size_t maps_len = 0;
    char *maps = hw_proc_read_whole(path, &maps_len);
    hw_python_find(pid, maps, maps_len, &req->python);
    /* V8's metadata the same way, for a node. */
    hw_js_reader *js = calloc(1, sizeof *js);
    if (js != NULL && !req->python.found && read_js)
        hw_js_find(pid, maps, maps_len, &js->target);
    if (js != NULL)
        req->js = js->target;
    free(maps);
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, req->executable, sizeof req->executable - 1);
    req->executable[n > 0 ? n : 0] = '\0';

    hw_capture_options copt;
    hw_capture_options_default(&copt, pid); /* every thread, the main thread the target */
    if (req->python.readable) {
        copt.interp_frames = HW_PY_MAX_FRAMES;
        copt.while_stopped = hw_python_read_stacks;
        copt.while_stopped_ctx = &req->python;
    } else if (js != NULL && js->target.readable) {
        copt.interp_frames = HW_JS_MAX_FRAMES;
        copt.while_stopped = hw_js_read_stacks;
        copt.while_stopped_ctx = js;
    }
    /* capture.h: ptrace's stop reports come as SIGCHLD; keep it blocked. */
    sigset_t sigchld;
    sigemptyset(&sigchld);
    sigaddset(&sigchld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &sigchld, NULL);

    req->detected_unix_ns = hw_realtime_ns();
    int rc = hw_capture_process(pid, &copt, &req->snap);
    /* Names of the Python or JavaScript code now, while the process most
     * likely lives. */
    hw_python_namer *namer = hw_python_namer_new(&req->python, pid);
    hw_js_namer *js_namer = js != NULL ? hw_js_namer_new(&js->target, pid) : NULL;
    req->runtime_names = namer != NULL ? hw_python_name_threads(namer, &req->snap, false)
                                       : hw_js_name_threads(js_namer, &req->snap, false);

    int status;
    if (rc == -ESRCH) {
        fprintf(stderr, "hangwatch: no process with pid %d (it ended)\n", (int)pid);
        status = 2;
    } else if (rc < 0) {
        fprintf(stderr, "hangwatch: cannot capture pid %d: %s\n", (int)pid, strerror(-rc));
        status = 1;
    } else if (all_denied_eperm(&req->snap)) {
        say_no_ptrace_right(pid, &req->snap);
        status = 2;
    } else if (req->snap.process_exited || hw_snapshot_every_thread_exited(&req->snap)) {
        fprintf(stderr, "hangwatch: pid %d ended before its stacks could be taken\n", (int)pid);
        status = 1;
    } else {
        status = report_capture(req, json_path);
    }
    report_request_release(req);
    free(req);
    hw_python_namer_free(namer);
    hw_js_namer_free(js_namer);
    free(js);
    return status;
}

int hw_stack_main(int argc, char **argv)
{
    const char *pid_text = NULL, *json_path = NULL;
    bool json_given = false, options_done = false;
    static hw_in_app_rule rules[HW_MAX_IN_APP_RULES];
    size_t rule_count = 0;
    hw_js_frames_mode js_frames = HW_JS_FRAMES_AUTO;
    char arg[256];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!options_done && strcmp(a, "--") == 0) {
            options_done = true;
        } else if (!options_done && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
            fputs(stack_help, stdout);
            return 0;
        } else if (!options_done && (strcmp(a, "--json") == 0 || strncmp(a, "--json=", 7) == 0)) {
            if (json_given)
                return usage_error("--json is given twice");
            json_given = true;
            if (a[6] == '=')
                json_path = a + 7;
            else if (i + 1 < argc)
                json_path = argv[++i];
            else
                return usage_error("option '--json' needs a value");
            if (json_path[0] == '\0')
                return usage_error("--json needs a file name");
        } else if (!options_done && (strcmp(a, "--in-app") == 0 || strcmp(a, "--not-in-app") == 0 ||
                                     strncmp(a, "--in-app=", 9) == 0 || strncmp(a, "--not-in-app=", 13) == 0)) {
            bool in_app = strncmp(a, "--in-app", 8) == 0;
            const char *value = strchr(a, '=');
            if (value != NULL)
                value++;
            else if (i + 1 < argc)
                value = argv[++i];
            else
                return usage_error("option '%s' needs a value", a);
            int rc = hw_take_in_app_rule(value, in_app, rules, &rule_count);
            if (rc >= 0)
                return rc;
        } else if (!options_done && (strcmp(a, "--js-frames") == 0 || strncmp(a, "--js-frames=", 12) == 0)) {
            const char *value = a[11] == '=' ? a + 12 : i + 1 < argc ? argv[++i] : NULL;
            if (value == NULL)
                return usage_error("option '--js-frames' needs a value");
            if (hw_js_frames_mode_parse(value, &js_frames) != 0)
                return usage_error("invalid --js-frames '%s' (auto, metadata, perf-map or off)",
                                   shown(value, arg, sizeof arg));
        } else if (!options_done && a[0] == '-' && a[1] != '\0' && !isdigit((unsigned char)a[1])) {
            return usage_error("unknown option '%s' for stack", shown(a, arg, sizeof arg));
        } else if (pid_text != NULL) {
            return usage_error("stack takes one pid, not '%s' as well", shown(a, arg, sizeof arg));
        } else {
            pid_text = a;
        }
    }
    if (pid_text == NULL)
        return usage_error("stack needs a pid: hangwatch stack PID [--json FILE]");
    pid_t pid;
    if (parse_pid(pid_text, &pid) != 0)
        return usage_error("invalid pid '%s': a whole number from 1", shown(pid_text, arg, sizeof arg));

    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    if (stat(path, &st) != 0) {
        fprintf(stderr, "hangwatch: no process with pid %d\n", (int)pid);
        return 2;
    }
    long tgid = hw_proc_status_number(pid, "Tgid");
    if (tgid > 0 && tgid != pid) {
        fprintf(stderr, "hangwatch: %d is a thread of process %ld: use hangwatch stack %ld\n", (int)pid, tgid, tgid);
        return 2;
    }
    if (pid == getpid()) {
        fprintf(stderr, "hangwatch: pid %d is this hangwatch itself, which cannot ptrace itself\n", (int)pid);
        return 2;
    }
    if (json_path != NULL && hw_json_file_check(json_path, "the report") != 0)
        return 2;
    return take_stacks(pid, json_path, rules, rule_count,
                       js_frames == HW_JS_FRAMES_AUTO || js_frames == HW_JS_FRAMES_METADATA);
}
