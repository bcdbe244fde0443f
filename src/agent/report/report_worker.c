/*
 * report_worker.c - turning captures into reports, off the detection path.
 *
 * The watch thread captures (registers and stack copies of every thread,
 * taken while the hang is going on) and hands each capture over through a
 * bounded FIFO queue.  This thread, at SCHED_IDLE so that any runnable
 * thread of the program preempts it, does the slow part: DWARF unwinding and
 * symbols (libdwfl, a symbolizer of its own: libdwfl objects are never
 * shared between threads), the annealing comparison of a re-check, the JSON,
 * the report directory's limits, the atomic write, the stderr line, the
 * exports, and later the final duration.  Jobs run in order, so a hang's
 * end is applied after its reports exist.
 *
 * Nothing is lost silently: a capture that finds the queue full (it holds
 * at most MAX_JOBS captures and MAX_QUEUED_BYTES of stack copies) is counted
 * by the watch thread, and when it was a hang's first, the hang is still
 * announced and counted (worker_submit_dropped); a report the limits refuse or the disk cannot take is
 * counted by report_write.c; each kind is said once when it first happens
 * and totalled at the end.
 *
 * A report is made in three steps: the capture named (report_request.c),
 * the report built around it (here, with report_samples.c and
 * report_cpu_high.c for its parts, report_line.c for its line), and its
 * way out (report_write.c).
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
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/common/clock.h"
#include "agent/common/pi_mutex.h"
#include "agent/common/priority_lender.h"
#include "agent/common/watch_priority.h"
#include "agent/common/report_dir.h"
#include "core/hang_cause.h"
#include "core/parse/duration.h"
#include "core/sleep_tally.h"
#include "core/text_escape.h"
#include "report_internal.h"

#define WORKER_DRAIN_RAISE_MS 50 /* how often the end raises the worker again while it drains */
#define MAX_JOBS 2048 /* as many hangs at once as processes can be watched (1024), twice */
#define MAX_QUEUED_BYTES (512ull << 20)

typedef enum job_kind { JOB_REPORT, JOB_RECHECK, JOB_FINISH, JOB_DROPPED } job_kind;

struct job {
    job_kind kind;
    hang_record *hang;
    report_request *req; /* JOB_REPORT, JOB_RECHECK, JOB_DROPPED (its thread table only) */
    size_t bytes;
    /* JOB_FINISH */
    hw_hang_end end;
    bool keep_launch;
    uint64_t queued_ns; /* when it was handed over (priority aging) */
    struct job *next;
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
    bool room = !bounded || (wk->jobs < wk->max_jobs && wk->bytes + j->bytes <= MAX_QUEUED_BYTES);
    if (room) {
        j->queued_ns = hw_monotonic_ns();
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

/* Back to idle time once nothing waits (the watch thread raised it). */
static void unboost_when_idle(report_worker *wk)
{
    if (!wk->boosted || wk->head)
        return;
    wk->boosted = false;
    struct sched_param sp = {0};
    hw_thread_policy_set(wk->tid, SCHED_IDLE, &sp);
}

static job *dequeue(report_worker *wk)
{
    pthread_mutex_lock(&wk->lock);
    wk->current_queued_ns = 0;
    unboost_when_idle(wk);
    while (!wk->head && !wk->stopping)
        pthread_cond_wait(&wk->wake, &wk->lock);
    job *j = wk->head;
    if (j) {
        wk->current_queued_ns = j->queued_ns;
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

uint64_t worker_boost_due(report_worker *wk)
{
    if (!wk)
        return UINT64_MAX;
    pthread_mutex_lock(&wk->lock);
    uint64_t oldest = wk->current_queued_ns ? wk->current_queued_ns : wk->head ? wk->head->queued_ns : 0;
    uint64_t due = oldest && wk->raisable && !wk->boosted ? oldest + WORKER_BOOST_AFTER_NS : UINT64_MAX;
    pthread_mutex_unlock(&wk->lock);
    return due;
}

void worker_boost_if_late(report_worker *wk, uint64_t now)
{
    if (worker_boost_due(wk) > now)
        return;
    pthread_mutex_lock(&wk->lock);
    if (!wk->boosted && wk->tid > 0) {
        /* nice first: the thread must not run at nice 0 for a moment */
        setpriority(PRIO_PROCESS, (id_t)wk->tid, WORKER_BOOST_NICE);
        struct sched_param sp = {0};
        wk->boosted = hw_thread_policy_set(wk->tid, SCHED_OTHER, &sp) == 0;
        /* Refused (a sandbox's seccomp, a limit lowered since): never asked
         * again, or the raise would be due at every wake-up and the watch
         * thread would spin on it, as it once did for seconds. */
        if (!wk->boosted)
            wk->raisable = false;
    }
    pthread_mutex_unlock(&wk->lock);
}

hang_record *worker_new_hang(bool launch)
{
    hang_record *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    hw_annealing_reset(&h->anneal);
    h->launch = launch;
    return h;
}

void worker_keep_off(report_worker *wk, int cpu)
{
    if (wk == NULL)
        return;
    pthread_mutex_lock(&wk->lock);
    pid_t tid = wk->tid;
    pthread_mutex_unlock(&wk->lock);
    hw_cpu_placement_keep_off(&wk->placement, tid, cpu);
    naming_keep_off(wk->naming, cpu);
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
    /* Off a spinning hung thread's CPU before they wake: on idle time or
     * not, a thread woken there gets a slice of it (cpu_avoid.h). */
    worker_keep_off(wk, req->hung_cpu_known ? req->hung_cpu : -1);
    j->kind = recheck && hang ? JOB_RECHECK : JOB_REPORT;
    j->hang = hang;
    j->req = copy;
    j->bytes = sizeof *copy + snapshot_bytes(&copy->snap);
    /* its memory map and runtime names are read off the watch thread */
    bool name = copy->snap.thread_count > 0 || copy->ps_depth > 0 || copy->ring.addr_count > 0;
    copy->names_pending = name; /* before the worker can see it */
    if (!enqueue(wk, j, true)) {
        free(copy);
        free(j);
        return false;
    }
    if (name)
        naming_submit(wk->naming, copy);
    memset(&req->snap, 0, sizeof req->snap); /* the worker's now */
    req->runtime_names = NULL;
    req->cpu = NULL;
    req->ps_named = NULL;
    req->ring_named = NULL;
    memset(&req->ring, 0, sizeof req->ring);
    return true;
}

void worker_submit_dropped(report_worker *wk, hang_record *hang, report_request *req)
{
    job *j = calloc(1, sizeof *j);
    report_request *copy = malloc(sizeof *copy);
    if (!j || !copy) {
        free(j);
        free(copy);
        return;
    }
    /* Only what the line needs: the thread table, without stacks. */
    *copy = *req;
    for (size_t i = 0; i < copy->snap.thread_count; i++) {
        free(copy->snap.threads[i].stack);
        copy->snap.threads[i].stack = NULL;
        copy->snap.threads[i].stack_len = 0;
    }
    j->kind = JOB_DROPPED;
    j->hang = hang;
    j->req = copy;
    memset(&req->snap, 0, sizeof req->snap);
    req->runtime_names = NULL;
    req->cpu = NULL;
    req->ps_named = NULL;
    req->ring_named = NULL;
    memset(&req->ring, 0, sizeof req->ring);
    (void)enqueue(wk, j, false); /* small, and never refused */
}

void worker_submit_finish(report_worker *wk, hang_record *hang, const hw_hang_end *end, bool keep_launch)
{
    job *j = calloc(1, sizeof *j);
    if (!j) {
        /* Out of memory: the reports keep no final duration. */
        return;
    }
    j->kind = JOB_FINISH;
    j->hang = hang;
    j->end = *end;
    j->keep_launch = keep_launch;
    enqueue(wk, j, false); /* never refused: a hang's end must reach its reports */
}

uint64_t worker_resets(hang_record *hang, uint64_t *captured_ns)
{
    uint64_t n = atomic_load_explicit(&hang->resets, memory_order_acquire);
    *captured_ns = atomic_load_explicit(&hang->reset_captured_ns, memory_order_relaxed);
    return n;
}

/* ---- building a report ---- */

/* Function keys of a classified backtrace for the annealing comparison:
 * from its culprit outwards (decisions.md §39), so that
 * what the user's frame calls (a library's leaf, the interpreter's
 * helpers, which change at every look) does not count as a move; never
 * from inside a garbage collector (its phases follow one another in one
 * pause: hw_frames_site_start). */
static size_t function_keys(const hw_backtrace *bt, uint64_t *keys, size_t max)
{
    size_t n = 0;
    size_t site = bt ? hw_frames_site_start(bt->frames, bt->count) : SIZE_MAX;
    for (size_t i = site == SIZE_MAX ? 0 : site; bt && i < bt->count && n < max; i++)
        keys[n++] = hw_frame_function_key(&bt->frames[i]);
    return n;
}

/* Annealing: a re-check is reported only if its culprit moved; the first
 * report of a hung stretch seeds the comparison.  False: no report. */
static bool annealing_reports(hang_record *h, const job *j, const hw_backtrace *target_bt)
{
    const report_request *req = j->req;
    uint64_t keys[HW_ANNEAL_MAX_FRAMES];
    size_t n = function_keys(target_bt, keys, HW_ANNEAL_MAX_FRAMES);
    if (j->kind == JOB_RECHECK) {
        hw_anneal_decision d = hw_annealing_step(&h->anneal, keys, n);
        if (!d.report)
            return false;
        /* Moved: the watch thread looks again one period after this
         * capture (its own schedule assumed the stack stayed). */
        atomic_store_explicit(&h->reset_captured_ns, req->captured_ns, memory_order_relaxed);
        atomic_fetch_add_explicit(&h->resets, 1, memory_order_release);
    } else if (h && !h->anneal.have_saved) {
        hw_annealing_step(&h->anneal, keys, n);
    }
    return true;
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

/* What the report says about itself: the detector, the hang's kind and
 * numbers, early sampling's Point Stack, a CPU-high report's section. */
static hw_hang_info report_info(const hw_agent_options *o, const report_request *req, const hang_record *h,
                                const hw_point_stack *ps, const cpu_report_parts *cpu_parts, pid_t gil_holder)
{
    const hw_check *c = &req->check;
    hw_hang_info info = {
        .detector = hw_detector_kind_name(o->detector_kind),
        .check_mode = check_mode_name(o),
        .observer = req->observer,
        .loop_wait = req->loop_wait.known ? &req->loop_wait : NULL,
        .hang_type = req->cpu ? "cpu_high" : c->stutter ? "stutter" : c->launch ? "launch_hang" : "hang",
        .hung_tid = req->tid,
        .block_duration_ns = c->busy_ns,
        .threshold_ns = req->threshold_ns,
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
        .gil_holder_tid = gil_holder,
        .time = &req->time,
    };
    if (req->cpu) {
        info.detector = "cpu_usage";
        info.check_mode = "periodic";
        info.threshold_ns = req->cpu->window_ns;
    }
    return info;
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

/*
 * Is the hung stack the process's exit, its loop over for good?  Then the
 * function of it that says so, else NULL.  A program's shutdown (Python
 * joining its non-daemon threads in threading._shutdown, atexit handlers,
 * node freeing its heap) runs after its loop has returned: the loop cannot
 * be hung, and the exit that ends it, whatever its status, is no fatal
 * hang.  Names of the C library's, CPython's and node's exit paths, which
 * run nothing else.
 */
static const char *exiting_in(const hw_backtrace *bt)
{
    static const char *const exit_paths[] = {
        "__run_exit_handlers",       /* exit(): atexit handlers, destructors */
        "Py_FinalizeEx", "Py_Finalize", "_Py_Finalize", /* CPython's interpreter shutdown */
        "node::FreeEnvironment", "node::TearDownOncePerProcess", "node::Environment::RunCleanup",
        "v8::internal::Heap::TearDown",
    };
    for (size_t i = 0; bt && i < bt->count; i++) {
        const char *name = bt->frames[i].symbol_name;
        if (name == NULL || bt->frames[i].language != HW_LANG_NATIVE)
            continue;
        for (size_t k = 0; k < sizeof exit_paths / sizeof exit_paths[0]; k++) {
            size_t len = strlen(exit_paths[k]);
            /* a C++ name with its arguments: "node::FreeEnvironment(node::Environment*)" */
            if (strncmp(name, exit_paths[k], len) == 0 && (name[len] == '\0' || name[len] == '('))
                return exit_paths[k];
        }
    }
    return NULL;
}

/* Hold a launch's report until the process proves to be a loop
 * (watch/hang_lifecycle.c); false when there is no room. */
static bool hold_launch_report(hang_record *h, const report_request *req, json_t *report, char *line)
{
    size_t k = 0;
    while (k < MAX_STRETCH_REPORTS && h->held[k])
        k++;
    if (k == MAX_STRETCH_REPORTS)
        return false;
    h->held[k] = report;
    h->held_lines[k] = line;
    h->held_tids[k] = req->tid;
    h->held_busy[k] = req->check.busy_ns;
    snprintf(h->held_names[k], sizeof h->held_names[k], "%d %" PRId64, (int)req->pid, req->detected_unix_ns);
    return true;
}

/* What becomes of a report made: ignored (--ignore-frame), lost (out of
 * memory), held (a launch's) or written now.  Takes `report` and `line`. */
static void dispose(report_worker *wk, hang_record *h, const report_request *req, json_t *report, char *line,
                    const hw_backtrace *target_bt)
{
    const hw_agent_options *o = wk->opts;
    const char *process = req->snap.process_name;
    char label[136], key[96];
    hw_container_label(&req->snap.container, label, sizeof label);
    hw_metrics_key(process, label, key, sizeof key);
    if (h && !h->seen) {
        h->seen = true;
        h->pid = req->pid;
        hw_escape_text(process, h->process, sizeof h->process);
    }
    const char *ignored_by = req->cpu ? NULL : ignore_rule_matching(o, target_bt);
    const char *exiting = req->cpu ? NULL : exiting_in(target_bt);
    if (h && h->reports == 0) {
        h->ignored = ignored_by != NULL;
        h->shutdown = exiting != NULL;
    }
    bool first = h == NULL || h->reports == 0;
    if (h)
        h->reports++;
    if (exiting || (h && h->shutdown)) {
        /* Its loop has ended: no hang, no report; said once. */
        hw_metrics_report_dropped(hw_exports_metrics(wk->exports), key, HW_METRICS_DROP_SHUTDOWN);
        char name[64], busy[32];
        hw_format_duration(req->check.busy_ns / 1000000 * 1000000, busy, sizeof busy);
        if (!o->quiet && first && exiting)
            fprintf(stderr,
                    "hangwatch: %s (pid %d) is exiting: its loop has ended, and the %s its main thread has spent "
                    "since is its shutdown (in %s), not a hang of the loop: no report\n",
                    hw_escape_text(process, name, sizeof name), (int)req->pid, busy, exiting);
    } else if (ignored_by) {
        /* An expected long operation: counted, said, not written. */
        char rule[160];
        hw_metrics_report_dropped(hw_exports_metrics(wk->exports), key, HW_METRICS_DROP_IGNORED);
        if (!o->quiet && line)
            fprintf(stderr, "%s; ignored: a frame matches --ignore-frame '%s', no report\n", line,
                    hw_escape_text(ignored_by, rule, sizeof rule));
    } else if (!report) {
        hw_metrics_report_dropped(hw_exports_metrics(wk->exports), key, HW_METRICS_DROP_OUT_OF_MEMORY);
        if (!o->quiet && line)
            fprintf(stderr, "%s; no report: out of memory\n", line);
    } else if (h && h->launch) {
        if (hold_launch_report(h, req, report, line)) {
            report = NULL; /* the record's now */
            line = NULL;
        }
    } else {
        write_report(wk, h, report, line, req->pid, req->tid, req->detected_unix_ns, req->check.busy_ns, h == NULL);
    }
    json_decref(report);
    free(line);
}

/* The report of a named capture: its parts, the JSON, the line, and what
 * becomes of it. */
static void make_report(report_worker *wk, hang_record *h, const report_request *req, const hw_named_capture *nc)
{
    const hw_agent_options *o = wk->opts;
    const hw_backtrace *target_bt = hw_named_target(nc);
    /* Early sampling's Point Stack, symbolized with this capture's maps
     * (report_samples.c). */
    hw_report_samples samples;
    hw_report_samples_build(nc->sym, req, o->sample_interval_ns, &samples);
    cpu_report_parts *cpu_parts = req->cpu ? malloc(sizeof *cpu_parts) : NULL;
    hw_in_app_context in_app = hw_request_in_app(req);
    if (cpu_parts)
        hw_cpu_parts_build(nc->sym, &in_app, req->cpu, cpu_parts);
    /* What it waits for, held by another thread: the GIL, or a lock. */
    const hw_backtrace *holder_bt = NULL;
    pid_t gil_holder = hw_gil_holder_of(req, nc, &holder_bt);
    pid_t lock_holder = gil_holder ? 0 : hw_lock_holder_of(req, nc, &holder_bt);
    hw_hang_info info = report_info(o, req, h, &samples.ps, cpu_parts, gil_holder);
    info.lock_holder_tid = lock_holder;
    char id[37];
    json_t *report = hw_report_of_capture(req, nc, &info, id);
    char *line = cpu_parts ? hw_cpu_line(req, cpu_parts)
                           : hw_hang_line(o, req, target_bt, gil_holder ? gil_holder : lock_holder,
                                          gil_holder ? "the GIL" : hw_lock_kind_words(req->time.look.lock_kind),
                                          holder_bt);
    dispose(wk, h, req, report, line, target_bt);
    hw_report_samples_free(&samples);
    if (cpu_parts)
        hw_cpu_parts_free(cpu_parts);
    free(cpu_parts);
}

/*
 * What the look before the capture saw, settled with the capture:
 *  - a thread found running, just let go by an earlier stop (early
 *    sampling's) on its way back into its call, is in the call the
 *    capture's stop found it in (its registers);
 *  - restart_syscall (the thread was stopped in a sleep, a futex wait or
 *    a poll, and the kernel resumes that call) is the call it restarts,
 *    from the captured stack's innermost functions;
 *  - a futex wait's lock is what the C library function it waits in says
 *    (an rwlock, whose writer must be a thread of the process, a
 *    condition variable, a semaphore ...).
 * The verdict is decided again when either changed the look, and the
 * stretch keeps the first report's look for its final verdict (the watch
 * thread's is the detection's look, as it was before this).
 */
/* What the looks at the stretch found it asleep in most (the watch
 * thread's), settled as the look is: a restart_syscall is the call the
 * capture's stack resumes, `restarted` (-1: none); the same kind of sleep
 * as the look is the look's to say.  True when it changed. */
static bool settle_slept(hw_time_section *t, long restarted)
{
    if (!t->slept.valid)
        return false;
    if (t->slept.in_syscall && t->slept.syscall == SYS_restart_syscall && restarted >= 0) {
        t->slept.syscall = restarted;
        t->slept.restarted = true;
    }
    if (!hw_look_same_sleep(&t->slept, &t->look))
        return t->slept.restarted;
    t->slept.valid = false;
    return true;
}

static void settle_look(hang_record *h, report_request *req, const hw_backtrace *bt)
{
    hw_time_section *t = &req->time;
    bool changed = false;
    for (size_t i = 0; i < req->snap.thread_count; i++) {
        const hw_thread_snapshot *th = &req->snap.threads[i];
        if (th->is_target && th->status == HW_THREAD_CAPTURED &&
            hw_blocked_look_from_stop(req->pid, req->tid, &th->regs, &t->look)) {
            hw_blocked_look_describe_fd(req->pid, &t->look);
            changed = true;
        }
    }
    const char *names[4] = {NULL};
    size_t n = 0;
    for (size_t i = 0; bt && i < bt->count && n < 4; i++)
        if (bt->frames[i].language == HW_LANG_NATIVE && bt->frames[i].origin != HW_ORIGIN_HANGWATCH)
            names[n++] = bt->frames[i].symbol_name;
    changed |= hw_look_resolve_restart(&t->look, names, n);
    long restarted = t->look.restarted ? t->look.syscall : -1;
    /* Found in a fresh call: the looks around this capture's stop (before
     * it, after it, to the hang's end) see that call resumed as
     * restart_syscall, and the call the stack is in is what they resume. */
    hw_blocked_look resumed = {.valid = true, .in_syscall = true, .syscall = SYS_restart_syscall};
    if (restarted < 0 && hw_look_resolve_restart(&resumed, names, n))
        restarted = resumed.syscall;
    changed |= settle_slept(t, restarted);
    if (hw_look_classify_lock(&t->look, names, n)) {
        changed = true;
        bool of_the_process = false;
        for (size_t i = 0; i < req->snap.thread_count && t->look.lock_owner > 0; i++)
            of_the_process |= req->snap.threads[i].tid == t->look.lock_owner;
        if (t->look.lock_owner > 0 && !of_the_process) {
            t->look.lock_owner = 0;
            t->look.lock_missing = "its writer is not one of the process's threads";
        }
    }
    if (changed)
        hw_cause_decide(t);
    if (h && !h->settled && h->reports == 0 && t->look.valid) {
        h->settled = true;
        h->settled_look = t->look;
        h->settled_restarted = restarted;
    }
}

static void do_report(report_worker *wk, job *j)
{
    /* who the process is for a fleet: read here, never before a stop */
    hw_container_of(j->req->pid, &j->req->snap.container);
    hw_named_capture nc;
    hw_name_capture(j->req, true, &nc);
    if (j->req->time.present)
        settle_look(j->hang, j->req, hw_named_target(&nc));
    if (annealing_reports(j->hang, j, hw_named_target(&nc))) {
        /* who is at the other end of its wait: a walk of /proc, bounded,
         * here on the worker and only for a report that is written (a
         * hang's first: by the naming thread, while it waited) */
        if (!j->req->peer_looked && j->req->time.present && j->req->time.look.valid)
            hw_wait_peer_find(j->req->pid, j->req->tid, &j->req->time.look);
        hw_name_capture_rest(j->req, &nc);
        make_report(wk, j->hang, j->req, &nc);
    }
    hw_named_capture_free(&nc, j->req->snap.thread_count);
}

/* A hang whose first report was dropped: its line, and it counts. */
static void do_dropped(report_worker *wk, job *j)
{
    const report_request *req = j->req;
    if (j->hang != NULL) {
        j->hang->seen = true;
        j->hang->pid = req->pid;
        hw_escape_text(req->snap.process_name, j->hang->process, sizeof j->hang->process);
    }
    if (wk->opts->quiet)
        return;
    char busy[32], thr[32], process[64], who[96] = "main thread", name[64];
    hw_format_duration(req->check.busy_ns / 1000000 * 1000000, busy, sizeof busy);
    hw_format_duration(req->threshold_ns, thr, sizeof thr);
    if (req->tid != req->pid)
        snprintf(who, sizeof who, "thread %d", (int)req->tid);
    for (size_t i = 0; i < req->snap.thread_count; i++)
        if (req->snap.threads[i].is_target && !req->snap.threads[i].is_main)
            snprintf(who, sizeof who, "thread %d (%s)", (int)req->snap.threads[i].tid,
                     hw_escape_text(req->snap.threads[i].name, name, sizeof name));
    char pid[256];
    fprintf(stderr,
            "hangwatch: %s in %s (%s): %s busy %s (threshold %s); no report of this capture: the report "
            "writer was behind and its queue was full (counted in hangwatch_reports_dropped_total; a later "
            "capture of this hang is still reported if it finds room)\n",
            req->check.stutter ? "stutter" : req->check.launch ? "launch hang" : "hang",
            hw_escape_text(req->snap.process_name, process, sizeof process),
            hw_line_pid(&req->snap, req->pid, pid, sizeof pid), who, busy, thr);
}

/* ---- a hang's end ---- */

static void free_hang(hang_record *h)
{
    for (size_t i = 0; i < MAX_STRETCH_REPORTS; i++) {
        free(h->names[i]);
        json_decref(h->kept[i]);
        json_decref(h->held[i]);
        free(h->held_lines[i]);
    }
    free(h);
}

/* A hang the process's death ended (hang_end "killed" or "exited"). */
static bool is_fatal(const job *j)
{
    return j->end.wait_status >= 0 && (strcmp(j->end.end, "killed") == 0 || strcmp(j->end.end, "exited") == 0);
}

/* "the process was killed by SIGKILL 3.2 s into this hang" (also `show`'s words). */
static void say_fatal(report_worker *wk, const job *j, const hang_record *h)
{
    const hw_agent_options *o = wk->opts;
    if (o->quiet)
        return;
    char how[64], name[32];
    if (WIFSIGNALED(j->end.wait_status))
        snprintf(how, sizeof how, "was killed by %s",
                 hw_signal_name(WTERMSIG(j->end.wait_status), name, sizeof name));
    else
        snprintf(how, sizeof how, "exited with status %d,", WEXITSTATUS(j->end.wait_status));
    const char *first = h->names[0];
    fprintf(stderr, "hangwatch: fatal hang in %s (pid %d): the process %s %.1f s into this hang%s%s%s%s\n",
            h->process[0] ? h->process : "?", (int)h->pid, how, (double)j->end.final_ns / 1e9, first ? "; report " : "",
            first ? hw_report_dir_path(o->report_dir_handle) : "", first ? "/" : "", first ? first : "");
}

static void do_finish(report_worker *wk, job *j)
{
    hang_record *h = j->hang;
    bool counted = h->seen && !h->shutdown && (!h->launch || j->keep_launch);
    /* The final verdict's look is the detection's (kept out of the final
     * section's own, hence not valid there): restarted as it was. */
    if (h->settled && j->end.time.present) {
        bool shown = j->end.time.look.valid;
        j->end.time.look = h->settled_look;
        settle_slept(&j->end.time, h->settled_restarted);
        hw_cause_decide(&j->end.time);
        j->end.time.look.valid = shown;
    }
    if (h->launch) {
        for (size_t i = 0; i < MAX_STRETCH_REPORTS && h->held[i]; i++) {
            if (!j->keep_launch)
                continue; /* no loop, no hang: dropped */
            hw_report_set_final(h->held[i], &j->end);
            int pid = 0;
            int64_t detected = 0;
            sscanf(h->held_names[i], "%d %" SCNd64, &pid, &detected);
            write_report(wk, h, h->held[i], h->held_lines[i], (pid_t)pid, h->held_tids[i], detected,
                         h->held_busy[i], true);
        }
    } else {
        write_final_durations(wk, h, &j->end);
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

/* ---- the names of a capture's runtime frames (report_naming.c) ---- */

void worker_names_ready(report_worker *wk, report_request *req, hw_runtime_names *names)
{
    pthread_mutex_lock(&wk->lock);
    req->runtime_names = names;
    req->names_pending = false;
    pthread_cond_broadcast(&wk->named);
    pthread_mutex_unlock(&wk->lock);
}

/* The worker's: wait until req's names are in. */
static void wait_for_names(report_worker *wk, report_request *req)
{
    pthread_mutex_lock(&wk->lock);
    while (req->names_pending)
        pthread_cond_wait(&wk->named, &wk->lock);
    pthread_mutex_unlock(&wk->lock);
}

void worker_forget_process(report_worker *wk, uint64_t serial)
{
    if (wk != NULL)
        naming_forget(wk->naming, serial);
}

/* ---- the thread ---- */

static void *worker_main(void *arg)
{
    report_worker *wk = arg;
    /* Never take the CPU from the program: run only on idle time, and at
     * nice WORKER_BOOST_NICE where the agent could not raise it from there.
     * (The benchmark compares with the normal policy,
     * HANGWATCH_WORKER_POLICY.) */
    const char *policy = getenv("HANGWATCH_WORKER_POLICY");
    pid_t tid = (pid_t)syscall(SYS_gettid);
    /* Not under the lock: on idle time the thread may wait long for a CPU
     * right after the change. */
    bool raisable = (!policy || strcmp(policy, "normal") != 0) && hw_take_idle_time(tid, WORKER_BOOST_NICE);
    pthread_mutex_lock(&wk->lock);
    wk->tid = tid;
    wk->raisable = raisable;
    pthread_mutex_unlock(&wk->lock);
    /* What every report's symbolizer shares: the processes of one program
     * look each address up once, a node's perf map is read once. */
    hw_symbol_caches *caches = hw_symbol_caches_start();
    for (;;) {
        job *j = dequeue(wk);
        if (!j)
            break; /* stopping, and nothing left */
        if (j->kind == JOB_FINISH) {
            do_finish(wk, j);
        } else if (j->kind == JOB_DROPPED) {
            do_dropped(wk, j);
            report_request_release(j->req);
            free(j->req);
        } else {
            wait_for_names(wk, j->req);
            do_report(wk, j);
            report_request_release(j->req);
            free(j->req);
        }
        free(j);
    }
    hw_symbol_caches_stop(caches);
    return NULL;
}

report_worker *worker_start(const hw_agent_options *opts, hw_exports *ex, size_t namers_max_bytes)
{
    report_worker *wk = calloc(1, sizeof *wk);
    if (!wk)
        return NULL;
    wk->opts = opts;
    wk->exports = ex;
    /* A smaller queue, only to test what a full one does (never larger). */
    const char *queue = getenv("HANGWATCH_REPORT_QUEUE");
    long n = queue != NULL ? strtol(queue, NULL, 10) : 0;
    wk->max_jobs = n > 0 && n < MAX_JOBS ? (size_t)n : MAX_JOBS;
    hw_pi_mutex_init(&wk->lock);
    pthread_cond_init(&wk->wake, NULL);
    pthread_cond_init(&wk->named, NULL);
    wk->naming = naming_start(wk, namers_max_bytes, opts->quiet);
    if (wk->naming == NULL || pthread_create(&wk->thread, NULL, worker_main, wk) != 0) {
        naming_stop(wk->naming);
        pthread_mutex_destroy(&wk->lock);
        pthread_cond_destroy(&wk->wake);
        pthread_cond_destroy(&wk->named);
        free(wk);
        return NULL;
    }
    /* Without it, a hang's line waits for its report, as --quiet has none. */
    wk->herald = opts->quiet ? NULL : herald_start();
    return wk;
}

/* A launch's, an ignored frame's fate is the report's to decide: they are
 * said with it, or not at all. */
static bool announced_at_detection(const report_worker *wk, const report_request *req)
{
    return wk->herald != NULL && !req->check.launch && !req->check.stutter && wk->opts->ignore_frame_count == 0;
}

void worker_announce(report_worker *wk, const report_request *req)
{
    /* a shutdown's too */
    if (!announced_at_detection(wk, req) || req->snap.process_exited || req->announced)
        return;
    char line[HW_DETECTION_LINE_MAX];
    if (hw_detection_line(wk->opts, req, line, sizeof line))
        herald_say(wk->herald, line);
}

bool worker_announce_unstopped(report_worker *wk, report_request *req, const hw_time_section *time, char state)
{
    char line[HW_DETECTION_LINE_MAX];
    if (!announced_at_detection(wk, req) || !hw_detection_line_unstopped(wk->opts, req, time, state, line, sizeof line))
        return false;
    herald_say(wk->herald, line);
    req->announced = true;
    return true;
}

void worker_stop(report_worker *wk, bool say_totals)
{
    if (!wk)
        return;
    unsigned long unsaid = herald_stop(wk->herald); /* the lines at detection first, as they came */
    if (unsaid > 0 && say_totals)
        fprintf(stderr, "hangwatch: %lu hang%s said only with %s report (more at once than the line at detection "
                        "keeps)\n", unsaid, unsaid == 1 ? " was" : "s were", unsaid == 1 ? "its" : "their");
    pthread_mutex_lock(&wk->lock);
    wk->stopping = true;
    pthread_cond_signal(&wk->wake);
    pthread_mutex_unlock(&wk->lock);
    /* Finish promptly now that nothing is watched any more, at the normal
     * policy and nice 0 (without the right to raise it, at the nice
     * hw_take_idle_time left it).  Again every WORKER_DRAIN_RAISE_MS while
     * it has not ended: a worker only starting can go on idle time after
     * a raise. */
    for (;;) {
        pthread_mutex_lock(&wk->lock);
        pid_t tid = wk->tid;
        pthread_mutex_unlock(&wk->lock);
        if (tid > 0) {
            struct sched_param sp = {0};
            (void)setpriority(PRIO_PROCESS, (id_t)tid, 0);
            hw_thread_policy_set(tid, SCHED_OTHER, &sp);
        }
        int64_t at = hw_realtime_ns() + WORKER_DRAIN_RAISE_MS * 1000000LL;
        struct timespec until = {(time_t)(at / 1000000000LL), (long)(at % 1000000000LL)};
        if (pthread_timedjoin_np(wk->thread, NULL, &until) != ETIMEDOUT)
            break; /* its last jobs' names came from the naming thread */
    }
    naming_stop(wk->naming);
    if (say_totals)
        worker_say_totals(wk);
    pthread_mutex_destroy(&wk->lock);
    pthread_cond_destroy(&wk->wake);
    pthread_cond_destroy(&wk->named);
    free(wk);
}

static void worker_say_totals(report_worker *wk)
{
    const hw_agent_options *o = wk->opts;
    if (o->quiet)
        return;
    if (wk->hangs > 0) {
        /* "fatal" explained only when there is one */
        char fatal[96] = "", ignored[64] = "";
        if (wk->fatal_hangs > 0)
            snprintf(fatal, sizeof fatal, ", %lu fatal (the process died before the hang ended)", wk->fatal_hangs);
        if (o->ignore_frame_count > 0)
            snprintf(ignored, sizeof ignored, ", %lu ignored (--ignore-frame)", wk->ignored_hangs);
        fprintf(stderr, "hangwatch: %lu hang%s%s%s\n", wk->hangs, wk->hangs == 1 ? "" : "s", fatal, ignored);
    }
    if (wk->dropped_by_limits > 0)
        fprintf(stderr, "hangwatch: %lu hang report%s not written because of the report limits\n",
                wk->dropped_by_limits, wk->dropped_by_limits == 1 ? " was" : "s were");
    if (wk->write_failures > 0)
        fprintf(stderr, "hangwatch: %lu hang report%s could not be written to %s (%s)\n", wk->write_failures,
                wk->write_failures == 1 ? "" : "s", o->report_dir, strerror(wk->first_write_error));
}
