/*
 * report_worker.c - turning captures into reports, off the detection path.
 *
 * The watch thread captures (registers and stack copies of every thread,
 * taken while the hang is going on) and hands each capture over through a
 * bounded FIFO queue.  This thread, at SCHED_IDLE so that any runnable
 * thread of the program preempts it, does the slow part: DWARF unwinding and
 * symbols (libdwfl, a symbolizer of its own: libdwfl objects are never
 * shared between threads), the annealing comparison of a re-check, the JSON,
 * the report directory's limits, the atomic write, the stderr line, and
 * later the final duration.  Jobs run in order, so a hang's end is applied
 * after its reports exist.
 *
 * Nothing is lost silently: a capture that finds the queue full (it holds
 * at most MAX_JOBS captures and MAX_QUEUED_BYTES of stack copies) is counted
 * by the watch thread; a report the limits refuse or the disk cannot take is
 * counted here; each kind is said once when it first happens and totalled
 * at the end.
 *
 * Two parts of a report have files of their own (report_worker.h):
 * report_samples.c symbolizes early sampling's stacks, report_cpu_high.c
 * builds a CPU-high report's section and line.
 */
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "core/parse/duration.h"
#include "core/abi/events.h"
#include "core/report_limits.h"
#include "core/text_escape.h"
#include "agent/exports/metrics.h"
#include "agent/common/report_dir.h"
#include "report_worker.h"
#include "agent/symbols/symbols.h"

#define MAX_JOBS 256
#define MAX_QUEUED_BYTES (512ull << 20)

struct hang_record {
    /* written here, read by the watch thread (worker_resets) */
    _Atomic uint64_t resets;
    _Atomic uint64_t reset_captured_ns;
    /* the worker's own */
    hw_annealing anneal;
    bool launch;        /* reports are held until the launch's verdict */
    unsigned reports;   /* stretch_report_index of the next report */
    char *names[MAX_STRETCH_REPORTS];   /* reports written (file names), for the final duration */
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
};

typedef enum job_kind { JOB_REPORT, JOB_RECHECK, JOB_FINISH } job_kind;

typedef struct job {
    job_kind kind;
    hang_record *hang;
    report_request *req; /* JOB_REPORT, JOB_RECHECK */
    size_t bytes;
    /* JOB_FINISH */
    uint64_t final_ns, precision_ns;
    const char *end;
    bool keep_launch;
    int wait_status; /* the process's, when its death ended the hang; else -1 */
    struct job *next;
} job;

struct report_worker {
    agent *a;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    job *head, *tail;
    size_t jobs;
    uint64_t bytes;
    bool stopping;
    /* the worker's own from here on */
    unsigned report_serial;
    uint64_t last_report_bytes;
    unsigned long dropped_by_limits;
    bool said_limits;
    unsigned long write_failures;
    int first_write_error;
    /* the summary at exit */
    unsigned long hangs, fatal_hangs, ignored_hangs;
};

static void worker_say_totals(report_worker *wk);

/* ---- the queue ---- */

static size_t snapshot_bytes(const hw_process_snapshot *s)
{
    size_t n = s->maps_len + s->thread_count * sizeof(hw_thread_snapshot);
    for (size_t i = 0; i < s->thread_count; i++)
        n += s->threads[i].stack_len;
    return n;
}

static bool enqueue(report_worker *wk, job *j, bool bounded)
{
    pthread_mutex_lock(&wk->lock);
    bool room = !bounded || (wk->jobs < MAX_JOBS && wk->bytes + j->bytes <= MAX_QUEUED_BYTES);
    if (room) {
        j->next = NULL;
        if (wk->tail)
            wk->tail->next = j;
        else
            wk->head = j;
        wk->tail = j;
        wk->jobs++;
        wk->bytes += j->bytes;
        pthread_cond_signal(&wk->wake);
    }
    pthread_mutex_unlock(&wk->lock);
    return room;
}

static job *dequeue(report_worker *wk)
{
    pthread_mutex_lock(&wk->lock);
    while (!wk->head && !wk->stopping)
        pthread_cond_wait(&wk->wake, &wk->lock);
    job *j = wk->head;
    if (j) {
        wk->head = j->next;
        if (!wk->head)
            wk->tail = NULL;
        wk->jobs--;
        wk->bytes -= j->bytes;
    }
    pthread_mutex_unlock(&wk->lock);
    return j;
}

/* ---- the watch thread's side ---- */

hang_record *worker_new_hang(bool launch)
{
    hang_record *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    hw_annealing_reset(&h->anneal);
    h->launch = launch;
    return h;
}

bool worker_submit_report(report_worker *wk, hang_record *hang, report_request *req, bool recheck)
{
    job *j = calloc(1, sizeof *j);
    report_request *copy = malloc(sizeof *copy);
    if (!j || !copy) {
        free(j);
        free(copy);
        return false;
    }
    *copy = *req; /* the snapshot's buffers move with it */
    j->kind = recheck && hang ? JOB_RECHECK : JOB_REPORT;
    j->hang = hang;
    j->req = copy;
    j->bytes = sizeof *copy + snapshot_bytes(&copy->snap);
    if (!enqueue(wk, j, true)) {
        free(copy);
        free(j);
        return false;
    }
    memset(&req->snap, 0, sizeof req->snap); /* the worker's now */
    req->py_names = NULL;
    req->cpu = NULL;
    req->ps_named = NULL;
    req->ring_named = NULL;
    memset(&req->ring, 0, sizeof req->ring);
    return true;
}

void report_request_release(report_request *req)
{
    if (!req)
        return;
    hw_python_names_free(req->py_names, req->snap.thread_count);
    req->py_names = NULL;
    for (size_t i = 0; req->ps_named && i < req->ps_depth; i++)
        hw_frame_clear(&req->ps_named[i]);
    free(req->ps_named);
    req->ps_named = NULL;
    cpu_high_request_free(req->cpu);
    req->cpu = NULL;
    for (size_t i = 0; req->ring_named && i < req->ring.addr_count; i++)
        hw_frame_clear(&req->ring_named[i]);
    free(req->ring_named);
    req->ring_named = NULL;
    hw_ring_stacks_free(&req->ring);
    hw_process_snapshot_free(&req->snap);
}

void worker_submit_finish(report_worker *wk, hang_record *hang, uint64_t final_ns, uint64_t precision_ns,
                          const char *end, bool keep_launch, int wait_status)
{
    job *j = calloc(1, sizeof *j);
    if (!j) {
        /* Out of memory: the reports keep no final duration. */
        return;
    }
    j->kind = JOB_FINISH;
    j->hang = hang;
    j->final_ns = final_ns;
    j->precision_ns = precision_ns;
    j->end = end; /* a string literal */
    j->keep_launch = keep_launch;
    j->wait_status = wait_status;
    enqueue(wk, j, false); /* never refused: a hang's end must reach its reports */
}

uint64_t worker_resets(hang_record *hang, uint64_t *captured_ns)
{
    uint64_t n = atomic_load_explicit(&hang->resets, memory_order_acquire);
    *captured_ns = atomic_load_explicit(&hang->reset_captured_ns, memory_order_relaxed);
    return n;
}

/* ---- building a report ---- */

const char *hw_report_frame_label(const hw_frame *f, char *buf, size_t len)
{
    char raw[320];
    if (f->language != HW_LANG_NATIVE && f->symbol_name && f->source_file) {
        /* the user's code: "handle_request (app.py:5)" */
        const char *base = strrchr(f->source_file, '/');
        if (f->source_line > 0)
            snprintf(raw, sizeof raw, "%s (%s:%d)", f->symbol_name, base ? base + 1 : f->source_file, f->source_line);
        else
            snprintf(raw, sizeof raw, "%s (%s)", f->symbol_name, base ? base + 1 : f->source_file);
        return hw_escape_text(raw, buf, len);
    }
    if (f->symbol_name)
        return hw_escape_text(f->symbol_name, buf, len);
    if (f->object_path) {
        const char *base = strrchr(f->object_path, '/');
        snprintf(raw, sizeof raw, "%s+0x%" PRIx64, base ? base + 1 : f->object_path, f->object_offset);
        return hw_escape_text(raw, buf, len);
    }
    snprintf(buf, len, "0x%" PRIx64, f->instruction_addr);
    return buf;
}

/* Function keys of a backtrace for the annealing comparison. */
static size_t function_keys(const hw_backtrace *bt, uint64_t *keys, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; bt && i < bt->count && n < max; i++) {
        keys[n++] = hw_frame_function_key(&bt->frames[i]);
    }
    return n;
}

/* Why the hung thread has no stack, for the stderr line. */
static void no_stack_reason(const hw_process_snapshot *snap, char *buf, size_t len)
{
    snprintf(buf, len, ", no stack");
    for (size_t i = 0; i < snap->thread_count; i++) {
        const hw_thread_snapshot *t = &snap->threads[i];
        if (!t->is_target)
            continue;
        char tracer[96];
        if (t->status == HW_THREAD_DENIED && hw_capture_denied_reason(snap, tracer, sizeof tracer))
            snprintf(buf, len, ", no stack (%s)", tracer);
        else if (t->status == HW_THREAD_DENIED || t->status == HW_THREAD_TIMEOUT)
            snprintf(buf, len, ", no stack (%s: %s)", hw_thread_status_name(t->status),
                     t->error ? strerror(t->error) : "unknown");
        else if (t->status == HW_THREAD_EXITED)
            snprintf(buf, len, ", no stack (the thread exited)");
        return;
    }
    if (snap->process_exited)
        snprintf(buf, len, ", no stack (the process exited)");
}

/* The line people see on stderr, up to where the report's path goes. */
static char *hang_line(const agent *a, const report_request *req, const hw_backtrace *bt)
{
    const hw_check *c = &req->check;
    const hw_process_snapshot *snap = &req->snap;
    char busy[32], thr[32];
    hw_format_duration(c->busy_ns / 1000000 * 1000000, busy, sizeof busy);
    hw_format_duration(a->opts->detector.threshold_ns, thr, sizeof thr);
    /* The innermost five frames; in a program that runs Python or
     * JavaScript, the innermost frame and then the user's functions (the
     * interpreter's own frames between them say nothing to its user). */
    bool runtime = false;
    for (size_t i = 0; bt && i < bt->count; i++)
        runtime |= bt->frames[i].language != HW_LANG_NATIVE;
    char frames[768] = "";
    size_t used = 0, shown = 0;
    for (size_t i = 0; bt && i < bt->count && shown < 5; i++) {
        if (runtime && i > 0 && bt->frames[i].language == HW_LANG_NATIVE)
            continue;
        char tmp[200];
        int n = snprintf(frames + used, sizeof frames - used, "%s%s", shown ? " < " : "",
                         hw_report_frame_label(&bt->frames[i], tmp, sizeof tmp));
        if (n < 0 || (size_t)n >= sizeof frames - used)
            break;
        used += (size_t)n;
        shown++;
    }
    char no_stack[160] = "";
    if (!used)
        no_stack_reason(snap, no_stack, sizeof no_stack);
    char who[96] = "main thread", name[64];
    for (size_t i = 0; i < snap->thread_count; i++)
        if (snap->threads[i].is_target && !snap->threads[i].is_main)
            snprintf(who, sizeof who, "thread %d (%s)", (int)snap->threads[i].tid,
                     hw_escape_text(snap->threads[i].name, name, sizeof name));
    /* What the detector measured: a busy stretch, an unanswered ping, or the
     * gap a late frame tick left (the hang is over by then). */
    const char *measured = a->opts->detector_kind == HW_DETECTOR_PING        ? "left a ping unanswered for"
                           : a->opts->detector_kind == HW_DETECTOR_FRAME_GAP ? "ran a frame tick late by"
                                                                             : "busy";
    char process[64];
    char *line = NULL;
    if (asprintf(&line, "hangwatch: %s in %s (pid %d): %s %s %s (threshold %s)%s%s", 
                 c->stutter ? "stutter" : c->launch ? "launch hang" : "hang",
                 hw_escape_text(snap->process_name, process, sizeof process), (int)snap->pid, who, measured, busy,
                 thr, used ? " in " : no_stack, frames) < 0)
        return NULL;
    return line;
}

static const char *check_mode_name(const hw_agent_options *o)
{
    switch (o->detector_kind) {
    case HW_DETECTOR_SEMAPHORE:
    case HW_DETECTOR_PING:
        return "periodic";
    case HW_DETECTOR_FRAME_GAP:
        return "on_arrival";
    case HW_DETECTOR_RUNLOOP:
    default:
        return hw_check_mode_name(o->detector.mode);
    }
}

/* ---- writing ---- */

/* The process name and hang type a report of ours names, for the metrics. */
static const char *report_process(json_t *report)
{
    return json_string_value(json_object_get(json_object_get(report, "report"), "process_name"));
}

static hw_metrics_hang_type report_hang_type(json_t *report)
{
    return hw_metrics_hang_type_of(json_string_value(json_object_get(json_object_get(report, "hangwatch"), "hang_type")));
}

/* Matrix's daily limit and the directory cap: may this report be written? */
static bool report_allowed(report_worker *wk, json_t *report)
{
    const hw_agent_options *o = wk->a->opts;
    hw_report_dir_usage u = hw_report_dir_usage_now(o->report_dir_handle);
    uint64_t expected = wk->last_report_bytes > 8192 ? wk->last_report_bytes : 8192;
    hw_limit_verdict v = hw_report_allowed(&o->limits, &u, expected);
    if (v == HW_LIMIT_OK)
        return true;
    wk->dropped_by_limits++;
    hw_metrics_report_dropped(wk->a->metrics, report_process(report),
                              v == HW_LIMIT_DAILY ? HW_METRICS_DROP_DAILY_LIMIT : HW_METRICS_DROP_SIZE_CAP);
    if (!wk->said_limits && !o->quiet) {
        wk->said_limits = true;
        if (v == HW_LIMIT_DAILY)
            fprintf(stderr,
                    "hangwatch: %s already holds %u reports from the last 24 h (the daily limit): further hangs "
                    "are detected but not written (--daily-limit changes it)\n",
                    o->report_dir, u.reports_last_day);
        else
            fprintf(stderr,
                    "hangwatch: %s would grow past its size cap of %llu bytes: further hangs are detected but not "
                    "written (--max-dir-size changes it)\n",
                    o->report_dir, (unsigned long long)o->limits.max_dir_bytes);
    }
    return false;
}

/* Write one report now (limits permitting), say its line, tell the
 * library, and remember its path for the final duration. */
static void write_now(report_worker *wk, hang_record *h, json_t *report, const char *line, pid_t pid, pid_t tid,
                      int64_t detected_unix_ns, uint64_t busy_ns)
{
    agent *a = wk->a;
    if (!report_allowed(wk, report))
        return;
    char file_name[128], stamp[32];
    time_t secs = (time_t)(detected_unix_ns / 1000000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    snprintf(file_name, sizeof file_name, "hang-%s-%d-%u.json", stamp, (int)pid, ++wk->report_serial);
    int rc = hw_report_write(a->opts->report_dir_handle, file_name, report);
    if (rc != 0) {
        hw_metrics_report_dropped(a->metrics, report_process(report), HW_METRICS_DROP_WRITE_ERROR);
        /* The reason is said once (a full disk stays full) and the
         * failures counted; later hangs still get their line. */
        if (wk->write_failures++ == 0) {
            wk->first_write_error = -rc;
            if (!a->opts->quiet)
                fprintf(stderr, "%s; no report: cannot write to %s: %s (further failures are counted)\n",
                        line ? line : "hangwatch: hang", a->opts->report_dir, strerror(-rc));
        } else if (!a->opts->quiet && line) {
            fprintf(stderr, "%s; no report (not written, as said above)\n", line);
        }
        return;
    }
    uint64_t bytes = 0;
    if (hw_report_dir_file_size(a->opts->report_dir_handle, file_name, &bytes) == 0)
        wk->last_report_bytes = bytes;
    hw_metrics_report_written(a->metrics, report_process(report), report_hang_type(report));
    if (!h)
        exports_report_complete(a, file_name); /* no final duration to wait for */
    char *path = NULL;
    if (asprintf(&path, "%s/%s", hw_report_dir_path(a->opts->report_dir_handle), file_name) < 0)
        path = NULL;
    send_event(a, HW_EVENT_REPORT, tid, busy_ns, 0, path);
    if (!a->opts->quiet && line)
        fprintf(stderr, "%s; report %s\n", line, path ? path : file_name);
    free(path);
    for (size_t i = 0; h && i < MAX_STRETCH_REPORTS; i++) {
        if (!h->names[i]) {
            h->names[i] = strdup(file_name);
            break;
        }
    }
}

/* ---- the jobs ---- */

/* Unwind thread i of the request's snapshot with its runtime frames. */
static void unwind_with_runtime(hw_symbolizer *sym, const report_request *req, size_t i, hw_backtrace *bt)
{
    hw_unwind_with_runtime(sym, &req->snap.threads[i], MAX_FRAMES, req->py_names ? &req->py_names[i] : NULL,
                           &req->python, req->executable, bt);
}

/* The --ignore-frame pattern a function of the hung stack matches (its
 * symbol name, native or the user's Python and JavaScript functions), or
 * NULL. */
static const char *ignore_rule_matching(const hw_agent_options *o, const hw_backtrace *bt)
{
    for (size_t i = 0; bt && i < bt->count; i++) {
        const char *name = bt->frames[i].symbol_name;
        for (size_t k = 0; name && k < o->ignore_frame_count; k++)
            if (fnmatch(o->ignore_frames[k], name, 0) == 0)
                return o->ignore_frames[k];
    }
    return NULL;
}

static void do_report(report_worker *wk, job *j)
{
    agent *a = wk->a;
    report_request *req = j->req;
    hang_record *h = j->hang;
    hw_process_snapshot *snap = &req->snap;
    hw_symbolizer *sym = snap->maps ? hw_symbolizer_new(req->pid, snap->maps, snap->maps_len, NULL) : NULL;
    if (sym && snap->owner_known)
        hw_symbolizer_set_owner(sym, snap->owner_uid); /* the process may be gone by now */
    hw_backtrace *bts = calloc(snap->thread_count ? snap->thread_count : 1, sizeof *bts);
    const hw_backtrace *target_bt = NULL;
    size_t target = SIZE_MAX;
    for (size_t i = 0; i < snap->thread_count; i++)
        if (snap->threads[i].is_target)
            target = i;
    if (bts && sym && target != SIZE_MAX && snap->threads[target].status == HW_THREAD_CAPTURED) {
        unwind_with_runtime(sym, req, target, &bts[target]);
        target_bt = &bts[target];
    }

    uint64_t keys[HW_ANNEAL_MAX_FRAMES];
    if (j->kind == JOB_RECHECK) {
        /* Annealing: report again only if the stack moved. */
        size_t n = req->key_count ? req->key_count : function_keys(target_bt, keys, HW_ANNEAL_MAX_FRAMES);
        hw_anneal_decision d = hw_annealing_step(&h->anneal, req->key_count ? req->keys : keys, n);
        if (!d.report)
            goto out;
        /* Moved: the watch thread looks again one period after this
         * capture (its own schedule assumed the stack stayed). */
        atomic_store_explicit(&h->reset_captured_ns, req->captured_ns, memory_order_relaxed);
        atomic_fetch_add_explicit(&h->resets, 1, memory_order_release);
    } else if (h && !h->anneal.have_saved) {
        /* The first report of a hung stretch seeds the comparison. */
        size_t n = function_keys(target_bt, keys, HW_ANNEAL_MAX_FRAMES);
        hw_annealing_step(&h->anneal, keys, n);
    }

    for (size_t i = 0; bts && sym && i < snap->thread_count; i++)
        if (i != target && snap->threads[i].status == HW_THREAD_CAPTURED)
            unwind_with_runtime(sym, req, i, &bts[i]);
    const hw_image *images = NULL;
    size_t image_count = sym ? hw_symbolizer_images(sym, &images) : 0;

    /* Early sampling's Point Stack, symbolized with this capture's maps
     * (report_samples.c). */
    hw_report_samples samples;
    hw_report_samples_build(sym, req, a->opts->sample_interval_ns, &samples);
    const hw_point_stack *ps = &samples.ps;
    const hw_check *c = &req->check;
    cpu_report_parts *cpu_parts = req->cpu ? malloc(sizeof *cpu_parts) : NULL;
    if (cpu_parts)
        hw_cpu_parts_build(sym, req->cpu, cpu_parts);
    hw_hang_info info = {
        .detector = hw_detector_kind_name(a->opts->detector_kind),
        .check_mode = check_mode_name(a->opts),
        .hang_type = req->cpu ? "cpu_high" : c->stutter ? "stutter" : c->launch ? "launch_hang" : "hang",
        .hung_tid = req->tid,
        .block_duration_ns = c->busy_ns,
        .threshold_ns = a->opts->detector.threshold_ns,
        .detected_unix_ns = req->detected_unix_ns,
        .main_thread_state = ps->frame_count ? req->main_thread_state
                             : strcmp(req->main_thread_state, "collected") == 0 ? "empty"
                                                                                 : req->main_thread_state,
        .main_thread_reason = ps->frame_count ? req->main_thread_reason
                              : strcmp(req->main_thread_reason, "early_sampling") == 0 ? "no_samples"
                                                                                       : req->main_thread_reason,
        .executable = req->executable[0] ? req->executable : NULL,
        .stretch_report_index = h ? h->reports : 0,
        .point_stack = ps->frame_count ? ps : NULL,
        .stutter_window_ns = c->stutter ? req->stutter.window_ns : 0,
        .stutter_busy_ns = req->stutter.busy_ns,
        .stutter_stalls = req->stutter.stalls,
        .cpu_high = cpu_parts ? &cpu_parts->info : NULL,
    };
    if (req->cpu) {
        info.detector = "cpu_usage";
        info.check_mode = "periodic";
        info.threshold_ns = req->cpu->window_ns;
    }
    char id[37];
    json_t *report = hw_report_build(&info, snap, bts, images, image_count, id);
    char *line = cpu_parts ? hw_cpu_line(req, cpu_parts) : hang_line(a, req, target_bt);
    if (h && !h->seen) {
        h->seen = true;
        h->pid = req->pid;
        hw_escape_text(snap->process_name, h->process, sizeof h->process);
    }
    const char *ignored_by = req->cpu ? NULL : ignore_rule_matching(a->opts, target_bt);
    if (h && h->reports == 0)
        h->ignored = ignored_by != NULL;
    if (h)
        h->reports++;
    if (ignored_by) {
        /* An expected long operation: counted, said, not written. */
        char rule[160];
        hw_metrics_report_dropped(a->metrics, snap->process_name, HW_METRICS_DROP_IGNORED);
        if (!a->opts->quiet && line)
            fprintf(stderr, "%s; ignored: a frame matches --ignore-frame '%s', no report\n", line,
                    hw_escape_text(ignored_by, rule, sizeof rule));
    } else if (!report) {
        hw_metrics_report_dropped(a->metrics, snap->process_name, HW_METRICS_DROP_OUT_OF_MEMORY);
        if (!a->opts->quiet && line)
            fprintf(stderr, "%s; no report: out of memory\n", line);
    } else if (h && h->launch) {
        /* Held until the process proves to be a loop (hang_lifecycle.c). */
        size_t k = 0;
        while (k < MAX_STRETCH_REPORTS && h->held[k])
            k++;
        if (k < MAX_STRETCH_REPORTS) {
            h->held[k] = report;
            h->held_lines[k] = line;
            h->held_tids[k] = req->tid;
            h->held_busy[k] = c->busy_ns;
            snprintf(h->held_names[k], sizeof h->held_names[k], "%d %" PRId64, (int)req->pid,
                     req->detected_unix_ns);
            report = NULL;
            line = NULL;
        }
    } else {
        write_now(wk, h, report, line, req->pid, req->tid, req->detected_unix_ns, c->busy_ns);
    }
    json_decref(report);
    free(line);
    hw_report_samples_free(&samples);
    if (cpu_parts)
        hw_cpu_parts_free(cpu_parts);
    free(cpu_parts);
out:
    for (size_t i = 0; bts && i < snap->thread_count; i++)
        hw_backtrace_free(&bts[i]);
    free(bts);
    if (sym)
        hw_symbolizer_free(sym);
}

static void free_hang(hang_record *h)
{
    for (size_t i = 0; i < MAX_STRETCH_REPORTS; i++) {
        free(h->names[i]);
        json_decref(h->held[i]);
        free(h->held_lines[i]);
    }
    free(h);
}

/* A hang the process's death ended (hang_end "killed" or "exited"). */
static bool is_fatal(const job *j)
{
    return j->wait_status >= 0 && (strcmp(j->end, "killed") == 0 || strcmp(j->end, "exited") == 0);
}

/* "the process was killed by SIGKILL 3.2 s into this hang" (also `show`'s words). */
static void say_fatal(report_worker *wk, const job *j, const hang_record *h)
{
    const agent *a = wk->a;
    if (a->opts->quiet)
        return;
    char how[64], name[32];
    if (WIFSIGNALED(j->wait_status))
        snprintf(how, sizeof how, "was killed by %s", hw_signal_name(WTERMSIG(j->wait_status), name, sizeof name));
    else
        snprintf(how, sizeof how, "exited with status %d,", WEXITSTATUS(j->wait_status));
    const char *first = h->names[0];
    fprintf(stderr, "hangwatch: fatal hang in %s (pid %d): the process %s %.1f s into this hang%s%s%s%s\n",
            h->process[0] ? h->process : "?", (int)h->pid, how, (double)j->final_ns / 1e9, first ? "; report " : "",
            first ? hw_report_dir_path(a->opts->report_dir_handle) : "", first ? "/" : "", first ? first : "");
}

static void do_finish(report_worker *wk, job *j)
{
    agent *a = wk->a;
    hang_record *h = j->hang;
    bool counted = h->seen && (!h->launch || j->keep_launch);
    if (h->launch) {
        for (size_t i = 0; i < MAX_STRETCH_REPORTS && h->held[i]; i++) {
            if (!j->keep_launch)
                continue; /* no loop, no hang: dropped */
            hw_report_set_final(h->held[i], j->final_ns, j->precision_ns, j->end, j->wait_status);
            int pid = 0;
            int64_t detected = 0;
            sscanf(h->held_names[i], "%d %" SCNd64, &pid, &detected);
            write_now(wk, h, h->held[i], h->held_lines[i], (pid_t)pid, h->held_tids[i], detected,
                      h->held_busy[i]);
        }
    } else {
        for (size_t i = 0; i < MAX_STRETCH_REPORTS; i++) {
            if (!h->names[i])
                continue;
            int rc = hw_report_add_final_duration(a->opts->report_dir_handle, h->names[i], j->final_ns,
                                                  j->precision_ns, j->end, j->wait_status);
            if (rc != 0 && !a->opts->quiet)
                fprintf(stderr, "hangwatch: cannot add the final duration to %s/%s: %s\n",
                        hw_report_dir_path(a->opts->report_dir_handle), h->names[i], strerror(-rc));
            exports_report_complete(a, h->names[i]);
        }
    }
    if (counted) {
        wk->hangs++;
        wk->ignored_hangs += h->ignored;
        if (is_fatal(j)) {
            wk->fatal_hangs++;
            say_fatal(wk, j, h);
        }
    }
    free_hang(h);
}

static void *worker_main(void *arg)
{
    report_worker *wk = arg;
    /* Never take the CPU from the program: run only on idle time.  (The
     * benchmark compares with the normal policy, HANGWATCH_WORKER_POLICY.) */
    const char *policy = getenv("HANGWATCH_WORKER_POLICY");
    if (!policy || strcmp(policy, "normal") != 0) {
        struct sched_param sp = {0};
        pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
    }
    for (;;) {
        job *j = dequeue(wk);
        if (!j)
            break; /* stopping, and nothing left */
        if (j->kind == JOB_FINISH) {
            do_finish(wk, j);
        } else {
            do_report(wk, j);
            report_request_release(j->req);
            free(j->req);
        }
        free(j);
    }
    return NULL;
}

report_worker *worker_start(agent *a)
{
    report_worker *wk = calloc(1, sizeof *wk);
    if (!wk)
        return NULL;
    wk->a = a;
    pthread_mutex_init(&wk->lock, NULL);
    pthread_cond_init(&wk->wake, NULL);
    if (pthread_create(&wk->thread, NULL, worker_main, wk) != 0) {
        pthread_mutex_destroy(&wk->lock);
        pthread_cond_destroy(&wk->wake);
        free(wk);
        return NULL;
    }
    return wk;
}

void worker_stop(report_worker *wk, bool say_totals)
{
    if (!wk)
        return;
    pthread_mutex_lock(&wk->lock);
    wk->stopping = true;
    pthread_cond_signal(&wk->wake);
    pthread_mutex_unlock(&wk->lock);
    /* Finish promptly now that nothing is watched any more (allowed to
     * fail without privileges: it then drains on idle time). */
    struct sched_param sp = {0};
    pthread_setschedparam(wk->thread, SCHED_OTHER, &sp);
    pthread_join(wk->thread, NULL);
    if (say_totals)
        worker_say_totals(wk);
    pthread_mutex_destroy(&wk->lock);
    pthread_cond_destroy(&wk->wake);
    free(wk);
}

static void worker_say_totals(report_worker *wk)
{
    const hw_agent_options *o = wk->a->opts;
    if (o->quiet)
        return;
    if (wk->hangs > 0 && o->ignore_frame_count > 0)
        fprintf(stderr, "hangwatch: %lu hang%s, %lu fatal (the process died before the hang ended), %lu ignored "
                        "(--ignore-frame)\n",
                wk->hangs, wk->hangs == 1 ? "" : "s", wk->fatal_hangs, wk->ignored_hangs);
    else if (wk->hangs > 0)
        fprintf(stderr, "hangwatch: %lu hang%s, %lu fatal (the process died before the hang ended)\n", wk->hangs,
                wk->hangs == 1 ? "" : "s", wk->fatal_hangs);
    if (wk->dropped_by_limits > 0)
        fprintf(stderr, "hangwatch: %lu hang report%s not written because of the report limits\n",
                wk->dropped_by_limits, wk->dropped_by_limits == 1 ? " was" : "s were");
    if (wk->write_failures > 0)
        fprintf(stderr, "hangwatch: %lu hang report%s could not be written to %s (%s)\n", wk->write_failures,
                wk->write_failures == 1 ? "" : "s", o->report_dir, strerror(wk->first_write_error));
}
